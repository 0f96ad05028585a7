#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import StoreSyncControl
import XCTest

/// Issue 18 parts 3-4: a real daemon keeps a group's external records
/// directory (`[group.export]`) in step with its hub: saves in any store
/// become records, updates rewrite them, deletes remove them; changes made
/// while it was stopped are exported after a restart; `storesyncctl export
/// rebuild` rewrites the directory; a directory that cannot be written never
/// stops syncing, shows in status, and is caught up afterwards.
final class ExternalRecordsDaemonTests: XCTestCase {
    /// Records in `records/` beside the config, the safety timer every second
    /// (so a directory made writable again is caught up without a new save).
    static let export = "\n[group.export]\ndirectory = \"records\"\n"
    static let fastRescan = "rescan_interval = \"1s\""

    // MARK: - Helpers

    /// Every Item record under `root` (`<store UUID>/Item/<pk>.<ext>`): path → parsed JSON.
    static func records(_ root: URL, fileExtension: String = "json") -> [String: Any] {
        var out: [String: Any] = [:]
        let fm = FileManager.default
        for store in (try? fm.contentsOfDirectory(atPath: root.path)) ?? [] {
            let folder = root.appendingPathComponent(store).appendingPathComponent("Item")
            for name in (try? fm.contentsOfDirectory(atPath: folder.path)) ?? [] where !name.hasPrefix(".") && name.hasSuffix(".\(fileExtension)") {
                let url = folder.appendingPathComponent(name)
                guard let data = try? Data(contentsOf: url), let json = try? JSONSerialization.jsonObject(with: data) else {
                    out[url.path] = "unreadable"
                    continue
                }
                out[url.path] = json
            }
        }
        return out
    }

    /// Whether `value` appears anywhere in a parsed record (as a string or a number).
    static func mentions(_ json: Any, _ value: String) -> Bool {
        switch json {
        case let string as String: return string == value
        case let number as NSNumber: return number.stringValue == value
        case let array as [Any]: return array.contains { mentions($0, value) }
        case let object as [String: Any]: return object.values.contains { mentions($0, value) }
        default: return false
        }
    }

    /// The records naming `name` (normally one).
    static func records(_ root: URL, naming name: String) -> [(path: String, json: Any)] {
        records(root).filter { mentions($0.value, name) }.map { ($0.key, $0.value) }
    }

    /// One record's content (docs/EXTERNAL-RECORDS.md): entity, the hub's
    /// store UUID (its folder), the object's URI there, its global identifier
    /// (the hub keeps history), and the values.
    static func checkRecord(_ path: String, _ json: Any, name: String, count: Int64, file: StaticString = #filePath, line: UInt = #line) {
        guard let record = json as? [String: Any] else { return XCTFail("\(path) is not a JSON object: \(json)", file: file, line: line) }
        let folder = ((path as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let store = (folder as NSString).lastPathComponent
        let key = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        XCTAssertEqual(record["entity"] as? String, "Item", path, file: file, line: line)
        XCTAssertEqual(record["store"] as? String, store, path, file: file, line: line)
        XCTAssertEqual(record["uri"] as? String, "x-coredata://\(store)/Item/p\(key)", path, file: file, line: line)
        XCTAssertNotNil((record["globalIdentifier"] as? String).flatMap(UUID.init(uuidString:)), "\(path): \(record)", file: file, line: line)
        let values = record["values"] as? [String: Any]
        XCTAssertEqual(values?["name"] as? String, name, "\(path): \(record)", file: file, line: line)
        XCTAssertEqual((values?["count"] as? NSNumber)?.int64Value, count, "\(path): \(record)", file: file, line: line)
    }

    /// Files being written (".name.tmp") left anywhere under `root`.
    static func temporaryFiles(_ root: URL) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: root.path)
        var out: [String] = []
        while let path = enumerator?.nextObject() as? String {
            if (path as NSString).lastPathComponent.hasSuffix(".tmp") { out.append(path) }
        }
        return out
    }

