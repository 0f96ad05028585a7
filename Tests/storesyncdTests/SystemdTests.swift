#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XCTest

/// Plays systemd's side of the notify protocol: binds a datagram socket,
/// names it in NOTIFY_SOCKET and reads what the real binary sends.
final class SystemdTests: XCTestCase {
    /// A bound AF_UNIX datagram socket (a path, or abstract when `abstract`).
    final class NotifySocket {
        let fd: Int32
        let name: String
        var received: [String] = []

        init(path: String, abstract: Bool = false) throws {
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            self.fd = fd
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(path.utf8)
            if abstract { bytes.insert(0, at: 0) }
            withUnsafeMutableBytes(of: &address.sun_path) { for (i, b) in bytes.enumerated() { $0[i] = b } }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
            let status = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EINVAL) }
            var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            name = abstract ? "@" + path : path
        }

        deinit { close(fd) }

        /// Receives until a message satisfies `match` (bounded); returns it.
        func wait(timeout: TimeInterval = 10, _ match: (String) -> Bool) -> String? {
            let deadline = Date().addingTimeInterval(timeout)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count > 0 else { continue }
                let message = String(decoding: buffer[0..<count], as: UTF8.self)
                received.append(message)
                if match(message) { return message }
            }
            return nil
        }
    }

    func testNotifyReadyStatusWatchdogReloadAndStopping() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Daemon.makeGroup(in: directory)
        let systemd = try NotifySocket(path: directory.appendingPathComponent("notify.sock").path)
        let daemon = try Daemon.Running(["--config", config],
                                        environment: ["NOTIFY_SOCKET": systemd.name, "WATCHDOG_USEC": "400000"],
                                        logFile: directory.appendingPathComponent("daemon.log"))
        let lines = { (message: String) in message.split(separator: "\n").map(String.init) }

        let ready = systemd.wait { lines($0).contains("READY=1") }
        XCTAssertNotNil(ready, "no READY=1; got \(systemd.received)\n\(daemon.log)")
        XCTAssertTrue(ready?.contains("STATUS=1 group, 3 stores") == true, ready ?? "")
        XCTAssertNotNil(systemd.wait { lines($0).contains("WATCHDOG=1") }, "no WATCHDOG=1 at half of WATCHDOG_USEC")
        let afterRound = { (message: String) in message.hasPrefix("STATUS=") && message.contains(" failed; ") }
        XCTAssertTrue(systemd.received.contains(where: afterRound) || systemd.wait(afterRound) != nil, "no STATUS= after a round: \(systemd.received)")

        // Reload with a valid file: RELOADING=1 + MONOTONIC_USEC, then READY=1.
        daemon.signal(SIGHUP)
        let reloading = systemd.wait { lines($0).contains("RELOADING=1") }
        XCTAssertNotNil(reloading, "\(systemd.received)")
        XCTAssertTrue(reloading.map { lines($0).contains { $0.hasPrefix("MONOTONIC_USEC=") && UInt64($0.dropFirst(15)) != nil } } == true, reloading ?? "")
        XCTAssertNotNil(systemd.wait { lines($0).contains("READY=1") }, "no READY=1 after reload: \(systemd.received)")

        // Reload with a broken file: refused, logged, the old one kept.
        let good = try String(contentsOfFile: config, encoding: .utf8)
        try Data(good.replacingOccurrences(of: "policy = \"overwrite\"", with: "policy = \"bogus\"").utf8).write(to: URL(fileURLWithPath: config))
        daemon.signal(SIGHUP)
        XCTAssertNotNil(systemd.wait { lines($0).contains("RELOADING=1") })
        let refused = systemd.wait { lines($0).contains("READY=1") }
        XCTAssertTrue(refused?.contains("reload refused") == true, refused ?? "\(systemd.received)")
        XCTAssertTrue(Daemon.wait(timeout: 5) { daemon.log.contains("reload refused") }, daemon.log)
        XCTAssertTrue(daemon.log.contains("group[1].store[3].policy"), daemon.log)

        // Still syncing on the old configuration.
        let app = try Daemon.app(directory.appendingPathComponent("s1.sqlite"))
        try app.performAndWait {
            let item = try app.insertNewObject(forEntityName: "Item")
            try item.setValue("after-refused-reload", forKey: "name")
            try app.save()
        }
        XCTAssertTrue(try Daemon.wait(timeout: 10) { try Daemon.items(directory.appendingPathComponent("s3.sqlite"))["after-refused-reload"] != nil },
                      daemon.log)

        daemon.signal(SIGTERM)
        XCTAssertNotNil(systemd.wait { lines($0).contains("STOPPING=1") }, "\(systemd.received)")
        XCTAssertEqual(daemon.waitForExit(timeout: 10), 0, daemon.log)
    }

    func testAbstractNotifySocket() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Daemon.makeGroup(in: directory)
        let systemd = try NotifySocket(path: "storesyncd-test-\(UUID().uuidString)", abstract: true)
        let daemon = try Daemon.Running(["--config", config], environment: ["NOTIFY_SOCKET": systemd.name],
                                        logFile: directory.appendingPathComponent("daemon.log"))
        XCTAssertNotNil(systemd.wait { $0.split(separator: "\n").contains("READY=1") }, daemon.log)
        daemon.signal(SIGINT)
        XCTAssertEqual(daemon.waitForExit(timeout: 10), 0, daemon.log)
    }

    /// Under systemd (stderr is $JOURNAL_STREAM) lines carry `<N>` priority
    /// prefixes and no timestamp; `--log-format json` gives one object a line.
    func testLogFormats() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = directory.appendingPathComponent("demo").path

        // A pipe as stderr, named in JOURNAL_STREAM by its device and inode.
        let err = Pipe()
        var info = stat()
        XCTAssertEqual(fstat(err.fileHandleForWriting.fileDescriptor, &info), 0)
        let process = Process()
        process.executableURL = Daemon.binary
        process.arguments = ["--demo", demo, "--demo-writes", "2", "--exit-when-synced"]
        var environment = ProcessInfo.processInfo.environment
        environment["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
        process.environment = environment
        process.standardError = err
        try process.run()
        try err.fileHandleForWriting.close()
        let journal = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, journal)
        let journalLines = journal.split(separator: "\n")
        XCTAssertFalse(journalLines.isEmpty)
        for line in journalLines {
            XCTAssertTrue(line.range(of: #"^<[2-7]>"#, options: .regularExpression) != nil, String(line))
            XCTAssertFalse(line.contains("time="), String(line))
        }
        XCTAssertTrue(journalLines.contains { $0.hasPrefix("<6>round ") }, journal)

        let json = try Daemon.run(["--demo", demo, "--demo-writes", "2", "--exit-when-synced", "--log-format", "json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        var messages: [String] = []
        for line in json.stderr.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]
            XCTAssertNotNil(object?["time"], String(line))
            messages.append(object?["msg"] ?? "")
        }
        XCTAssertTrue(messages.contains("round"), "\(messages)")
    }
}
