#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import XCTest

/// The real binary on three stores: the test process writes one store as an
/// application would and waits (bounded) for the others to follow.
final class EndToEndTests: XCTestCase {
    func testInsertsUpdatesAndDeletesReachTheOtherStoresThenSIGTERMExitsZero() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Daemon.makeGroup(in: directory)
        let daemon = try Daemon.Running(["--config", config], logFile: directory.appendingPathComponent("daemon.log"))
        let urls = ["s1", "s2", "s3"].map { directory.appendingPathComponent("\($0).sqlite") }
        let app = try Daemon.app(urls[0])
        // Write only after the start-up round: from then on only file events
        // (the safety timer is 30 s away) can bring the changes across.
        XCTAssertTrue(Daemon.wait(timeout: 10) { Daemon.startRoundDone(daemon.log) }, daemon.log)

        func converged(_ expected: [String: Int64]) throws -> Bool {
            try urls.dropFirst().allSatisfy { try Daemon.items($0) == expected }
        }

        // Inserts, in several saves.
        var expected: [String: Int64] = [:]
        try app.performAndWait {
            for batch in 0..<4 {
                for index in 0..<5 {
                    let item = try app.insertNewObject(forEntityName: "Item")
                    let name = "item-\(batch)-\(index)"
                    try item.setValue(name, forKey: "name")
                    try item.setValue(Int64(index), forKey: "count")
                    expected[name] = Int64(index)
                }
                try app.save()
            }
        }
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try converged(expected) }, "inserts did not arrive:\n\(daemon.log)")

        // Updates.
        try app.performAndWait {
            for item in try app.fetch(FetchRequest(entityName: "Item")) where (try item.value(forKey: "name") as? String)?.hasPrefix("item-1") == true {
                try item.setValue(Int64(100), forKey: "count")
                expected[try item.value(forKey: "name") as! String] = 100
            }
            try app.save()
        }
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try converged(expected) }, "updates did not arrive:\n\(daemon.log)")

        // Deletes.
        try app.performAndWait {
            for item in try app.fetch(FetchRequest(entityName: "Item")) where (try item.value(forKey: "name") as? String)?.hasPrefix("item-2") == true {
                expected[try item.value(forKey: "name") as! String] = nil
                app.delete(item)
            }
            try app.save()
        }
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try converged(expected) }, "deletes did not arrive:\n\(daemon.log)")
        XCTAssertEqual(try Daemon.items(urls[0]), expected)

        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 10), 0, daemon.log)
        let log = daemon.log
        XCTAssertTrue(log.contains("msg=ready"), log)
        XCTAssertTrue(log.contains("trigger=store:s1"), "changes were not picked up through file events:\n\(log)")
        XCTAssertTrue(log.contains("msg=stopped"), log)
    }

    /// The README quick start: the demo makes its stores, writes in s1 and
    /// exits 0 once every write is in s2 and s3.
    func testDemoExitsWhenSynced() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = directory.appendingPathComponent("demo").path
        let result = try Daemon.run(["--demo", demo, "--demo-writes", "20", "--exit-when-synced", "--log-format", "logfmt"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("demo: all writes arrived in s2 and s3"), result.stderr)
        for name in ["s1.sqlite", "s2.sqlite", "s3.sqlite", "storesyncd.toml", "Demo.xcdatamodel/contents", "state/demo/hub.sqlite"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: "\(demo)/\(name)"), name)
        }
        // Run again on the same directory: its data is kept, new writes sync too.
        let again = try Daemon.run(["--demo", demo, "--demo-writes", "3", "--exit-when-synced"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(try Daemon.run(["--check-config", "--config", "\(demo)/storesyncd.toml"]).status, 0)
    }
}
