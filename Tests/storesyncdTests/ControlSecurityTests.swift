#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSyncControl
import XCTest

/// Issue 16: the control socket is 0660 and refuses peers whose uid is
/// neither root nor the daemon's (SO_PEERCRED); a crashed daemon's socket
/// is replaced, a live daemon's is not.
final class ControlSecurityTests: XCTestCase {
    static let nobody: uid_t = 65534

    func testSocketIsMode0660AndAPeerWithAnotherUIDIsRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to act as another user (the tests run as root in CI)")
        let daemon = try Daemon.Controlled()
        var info = stat()
        XCTAssertEqual(lstat(daemon.socket, &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFSOCK)
        XCTAssertEqual(info.st_mode & 0o7777, 0o660, String(info.st_mode & 0o7777, radix: 8))

        // At 0660, nobody (not the owner, not in the group) cannot even connect.
        let blocked = Self.connect(as: Self.nobody, to: daemon.socket)
        XCTAssertEqual(blocked.stage, .connect)
        XCTAssertEqual(blocked.errno, EACCES, "connect as nobody: \(String(cString: strerror(blocked.errno)))")

        // With the file opened up, the daemon's own check refuses: an error
        // line, then the connection is closed.
        XCTAssertEqual(chmod(daemon.socket, 0o666), 0)
        let refused = Self.connect(as: Self.nobody, to: daemon.socket)
        XCTAssertEqual(refused.stage, .done, "\(refused)")
        let reply = try JSONValue.line(refused.reply.split(separator: "\n").first.map(String.init) ?? "")
        XCTAssertEqual(reply["ok"], false)
        XCTAssertEqual(reply["error"]?["code"], "forbidden")
        XCTAssertTrue(reply["error"]?["message"]?.string?.contains("uid 65534") == true, reply.text)
        XCTAssertTrue(refused.closed, "the connection stayed open after the refusal")
        XCTAssertTrue(Daemon.wait(timeout: 5) { daemon.daemon.log.contains("control connection refused") }, daemon.daemon.log)

        // Root is still answered.
        XCTAssertEqual(try daemon.request(["op": "status"])["ok"], true)
    }

    /// The daemon's log and its exit when a second one starts on the same
    /// socket; after a SIGKILL the stale socket is replaced.
    func testASecondDaemonRefusesToStartAndAStaleSocketIsReplaced() throws {
        let first = try Daemon.Controlled()
        let second = try Daemon.run(["--config", first.config, "--log-format", "logfmt"])
        XCTAssertEqual(second.status, 1, second.stderr)
        XCTAssertTrue(second.stderr.contains("another storesyncd (pid \(first.daemon.process.processIdentifier)) is already running on the control socket \(first.socket)"), second.stderr)
        XCTAssertEqual(try first.request(["op": "status"])["ok"], true, "the second daemon disturbed the first")

        // A crashed daemon leaves its socket file behind.
        first.daemon.signal(SIGKILL)
        _ = first.daemon.waitForExit(timeout: 10)
        XCTAssertTrue(FileManager.default.fileExists(atPath: first.socket))
        XCTAssertThrowsError(try first.client()) { error in
            guard case ControlClientError.notRunning = error else { return XCTFail("\(error)") }
        }
        let third = try Daemon.Running(["--config", first.config], logFile: first.directory.appendingPathComponent("third.log"))
        defer {
            third.signal(SIGTERM)
            _ = third.waitForExit(timeout: 10)
        }
        XCTAssertTrue(Daemon.wait(timeout: 20) { (try? first.request(["op": "status"]))?["ok"] == true }, third.log)
        XCTAssertTrue(third.log.contains("replaced a stale control socket"), third.log)

        // SIGTERM removes the socket it bound.
        third.signal(SIGTERM)
        XCTAssertEqual(third.waitForExit(timeout: 10), 0, third.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: first.socket), "the socket file outlived a clean stop")
    }

    func testSomethingElseAtTheSocketPathIsNotReplaced() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Daemon.makeGroup(in: directory)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("run"), withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("run/control.sock").path
        try Data("precious".utf8).write(to: URL(fileURLWithPath: path))
        let result = try Daemon.run(["--config", config])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("\(path) exists and is not a socket"), result.stderr)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "precious")
    }

    // MARK: - Another user

    struct PeerAttempt: CustomStringConvertible {
        enum Stage: UInt8 { case setuid = 1, socket, connect, done }
        var stage: Stage
        var errno: Int32
        var reply: String
        /// The daemon closed the connection after its reply.
        var closed: Bool
        var description: String { "stage \(stage) errno \(errno) closed \(closed) reply \(reply)" }
    }

    /// Forks a child that becomes `uid`, connects to `path` and reads what
    /// the daemon says (until it closes, or 5 s). Everything the child
    /// touches is prepared before the fork: the child of a threaded process
    /// may only make plain system calls.
    static func connect(as uid: uid_t, to path: String) -> PeerAttempt {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return PeerAttempt(stage: .setuid, errno: errno, reply: "", closed: false) }
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 8192)
        defer { buffer.deallocate() }
        var header: (UInt8, Int32, UInt8) = (0, 0, 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        let addressLength = socklen_t(MemoryLayout<sockaddr_un>.size)

        let child = fork()
        if child == 0 {
            close(fds[0])
            // Report: stage reached, errno, whether the peer closed; then the bytes read.
            func report(_ stage: UInt8, _ error: Int32, _ count: Int, _ closed: UInt8) -> Never {
                header = (stage, error, closed)
                _ = withUnsafeBytes(of: &header) { write(fds[1], $0.baseAddress, $0.count) }
                if count > 0 { _ = write(fds[1], buffer, count) }
                _exit(0)
            }
            if setgroups(0, nil) != 0 || setgid(uid) != 0 || setuid(uid) != 0 { report(1, errno, 0, 0) }
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            if fd < 0 { report(2, errno, 0, 0) }
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, addressLength) }
            }
            if connected != 0 { report(3, errno, 0, 0) }
            var total = 0
            while total < 8192 {
                let count = recv(fd, buffer + total, 8192 - total, 0)
                if count == 0 { report(4, 0, total, 1) }
                if count < 0 { report(4, errno, total, errno == ECONNRESET ? 1 : 0) }
                total += count
            }
            report(4, 0, total, 0)
        }
        close(fds[1])
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fds[0], &chunk, chunk.count)
            if count <= 0 { break }
            received.append(contentsOf: chunk[..<count])
        }
        close(fds[0])
        var status: Int32 = 0
        waitpid(child, &status, 0)
        let size = MemoryLayout<(UInt8, Int32, UInt8)>.size
        guard received.count >= size else { return PeerAttempt(stage: .setuid, errno: 0, reply: "child reported nothing", closed: false) }
        withUnsafeMutableBytes(of: &header) { $0.copyBytes(from: received.prefix(size)) }
        return PeerAttempt(stage: PeerAttempt.Stage(rawValue: header.0) ?? .setuid, errno: header.1,
                           reply: String(decoding: received.dropFirst(size), as: UTF8.self), closed: header.2 == 1)
    }
}
