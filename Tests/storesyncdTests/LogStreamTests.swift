#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSyncControl
import XCTest

/// Issue 17: the change-log stream, the control socket's `log` op, and
/// `storesyncctl log --follow` on it (docs/CONTROL.md, docs/CHANGELOG-FORMAT.md).
final class LogStreamTests: XCTestCase {
    /// A save made by another process (this test process, beside the daemon
    /// and the CLI) shows in a running `log --follow` within one second, and
    /// on the raw stream; the CLI follows through the daemon, not the files.
    func testSaveInAnotherProcessShowsWithinOneSecond() throws {
        let daemon = try Daemon.Controlled()
        let follower = try Follower(Daemon.ctlBinary.path, ["log", "--follow", "--json", "--show-cursor", "--config", daemon.config,
                                                           "--socket", daemon.socket])
        defer { follower.stop() }
        // The history there is, from the files, then the first cursor line.
        XCTAssertTrue(Daemon.wait(timeout: 10) { follower.lines.contains { $0.hasPrefix("-- cursor: ") } }, follower.stdout + follower.stderr)

        let stream = try daemon.client(timeout: 10)
        let opened = try stream.request(["op": "log", "group": "items", "id": 7])
        XCTAssertEqual(opened["ok"], true, opened.text)
        XCTAssertEqual(opened["sources"], ["items", "items/s1", "items/s2", "items/s3"])
        XCTAssertNotNil(opened["cursor"]?.string, opened.text)

        for (index, store) in ["s1", "s2", "s3"].enumerated() {
            let before = follower.lines.count
            try daemon.save(store, name: "follow-\(store)", count: Int64(index + 1))
            let saved = Date()
            var seen: Date?
            _ = Daemon.wait(timeout: 5) {
                let found = follower.lines.dropFirst(before).contains { $0.contains("\"follow-\(store)\"") && $0.contains("\"source\":\"items/\(store)\"") }
                if found, seen == nil { seen = Date() }
                return found
            }
            let delay = try XCTUnwrap(seen, "the save in \(store) never showed:\n\(follower.stdout)\n\(follower.stderr)").timeIntervalSince(saved)
            XCTAssertLessThan(delay, 1.0, "log --follow showed the save in \(store) after \(delay) s")
        }
        XCTAssertFalse(follower.stderr.contains("polling"), "followed the files, not the daemon: \(follower.stderr)")

        // The raw stream gave the same transactions, in the CHANGELOG-FORMAT shape.
        var items: [JSONValue] = []
        let deadline = Date().addingTimeInterval(5)
        while !["s1", "s2", "s3"].allSatisfy({ store in items.contains { $0["entry"]?["source"]?.string == "items/\(store)" && $0["entry"]?["author"] == "test-app" } }),
              let message = try stream.readMessage(deadline: deadline) {
            XCTAssertEqual(message["id"], 7, message.text)
            if message["event"] == "transaction" { items.append(message) }
        }
        let s1 = try XCTUnwrap(items.first { $0["entry"]?["source"] == "items/s1" && $0["entry"]?["author"] == "test-app" })
        let entry = try XCTUnwrap(s1["entry"])
        XCTAssertEqual(entry["group"], "items")
        XCTAssertEqual(entry["store"], "s1")
        XCTAssertEqual(entry["hub"], false)
        XCTAssertNotNil(entry["position"]?.int)
        XCTAssertNotNil(entry["cursor"]?.string)
        let change = try XCTUnwrap(entry["changes"]?.array?.first)
        XCTAssertEqual(change["type"], "insert")
        XCTAssertEqual(change["entity"], "Item")
        XCTAssertEqual(change["properties"]?["name"]?["new"], "follow-s1")
        XCTAssertEqual(change["properties"]?["count"]?["new"], 1)
        let cancelled = try stream.request(["op": "cancel", "subscription": 7])
        XCTAssertEqual(cancelled["ok"], true, cancelled.text)
    }

