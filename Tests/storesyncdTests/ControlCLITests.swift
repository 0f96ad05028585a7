#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSyncControl
import XCTest

/// Issue 17: storesyncctl's daemon commands against a real daemon, human
/// and JSON output, and their exit statuses.
final class ControlCLITests: XCTestCase {
    func testStatusExitCodesZeroOneAndThree() throws {
        let daemon = try Daemon.Controlled()

        let ok = try daemon.ctl(["status"])
        XCTAssertEqual(ok.status, 0, ok.stderr + ok.stdout)
        XCTAssertTrue(ok.stdout.contains("storesyncd \(StoreSyncVersion.current), pid \(daemon.daemon.process.processIdentifier)"), ok.stdout)
        XCTAssertTrue(ok.stdout.contains("All 3 stores in sync."), ok.stdout)
        let header = try XCTUnwrap(ok.stdout.split(separator: "\n").first { $0.hasPrefix("GROUP") })
        XCTAssertTrue(header.contains("STATE") && header.contains("LAG") && header.contains("CONFLICTS"), String(header))
        for store in ["s1", "s2", "s3"] {
            XCTAssertNotNil(ok.stdout.range(of: "items +\(store) +ok ", options: .regularExpression), ok.stdout)
        }
        XCTAssertFalse(ok.stdout.contains("\u{1B}["), "colour on a pipe")

        let json = try daemon.ctl(["status", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let parsed = try JSONValue.line(json.stdout.trimmingCharacters(in: .newlines))
        XCTAssertEqual(parsed["in_sync"], true)
        XCTAssertEqual(parsed["groups"]?.array?.first?["stores"]?.array?.count, 3)
        XCTAssertNil(parsed["ok"], "the envelope is left out of --json")

        // Something not in sync: a paused store.
        let paused = try daemon.ctl(["pause", "s2"])
        XCTAssertEqual(paused.status, 0, paused.stderr)
        XCTAssertEqual(paused.stdout, "paused items/s2\n")
        let behind = try daemon.ctl(["status"])
        XCTAssertEqual(behind.status, 1, behind.stdout + behind.stderr)
        XCTAssertNotNil(behind.stdout.range(of: "items +s2 +paused ", options: .regularExpression), behind.stdout)
        XCTAssertTrue(behind.stdout.contains("2 of 3 stores in sync."), behind.stdout)
        XCTAssertEqual(try daemon.ctl(["status", "--json"]).status, 1)
        let resumed = try daemon.ctl(["resume", "items/s2", "--json"])
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertEqual(try JSONValue.line(resumed.stdout.trimmingCharacters(in: .newlines))["resumed"], [["group": "items", "store": "s2"]])
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try daemon.ctl(["status"]).status == 0 })

        // Unknown names are the daemon's refusal: 1, with its message.
        let unknown = try daemon.ctl(["pause", "nope"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("no group or store named nope") && unknown.stderr.contains("(not-found)"), unknown.stderr)

        // Colour on a terminal only, and never with NO_COLOR (script(1) gives it a pty).
        let command = "\(Daemon.ctlBinary.path) status --socket \(daemon.socket)"
        let coloured = try Daemon.runTool("/usr/bin/script", ["-qec", command, "/dev/null"], environment: ["TERM": "xterm"])
        XCTAssertTrue(coloured.stdout.contains("\u{1B}[32mok\u{1B}[0m"), coloured.stdout)
        let plain = try Daemon.runTool("/usr/bin/script", ["-qec", command, "/dev/null"], environment: ["NO_COLOR": "1", "TERM": "xterm"])
        XCTAssertTrue(plain.stdout.contains("All 3 stores in sync."), plain.stdout)
        XCTAssertFalse(plain.stdout.contains("\u{1B}["), plain.stdout)

        // Not running: 3, saying so and where it looked.
        daemon.daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.daemon.waitForExit(timeout: 10), 0)
        let down = try daemon.ctl(["status"])
        XCTAssertEqual(down.status, 3, down.stderr)
        XCTAssertTrue(down.stderr.contains("storesyncd is not running: no socket at \(daemon.socket) (path from --socket)"), down.stderr)
        let viaConfig = try Daemon.ctl(["status", "--config", daemon.config])
        XCTAssertEqual(viaConfig.status, 3, viaConfig.stderr)
        XCTAssertTrue(viaConfig.stderr.contains("path from control_socket of \(daemon.config)"), viaConfig.stderr)
        let viaEnvironment = try Daemon.ctl(["status"], environment: ["RUNTIME_DIRECTORY": daemon.directory.appendingPathComponent("run").path])
        XCTAssertEqual(viaEnvironment.status, 3)
        XCTAssertTrue(viaEnvironment.stderr.contains("\(daemon.socket) (path from $RUNTIME_DIRECTORY)"), viaEnvironment.stderr)
    }

