#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
@testable import storesyncd
import XCTest

/// Issue 16, deliverable 7: a summary line per round at info (rounds that
/// moved nothing at debug), one line per transaction at debug, and repeated
/// errors rate-limited with a line when they stop.
final class LoggingTests: XCTestCase {
    func testOneDebugLinePerTransactionAndRoundLevels() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Daemon.makeGroup(in: directory, extra: "rescan_interval = \"1s\"")
        let daemon = try Daemon.Running(["--config", config], logFile: directory.appendingPathComponent("daemon.log"))
        XCTAssertTrue(Daemon.wait(timeout: 20) { Daemon.startRoundDone(daemon.log) }, daemon.log)

        // Three saves in s1 (three transactions), a moment apart.
        let app = try Daemon.app(directory.appendingPathComponent("s1.sqlite"))
        for index in 1...3 {
            try app.performAndWait {
                let item = try app.insertNewObject(forEntityName: "Item")
                try item.setValue("t\(index)", forKey: "name")
                try app.save()
            }
            usleep(100_000)
        }
        let others = ["s2", "s3"].map { directory.appendingPathComponent("\($0).sqlite") }
        XCTAssertTrue(try Daemon.wait(timeout: 20) { try others.allSatisfy { try Daemon.items($0).count == 3 } }, daemon.log)
        // Then idle rounds from the safety timer (the first may still move a position).
        let idleTimerRounds = { daemon.log.split(separator: "\n").filter { $0.contains("msg=round ") && $0.contains("trigger=timer") && $0.contains("moved=false") } }
        XCTAssertTrue(Daemon.wait(timeout: 20) { idleTimerRounds().count >= 3 }, daemon.log)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)

        let lines = daemon.log.split(separator: "\n").map(String.init)
        func field(_ line: String, _ key: String) -> String? {
            line.split(separator: " ").first { $0.hasPrefix("\(key)=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        let transactions = lines.filter { $0.contains("msg=transaction ") }
        XCTAssertTrue(transactions.allSatisfy { $0.contains("level=debug") }, "\(transactions)")
        // Exactly one line per application transaction: three saves, three lines, three positions.
        let fromApp = transactions.filter { field($0, "store") == "s1" && field($0, "direction") == "from-application" }
        XCTAssertEqual(fromApp.count, 3, "\(fromApp)")
        XCTAssertEqual(Set(fromApp.compactMap { field($0, "position") }).count, 3, "\(fromApp)")
        XCTAssertTrue(fromApp.allSatisfy { field($0, "author") == "test-app" && field($0, "inserted") == "1" }, "\(fromApp)")
        // The engine's pushes into s2 and s3: each logged once, three inserts in all per store.
        for store in ["s2", "s3"] {
            let pushed = transactions.filter { field($0, "store") == store && field($0, "direction") == "pushed" }
            XCTAssertFalse(pushed.isEmpty, "no push into \(store) logged")
            XCTAssertEqual(pushed.compactMap { field($0, "inserted").flatMap(Int.init) }.reduce(0, +), 3, "\(pushed)")
            XCTAssertEqual(Set(pushed.compactMap { field($0, "position") }).count, pushed.count, "a push logged twice: \(pushed)")
            XCTAssertTrue(pushed.allSatisfy { field($0, "author") == "storesync" && field($0, "context")?.hasPrefix("push:") == true }, "\(pushed)")
        }
        // s2 and s3 only receive: once the saves began, the file events of the
        // daemon's own pushes into them ran no job, so no round (nor its
        // "round started" line) names them (GroupRunner, SyncGroup.endsWithOwnPush).
        let firstSave = try XCTUnwrap(lines.firstIndex { $0.contains("msg=transaction ") && $0.contains("direction=from-application") })
        let ownPushRounds = lines[firstSave...].filter { line in
            (line.contains("msg=round") || line.contains("msg=\"round started\"")) && ["store:s2", "store:s3"].contains(field(line, "trigger"))
        }
        XCTAssertEqual(ownPushRounds, [], "rounds for the events of the daemon's own pushes")
        // A round that moved something is an info line; idle timer rounds are debug.
        let rounds = self.rounds(lines)
        XCTAssertTrue(rounds.contains { $0.contains("level=info") && field($0, "trigger") == "store:s1" && field($0, "moved") == "true" }, "\(rounds)")
        let idle = rounds.filter { field($0, "trigger") == "timer" && field($0, "moved") == "false" }
        XCTAssertGreaterThanOrEqual(idle.count, 3, "\(rounds)")
        XCTAssertTrue(idle.allSatisfy { $0.contains("level=debug") }, "\(idle)")
    }

    func rounds(_ lines: [String]) -> [String] { lines.filter { $0.contains("msg=round ") } }

    /// The rate limit itself, on a clock the test moves.
    func testRepeatedErrorsAreLoggedOnceThenAtMostOncePerIntervalAndWhenTheyStop() {
        var errors = RepeatedErrors(interval: 60)
        let t0 = Date(timeIntervalSinceReferenceDate: 1000)
        XCTAssertEqual(errors.failed("store:s2", reason: "disk full", now: t0), .started)
        for second in 1..<60 {
            XCTAssertEqual(errors.failed("store:s2", reason: second % 2 == 0 ? "disk full" : "locked", now: t0 + Double(second)), .suppressed)
        }
        // Another key is its own episode.
        XCTAssertEqual(errors.failed("round", reason: "hub", now: t0 + 30), .started)
        XCTAssertEqual(errors.failed("store:s2", reason: "disk full", now: t0 + 60), .repeating(failures: 60, reasons: 2))
        XCTAssertEqual(errors.failed("store:s2", reason: "disk full", now: t0 + 61), .suppressed)
        XCTAssertEqual(errors.failed("store:s2", reason: "disk full", now: t0 + 120), .repeating(failures: 2, reasons: 1))
        XCTAssertEqual(errors.succeeded("store:s2", now: t0 + 130), RepeatedErrors.Ended(failures: 63, duration: 130))
        XCTAssertNil(errors.succeeded("store:s2", now: t0 + 131), "a success without a failure ends nothing")
        XCTAssertEqual(errors.failed("store:s2", reason: "disk full", now: t0 + 140), .started, "a new episode is logged again")
        XCTAssertTrue(errors.isFailing("round"))
    }

    func testCoreDataErrorsAreNamed() {
        XCTAssertEqual(CoreDataErrorNames.metadata(for: "NSCocoaErrorDomain 134100: /x.sqlite: no version fits"),
                       ["error_code": "134100", "error_name": "NSPersistentStoreIncompatibleVersionHashError"])
        XCTAssertEqual(CoreDataErrorNames.metadata(for: "NSCocoaErrorDomain 134180: file is not a database")["error_name"], "NSSQLiteError")
        XCTAssertEqual(CoreDataErrorNames.metadata(for: "the store file /x is missing"), [:])
    }
}
