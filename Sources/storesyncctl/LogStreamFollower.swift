import Foundation
import StoreSync
import StoreSyncConfig
import StoreSyncControl

/// `log --follow` through storesyncd: once the files have been read to their
/// end, the daemon's change-log stream (the `log` op, docs/CONTROL.md) gives
/// the transactions committed after that cursor, with the same filters, and
/// they are printed exactly as entries read from the files are. When the
/// daemon is not running, refuses the stream, or goes away, this says so on
/// stderr and hands back the cursor it reached, from which `log` polls the
/// files: no transaction is missed or shown twice across the switch.
struct LogStreamFollower {
    var command: LogCommand
    var printer: LogPrinter
    var log: SyncChangeLog

    /// Follows the stream until it ends; returns the cursor reached.
    func follow(printedSinceCursor: inout Bool) -> ChangeLogPosition {
        var cursor = log.position
        let polling = "following by polling the files"
        let location: DaemonOptions.Location
        do {
            location = try socketLocation()
        } catch {
            note("cannot find storesyncd's control socket: \(error); \(polling)")
            return cursor
        }
        let client: ControlClient
        do {
            client = try ControlClient(path: location.path, timeout: command.timeout)
        } catch {
            note("\(error) (path from \(location.source)); \(polling)")
            return cursor
        }
        let reply: JSONValue
        do {
            reply = try client.request(request(after: cursor))
        } catch {
            note("\(error); \(polling)")
            return cursor
        }
        guard reply["ok"]?.bool == true else {
            let message = reply["error"]?["message"]?.string ?? "no reason given"
            note("storesyncd refused the change-log stream: \(message) (\(reply["error"]?["code"]?.string ?? "unknown")); \(polling)")
            return cursor
        }
        while true {
            let message: JSONValue?
            do {
                message = try client.readMessage(deadline: .distantFuture)
            } catch {
                note("the change-log stream from storesyncd broke: \(error); \(polling)")
                return cursor
            }
            guard let message else {
                note("storesyncd closed the change-log stream (it is stopping or restarting); \(polling)")
                return cursor
            }
            switch message["event"]?.string {
            case "transaction"?:
                do {
                    guard let object = message["entry"]?.foundationValue as? [String: Any] else {
                        throw ChangeLogError.badEntry("the item has no entry object")
                    }
                    let kinds = (message["kinds"]?.array ?? []).map { ($0.object ?? [:]).compactMapValues(\.string) }
                    let entry = try ChangeLogEntry(jsonObject: object, valueKinds: kinds)
                    FileHandle.standardOutput.write(Data(try printer.text(entry).utf8))
                    cursor = entry.cursor
                    printedSinceCursor = true
                } catch {
                    note("storesyncd sent a change-log item this storesyncctl cannot read (\(error)); \(polling)")
                    return cursor
                }
            case "warning"?:
                note("warning: \(message["message"]?.string ?? message.text)")
            case "caught-up"?:
                if let text = message["cursor"]?.string, let position = try? ChangeLogPosition(parsing: text) { cursor = position }
                if command.showCursor && printedSinceCursor {
                    FileHandle.standardOutput.write(Data("-- cursor: \(cursor)\n".utf8))
                    printedSinceCursor = false
                }
            default:
                if message["ok"]?.bool == false {
                    note("storesyncd ended the change-log stream: \(message["error"]?["message"]?.string ?? message.text); \(polling)")
                    return cursor
                }
            }
        }
    }

    /// `--socket`, else the configuration's `control_socket` (the one the
    /// log was read with, so the daemon of those files).
    private func socketLocation() throws -> DaemonOptions.Location {
        if let socket = command.socket { return DaemonOptions.Location(path: DaemonOptions.absolute(socket), source: "--socket") }
        let configuration = try GroupLookup.configuration(command.config)
        return DaemonOptions.Location(path: configuration.controlSocket.path, source: "control_socket of \(configuration.file)")
    }

    /// The `log` op with the log's own filter and sources.
    private func request(after cursor: ChangeLogPosition) -> [String: JSONValue] {
        let filter = log.filter
        var fields: [String: JSONValue] = ["op": .string(ControlProtocol.Op.log.rawValue), "after": .string(cursor.description)]
        let groups = Set(log.sources.compactMap(\.group)).sorted()
        fields["groups"] = .array(groups.map(JSONValue.string))
        if let stores = filter.stores {
            fields["stores"] = .array(stores.sorted().map(JSONValue.string))
            fields["hub"] = .bool(filter.includesHub)
        }
        if let entities = filter.entities { fields["entities"] = .array(entities.sorted().map(JSONValue.string)) }
        if let objects = filter.objects { fields["objects"] = .array(objects.map(\.uuidString).sorted().map(JSONValue.string)) }
        if let authors = filter.authors { fields["authors"] = .array(authors.sorted().map(JSONValue.string)) }
        if let since = filter.since { fields["since"] = .double(since.timeIntervalSince1970) }
        if let until = filter.until { fields["until"] = .double(until.timeIntervalSince1970) }
        if filter.onlyConflicts { fields["conflicts"] = true }
        if filter.includesBookkeeping { fields["bookkeeping"] = true }
        return fields
    }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("storesyncctl: \(message)\n".utf8))
    }
}

extension JSONValue {
    /// The value as JSONSerialization would give it, with native Swift
    /// numbers and booleans (so an integer is never taken for a boolean).
    var foundationValue: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let value): return value
        case .int(let value): return value
        case .double(let value): return value
        case .string(let value): return value
        case .array(let values): return values.map(\.foundationValue)
        case .object(let members): return members.mapValues(\.foundationValue)
        }
    }
}
