#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSyncControl
import Testing

/// A Unix stream socket played by the test: it accepts connections on
/// a thread and treats each with `behaviour`.
final class FakeServer: @unchecked Sendable {
    enum Behaviour {
        /// Accept and never write (a wedged daemon).
        case silent
        /// Write these bytes, then close.
        case answer(String)
        /// Bound but never listening: connect is refused.
        case notListening
    }

    /// Connections held open by `.silent`, closed with the server.
    final class Held: @unchecked Sendable {
        var fds: [Int32] = []
        let lock = NSLock()
    }

    let path: String
    let fd: Int32
    private let held = Held()

    init(_ behaviour: Behaviour) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-fake-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("control.sock").path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EINVAL) }
        if case .notListening = behaviour { return }
        guard listen(fd, 8) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EINVAL) }
        // The thread holds no reference to the server, so the server's
        // deinit runs and its shutdown() ends the thread's accept().
        let (listening, holder) = (fd, held)
        let thread = Thread {
            while true {
                let client = accept(listening, nil, nil)
                if client < 0 { return }
                switch behaviour {
                case .silent:
                    holder.lock.lock()
                    holder.fds.append(client)
                    holder.lock.unlock()
                case .answer(let text):
                    _ = text.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                    close(client)
                case .notListening:
                    return
                }
            }
        }
        thread.start()
    }

    deinit {
        // shutdown wakes the accepting thread; then the held connections go.
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        held.lock.lock()
        for client in held.fds { close(client) }
        held.lock.unlock()
        unlink(path)
    }
}

/// Issue 17's bad input for the daemon commands, without a daemon: sockets
/// that never answer, speak something else, or are not there. Each case
/// must give a clear message and its documented exit status.
@Suite struct DaemonClientTests {
    @Test func aDaemonThatDoesNotAnswerTimesOutWithExit75() throws {
        let server = try FakeServer(.silent)
        let started = Date()
        let result = try CLI.run(["status", "--socket", server.path, "--timeout", "0.5"])
        #expect(result.status == 75)
        #expect(result.stderr == "storesyncctl: storesyncd did not answer within 0.5 s on \(server.path) (--timeout to wait longer)\n")
        #expect(Date().timeIntervalSince(started) < 8, "the timeout was not kept")
        #expect(result.stdout.isEmpty)
    }

    @Test func aSocketThatSpeaksSomethingElseIsNotTheDaemonExit76() throws {
        let http = try FakeServer(.answer("HTTP/1.1 400 Bad Request\r\n\r\n"))
        let result = try CLI.run(["status", "--socket", http.path])
        #expect(result.status == 76)
        #expect(result.stderr.contains("\(http.path) is not storesyncd's control socket: it answered something that is not JSON: \"HTTP/1.1 400 Bad Request"))

        let otherJSON = try FakeServer(.answer("{\"hello\": \"world\"}\n"))
        let json = try CLI.run(["pause", "--socket", otherJSON.path])
        #expect(json.status == 76)
        #expect(json.stderr.contains("its answer has no protocol version"))

        let hangUp = try FakeServer(.answer(""))
        let closed = try CLI.run(["metrics", "--socket", hangUp.path])
        #expect(closed.status == 76)
        #expect(closed.stderr.contains("it closed the connection without answering"))
    }

    @Test func noDaemonIsExit3SayingWhereItLooked() throws {
        let stale = try FakeServer(.notListening)
        let refused = try CLI.run(["status", "--socket", stale.path])
        #expect(refused.status == 3)
        #expect(refused.stderr == "storesyncctl: storesyncd is not running: nothing accepts on the socket at \(stale.path) (path from --socket)\n")

        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-none-\(UUID().uuidString.prefix(8))").path
        let none = try CLI.run(["sync", "--wait", "--socket", missing + "/control.sock"])
        #expect(none.status == 3)
        #expect(none.stderr.contains("no socket at \(missing)/control.sock"))
    }

    @Test func aForbiddenReplyIsExit77() throws {
        let server = try FakeServer(.answer("{\"v\":1,\"id\":null,\"ok\":false,\"error\":{\"code\":\"forbidden\",\"message\":\"uid 1000 may not use this socket\"}}\n"))
        let result = try CLI.run(["status", "--socket", server.path])
        #expect(result.status == 77)
        #expect(result.stderr == "storesyncctl: storesyncd refused this user: uid 1000 may not use this socket\n")
    }