    func testSyncReloadAndMetrics() throws {
        let daemon = try Daemon.Controlled()
        try daemon.save("s1", name: "cli", count: 5)

        let scheduled = try daemon.ctl(["sync"])
        XCTAssertEqual(scheduled.status, 0, scheduled.stderr)
        XCTAssertEqual(scheduled.stdout, "sync requested for items\n")

        let waited = try daemon.ctl(["sync", "--wait", "--timeout", "30"])
        XCTAssertEqual(waited.status, 0, waited.stderr)
        XCTAssertTrue(waited.stdout.hasPrefix("items: round finished in "), waited.stdout)
        XCTAssertTrue(waited.stdout.contains("  s1 ok\n") && waited.stdout.contains("  s3 ok\n"), waited.stdout)
        XCTAssertEqual(try Daemon.items(daemon.url("s3"))["cli"], 5, "sync --wait returned before the change arrived")
        let waitedJSON = try daemon.ctl(["sync", "items", "--wait", "--json"])
        XCTAssertEqual(try JSONValue.line(waitedJSON.stdout.trimmingCharacters(in: .newlines))["rounds"]?.array?.first?["group"], "items")

        // Metrics: Prometheus text a scraper accepts.
        let metrics = try daemon.ctl(["metrics"])
        XCTAssertEqual(metrics.status, 0, metrics.stderr)
        let text = try PrometheusText(metrics.stdout)
        XCTAssertEqual(text.types["storesync_rounds_total"], "counter")
        XCTAssertEqual(text.types["storesync_round_duration_seconds"], "histogram")
        XCTAssertEqual(text.types["storesync_lag_seconds"], "gauge")
        XCTAssertGreaterThan(text.value("storesync_transactions_pulled_total", ["store": "s1"]) ?? 0, 0, metrics.stdout)
        XCTAssertEqual(text.value("storesync_daemon_info", ["version": StoreSyncVersion.current]), 1)

        // Reload refused: the reason comes back through reload --wait.
        let good = try String(contentsOfFile: daemon.config, encoding: .utf8)
        try Data(("bogus_key = 1\n" + good).utf8).write(to: URL(fileURLWithPath: daemon.config))
        let refused = try daemon.ctl(["reload", "--wait"])
        XCTAssertEqual(refused.status, 1, refused.stdout + refused.stderr)
        XCTAssertTrue(refused.stderr.contains("reload refused"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("\(daemon.config): key bogus_key: unknown key"), refused.stderr)
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0, "a refused reload must keep the running configuration")

        try Data(good.utf8).write(to: URL(fileURLWithPath: daemon.config))
        let reloaded = try daemon.ctl(["reload", "--wait"])
        XCTAssertEqual(reloaded.status, 0, reloaded.stderr)
        XCTAssertEqual(reloaded.stdout, "reloaded: 1 group\n")
        let started = try daemon.ctl(["reload"])
        XCTAssertEqual(started.status, 0, started.stderr)
        XCTAssertEqual(started.stdout, "reload started\n")
    }

