import Foundation
import StoreSync
import StoreSyncControl

extension ControlService {
    /// `log`: a stream of the change log of the daemon's groups (or some of
    /// them, filtered as `storesyncctl log` filters), from `after` (a
    /// cursor; "" is the beginning) or, without it, from now on.
    func log(_ request: ControlRequest, on connection: ControlConnection, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        if connection.subscriptions.contains(where: { $0.id == request.id }) {
            throw ControlError(.badRequest, "this connection already has a stream with id \(request.id.text); use another id")
        }
        let runners = daemon.runners
        var names = try strings(request, "groups")
        if let group = try request.string("group") { names = (names ?? []) + [group] }
        if let names, let unknown = names.first(where: { name in !runners.contains { $0.name == name } }) {
            throw ControlError(.notFound, "no group named \(unknown) (groups: \(Self.list(runners.map(\.name))))")
        }
        let selected = runners.filter { names?.contains($0.name) ?? true }
        if let shared = selected.first(where: { $0.settings.hub.postgreSQL != nil }) {
            // SyncChangeLog reads the embedded hub's file (its history and conflicts).
            throw ControlError(.unsupported, "group \(shared.name) keeps its hub in PostgreSQL; the change log reads embedded hubs only (not done yet)"
                               + (names == nil ? "; name the other groups" : ""))
        }
        let groups = selected.map(\.configuration)
        var filter = ChangeLogFilter()
        if let stores = try strings(request, "stores") {
            filter.stores = Set(stores)
            filter.includesHub = try request.bool("hub", default: false)
        } else if try request.bool("hub", default: false) {
            filter.stores = []
        }
        filter.entities = try strings(request, "entities").map(Set.init)
        if let objects = try strings(request, "objects") {
            filter.objects = Set(try objects.map { text in
                guard let id = UUID(uuidString: text) else { throw ControlError(.badRequest, "field objects: '\(text)' is not a global ID (a UUID)") }
                return id
            })
        }
        // Authors may be "" (foreign writers), which `string` refuses.
        filter.authors = try strings(request, "authors", allowEmpty: true).map(Set.init)
        filter.since = try time(request, "since")
        filter.until = try time(request, "until")
        filter.onlyConflicts = try request.bool("conflicts", default: false)
        filter.includesBookkeeping = try request.bool("bookkeeping", default: false)
        var after: ChangeLogPosition?
        if let value = request.fields["after"], !value.isNull {
            guard let text = value.string else { throw ControlError(.badRequest, "field after: expected a cursor string, found \(value.typeName)") }
            do { after = try ChangeLogPosition(parsing: text) } catch { throw ControlError(.badRequest, "field after: \(error)") }
        }
        ControlLogStream.open(groups: groups, filter: filter, after: after, request: request, connection: connection, loop: loop, reply: reply)
    }

    private func strings(_ request: ControlRequest, _ name: String, allowEmpty: Bool = false) throws -> [String]? {
        guard let value = request.fields[name], !value.isNull else { return nil }
        guard let array = value.array else { throw ControlError(.badRequest, "field \(name): expected an array of strings, found \(value.typeName)") }
        return try array.map { item in
            guard let text = item.string, allowEmpty || !text.isEmpty else {
                throw ControlError(.badRequest, "field \(name): expected non-empty strings, found \(item.text)")
            }
            return text
        }
    }

    /// A time as seconds since 1970 (what storesyncctl sends, exact) or ISO 8601 text.
    private func time(_ request: ControlRequest, _ name: String) throws -> Date? {
        guard let value = request.fields[name], !value.isNull else { return nil }
        if let seconds = value.double { return Date(timeIntervalSince1970: seconds) }
        guard let text = value.string, let date = JSONValue.date(text) else {
            throw ControlError(.badRequest, "field \(name): \(value.text) is neither seconds since 1970 nor an ISO 8601 time such as 2026-11-25T09:00:00.000Z")
        }
        return date
    }
}
