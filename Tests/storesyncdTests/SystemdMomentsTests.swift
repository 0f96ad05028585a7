#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XCTest

/// When each notification comes (SystemdTests checks that each comes):
/// READY=1 only once the stores are open, never when a group cannot be
/// opened; WATCHDOG=1 at half of WATCHDOG_USEC and only for the process
/// WATCHDOG_PID names; STOPPING=1 only after SIGTERM and nothing after it.
final class SystemdMomentsTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws { directory = try Daemon.temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    func lines(_ message: String) -> [String] { message.split(separator: "\n").map(String.init) }

    func testReadyAfterTheStoresOpenWatchdogAtHalfTheIntervalStoppingLast() throws {
        let config = try Daemon.makeGroup(in: directory)
        let systemd = try SystemdTests.NotifySocket(path: directory.appendingPathComponent("notify.sock").path)
        let daemon = try Daemon.Running(["--config", config], environment: ["NOTIFY_SOCKET": systemd.name, "WATCHDOG_USEC": "300000"],
                                        logFile: directory.appendingPathComponent("daemon.log"))
        var logAtReady = ""
        XCTAssertNotNil(systemd.wait { message in
            guard self.lines(message).contains("READY=1") else { return false }
            logAtReady = daemon.log
            return true
        }, "\(systemd.received)")
        XCTAssertTrue(logAtReady.contains("msg=\"group open\""), "READY=1 before the stores were open:\n\(logAtReady)")
        XCTAssertFalse(systemd.received.dropLast().contains { lines($0).contains("READY=1") }, "READY=1 twice: \(systemd.received)")

        // Pings every 150 ms: about eight in 1.2 s (at least four on a loaded machine).
        let start = Date()
        var pings = 0
        while Date().timeIntervalSince(start) < 1.2 {
            if systemd.wait(timeout: 1.2 - Date().timeIntervalSince(start), { self.lines($0).contains("WATCHDOG=1") }) != nil { pings += 1 }
        }
        XCTAssertGreaterThanOrEqual(pings, 4, "\(systemd.received)")
        XCTAssertLessThanOrEqual(pings, 12, "pings faster than half the interval: \(systemd.received)")
        XCTAssertFalse(systemd.received.contains { lines($0).contains("STOPPING=1") }, "STOPPING=1 before SIGTERM")

        daemon.signal(SIGTERM)
        XCTAssertNotNil(systemd.wait { self.lines($0).contains("STOPPING=1") }, "\(systemd.received)")
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
        // Drain what is left: nothing says READY after STOPPING.
        _ = systemd.wait(timeout: 0.3) { _ in false }
        let stopping = systemd.received.lastIndex { lines($0).contains("STOPPING=1") }!
        XCTAssertFalse(systemd.received[stopping...].contains { lines($0).contains("READY=1") }, "\(systemd.received)")
    }

    func testNoWatchdogPingsForAnotherProcess() throws {
        let config = try Daemon.makeGroup(in: directory)
        let systemd = try SystemdTests.NotifySocket(path: directory.appendingPathComponent("notify.sock").path)
        // WATCHDOG_PID names another process (a child inherited the variables).
        let daemon = try Daemon.Running(["--config", config],
                                        environment: ["NOTIFY_SOCKET": systemd.name, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"],
                                        logFile: directory.appendingPathComponent("daemon.log"))
        XCTAssertNotNil(systemd.wait { self.lines($0).contains("READY=1") }, "\(systemd.received)")
        XCTAssertNil(systemd.wait(timeout: 1) { self.lines($0).contains("WATCHDOG=1") }, "pinged for pid 1: \(systemd.received)")
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }

    /// A group whose hub cannot be opened: no READY=1, a STATUS= and ERRNO=
    /// saying why, exit 1 (systemd then restarts it per Restart=on-failure).
    func testNoReadyWhenAGroupCannotBeOpened() throws {
        let config = try Daemon.makeGroup(in: directory)
        // The group's state directory is a file: its hub cannot be made.
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("state"), withIntermediateDirectories: true)
        try Data("not a directory".utf8).write(to: directory.appendingPathComponent("state/items"))
        let systemd = try SystemdTests.NotifySocket(path: directory.appendingPathComponent("notify.sock").path)
        let daemon = try Daemon.Running(["--config", config], environment: ["NOTIFY_SOCKET": systemd.name],
                                        logFile: directory.appendingPathComponent("daemon.log"))
        let failure = systemd.wait { $0.contains("STATUS=cannot open group items") }
        XCTAssertNotNil(failure, "\(systemd.received)\n\(daemon.log)")
        XCTAssertTrue(failure.map { lines($0).contains { $0.hasPrefix("ERRNO=") } } == true, failure ?? "")
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 1, daemon.log)
        _ = systemd.wait(timeout: 0.3) { _ in false }
        XCTAssertFalse(systemd.received.contains { lines($0).contains("READY=1") }, "READY=1 although a group is not open: \(systemd.received)")
    }
}