    @Test func theSocketPathComesFromTheConfigWhenGiven() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-config-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let broken = directory.appendingPathComponent("storesyncd.toml")
        try Data("control_socket = 5\n".utf8).write(to: broken)
        let result = try CLI.run(["status", "--config", broken.path])
        #expect(result.status == 78)
        #expect(result.stderr.contains("cannot use --config: \(broken.path): key control_socket"))
    }

    @Test func unknownSubcommandsAndOptionsAreUsageErrorsExit64() throws {
        let subcommand = try CLI.run(["bogus"])
        #expect(subcommand.status == 64)
        #expect(subcommand.stderr.contains("Unexpected argument 'bogus'"), "\(subcommand.stderr)")
        #expect(subcommand.stderr.contains("Usage: storesyncctl <subcommand>"), "\(subcommand.stderr)")
        let option = try CLI.run(["status", "--bogus"])
        #expect(option.status == 64)
        #expect(option.stderr.contains("Unknown option '--bogus'"), "\(option.stderr)")
        let nested = try CLI.run(["conflicts", "frobnicate"])
        #expect(nested.status == 64)
        #expect(nested.stderr.contains("'frobnicate'"), "\(nested.stderr)")
        let value = try CLI.run(["status", "--timeout", "soon"])
        #expect(value.status == 64)
        #expect(value.stderr.contains("--timeout") && value.stderr.contains("soon"), "\(value.stderr)")
    }

    /// `log --follow` given a socket that is not the daemon's, or a daemon
    /// that does not answer in time, says so and follows the files instead.
    @Test func logFollowFallsBackToTheFilesSayingWhy() throws {
        let fixture = try SyncGroupFixture()
        let http = try FakeServer(.answer("HTTP/1.1 400 Bad Request\r\n\r\n"))
        let wrong = try Self.follow(["log", "--follow", "--config", fixture.configPath, "--socket", http.path])
        #expect(wrong.contains("\(http.path) is not storesyncd's control socket: it answered something that is not JSON"), "\(wrong)")
        #expect(wrong.contains("following by polling the files"), "\(wrong)")
        let silent = try FakeServer(.silent)
        let slow = try Self.follow(["log", "--follow", "--config", fixture.configPath, "--socket", silent.path, "--timeout", "0.3"])
        #expect(slow.contains("storesyncd did not answer within 0.3 s on \(silent.path); following by polling the files"), "\(slow)")
    }

    /// Runs a `--follow` until its stderr has a line (at most 5 s), then stops it; returns stderr.
    static func follow(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = arguments
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var text = ""
        let deadline = Date().addingTimeInterval(5)
        let fd = err.fileHandleForReading.fileDescriptor
        while Date() < deadline, !text.contains("polling") {
            var pollfd = Glibc.pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pollfd, 1, 100) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            text += String(decoding: buffer[..<count], as: UTF8.self)
        }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return text
    }

    @Test func everyCommandDocumentsItsExitStatuses() throws {
        for command in [["log"], ["verify"], ["attach"], ["detach"], ["query"], ["model"], ["model", "show"], ["model", "check"],
                        ["predicate"], ["migrate"], ["completion"], []] {
            let help = try CLI.run(command + ["--help"])
            #expect(help.status == 0)
            #expect(help.stdout.range(of: "Exit status", options: .caseInsensitive) != nil, "\(command)")
        }
    }

    @Test func everyDaemonCommandDocumentsItsExitStatuses() throws {
        for command in [["status"], ["pause"], ["resume"], ["sync"], ["reload"], ["metrics"], ["conflicts", "list"], ["conflicts", "show"], ["conflicts", "resolve"]] {
            let help = try CLI.run(command + ["--help"])
            #expect(help.status == 0)
            #expect(help.stdout.contains("75  the daemon did not answer within --timeout"), "\(command)")
            #expect(help.stdout.contains("Examples:"), "\(command)")
            #expect(help.stdout.contains("--socket <socket>"), "\(command)")
        }
    }
}