    /// Deletes the Item named `name` from a store, as an application would.
    static func delete(_ url: URL, name: String) throws {
        let context = try Daemon.app(url)
        defer { for store in context.persistentStoreCoordinator.persistentStores { try? context.persistentStoreCoordinator.remove(store) } }
        try context.performAndWait {
            let request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "name == %@", name)
            for item in try context.fetch(request) { context.delete(item) }
            try context.save()
        }
    }

    /// The group's `export` object from `status`.
    static func exportStatus(_ daemon: Daemon.Controlled) throws -> JSONValue {
        try daemon.request(["op": "status"])["groups"]?.array?.first?["export"] ?? .null
    }

    // MARK: - Tests

    /// Saves in each store appear as one record per object (each file read
    /// back), an update rewrites the record, a delete removes it; a file
    /// that is not a record is left alone; status shows the export at the
    /// hub's position.
    func testSavesUpdatesAndDeletesBecomeRecords() throws {
        let daemon = try Daemon.Controlled(groupExtra: Self.export + "change_feed = true\n")
        let root = daemon.directory.appendingPathComponent("records")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let note = root.appendingPathComponent("README.txt")
        try Data("not a record\n".utf8).write(to: note)

        try daemon.save("s1", name: "alpha", count: 1)
        try daemon.save("s2", name: "beta", count: 2)
        try daemon.save("s3", name: "gamma", count: 3)
        XCTAssertTrue(Daemon.wait(timeout: 20) { Self.records(root).count == 3 }, "records: \(Self.records(root).keys.sorted())\n\(daemon.daemon.log)")
        for (name, count) in [("alpha", 1), ("beta", 2), ("gamma", 3)] as [(String, Int64)] {
            let found = Self.records(root, naming: name)
            XCTAssertEqual(found.count, 1, "\(name): \(found.map(\.path))")
            if let record = found.first { Self.checkRecord(record.path, record.json, name: name, count: count) }
            // <dir>/<store UUID>/Item/<pk>.json
            let path = try XCTUnwrap(found.first?.path)
            XCTAssertEqual((path as NSString).deletingLastPathComponent.hasSuffix("/Item"), true, path)
        }
        // One store folder: the hub's.
        XCTAssertEqual(Set(Self.records(root).keys.map { (($0 as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent }).count, 1)

        // Every store has every object before one is changed elsewhere
        // (the records only say the hub has them).
        XCTAssertTrue(try Daemon.wait(timeout: 20) {
            try ["s1", "s2", "s3"].allSatisfy { try Daemon.items(daemon.url($0)) == ["alpha": 1, "beta": 2, "gamma": 3] }
        }, daemon.daemon.log)
        try daemon.save("s3", name: "alpha", count: 5)
        XCTAssertTrue(Daemon.wait(timeout: 20) {
            Self.records(root, naming: "alpha").first.map { Self.mentions($0.json, "5") } ?? false
        }, "alpha's record was not rewritten: \(String(describing: Self.records(root, naming: "alpha").first?.json))")
        XCTAssertEqual(Self.records(root).count, 3)
        if let record = Self.records(root, naming: "alpha").first { Self.checkRecord(record.path, record.json, name: "alpha", count: 5) }

        XCTAssertTrue(try Daemon.wait(timeout: 20) { try Daemon.items(daemon.url("s1"))["alpha"] == 5 }, daemon.daemon.log)
        let betaURI = try XCTUnwrap((Self.records(root, naming: "beta").first?.json as? [String: Any])?["uri"] as? String)
        try Self.delete(daemon.url("s1"), name: "beta")
        XCTAssertTrue(Daemon.wait(timeout: 20) { Self.records(root, naming: "beta").isEmpty }, "beta's record is still there")
        XCTAssertEqual(Self.records(root).count, 2)
        XCTAssertEqual(try String(contentsOf: note, encoding: .utf8), "not a record\n", "a file that is not a record was touched")
        XCTAssertEqual(Self.temporaryFiles(root), [])

        // The change feed (change_feed = true): one line per record written or
        // removed, in order; beta's last line is its delete.
        let folder = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: root.path).first { $0 != "README.txt" })
        let feed = try String(contentsOf: root.appendingPathComponent(folder).appendingPathComponent("changes.ndjson"), encoding: .utf8)
        let lines = try feed.split(separator: "\n").map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(lines.compactMap { ($0["seq"] as? NSNumber)?.intValue }, Array(1...lines.count), feed)
        XCTAssertGreaterThanOrEqual(lines.filter { $0["op"] as? String == "upsert" }.count, 4, feed)
        XCTAssertEqual(lines.last?["op"] as? String, "delete", feed)
        XCTAssertEqual(lines.last?["uri"] as? String, betaURI, feed)

        // status: ok, at the hub's position (after the next round has run).
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            let status = try daemon.request(["op": "status"])
            let group = status["groups"]?.array?.first
            return group?["export"]?["state"]?.string == "ok" && group?["export"]?["position"]?.int == group?["stores"]?.array?.first?["positions"]?["hub"]?.int
        }, "\((try? daemon.request(["op": "status"]).text) ?? "no status")")
        let export = try Self.exportStatus(daemon)
        XCTAssertEqual(export["directory"]?.string, root.path)
        XCTAssertEqual(export["format"]?.string, "json")
        XCTAssertTrue(export["last_error"]?.isNull == true, export.text)
        XCTAssertEqual(export["rebuilds"]?.int, 1, "only the first export rebuilds (no cursor yet): \(export.text)")
        let human = try daemon.ctl(["status"])
        XCTAssertEqual(human.status, 0, human.stdout + human.stderr)
        XCTAssertTrue(human.stdout.contains("EXPORT") && human.stdout.contains(root.path), human.stdout)
    }

    /// Changes made while the daemon was stopped (an insert, an update, a
    /// delete) reach the records after it starts again: the start-up round
    /// pulls them into the hub and the exporter goes on from its cursor.
    func testChangesWhileStoppedAreExportedAfterRestart() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Daemon.makeGroup(in: directory, groupExtra: Self.export)
        let root = directory.appendingPathComponent("records")
        let url = { (store: String) in directory.appendingPathComponent("\(store).sqlite") }
        func start() throws -> Daemon.Running {
            let running = try Daemon.Running(["--config", config], logFile: directory.appendingPathComponent("daemon.log"))
            XCTAssertTrue(Daemon.wait(timeout: 20) { Daemon.startRoundDone(running.log) }, running.log)
            return running
        }

        var running = try start()
        try Daemon.saveItem(at: url("s1"), name: "alpha", count: 1)
        try Daemon.saveItem(at: url("s1"), name: "beta", count: 2)
        XCTAssertTrue(Daemon.wait(timeout: 20) { Self.records(root).count == 2 }, running.log)
        XCTAssertTrue(try Daemon.wait(timeout: 20) { try Daemon.items(url("s3")) == ["alpha": 1, "beta": 2] }, running.log)
        running.signal(SIGTERM)
        XCTAssertEqual(running.waitForExit(timeout: 20), 0)
        let cursor = directory.appendingPathComponent("state/items/export-cursor.json")
        XCTAssertTrue(FileManager.default.fileExists(atPath: cursor.path), "the export cursor is kept in the group's state directory")

        try Daemon.saveItem(at: url("s2"), name: "gamma", count: 3)
        try Daemon.saveItem(at: url("s3"), name: "alpha", count: 7)
        try Self.delete(url("s1"), name: "beta")
        XCTAssertEqual(Self.records(root).count, 2, "nothing exports while the daemon is stopped")

        running = try start()
        defer { running.signal(SIGTERM); _ = running.waitForExit(timeout: 20) }
        XCTAssertTrue(Daemon.wait(timeout: 20) {
            Self.records(root, naming: "gamma").count == 1 && Self.records(root, naming: "beta").isEmpty
                && (Self.records(root, naming: "alpha").first.map { Self.mentions($0.json, "7") } ?? false)
        }, "records: \(Self.records(root))\n\(running.log)")
        XCTAssertEqual(Self.records(root).count, 2)
        // Caught up from the cursor, not rebuilt (the log file is new for this run).
        XCTAssertFalse(running.log.contains("records rebuilt"), "the restart rebuilt the records instead of reading the hub's history from the cursor:\n\(running.log)")
    }

    /// `storesyncctl export rebuild` rewrites a directory from which records
    /// were deleted, in which one was changed and a stale one planted, and
    /// leaves other files alone; unknown groups and groups without export
    /// are refused with their own codes.
    func testExportRebuildRewritesTheDirectory() throws {
        let daemon = try Daemon.Controlled(groupExtra: Self.export)
        let root = daemon.directory.appendingPathComponent("records")
        for (i, name) in ["alpha", "beta", "gamma"].enumerated() { try daemon.save("s\(i + 1)", name: name, count: Int64(i + 1)) }
        XCTAssertTrue(Daemon.wait(timeout: 20) { Self.records(root).count == 3 }, daemon.daemon.log)
        let alpha = try XCTUnwrap(Self.records(root, naming: "alpha").first?.path)
        let beta = try XCTUnwrap(Self.records(root, naming: "beta").first?.path)
        let itemFolder = (alpha as NSString).deletingLastPathComponent
        try FileManager.default.removeItem(atPath: alpha)
        try Data("{\"planted\": true}".utf8).write(to: URL(fileURLWithPath: beta))
        let stale = (itemFolder as NSString).appendingPathComponent("99999.json")
        try Data("{\"stale\": true}".utf8).write(to: URL(fileURLWithPath: stale))
        let other = (itemFolder as NSString).appendingPathComponent("notes.md")
        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: other))

        let result = try daemon.ctl(["export", "rebuild", "items"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix("items: 3 records written to \(root.path) in "), result.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: alpha), "the deleted record was not written again")
        // Rewritten from the hub (its modification time may differ from the first write).
        let rewritten = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: beta)))
        XCTAssertTrue(Self.mentions(rewritten, "beta") && Self.mentions(rewritten, "2"), "the planted content was not replaced: \(rewritten)")
        XCTAssertNil((rewritten as? [String: Any])?["planted"], "the planted content was not replaced: \(rewritten)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale), "a record of no object was not removed")
        XCTAssertEqual(try String(contentsOfFile: other, encoding: .utf8), "mine\n", "a file that is not a record was touched")
        XCTAssertEqual(Self.records(root).count, 3)

        let json = try daemon.ctl(["export", "rebuild", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let reply = try JSONValue.line(json.stdout)
        XCTAssertEqual(reply["records"]?.int, 3, json.stdout)
        XCTAssertEqual(reply["groups"]?.array?.first?["group"]?.string, "items")
        XCTAssertEqual(reply["groups"]?.array?.first?["directory"]?.string, root.path)
        XCTAssertEqual(try Self.exportStatus(daemon)["rebuilds"]?.int, 3, "first export and the two asked for")

        let unknown = try daemon.ctl(["export", "rebuild", "nosuch"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("no group named nosuch") && unknown.stderr.contains("(not-found)"), unknown.stderr)

        let plain = try Daemon.Controlled()
        let none = try plain.ctl(["export", "rebuild"])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.stderr.contains("no group exports records") && none.stderr.contains("(not-configured)"), none.stderr)
        let named = try plain.request(["op": "export.rebuild", "group": "items"])
        XCTAssertEqual(named["error"]?["code"]?.string, "not-configured", named.text)
        XCTAssertTrue(try plain.request(["op": "status"])["groups"]?.array?.first?["export"]?.isNull == true)
        let help = try Daemon.ctl(["export", "rebuild", "--help"])
        XCTAssertTrue(help.stdout.contains("Examples:") && help.stdout.contains("Exit status:"), help.stdout)
    }

    /// The records directory replaced by a regular file mid-run (the tests
    /// run as root, so a chmod would not stop the writes): rounds go on
    /// syncing the stores, status shows the export failing with the error
    /// (and `status` exits 1), one log line is written for the episode; once
    /// the directory is back the safety timer catches the records up with
    /// no new save.
    func testUnwritableDirectoryKeepsSyncingAndCatchesUp() throws {
        let daemon = try Daemon.Controlled(extra: Self.fastRescan, groupExtra: Self.export)
        let root = daemon.directory.appendingPathComponent("records")
        let away = daemon.directory.appendingPathComponent("records.away")
        try daemon.save("s1", name: "alpha", count: 1)
        XCTAssertTrue(try Daemon.wait(timeout: 20) { Self.records(root).count == 1 }, daemon.daemon.log)
        XCTAssertTrue(try Daemon.wait(timeout: 20) { try Daemon.items(daemon.url("s2")) == ["alpha": 1] }, daemon.daemon.log)

        try FileManager.default.moveItem(at: root, to: away)
        try Data("in the way\n".utf8).write(to: root)
        try daemon.save("s1", name: "beta", count: 2)
        try daemon.save("s2", name: "alpha", count: 9)
        XCTAssertTrue(try Daemon.wait(timeout: 20) {
            try Daemon.items(daemon.url("s3")) == ["alpha": 9, "beta": 2] && Daemon.items(daemon.url("s1")) == ["alpha": 9, "beta": 2]
        }, "the stores stopped syncing: \(String(describing: try? Daemon.items(daemon.url("s3"))))\n\(daemon.daemon.log)")
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Self.exportStatus(daemon)["state"]?.string == "failing" }, (try? Self.exportStatus(daemon).text) ?? "")
        let failing = try Self.exportStatus(daemon)
        XCTAssertTrue(failing["last_error"]?.string?.contains(root.path) == true, "the error names the path: \(failing.text)")
        XCTAssertFalse(failing["failing_since"]?.isNull ?? true)
        let status = try daemon.ctl(["status"])
        XCTAssertEqual(status.status, 1, "a failing export is not in sync: \(status.stdout)")
        XCTAssertTrue(status.stdout.contains("failing") && status.stdout.contains("items export"), status.stdout)
        // A few safety-timer rounds fail the same way: one line for the episode.
        Thread.sleep(forTimeInterval: 2.5)
        XCTAssertEqual(daemon.daemon.log.components(separatedBy: "msg=\"export failed").count - 1, 1, daemon.daemon.log)
        XCTAssertEqual(try String(contentsOf: root, encoding: .utf8), "in the way\n", "the file in the way was replaced")
        // A rebuild asked for now fails the same way, with the path, and changes nothing.
        let rebuild = try daemon.ctl(["export", "rebuild"])
        XCTAssertEqual(rebuild.status, 1, rebuild.stdout)
        XCTAssertTrue(rebuild.stderr.contains("export rebuild failed: items: ") && rebuild.stderr.contains(root.path)
                      && rebuild.stderr.hasSuffix("(failed)\n"), rebuild.stderr)

        try FileManager.default.removeItem(at: root)
        try FileManager.default.moveItem(at: away, to: root)
        XCTAssertTrue(Daemon.wait(timeout: 20) {
            Self.records(root, naming: "beta").count == 1 && (Self.records(root, naming: "alpha").first.map { Self.mentions($0.json, "9") } ?? false)
        }, "records not caught up: \(Self.records(root))\n\(daemon.daemon.log)")
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Self.exportStatus(daemon)["state"]?.string == "ok" })
        XCTAssertTrue(daemon.daemon.log.contains("msg=\"export recovered\""), daemon.daemon.log)
        XCTAssertEqual(Self.temporaryFiles(root), [])
    }

    /// A reload that changes `format`: the exporter's cursor names other
    /// settings, so the next job rebuilds the directory in the new format and
    /// removes the old format's records.
    func testReloadWithAnotherFormatRebuilds() throws {
        let daemon = try Daemon.Controlled(groupExtra: Self.export)
        let root = daemon.directory.appendingPathComponent("records")
        try daemon.save("s1", name: "alpha", count: 1)
        XCTAssertTrue(Daemon.wait(timeout: 20) { Self.records(root).count == 1 }, daemon.daemon.log)
        let json = try XCTUnwrap(Self.records(root).keys.first)

        let text = try String(contentsOfFile: daemon.config, encoding: .utf8)
        try Data(text.replacingOccurrences(of: "directory = \"records\"\n", with: "directory = \"records\"\nformat = \"xml\"\n").utf8)
            .write(to: URL(fileURLWithPath: daemon.config))
        let reload = try daemon.ctl(["reload", "--wait"])
        XCTAssertEqual(reload.status, 0, reload.stderr)
        let xml = (json as NSString).deletingPathExtension + ".xml"
        XCTAssertTrue(Daemon.wait(timeout: 20) {
            FileManager.default.fileExists(atPath: xml) && !FileManager.default.fileExists(atPath: json)
        }, "not rebuilt as XML: \(daemon.daemon.log)")
        let plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: URL(fileURLWithPath: xml)), format: nil) as? [String: Any]
        XCTAssertEqual((plist?["values"] as? [String: Any])?["name"] as? String, "alpha")
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Self.exportStatus(daemon)["format"]?.string == "xml" })
        XCTAssertTrue(daemon.daemon.log.contains("reason=\"the export settings changed\""), daemon.daemon.log)
    }
}