    /// `after` resumes with no gap and no repeat: a stream opened after any
    /// entry's cursor gives exactly the entries after it that the files give.
    func testAfterResumesWithoutGapOrRepeat() throws {
        let daemon = try Daemon.Controlled()
        for round in 0..<3 {
            for store in ["s1", "s2", "s3"] { try daemon.save(store, name: "\(store)-\(round)", count: Int64(round)) }
        }
        XCTAssertEqual(try daemon.ctl(["sync", "--wait"]).status, 0)
        // Paused, the daemon writes nothing more: the files' log stays what it is.
        XCTAssertEqual(try daemon.ctl(["pause"]).status, 0)
        let files = try Daemon.ctl(["log", "--json", "--config", daemon.config])
        XCTAssertEqual(files.status, 0, files.stderr)
        let all = files.stdout.split(separator: "\n").map(String.init)
        XCTAssertGreaterThan(all.count, 12, files.stdout)

        // From the beginning ("") the stream gives every entry the files give, then caught-up.
        XCTAssertEqual(try streamed(daemon, after: ""), all)
        for cut in [1, all.count / 3, all.count / 2, all.count - 1] {
            let cursor = try XCTUnwrap(try JSONValue.line(all[cut - 1])["cursor"]?.string)
            XCTAssertEqual(try streamed(daemon, after: cursor), Array(all[cut...]), "after entry \(cut): \(cursor)")
        }
        // Without after: only what is committed from now on.
        let client = try daemon.client()
        XCTAssertEqual(try client.request(["op": "log", "id": 1])["ok"], true)
        try daemon.save("s2", name: "later", count: 9)
        let message = try XCTUnwrap(try nextTransaction(client))
        XCTAssertEqual(message["entry"]?["changes"]?.array?.first?["properties"]?["name"]?["new"], "later", message.text)

        // The CLI resumes with --after through the daemon exactly as from the files.
        let middle = try XCTUnwrap(try JSONValue.line(all[all.count / 2 - 1])["cursor"]?.string)
        let follower = try Follower(Daemon.ctlBinary.path, ["log", "--follow", "--json", "--after", middle, "--config", daemon.config,
                                                           "--socket", daemon.socket])
        defer { follower.stop() }
        let fromFiles = try Daemon.ctl(["log", "--json", "--after", middle, "--config", daemon.config]).stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(Daemon.wait(timeout: 10) { follower.lines.count >= fromFiles.count }, follower.stdout + follower.stderr)
        XCTAssertEqual(Array(follower.lines.prefix(fromFiles.count)), fromFiles)
    }