    func testConflictsListShowResolve() throws {
        let daemon = try Daemon.Controlled(policies: ["store-trump", "error", "overwrite"])
        let empty = try daemon.ctl(["conflicts", "list"])
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertEqual(empty.stdout, "No conflicts waiting.\n")

        try daemon.save("s1", name: "shared", count: 1)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(daemon.url("s2"))["shared"] == 1 })
        XCTAssertEqual(try daemon.ctl(["pause", "s2"]).status, 0)
        try daemon.save("s1", name: "shared", count: 2)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(daemon.url("s3"))["shared"] == 2 })
        try daemon.save("s2", name: "shared", count: 3)
        XCTAssertEqual(try daemon.ctl(["resume", "s2"]).status, 0)

        var listed = Daemon.Result(status: -1, stdout: "", stderr: "")
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            listed = try daemon.ctl(["conflicts", "list", "--json"])
            return (try? JSONValue.line(listed.stdout.trimmingCharacters(in: .newlines)))?["conflicts"]?.array?.count == 1
        }, listed.stdout + listed.stderr)
        let reference = try XCTUnwrap(try JSONValue.line(listed.stdout.trimmingCharacters(in: .newlines))["conflicts"]?.array?.first?["ref"]?.string)

        let human = try daemon.ctl(["conflicts", "list"])
        XCTAssertEqual(human.status, 0)
        XCTAssertNotNil(human.stdout.range(of: "\(reference) +s2 +Item +[0-9A-F-]{36} +update +[0-9.]+ (ms|s) ago +count", options: .regularExpression), human.stdout)
        XCTAssertTrue(human.stdout.hasSuffix("1 conflict waiting.\n"), human.stdout)
        XCTAssertEqual(try daemon.ctl(["status"]).status, 1, "a conflict waiting is not in sync")

        let shown = try daemon.ctl(["conflicts", "show", reference])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertTrue(shown.stdout.hasPrefix("conflict \(reference) (waiting)\n"), shown.stdout)
        XCTAssertNotNil(shown.stdout.range(of: "PROPERTY +BASE +INCOMING +HUB", options: .regularExpression), shown.stdout)
        XCTAssertNotNil(shown.stdout.range(of: "\\* +count +1 +3 +2\n", options: .regularExpression), shown.stdout)
        // Only what the store changed is recorded for base and incoming.
        XCTAssertNotNil(shown.stdout.range(of: "\n +name +- +- +shared\n", options: .regularExpression), shown.stdout)
        let number = String(reference.split(separator: ":").last!)
        let shownJSON = try daemon.ctl(["conflicts", "show", number, "--json"])
        XCTAssertEqual(try JSONValue.line(shownJSON.stdout.trimmingCharacters(in: .newlines))["conflict"]?["incoming"]?["count"], "3")

        let badReference = try daemon.ctl(["conflicts", "show", "items:x"])
        XCTAssertEqual(badReference.status, 64, badReference.stderr)
        let badSide = try daemon.ctl(["conflicts", "resolve", reference, "--take", "mine"])
        XCTAssertEqual(badSide.status, 64, badSide.stderr)

        let resolved = try daemon.ctl(["conflicts", "resolve", reference, "--take", "hub"])
        XCTAssertEqual(resolved.status, 0, resolved.stderr)
        XCTAssertTrue(resolved.stdout.hasPrefix("resolved \(reference) taking hub (Item "), resolved.stdout)
        XCTAssertTrue(try Daemon.wait(timeout: 10) {
            try ["s1", "s2", "s3"].allSatisfy { try Daemon.items(daemon.url($0))["shared"] == 2 }
        }, daemon.daemon.log)
        let twice = try daemon.ctl(["conflicts", "resolve", reference, "--take", "hub"])
        XCTAssertEqual(twice.status, 1)
        XCTAssertTrue(twice.stderr.contains("already resolved"), twice.stderr)
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try daemon.ctl(["status"]).status == 0 })
    }
}
