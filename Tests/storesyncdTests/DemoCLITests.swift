#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import StoreSyncControl
import XCTest

/// Issue 17's end-to-end acceptance: the real `storesyncd --demo DIR` (one
/// daemon for the whole test) driven through every daemon subcommand of
/// storesyncctl, checking the human and the JSON output: status (exit 0, 1
/// and 3), pause, resume, sync --wait, reload --wait, a real conflict
/// listed, shown and resolved, metrics parsed as Prometheus text, log and
/// log --follow, verify (differences planted with sqlite3, then repaired
/// by the daemon; a conflict's difference, gone once it is resolved), and
/// query on the group.
final class DemoCLITests: XCTestCase {
    var directory: URL!
    var config: String { directory.appendingPathComponent("storesyncd.toml").path }
    var socket: String { directory.appendingPathComponent("run/control.sock").path }
    var model: ManagedObjectModel!

    func ctl(_ arguments: [String]) throws -> Daemon.Result { try Daemon.ctl(arguments + ["--socket", socket]) }
    func files(_ arguments: [String]) throws -> Daemon.Result { try Daemon.ctl(arguments + ["--config", config]) }
    func json(_ result: Daemon.Result) throws -> JSONValue { try JSONValue.line(result.stdout.trimmingCharacters(in: .newlines)) }

