import Foundation
import ObjectGraph
import StoreSync
import Testing
@testable import storesyncctl

/// `storesyncctl log` on `SyncGroupFixture`'s known history: the human and
/// JSON forms, each option selecting exactly what it names, `--after`
/// resuming with no gap or repeat, `--follow` showing another process's
/// save within a second, and bad input.
@Suite struct LogCommandTests {
    func run(_ arguments: [String]) throws -> CommandOutcome {
        try LogCommand.parse(arguments).execute()
    }

    /// The JSON lines of a run, each parsed.
    func lines(_ fixture: SyncGroupFixture, _ arguments: [String] = []) throws -> [[String: Any]] {
        let outcome = try run(["--config", fixture.configPath, "--json"] + arguments)
        try #require(outcome.exitCode == 0, "log \(arguments) failed: \(outcome.standardError)")
        #expect(outcome.standardError.isEmpty, "\(outcome.standardError)")
        return try outcome.standardOutput.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    func key(_ line: [String: Any]) -> String { "\(line["source"] ?? "?"):\(line["position"] ?? "?")" }
    func changes(_ line: [String: Any]) -> [[String: Any]] { line["changes"] as? [[String: Any]] ?? [] }

    @Test func humanOutputShowsSourcePositionAuthorsAndValues() throws {
        let fixture = try SyncGroupFixture()
        let outcome = try run(["--config", fixture.configPath])
        #expect(outcome.exitCode == 0 && outcome.standardError.isEmpty, "\(outcome.standardError)")
        let text = outcome.standardOutput
        let record = fixture.record.uuidString
        for expected in [
            "transaction notes/app ", "Author:   app\n", "    insert Record \(record)\n", "        a: 1\n",
            "        folder: \(fixture.folder.uuidString)\n", "        records: +\(record)\n",
            "transaction notes/hub ", "Author:   storesync (pull from app)\n", "Context:  pull:app\n",
            "Author:   storesync (push of hub position ", "Author:   web\n", "    update Record \(record)\n", "        a: 1 → 2\n",
            "Author:   (foreign writer: no author)\n", "        name: \"one\" → \"sql\"\n",
            "Conflict: 1 recorded: web's change to Record \(record) (update)\n", "Conflict: 1 resolved, taking the hub's object\n",
            "Involved: conflict 1\n", "        b: nil → 5\n",
        ] {
            #expect(text.contains(expected), "missing \(expected.debugDescription) in:\n\(text)")
        }
        #expect(!text.contains("StoreSyncCursor") && !text.contains("\u{1B}["))
        // The bookkeeping shows when asked for.
        #expect(try run(["--config", fixture.configPath, "--bookkeeping"]).standardOutput.contains("StoreSyncCursor"))
    }

    @Test func jsonLinesHaveTheDocumentedFields() throws {
        let fixture = try SyncGroupFixture()
        let lines = try lines(fixture)
        let entryFields: Set<String> = ["cursor", "source", "group", "store", "hub", "position", "time", "author", "context",
                                        "transaction", "engine", "conflicts", "conflictEvents", "changes"]
        for line in lines { #expect(Set(line.keys) == entryFields, "\(line.keys.sorted())") }
        for change in lines.flatMap(changes) { #expect(Set(change.keys) == ["type", "entity", "object", "properties"]) }

        let update = try #require(lines.first { $0["author"] as? String == "web" })
        #expect(update["source"] as? String == "notes/web" && update["group"] as? String == "notes" && update["store"] as? String == "web")
        #expect(update["hub"] as? Bool == false && update["engine"] is NSNull && update["context"] is NSNull)
        let properties = try #require(changes(update).first?["properties"] as? [String: [String: Any]])
        #expect(properties["a"]?["old"] as? Int == 1 && properties["a"]?["new"] as? Int == 2)
        #expect(ISO8601DateFormatter.withFractionalSeconds.date(from: update["time"] as? String ?? "") != nil)

        let pull = try #require(lines.first { ($0["engine"] as? [String: Any])?["write"] as? String == "pull" })
        #expect(pull["hub"] as? Bool == true && pull["store"] is NSNull && pull["source"] as? String == "notes")
        #expect((pull["engine"] as? [String: Any])?["store"] as? String == "app")
        let push = try #require(lines.first { ($0["engine"] as? [String: Any])?["write"] as? String == "push" })
        #expect((push["engine"] as? [String: Any])?["hubPosition"] is Int)
        let foreign = try #require(lines.first { $0["author"] is NSNull })
        #expect(foreign["store"] as? String == "phone" && foreign["transaction"] is NSNull)
        let recorded = try #require(lines.first { !(($0["conflictEvents"] as? [Any]) ?? []).isEmpty })
        let event = try #require((recorded["conflictEvents"] as? [[String: Any]])?.first)
        #expect(event["event"] as? String == "recorded" && event["id"] as? Int == 1 && event["store"] as? String == "web"
                && event["object"] as? String == fixture.record.uuidString)
        let insert = try #require(lines.first { $0["author"] as? String == "app" })
        let folder = try #require(changes(insert).first { $0["entity"] as? String == "Folder" })
        #expect((folder["properties"] as? [String: [String: Any]])?["records"]?["added"] as? [String] == [fixture.record.uuidString])

        // The same entries as the library reads.
        let configuration = try GroupLookup.groups([], in: GroupLookup.configuration(fixture.configPath))
        let log = try SyncChangeLog(groups: configuration)
        var library: [String] = []
        while let entry = try log.next() { library.append("\(entry.source.key):\(entry.position)") }
        #expect(lines.map(key) == library)
    }

    @Test func eachOptionSelectsExactlyWhatItNames() throws {
        let fixture = try SyncGroupFixture()
        let all = try lines(fixture)
        func selected(_ arguments: [String]) throws -> [String] { try lines(fixture, arguments).map(key) }
        func expected(_ keep: ([String: Any]) -> Bool) -> [String] { all.filter(keep).map(key) }
        let record = fixture.record.uuidString

        #expect(try selected(["--group", "notes"]) == all.map(key))
        #expect(try selected(["--store", "web"]) == expected { $0["store"] as? String == "web" })
        #expect(try selected(["--store", fixture.url("web").path]) == expected { $0["store"] as? String == "web" })
        #expect(try selected(["--store", "web", "--store", "phone"]) == expected { ["web", "phone"].contains($0["store"] as? String ?? "") })
        #expect(try selected(["--hub"]) == expected { $0["hub"] as? Bool == true })
        #expect(try selected(["--store", "app", "--hub"]) == expected { $0["hub"] as? Bool == true || $0["store"] as? String == "app" })

        let folders = try lines(fixture, ["--entity", "Folder"])
        #expect(folders.map(key) == expected { changes($0).contains { $0["entity"] as? String == "Folder" } })
        #expect(folders.allSatisfy { changes($0).allSatisfy { $0["entity"] as? String == "Folder" } } && folders.count == 4)

        let objects = try lines(fixture, ["--object", record])
        #expect(!objects.isEmpty && objects.allSatisfy { changes($0).allSatisfy { $0["object"] as? String == record } })
        #expect(objects.map(key) == expected { changes($0).contains { $0["object"] as? String == record } || !(($0["conflictEvents"] as? [Any]) ?? []).isEmpty })

        #expect(try selected(["--author", "app"]) == expected { $0["author"] as? String == "app" })
        #expect(try selected(["--author", "app"]).count == 2)
        #expect(try selected(["--author", ""]) == expected { $0["author"] is NSNull })
        #expect(try selected(["--author", ""]).count == 1)
        #expect(try selected(["--author", "storesync", "--author", "web"]) == expected { ["storesync", "web"].contains($0["author"] as? String ?? "") })

        // Times: absolute, in the local zone as printed by the human form, and relative.
        // A cut between two transactions far enough apart that the JSON's
        // millisecond times fall on the same sides as the exact ones.
        let times = all.compactMap { ISO8601DateFormatter.withFractionalSeconds.date(from: $0["time"] as? String ?? "") }
        let gap = try #require(zip(times, times.dropFirst()).max { $0.1.timeIntervalSince($0.0) < $1.1.timeIntervalSince($1.0) })
        try #require(gap.1.timeIntervalSince(gap.0) > 0.02, "the fixture pauses between steps 3 and 4")
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        let cut = formatter.string(from: gap.0.addingTimeInterval(0.01))
        let exact = formatter.date(from: cut)!
        let since = try selected(["--since", cut]), until = try selected(["--until", cut])
        #expect(!since.isEmpty && since == expected { ISO8601DateFormatter.withFractionalSeconds.date(from: $0["time"] as! String)! >= exact })
        #expect(!until.isEmpty && until == expected { ISO8601DateFormatter.withFractionalSeconds.date(from: $0["time"] as! String)! <= exact })
        #expect(since.count + until.count == all.count)
        #expect(try selected(["--since", "-1h"]) == all.map(key))
        #expect(try selected(["--since", "+1h"]).isEmpty)
        #expect(try selected(["--until", "yesterday"]).isEmpty)
        #expect(try selected(["--since", "today", "--until", "now"]) == all.map(key))

        let conflicts = try lines(fixture, ["--conflicts"])
        #expect(conflicts.map(key) == expected { ($0["conflicts"] as? [Int]) == [1] })
        #expect(conflicts.count == 5 && conflicts.allSatisfy { changes($0).allSatisfy { $0["object"] as? String == record } })

        // Combined filters all hold.
        #expect(try selected(["--store", "web", "--author", "storesync"]) == expected { $0["store"] as? String == "web" && $0["author"] as? String == "storesync" })
    }

    @Test func afterResumesWithNoGapOrRepeat() throws {
        let fixture = try SyncGroupFixture()
        let all = try lines(fixture)
        for cut in [0, 3, all.count - 2, all.count - 1] {
            let cursor = try #require(all[cut]["cursor"] as? String)
            #expect(try lines(fixture, ["--after", cursor]).map(key) == all[(cut + 1)...].map(key), "after \(cursor)")
        }
        // --show-cursor's last line resumes after everything, then to exactly what comes later.
        let shown = try run(["--config", fixture.configPath, "--show-cursor"]).standardOutput
        let cursor = try #require(shown.split(separator: "\n").last.map(String.init))
        #expect(cursor.hasPrefix("-- cursor: notes:"))
        let position = String(cursor.dropFirst("-- cursor: ".count))
        #expect(try lines(fixture, ["--after", position]).isEmpty)
        let phone = try fixture.app("phone", author: "late")
        try fixture.set(phone, fixture.folder, "name", "Outbox")
        try fixture.group.runUntilIdle()
        let later = try lines(fixture, ["--after", position])
        #expect(later.first?["author"] as? String == "late")
        #expect(later.filter { $0["author"] as? String == "late" }.count == 1)
        let everything = try lines(fixture)
        #expect(all.map(key) + later.map(key) == everything.map(key))
    }

    @Test func followShowsASaveMadeInAnotherProcessWithinOneSecond() async throws {
        let fixture = try SyncGroupFixture()
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = ["log", "--config", fixture.configPath, "--json", "--follow", "--show-cursor"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        let reader = LineCollector(out.fileHandleForReading)
        try process.run()
        defer { Self.stop(process) }

        // Caught up: the history, then the cursor line.
        try #require(reader.wait(timeout: 30) { $0.contains { $0.hasPrefix("-- cursor:") } }, "log --follow never caught up: \(reader.lines)")
        let before = reader.lines.count

        let path = fixture.url("app").path, modelPath = fixture.modelPath, folder = fixture.folder.uuidString
        await #expect(processExitsWith: .success) { [path = path as String, modelPath = modelPath as String, folder = folder as String] in
            let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: modelPath))
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: URL(fileURLWithPath: path))
            let context = ManagedObjectContext(coordinator: coordinator)
            context.transactionAuthor = "remote"
            try context.performAndWait {
                let object = try context.existingObject(withGlobalIdentifier: UUID(uuidString: folder)!)!
                try object.setValue("Remote", forKey: "name")
                try context.save()
            }
        }
        let saved = Date()
        let arrived = reader.wait(timeout: 5) { lines in lines.dropFirst(before).contains { $0.contains("\"author\":\"remote\"") } }
        let latency = Date().timeIntervalSince(saved)
        try #require(arrived, "the remote save never showed: \(reader.lines.dropFirst(before))")
        let line = try #require(reader.lines.dropFirst(before).first { $0.contains("\"author\":\"remote\"") })
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let committed = try #require(ISO8601DateFormatter.withFractionalSeconds.date(from: entry["time"] as? String ?? ""))
        // From the commit (the transaction's own time) to the line, and from the writer's exit to the line.
        #expect(reader.arrival(of: line)!.timeIntervalSince(committed) < 1, "arrived \(reader.arrival(of: line)!.timeIntervalSince(committed)) s after its commit")
        #expect(latency < 1, "arrived \(latency) s after the writer exited")
        #expect(entry["store"] as? String == "app" && changes(entry).first?["object"] as? String == folder)
    }

    /// Ends `log --follow` as a user would, with SIGTERM.
    static func stop(_ process: Process) {
        process.terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning {
            Issue.record("log --follow did not end on SIGTERM")
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }

    @Test func badInputIsRefusedWithTheDocumentedStatus() throws {
        let fixture = try SyncGroupFixture(history: false)
        let unknownOption = try CLI.run(["log", "--config", fixture.configPath, "--bogus"])
        #expect(unknownOption.status == 64 && unknownOption.stderr.contains("Unknown option '--bogus'"), "\(unknownOption)")

        func refusal(_ arguments: [String]) throws -> (Int32, String) {
            let outcome = try run(arguments)
            #expect(outcome.standardOutput.isEmpty)
            return (outcome.exitCode, outcome.standardError)
        }
        var (status, message) = try refusal(["--config", fixture.configPath, "--group", "photos"])
        #expect(status == 64 && message.contains("no group 'photos' in \(fixture.configPath) (it has: notes)"), "\(message)")
        (status, message) = try refusal(["--config", fixture.configPath, "--store", "tablet"])
        #expect(status == 64 && message.contains("no store named 'tablet' in group notes (stores: app, phone, web)"), "\(message)")
        (status, message) = try refusal(["--config", fixture.configPath, "--entity", "Nope"])
        #expect(status == 64 && message.contains("has an entity named 'Nope'"), "\(message)")
        (status, message) = try refusal(["--config", fixture.configPath, "--since", "last tuesday"])
        #expect(status == 64 && message.contains("'last tuesday' is not a time"), "\(message)")
        (status, message) = try refusal(["--config", fixture.configPath, "--after", "notes/hub:4"])
        #expect(status == 64 && message.contains("names source 'notes/hub'"), "\(message)")
        (status, message) = try refusal(["--config", fixture.directory.appendingPathComponent("none.toml").path])
        #expect(status == 66 && message.contains("no configuration file at"), "\(message)")

        let text = try CLI.temporaryFile("notes.txt", "not a database")
        (status, message) = try refusal(["--store", text, "--model", fixture.modelPath])
        #expect(status == 65 && message.contains("is not a SQLite store file"), "\(message)")
        (status, message) = try refusal(["--store", fixture.directory.appendingPathComponent("none.sqlite").path, "--model", fixture.modelPath])
        #expect(status == 66 && message.contains("no store file at"), "\(message)")

        let badObject = try CLI.run(["log", "--config", fixture.configPath, "--object", "123"])
        #expect(badObject.status == 64 && badObject.stderr.contains("not a global ID"))
        let badModelUse = try CLI.run(["log", "--store", "a.sqlite", "--store", "b.sqlite", "--model", fixture.modelPath])
        #expect(badModelUse.status == 64 && badModelUse.stderr.contains("exactly one --store PATH"))

        // A store file read alone works without a configuration.
        let lone = try run(["--store", fixture.url("app").path, "--model", fixture.modelPath, "--json"])
        #expect(lone.exitCode == 0 && lone.standardOutput.isEmpty && lone.standardError.isEmpty, "\(lone)")
    }
}

extension ISO8601DateFormatter {
    static let withFractionalSeconds: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}

/// Collects a pipe's lines as they arrive, with their arrival times.
final class LineCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var buffer = Data()
    private var received: [(String, Date)] = []

    init(_ handle: FileHandle) {
        handle.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            if data.isEmpty { handle.readabilityHandler = nil; return }
            self.lock.lock()
            defer { self.lock.unlock() }
            self.buffer.append(data)
            while let newline = self.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                self.received.append((String(decoding: self.buffer[..<newline], as: UTF8.self), Date()))
                self.buffer.removeSubrange(...newline)
            }
        }
    }

    var lines: [String] {
        lock.lock()
        defer { lock.unlock() }
        return received.map(\.0)
    }

    func arrival(of line: String) -> Date? {
        lock.lock()
        defer { lock.unlock() }
        return received.first { $0.0 == line }?.1
    }

    /// Waits until `condition` holds for the lines so far, up to `timeout` seconds.
    func wait(timeout: TimeInterval, _ condition: ([String]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(lines) { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition(lines)
    }
}