    /// A history of several batches (128 entries each) streams whole, in
    /// the files' order, to a client that reads it only after it was sent.
    func testALongHistoryStreamsInBatches() throws {
        let daemon = try Daemon.Controlled()
        XCTAssertEqual(try daemon.ctl(["pause"]).status, 0)
        let context = try Daemon.app(daemon.url("s1"))
        try context.performAndWait {
            for index in 0..<300 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue("bulk-\(index)", forKey: "name")
                try item.setValue(Int64(index), forKey: "count")
                try context.save()
            }
        }
        let files = try Daemon.ctl(["log", "--json", "--config", daemon.config]).stdout.split(separator: "\n").map(String.init)
        XCTAssertGreaterThanOrEqual(files.count, 300)
        let client = try daemon.client()
        XCTAssertEqual(try client.request(["op": "log", "after": "", "id": 4])["ok"], true)
        Thread.sleep(forTimeInterval: 0.5)   // the daemon sends while nobody reads
        var lines: [String] = []
        var caughtUp = 0
        let deadline = Date().addingTimeInterval(20)
        while let message = try client.readMessage(deadline: deadline) {
            if message["event"] == "caught-up" { caughtUp += 1; break }
            if message["event"] == "transaction", let entry = message["entry"] { lines.append(entry.text) }
        }
        XCTAssertEqual(caughtUp, 1)
        XCTAssertEqual(lines, files)
    }

    /// Bad requests are refused with the field named; a follower without a
    /// daemon says so and polls the files, and one whose daemon stops goes on
    /// from the files where the stream left off.
    func testRefusalsAndFallbackToTheFiles() throws {
        let daemon = try Daemon.Controlled()
        let client = try daemon.client()
        let badCursor = try client.request(["op": "log", "after": "items:x"])
        XCTAssertEqual(badCursor["error"]?["code"], "bad-request", badCursor.text)
        XCTAssertTrue(badCursor["error"]?["message"]?.string?.contains("field after") == true, badCursor.text)
        let badGroup = try client.request(["op": "log", "group": "nope"])
        XCTAssertEqual(badGroup["error"]?["code"], "not-found", badGroup.text)
        let badStore = try client.request(["op": "log", "stores": ["nope"]])
        XCTAssertEqual(badStore["error"]?["code"], "bad-request", badStore.text)
        XCTAssertTrue(badStore["error"]?["message"]?.string?.contains("no store named 'nope'") == true, badStore.text)

        let follower = try Follower(Daemon.ctlBinary.path, ["log", "--follow", "--store", "s1", "--config", daemon.config, "--socket", daemon.socket])
        defer { follower.stop() }
        // On the stream (the daemon counts the log requests it answered ok) before the daemon stops.
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            let text = try daemon.request(["op": "metrics"])["text"]?.string ?? ""
            return (try PrometheusText(text).value("storesync_control_requests_total", ["op": "log", "outcome": "ok"]) ?? 0) >= 1
        }, follower.stderr)
        try daemon.save("s1", name: "before-stop", count: 1)
        XCTAssertTrue(Daemon.wait(timeout: 5) { follower.stdout.contains("name: \"before-stop\"") }, follower.stdout + follower.stderr)
        daemon.daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.daemon.waitForExit(timeout: 10), 0)
        XCTAssertTrue(Daemon.wait(timeout: 5) { follower.stderr.contains("storesyncd closed the change-log stream") && follower.stderr.contains("following by polling the files") },
                      follower.stderr)
        try daemon.save("s1", name: "after-stop", count: 2)
        XCTAssertTrue(Daemon.wait(timeout: 5) { follower.stdout.contains("name: \"after-stop\"") }, follower.stdout + follower.stderr)
        XCTAssertEqual(follower.stdout.components(separatedBy: "name: \"before-stop\"").count, 2, "shown twice across the switch:\n\(follower.stdout)")

        let alone = try Follower(Daemon.ctlBinary.path, ["log", "--follow", "--config", daemon.config, "--socket", daemon.socket])
        defer { alone.stop() }
        XCTAssertTrue(Daemon.wait(timeout: 5) { alone.stderr.contains("storesyncd is not running: no socket at \(daemon.socket) (path from --socket); following by polling the files") },
                      alone.stderr)
        try daemon.save("s2", name: "no-daemon", count: 3)
        XCTAssertTrue(Daemon.wait(timeout: 5) { alone.stdout.contains("name: \"no-daemon\"") }, alone.stdout + alone.stderr)
    }

    // MARK: - Helpers

    /// The `transaction` entries of a stream opened after `cursor`, until caught up, as JSON lines.
    private func streamed(_ daemon: Daemon.Controlled, after cursor: String) throws -> [String] {
        let client = try daemon.client()
        let opened = try client.request(["op": "log", "after": .string(cursor), "id": 3])
        XCTAssertEqual(opened["ok"], true, opened.text)
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(10)
        while let message = try client.readMessage(deadline: deadline) {
            if message["event"] == "caught-up" { break }
            if message["event"] == "transaction", let entry = message["entry"] { lines.append(entry.text) }
        }
        return lines
    }

    private func nextTransaction(_ client: ControlClient) throws -> JSONValue? {
        let deadline = Date().addingTimeInterval(5)
        while let message = try client.readMessage(deadline: deadline) {
            if message["event"] == "transaction" { return message }
        }
        return nil
    }
}

/// A long-running child (`log --follow`) whose output is collected as it comes.
final class Follower: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()

    init(_ path: String, _ arguments: [String]) throws {
        var env = ProcessInfo.processInfo.environment
        for key in ["RUNTIME_DIRECTORY", "NO_COLOR"] { env[key] = nil }
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = env
        let outPipe = Pipe(), errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        outPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            lock.lock(); out.append(data); lock.unlock()
        }
        errPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            lock.lock(); err.append(data); lock.unlock()
        }
        try process.run()
    }

    var stdout: String { lock.lock(); defer { lock.unlock() }; return String(decoding: out, as: UTF8.self) }
    var stderr: String { lock.lock(); defer { lock.unlock() }; return String(decoding: err, as: UTF8.self) }
    /// Complete lines of stdout so far.
    var lines: [String] {
        let text = stdout
        var parts = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        parts.removeLast()   // the part after the last newline is not a line yet
        return parts
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