    func testEveryDaemonCommandOnTheDemo() throws {
        directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try Daemon.Running(["--demo", directory.path], logFile: FileManager.default.temporaryDirectory.appendingPathComponent("demo-\(UUID().uuidString).log"))
        defer { daemon.signal(SIGTERM); _ = daemon.waitForExit(timeout: 10) }
        XCTAssertTrue(Daemon.wait(timeout: 30) { [self] in
            guard let reply = try? ControlClient(path: socket, timeout: 5).request(["op": "status"]) else { return false }
            return reply["in_sync"] == true
        }, daemon.log)
        model = try ManagedObjectModel(contentsOf: directory.appendingPathComponent("Demo.xcdatamodel"))

        // status: 0 in sync, human and JSON.
        let ok = try ctl(["status"])
        XCTAssertEqual(ok.status, 0, ok.stdout + ok.stderr)
        XCTAssertTrue(ok.stdout.contains("storesyncd \(StoreSyncVersion.current), pid \(daemon.process.processIdentifier)"), ok.stdout)
        XCTAssertTrue(ok.stdout.contains("All 3 stores in sync."), ok.stdout)
        XCTAssertNotNil(ok.stdout.range(of: "demo +s3 +ok ", options: .regularExpression), ok.stdout)
        let okJSON = try json(try ctl(["status", "--json"]))
        XCTAssertEqual(okJSON["in_sync"], true)
        XCTAssertEqual(okJSON["groups"]?.array?.first?["name"], "demo")

        // log --follow through the daemon, from the start of the test.
        let follower = try Follower(Daemon.ctlBinary.path, ["log", "--follow", "--json", "--config", config, "--socket", socket])
        defer { follower.stop() }

        // Data in s1; sync --wait carries it everywhere.
        try save("s1") { context in
            let inbox = try self.folder("inbox", in: context)
            _ = try self.folder("archive", in: context)
            try self.note("n1", revision: 1, folder: inbox, in: context)
            try self.note("spare", revision: 1, folder: inbox, in: context)
        }
        let synced = try ctl(["sync", "--wait", "--timeout", "30"])
        XCTAssertEqual(synced.status, 0, synced.stderr)
        XCTAssertTrue(synced.stdout.hasPrefix("demo: round finished in "), synced.stdout)
        XCTAssertTrue(Daemon.wait(timeout: 10) { (try? self.revision("s3", "n1")) == 1 })
        let syncedJSON = try json(try ctl(["sync", "demo", "--wait", "--json"]))
        XCTAssertEqual(syncedJSON["rounds"]?.array?.first?["group"], "demo", syncedJSON.text)

        // pause, status 1, resume.
        let paused = try ctl(["pause", "s2"])
        XCTAssertEqual(paused.status, 0, paused.stderr)
        XCTAssertEqual(paused.stdout, "paused demo/s2\n")
        let behind = try ctl(["status"])
        XCTAssertEqual(behind.status, 1, behind.stdout)
        XCTAssertNotNil(behind.stdout.range(of: "demo +s2 +paused ", options: .regularExpression), behind.stdout)
        let behindJSON = try ctl(["status", "--json"])
        XCTAssertEqual(behindJSON.status, 1)
        XCTAssertEqual(try json(behindJSON)["in_sync"], false)
        let resumed = try ctl(["resume", "demo/s2", "--json"])
        XCTAssertEqual(try json(resumed)["resumed"], [["group": "demo", "store": "s2"]])
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try self.ctl(["status"]).status == 0 })

        // reload --wait: s2 takes the error policy (conflicts wait for a decision).
        let text = try String(contentsOfFile: config, encoding: .utf8)
        let withError = text.replacingOccurrences(of: "name = \"s2\"\npath = \"s2.sqlite\"\npolicy = \"object-trump\"",
                                                  with: "name = \"s2\"\npath = \"s2.sqlite\"\npolicy = \"error\"")
        XCTAssertNotEqual(withError, text, "the demo configuration changed shape:\n\(text)")
        try Data(withError.utf8).write(to: URL(fileURLWithPath: config))
        let reloaded = try ctl(["reload", "--wait"])
        XCTAssertEqual(reloaded.status, 0, reloaded.stderr)
        XCTAssertEqual(reloaded.stdout, "reloaded: 1 group\n")
        XCTAssertEqual(try json(try ctl(["reload", "--wait", "--json"]))["groups"], 1)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try self.ctl(["status"]).status == 0 })

        // A real conflict: s2 changes what the hub changed meanwhile.
        XCTAssertEqual(try ctl(["pause", "s2"]).status, 0)
        try save("s1") { try self.note("n1", revision: 2, folder: nil, in: $0) }
        XCTAssertTrue(Daemon.wait(timeout: 10) { (try? self.revision("s3", "n1")) == 2 })
        try save("s2") { try self.note("n1", revision: 3, folder: nil, in: $0) }
        XCTAssertEqual(try ctl(["resume", "s2"]).status, 0)
        var listed = Daemon.Result(status: -1, stdout: "", stderr: "")
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            listed = try self.ctl(["conflicts", "list", "--json"])
            return (try? self.json(listed))?["conflicts"]?.array?.count == 1
        }, listed.stdout + listed.stderr + daemon.log)
        let conflict = try XCTUnwrap(try json(listed)["conflicts"]?.array?.first)
        let reference = try XCTUnwrap(conflict["ref"]?.string)
        let number = try XCTUnwrap(conflict["id"]?.int)
        XCTAssertEqual(conflict["store"], "s2")
        XCTAssertEqual(conflict["incoming"]?["revision"], "3")
        let list = try ctl(["conflicts", "list"])
        XCTAssertNotNil(list.stdout.range(of: "\(reference) +s2 +Note +[0-9A-F-]{36} +update ", options: .regularExpression), list.stdout)
        XCTAssertTrue(list.stdout.hasSuffix("1 conflict waiting.\n"), list.stdout)
        XCTAssertEqual(try ctl(["status"]).status, 1, "a conflict waiting is not in sync")
        let shown = try ctl(["conflicts", "show", reference])
        XCTAssertTrue(shown.stdout.hasPrefix("conflict \(reference) (waiting)\n"), shown.stdout)
        XCTAssertNotNil(shown.stdout.range(of: "\\* +revision +1 +3 +2\n", options: .regularExpression), shown.stdout)
        XCTAssertEqual(try json(try ctl(["conflicts", "show", reference, "--json"]))["conflict"]?["hub"]?["revision"], "2")

        // verify: the waiting conflict explains s2's difference.
        let during = try files(["verify", "demo", "--json"])
        XCTAssertEqual(during.status, 1, during.stdout + during.stderr)
        let explained = try XCTUnwrap(try json(during)["groups"]?.array?.first?["differences"]?.array?.first { $0["store"] == "s2" && $0["property"] == "revision" },
                                      during.stdout)
        XCTAssertEqual(explained["conflict"]?.int, number, explained.text)
        XCTAssertEqual(explained["storeValue"], 3)

        let resolved = try ctl(["conflicts", "resolve", reference, "--take", "incoming"])
        XCTAssertEqual(resolved.status, 0, resolved.stderr)
        XCTAssertTrue(resolved.stdout.hasPrefix("resolved \(reference) taking incoming (Note "), resolved.stdout)
        XCTAssertTrue(Daemon.wait(timeout: 10) { ["s1", "s2", "s3"].allSatisfy { (try? self.revision($0, "n1")) == 3 } }, daemon.log)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try self.ctl(["status"]).status == 0 })
        let agreed = try files(["verify", "demo"])
        XCTAssertEqual(agreed.status, 0, agreed.stdout)
        XCTAssertTrue(agreed.stdout.hasPrefix("group demo: the hub and 3 stores (s1, s2, s3) agree on "), agreed.stdout)

        // log from the files: the conflict recorded and resolved, human and JSON.
        let conflictLog = try files(["log", "--conflicts"])
        XCTAssertEqual(conflictLog.status, 0, conflictLog.stderr)
        XCTAssertTrue(conflictLog.stdout.contains("Conflict: \(number) recorded: s2's change to Note "), conflictLog.stdout)
        XCTAssertTrue(conflictLog.stdout.contains("Conflict: \(number) resolved, taking the store's object"), conflictLog.stdout)
        let conflictJSON = try files(["log", "--conflicts", "--json", "--hub"]).stdout.split(separator: "\n").map { try JSONValue.line(String($0)) }
        let events = conflictJSON.flatMap { $0["conflictEvents"]?.array ?? [] }
        XCTAssertTrue(events.contains { $0["event"] == "recorded" && $0["id"]?.int == number && $0["store"] == "s2" }, "\(events)")
        XCTAssertTrue(events.contains { $0["event"] == "resolved" && $0["id"]?.int == number && $0["taking"] == "incoming" }, "\(events)")
        let s1Log = try files(["log", "--store", "s1", "--entity", "Note", "--author", "test-app"])
        XCTAssertTrue(s1Log.stdout.hasPrefix("transaction demo/s1 "), s1Log.stdout)
        XCTAssertTrue(s1Log.stdout.contains("Author:   test-app\n") && s1Log.stdout.contains("    insert Note ") && s1Log.stdout.contains("title: \"n1\""), s1Log.stdout)
        XCTAssertTrue(s1Log.stdout.contains("revision: 1 → 2"), s1Log.stdout)

        // log --follow: a save in another process (this one) within a second, through the daemon.
        let before = follower.lines.count
        try save("s3") { try self.note("followed", revision: 7, folder: nil, in: $0) }
        let saved = Date()
        var seen: Date?
        _ = Daemon.wait(timeout: 5) {
            let found = follower.lines.dropFirst(before).contains { $0.contains("\"source\":\"demo/s3\"") && $0.contains("\"followed\"") }
            if found, seen == nil { seen = Date() }
            return found
        }
        let delay = try XCTUnwrap(seen, follower.stdout + follower.stderr).timeIntervalSince(saved)
        XCTAssertLessThan(delay, 1.0, "log --follow showed the save after \(delay) s")
        XCTAssertFalse(follower.stderr.contains("polling"), follower.stderr)
        let followed = try follower.lines.map { try JSONValue.line($0) }
        XCTAssertTrue(followed.contains { $0["conflictEvents"]?.array?.contains { $0["event"] == "recorded" } == true }, "the conflict is in the followed log")
        // Followed through the daemon, the log has every transaction the files have, each once
        // (live, the order across sources is the order they became visible, and cursors follow it).
        func keys(_ lines: [String]) throws -> [String] {
            try lines.map { line in
                let entry = try JSONValue.line(line)
                return "\(entry["source"]?.string ?? "?"):\(entry["position"]?.int ?? -1)"
            }
        }
        var fromFiles: [String] = []
        XCTAssertTrue(try Daemon.wait(timeout: 10) { [self] in
            fromFiles = try keys(try files(["log", "--json"]).stdout.split(separator: "\n").map(String.init))
            return try keys(follower.lines).sorted() == fromFiles.sorted()
        }, "files: \(fromFiles)\nfollowed: \((try? keys(follower.lines)) ?? [])")
        XCTAssertEqual(Set(fromFiles).count, fromFiles.count)

        // query on the group: the hub by default, or --store; a syntax error shows its column.
        let hubQuery = try files(["query", "demo", "Note", "title == \"n1\""])
        XCTAssertEqual(hubQuery.status, 0, hubQuery.stderr)
        XCTAssertTrue(hubQuery.stdout.contains("n1") && hubQuery.stdout.contains("title"), hubQuery.stdout)
        let storeQuery = try files(["query", "demo", "Note", "revision == 3", "--store", "s2", "--json"])
        XCTAssertEqual(storeQuery.status, 0, storeQuery.stderr)
        let rows = try JSONValue.line(storeQuery.stdout).array ?? []
        XCTAssertEqual(rows.compactMap { $0["title"]?.string }, ["n1"], storeQuery.stdout)
        let syntax = try files(["query", "demo", "Note", "title == "])
        XCTAssertEqual(syntax.status, 65, syntax.stderr)
        XCTAssertTrue(syntax.stderr.contains("column") && syntax.stderr.contains("^"), syntax.stderr)
        let noStore = try files(["query", "demo", "Note", "--store", "s9"])
        XCTAssertEqual(noStore.status, 64, noStore.stderr)
        XCTAssertTrue(noStore.stderr.contains("group demo has no store 's9' (it has: s1, s2, s3)"), noStore.stderr)

        // verify: a changed value, a missing object and a changed relationship planted in paused s3 with sqlite3.
        XCTAssertEqual(try ctl(["pause", "s3"]).status, 0)
        _ = try sqlite3(directory.appendingPathComponent("s3.sqlite").path, """
            BEGIN;
            UPDATE ZNOTE SET ZREVISION = 99, Z_OPT = Z_OPT + 1 WHERE ZTITLE = 'n1';
            UPDATE ZNOTE SET ZFOLDER = (SELECT Z_PK FROM ZFOLDER WHERE ZNAME = 'archive'), Z_OPT = Z_OPT + 1 WHERE ZTITLE = 'n1';
            DELETE FROM ZNOTE WHERE ZTITLE = 'spare';
            COMMIT;
            """)
        let planted = try files(["verify", "demo"])
        XCTAssertEqual(planted.status, 1, planted.stdout + planted.stderr)
        XCTAssertNotNil(planted.stdout.range(of: "s3 +value +Note +[0-9A-F-]{36} +revision +99 +3", options: .regularExpression), planted.stdout)
        XCTAssertNotNil(planted.stdout.range(of: "s3 +relationship +Note +[0-9A-F-]{36} +folder ", options: .regularExpression), planted.stdout)
        XCTAssertNotNil(planted.stdout.range(of: "s3 +missing-object +Note +[0-9A-F-]{36} ", options: .regularExpression), planted.stdout)
        let plantedJSON = try json(try files(["verify", "demo", "--json"]))
        let kinds = Set(plantedJSON["groups"]?.array?.first?["differences"]?.array?.compactMap { $0["kind"]?.string } ?? [])
        XCTAssertEqual(kinds, ["value", "relationship", "missing-object"], plantedJSON.text)
        XCTAssertEqual(plantedJSON["agree"], false)
        // Resumed, the daemon pulls the SQL like any writer's and carries it everywhere.
        XCTAssertEqual(try ctl(["resume", "s3"]).status, 0)
        var repaired = Daemon.Result(status: -1, stdout: "", stderr: "")
        XCTAssertTrue(try Daemon.wait(timeout: 15) {
            repaired = try self.files(["verify", "demo"])
            return repaired.status == 0
        }, repaired.stdout + daemon.log)
        XCTAssertEqual(try json(try files(["verify", "demo", "--json"]))["agree"], true)
        XCTAssertEqual(try revision("s1", "n1"), 99)

        // metrics: Prometheus text.
        let metrics = try ctl(["metrics"])
        XCTAssertEqual(metrics.status, 0, metrics.stderr)
        let exposition = try PrometheusText(metrics.stdout)
        XCTAssertEqual(exposition.types["storesync_round_duration_seconds"], "histogram")
        XCTAssertGreaterThan(exposition.value("storesync_rounds_total", ["group": "demo"]) ?? 0, 0)
        XCTAssertGreaterThan(exposition.value("storesync_transactions_pulled_total", ["group": "demo", "store": "s1"]) ?? 0, 0)
        XCTAssertGreaterThanOrEqual(exposition.value("storesync_conflicts_total", ["group": "demo"]) ?? 0, 1)
        XCTAssertEqual(exposition.value("storesync_conflicts_resolved_total", ["group": "demo"]), 1)

        // Stopped: status 3, and log --follow goes on from the files, saying so.
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 10), 0, daemon.log)
        let down = try ctl(["status"])
        XCTAssertEqual(down.status, 3, down.stderr)
        XCTAssertTrue(down.stderr.contains("storesyncd is not running: no socket at \(socket)"), down.stderr)
        XCTAssertTrue(Daemon.wait(timeout: 5) { follower.stderr.contains("following by polling the files") }, follower.stderr)
        try save("s1") { try self.note("after-stop", revision: 1, folder: nil, in: $0) }
        XCTAssertTrue(Daemon.wait(timeout: 5) { follower.stdout.contains("\"after-stop\"") }, follower.stdout + follower.stderr)
    }

    // MARK: - The demo's stores, as an application writes them

    func save(_ store: String, _ body: @escaping (ManagedObjectContext) throws -> Void) throws {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        let sqlite = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                        at: directory.appendingPathComponent("\(store).sqlite"))
        defer { try? coordinator.remove(sqlite) }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = "test-app"
        try context.performAndWait {
            try body(context)
            try context.save()
        }
    }

    func folder(_ name: String, in context: ManagedObjectContext) throws -> ManagedObject {
        let request = FetchRequest(entityName: "Folder")
        request.predicate = try FetchPredicate(format: "name == %@", name)
        if let found = try context.fetch(request).first { return found }
        let folder = try context.insertNewObject(forEntityName: "Folder")
        try folder.setValue(name, forKey: "name")
        return folder
    }

    /// Inserts or updates the note titled `title`.
    func note(_ title: String, revision: Int64, folder: ManagedObject?, in context: ManagedObjectContext) throws {
        let request = FetchRequest(entityName: "Note")
        request.predicate = try FetchPredicate(format: "title == %@", title)
        let note = try context.fetch(request).first ?? context.insertNewObject(forEntityName: "Note")
        try note.setValue(title, forKey: "title")
        try note.setValue(revision, forKey: "revision")
        if let folder { try note.setValue(folder, forKey: "folder") }
    }

    func revision(_ store: String, _ title: String) throws -> Int64? {
        var result: Int64?
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        let sqlite = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                        at: directory.appendingPathComponent("\(store).sqlite"))
        defer { try? coordinator.remove(sqlite) }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let request = FetchRequest(entityName: "Note")
            request.predicate = try FetchPredicate(format: "title == %@", title)
            result = try context.fetch(request).first.flatMap { try $0.value(forKey: "revision") as? Int64 }
        }
        return result
    }

    func sqlite3(_ path: String, _ sql: String) throws -> String {
        let result = try Daemon.runTool("/usr/bin/sqlite3", ["-bail", "-cmd", ".timeout 5000", path, sql])
        guard result.status == 0 else { throw NSError(domain: "sqlite3", code: Int(result.status), userInfo: [NSLocalizedDescriptionKey: result.stderr]) }
        return result.stdout
    }
}
