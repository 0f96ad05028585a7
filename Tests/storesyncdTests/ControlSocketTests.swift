#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSyncControl
import XCTest

/// Issue 16, deliverable 5: every op of the control socket against the real
/// daemon, in the protocol's own terms (docs/CONTROL.md).
final class ControlSocketTests: XCTestCase {
    func testStatusPauseResumeSyncMetricsReloadAndExportRebuild() throws {
        let daemon = try Daemon.Controlled()

        // status: the daemon, then each group and store.
        let status = try daemon.request(["op": "status", "id": "s"])
        XCTAssertEqual(status["id"], "s")
        XCTAssertEqual(status["ok"], true)
        XCTAssertEqual(status["v"], .int(ControlProtocol.version))
        XCTAssertEqual(status["daemon"]?["pid"]?.int, Int64(daemon.daemon.process.processIdentifier))
        XCTAssertEqual(status["daemon"]?["version"]?.string, StoreSyncVersion.current)
        XCTAssertEqual(status["daemon"]?["state"], "running")
        XCTAssertGreaterThan(status["daemon"]?["uptime_s"]?.double ?? -1, 0)
        let group = try XCTUnwrap(status["groups"]?.array?.first)
        XCTAssertEqual(group["name"], "items")
        XCTAssertEqual(group["fresh"], true)
        XCTAssertEqual(group["stores"]?.array?.compactMap { $0["name"]?.string }, ["s1", "s2", "s3"])
        for store in group["stores"]?.array ?? [] {
            XCTAssertEqual(store["state"], "ok", "\(store.text)")
            XCTAssertNotNil(store["positions"]?["pulled_through"]?.int, store.text)
            XCTAssertNotNil(store["positions"]?["hub"]?.int, store.text)
            XCTAssertEqual(store["lag"]?["transactions"]?.int, 0, store.text)
            XCTAssertEqual(store["conflicts_waiting"]?.int, 0, store.text)
        }
        XCTAssertEqual(status["in_sync"], true)

        // pause one store: the reply comes when no round touches it any more.
        let paused = try daemon.request(["op": "pause", "group": "items", "store": "s2"])
        XCTAssertEqual(paused["ok"], true, paused.text)
        XCTAssertEqual(paused["paused"], [["group": "items", "store": "s2"]])
        try daemon.save("s1", name: "while-paused", count: 7)
        let round = try daemon.request(["op": "sync", "wait": true])
        XCTAssertEqual(round["ok"], true, round.text)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(daemon.url("s3"))["while-paused"] == 7 })
        XCTAssertNil(try Daemon.items(daemon.url("s2"))["while-paused"], "a paused store was written")
        let pausedStatus = try daemon.request(["op": "status"])
        XCTAssertEqual(pausedStatus["groups"]?.array?.first?["stores"]?.array?.first { $0["name"] == "s2" }?["state"], "paused")
        XCTAssertEqual(pausedStatus["groups"]?.array?.first?["paused"], ["s2"])
        XCTAssertEqual(pausedStatus["in_sync"], false)

        // resume by name (a store name alone, as storesyncctl sends it): it catches up.
        let resumed = try daemon.request(["op": "resume", "name": "s2"])
        XCTAssertEqual(resumed["resumed"], [["group": "items", "store": "s2"]], resumed.text)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(daemon.url("s2"))["while-paused"] == 7 })

        // sync with wait: the round's summary per group.
        let waited = try daemon.request(["op": "sync", "wait": true, "group": "items"])
        XCTAssertEqual(waited["ok"], true, waited.text)
        let summary = try XCTUnwrap(waited["rounds"]?.array?.first)
        XCTAssertEqual(summary["group"], "items")
        XCTAssertEqual(summary["trigger"], "control")
        XCTAssertNotNil(summary["duration_s"]?.double)
        XCTAssertEqual(summary["stores"]?.array?.count, 3)
        let scheduled = try daemon.request(["op": "sync"])
        XCTAssertEqual(scheduled["scheduled"], ["items"], scheduled.text)

        // metrics: Prometheus text, with what the saves above moved.
        let metrics = try daemon.request(["op": "metrics"])
        XCTAssertEqual(metrics["content_type"], "text/plain; version=0.0.4")
        let text = try XCTUnwrap(metrics["text"]?.string)
        let parsed = try PrometheusText(text)
        XCTAssertEqual(parsed.types["storesync_round_duration_seconds"], "histogram")
        XCTAssertEqual(parsed.types["storesync_transactions_pulled_total"], "counter")
        XCTAssertGreaterThan(parsed.value("storesync_rounds_total", ["group": "items"]) ?? 0, 0)
        XCTAssertGreaterThan(parsed.value("storesync_transactions_pulled_total", ["group": "items", "store": "s1"]) ?? 0, 0, text)
        XCTAssertGreaterThan(parsed.value("storesync_transactions_pushed_total", ["group": "items", "store": "s2"]) ?? 0, 0, text)
        XCTAssertEqual(parsed.value("storesync_store_state", ["store": "s2", "state": "ok"]), 1, text)
        XCTAssertEqual(parsed.value("storesync_lag_transactions", ["store": "s1"]), 0, text)
        XCTAssertNotNil(parsed.help["storesync_lag_seconds"])
        XCTAssertGreaterThan(parsed.value("storesync_control_requests_total", ["op": "pause", "outcome": "ok"]) ?? 0, 0, text)

        // export rebuild of a group without [group.export]: a code scripts can test
        // (ExternalRecordsDaemonTests rebuilds a group that has one).
        let export = try daemon.request(["op": "export.rebuild", "group": "items"])
        XCTAssertEqual(export["ok"], false)
        XCTAssertEqual(export["error"]?["code"], "not-configured")
        XCTAssertTrue(export["error"]?["message"]?.string?.contains("group items exports no records") == true, export.text)

        // reload with wait: answered after the groups are back; a pause is kept.
        _ = try daemon.request(["op": "pause", "name": "items/s3"])
        let reload = try daemon.request(["op": "reload", "wait": true])
        XCTAssertEqual(reload["ok"], true, reload.text)
        XCTAssertEqual(reload["groups"], 1)
        let afterReload = try daemon.request(["op": "status"])
        XCTAssertEqual(afterReload["groups"]?.array?.first?["stores"]?.array?.first { $0["name"] == "s3" }?["state"], "paused", afterReload.text)
        XCTAssertEqual(try daemon.request(["op": "reload"])["started"], true)
    }

    /// A store with the error policy records a conflict; list, show and
    /// resolve it through the socket, and the decision reaches every store.
    func testConflictsListShowAndResolve() throws {
        let daemon = try Daemon.Controlled(policies: ["store-trump", "error", "overwrite"])
        try daemon.save("s1", name: "shared", count: 1)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(daemon.url("s2"))["shared"] == 1 })

        // s2 changes the object while it is paused and the hub changes it too.
        XCTAssertEqual(try daemon.request(["op": "pause", "name": "s2"])["ok"], true)
        try daemon.save("s1", name: "shared", count: 2)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(daemon.url("s3"))["shared"] == 2 })
        try daemon.save("s2", name: "shared", count: 3)
        XCTAssertEqual(try daemon.request(["op": "resume", "name": "s2"])["ok"], true)

        var listed: JSONValue = .null
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            listed = try daemon.request(["op": "conflicts.list"])
            return listed["conflicts"]?.array?.count == 1
        }, listed.text + daemon.daemon.log)
        let conflict = try XCTUnwrap(listed["conflicts"]?.array?.first)
        XCTAssertEqual(conflict["store"], "s2")
        XCTAssertEqual(conflict["entity"], "Item")
        XCTAssertEqual(conflict["kind"], "update")
        XCTAssertEqual(conflict["resolved"], false)
        let id = try XCTUnwrap(conflict["id"]?.int)
        XCTAssertEqual(conflict["ref"]?.string, "items:\(id)")

        let shown = try daemon.request(["op": "conflicts.show", "conflict": .int(id)])
        XCTAssertEqual(shown["ok"], true, shown.text)
        XCTAssertEqual(shown["conflict"]?["base"]?["count"], "1", shown.text)
        XCTAssertEqual(shown["conflict"]?["incoming"]?["count"], "3", shown.text)
        XCTAssertEqual(shown["conflict"]?["hub"]?["count"], "2", shown.text)
        XCTAssertEqual(shown["conflict"]?["hub"]?["name"], "shared", shown.text)
        XCTAssertEqual(shown["conflict"]?["types"]?["count"], "Int64", shown.text)
        let status = try daemon.request(["op": "status"])
        XCTAssertEqual(status["groups"]?.array?.first?["stores"]?.array?.first { $0["name"] == "s2" }?["conflicts_waiting"], 1)
        XCTAssertEqual(status["in_sync"], false)

        let badSide = try daemon.request(["op": "conflicts.resolve", "conflict": .int(id), "take": "mine"])
        XCTAssertEqual(badSide["error"]?["code"], "bad-request", badSide.text)
        let missing = try daemon.request(["op": "conflicts.show", "conflict": 999])
        XCTAssertEqual(missing["error"]?["code"], "not-found", missing.text)

        let resolved = try daemon.request(["op": "conflicts.resolve", "group": "items", "conflict": .int(id), "take": "incoming"])
        XCTAssertEqual(resolved["ok"], true, resolved.text)
        XCTAssertEqual(resolved["took"], "incoming")
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            try ["s1", "s2", "s3"].allSatisfy { try Daemon.items(daemon.url($0))["shared"] == 3 }
        }, daemon.daemon.log)
        let again = try daemon.request(["op": "conflicts.resolve", "conflict": .int(id), "take": "hub"])
        XCTAssertEqual(again["error"]?["code"], "not-found")
        XCTAssertTrue(again["error"]?["message"]?.string?.contains("already resolved") == true, again.text)
        XCTAssertEqual(try daemon.request(["op": "conflicts.show", "conflict": .int(id)])["conflict"]?["resolved"], true)

        let metrics = try PrometheusText(try daemon.request(["op": "metrics"])["text"]?.string ?? "")
        XCTAssertEqual(metrics.value("storesync_conflicts_total", ["group": "items"]), 1)
        XCTAssertEqual(metrics.value("storesync_conflicts_resolved_total", ["group": "items"]), 1)
    }

    /// The subscription `storesyncctl sync --wait` and `log --follow` build
    /// on: one connection receives a line per state change and per round.
    func testEventsStreamStateChangesAndRoundsUntilCancelled() throws {
        let daemon = try Daemon.Controlled()
        let subscriber = try daemon.client(timeout: 10)
        let subscribed = try subscriber.request(["op": "events", "id": "stream-1"])
        XCTAssertEqual(subscribed["ok"], true, subscribed.text)
        XCTAssertEqual(subscribed["subscribed"], ["reload", "round", "state", "stopping"])

        XCTAssertEqual(try daemon.request(["op": "pause", "name": "s3"])["ok"], true)
        let state = try next(subscriber) { $0["event"] == "state" }
        XCTAssertEqual(state["id"], "stream-1")
        XCTAssertEqual(state["group"], "items")
        XCTAssertEqual(state["store"], "s3")
        XCTAssertEqual(state["from"], "ok")
        XCTAssertEqual(state["to"], "paused")
        XCTAssertNotNil(state["time"]?.string)

        try daemon.save("s1", name: "evented", count: 1)
        let round = try next(subscriber) { $0["event"] == "round" && $0["moved"] == true }
        XCTAssertEqual(round["id"], "stream-1")
        XCTAssertEqual(round["group"], "items")
        XCTAssertEqual(round["stores"]?.array?.count, 3)

        // Requests on a streaming connection are still answered.
        let cancelled = try subscriber.request(["op": "cancel", "subscription": "stream-1"])
        XCTAssertEqual(cancelled["ok"], true, cancelled.text)
        XCTAssertEqual(try subscriber.request(["op": "cancel", "subscription": "stream-1"])["error"]?["code"], "not-found")

        let reload = try daemon.client()
        let reloadSubscriber = try daemon.client()
        XCTAssertEqual(try reloadSubscriber.request(["op": "events", "id": 9])["ok"], true)
        XCTAssertEqual(try reload.request(["op": "reload", "wait": true])["ok"], true)
        let reloaded = try next(reloadSubscriber) { $0["event"] == "reload" }
        XCTAssertEqual(reloaded["outcome"], "reloaded")
        XCTAssertEqual(reloaded["id"], 9)

        // A stopping daemon says so, then closes the stream.
        daemon.daemon.signal(SIGTERM)
        XCTAssertEqual(try next(reloadSubscriber) { $0["event"] == "stopping" }["id"], 9)
        XCTAssertNil(try reloadSubscriber.readMessage(deadline: Date().addingTimeInterval(10)))
        XCTAssertEqual(daemon.daemon.waitForExit(timeout: 10), 0, daemon.daemon.log)
    }

    /// A group busy with a long round is reported from its last round
    /// (`"fresh": false`) after a second, instead of holding the answer.
    /// The round is held by another process keeping s1's write lock: the
    /// engine's push into s1 waits (SQLite's busy timeout, 5 s).
    func testStatusOfABusyGroupComesFromItsLastRound() throws {
        let daemon = try Daemon.Controlled()
        let locker = Process()
        locker.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        locker.arguments = [daemon.url("s1").path]
        let input = Pipe(), output = Pipe()
        locker.standardInput = input
        locker.standardOutput = output
        try locker.run()
        defer {
            try? input.fileHandleForWriting.write(contentsOf: Data("ROLLBACK;\n.quit\n".utf8))
            locker.waitUntilExit()
        }
        try input.fileHandleForWriting.write(contentsOf: Data("BEGIN IMMEDIATE;\nSELECT 'locked';\n".utf8))
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("locked") {
            let chunk = output.fileHandleForReading.availableData
            XCTAssertFalse(chunk.isEmpty, "sqlite3 ended before taking the lock")
            if chunk.isEmpty { return }
            seen.append(chunk)
        }
        let before = try daemon.request(["op": "status"])
        let lastRound = try XCTUnwrap(before["groups"]?.array?.first?["last_round"]?["finished"]?.string)

        // A change for s1 to receive, and a round queued ahead of the status read.
        try daemon.save("s2", name: "held", count: 1)
        XCTAssertEqual(try daemon.request(["op": "sync"])["ok"], true)
        let started = Date()
        let status = try daemon.request(["op": "status"])
        let waited = Date().timeIntervalSince(started)
        let group = try XCTUnwrap(status["groups"]?.array?.first)
        XCTAssertEqual(group["fresh"], false, status.text)
        XCTAssertNotNil(group["as_of"]?.string, status.text)
        XCTAssertGreaterThanOrEqual(group["as_of"]?.string ?? "", lastRound, status.text)
        XCTAssertEqual(group["stores"]?.array?.count, 3, status.text)
        XCTAssertLessThan(waited, 4.5, "status waited for the round instead of answering from the last one")

        let human = try daemon.ctl(["status"])
        XCTAssertTrue(human.stdout.contains("group items is busy; shown as of its last round"), human.stdout)
    }

    /// Reads stream lines until one matches (bounded).
    private func next(_ client: ControlClient, timeout: TimeInterval = 10, where match: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            guard let message = try client.readMessage(deadline: deadline) else {
                throw NSError(domain: "ControlSocketTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "the stream closed before a matching line"])
            }
            if match(message) { return message }
        }
    }

    /// Issue 16 acceptance: malformed, oversized and unknown requests get an
    /// error reply and the daemon carries on.
    func testMalformedOversizedAndUnknownRequestsGetErrorRepliesAndTheDaemonCarriesOn() throws {
        let daemon = try Daemon.Controlled()
        let client = try daemon.client(timeout: 10)
        func reply(_ raw: String) throws -> JSONValue {
            try client.send(Data(raw.utf8))
            return try XCTUnwrap(try client.readMessage(deadline: Date().addingTimeInterval(10)))
        }
        let cases: [(String, String, JSONValue)] = [
            ("{not json", "bad-json", .null),
            ("[1, 2]", "bad-json", .null),
            ("{\"id\": 1, \"op\": \"status\"}", "bad-request", 1),
            ("{\"v\": \"1\", \"id\": 2, \"op\": \"status\"}", "bad-request", 2),
            ("{\"v\": 99, \"id\": 3, \"op\": \"status\"}", "unsupported-version", 3),
            ("{\"v\": 1, \"id\": 4}", "bad-request", 4),
            ("{\"v\": 1, \"id\": 5, \"op\": \"frobnicate\"}", "unknown-op", 5),
            ("{\"v\": 1, \"id\": 6, \"op\": \"conflicts.show\"}", "bad-request", 6),
            ("{\"v\": 1, \"id\": 7, \"op\": \"pause\", \"name\": \"no-such-store\"}", "not-found", 7),
            ("{\"v\": 1, \"id\": 8, \"op\": \"sync\", \"wait\": \"yes\"}", "bad-request", 8),
            ("{\"v\": 1, \"id\": \"x\", \"op\": \"status\", \"group\": 12}", "bad-request", "x"),
        ]
        for (line, code, id) in cases {
            let answer = try reply(line)
            XCTAssertEqual(answer["ok"], false, "\(line) -> \(answer.text)")
            XCTAssertEqual(answer["error"]?["code"]?.string, code, "\(line) -> \(answer.text)")
            XCTAssertEqual(answer["id"], id, "\(line) -> \(answer.text)")
            XCTAssertFalse(answer["error"]?["message"]?.string?.isEmpty ?? true, answer.text)
        }
        XCTAssertEqual(try reply("{\"v\": 99, \"op\": \"status\"}")["supported"], [1])
        // The same connection still works after all of that.
        XCTAssertEqual(try client.request(["op": "status"])["ok"], true)

        // A line over 64 KiB: one reply, then the connection is closed.
        let big = try daemon.client(timeout: 10)
        let oversized = "{\"v\":1,\"op\":\"status\",\"pad\":\"" + String(repeating: "x", count: ControlProtocol.maximumRequestBytes + 10) + "\"}"
        try big.send(Data(oversized.utf8))
        let tooLarge = try XCTUnwrap(try big.readMessage(deadline: Date().addingTimeInterval(10)))
        XCTAssertEqual(tooLarge["error"]?["code"], "too-large", tooLarge.text)
        XCTAssertNil(try big.readMessage(deadline: Date().addingTimeInterval(10)), "the connection stays open after an oversized line")
        // Endless input with no newline at all is cut off the same way.
        let endless = try daemon.client(timeout: 10)
        try? endless.send(Data(String(repeating: "y", count: ControlProtocol.maximumRequestBytes * 2).utf8))
        XCTAssertEqual(try endless.readMessage(deadline: Date().addingTimeInterval(10))?["error"]?["code"], "too-large")

        // Pipelined requests on one connection are answered in order.
        let pipelined = try daemon.client(timeout: 10)
        try pipelined.send(Data("{\"v\":1,\"id\":1,\"op\":\"metrics\"}\n{\"v\":1,\"id\":2,\"op\":\"status\"}\n{\"v\":1,\"id\":3,\"op\":\"nope\"}".utf8))
        let ids = try (0..<3).map { _ in try pipelined.readMessage(deadline: Date().addingTimeInterval(10))?["id"] }
        XCTAssertEqual(ids, [1, 2, 3])

        // A client that half-closes after asking still gets its answers, then EOF.
        let halfClosed = try daemon.client(timeout: 10)
        try halfClosed.send(Data("{\"v\":1,\"id\":\"a\",\"op\":\"sync\"}\n{\"v\":1,\"id\":\"b\",\"op\":\"status\"}".utf8))
        halfClosed.finishSending()
        XCTAssertEqual(try halfClosed.readMessage(deadline: Date().addingTimeInterval(10))?["id"], "a")
        XCTAssertEqual(try halfClosed.readMessage(deadline: Date().addingTimeInterval(10))?["id"], "b")
        XCTAssertNil(try halfClosed.readMessage(deadline: Date().addingTimeInterval(10)))

        // A client that sends a thousand requests before reading any reply is
        // throttled meanwhile (docs/CONTROL.md, limits) and then answered in full.
        let flood = try daemon.client(timeout: 20)
        let request = Data("{\"v\":1,\"op\":\"metrics\"}\n".utf8)
        var batch = Data()
        for _ in 0..<999 { batch.append(request) }
        try flood.send(batch + Data("{\"v\":1,\"id\":\"last\",\"op\":\"metrics\"}".utf8))
        var answered = 0
        while let line = try flood.readMessage(deadline: Date().addingTimeInterval(20)) {
            XCTAssertEqual(line["ok"], true)
            answered += 1
            if line["id"] == "last" { break }
        }
        XCTAssertEqual(answered, 1000)

        // And the daemon answers new connections.
        XCTAssertEqual(try daemon.request(["op": "status"])["ok"], true)
        XCTAssertTrue(daemon.daemon.process.isRunning)
    }
}
