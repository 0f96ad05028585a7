#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Why a control connection did not give an answer. Each case is a
/// different thing for an operator to do, so storesyncctl gives each its own
/// message and exit status.
public enum ControlClientError: Error, CustomStringConvertible, Equatable {
    /// Nothing listens at the path (no file, or a socket file no process
    /// accepts on: a daemon that crashed or is stopped).
    case notRunning(path: String, reason: String)
    /// The socket exists but this user may not connect (mode 0660).
    case permissionDenied(path: String)
    /// Connected, but no complete reply within the timeout.
    case timedOut(path: String, seconds: Double)
    /// Something answered that does not speak this protocol: not JSON, no
    /// `"v"`, or it closed without a word.
    case notTheDaemon(path: String, detail: String)
    /// Any other socket failure (the call and errno's text).
    case io(path: String, call: String, reason: String)

    public var description: String {
        switch self {
        case .notRunning(let path, let reason): return "storesyncd is not running: \(reason) at \(path)"
        case .permissionDenied(let path):
            return "permission denied on \(path): the control socket is mode 0660; run as root or as the daemon's user or group"
        case .timedOut(let path, let seconds):
            return "storesyncd did not answer within \(Self.seconds(seconds)) on \(path)"
        case .notTheDaemon(let path, let detail): return "\(path) is not storesyncd's control socket: \(detail)"
        case .io(let path, let call, let reason): return "\(call) on \(path): \(reason)"
        }
    }

    static func seconds(_ value: Double) -> String {
        value.rounded() == value ? "\(Int(value)) s" : String(format: "%.1f s", value)
    }
}

/// A blocking client for the control socket: connect, send one request a
/// line, read reply lines, each read bounded by a deadline (`poll`). No
/// event loop: storesyncctl makes one request and exits (or follows one
/// stream).
///
/// ```swift
/// let client = try ControlClient(path: "/run/storesyncd/control.sock", timeout: 10)
/// let reply = try client.request(["op": "status"])
/// if reply["ok"]?.bool == true { print(reply["groups"] ?? .null) }
/// ```
public final class ControlClient {
    public let path: String
    /// Seconds each `request`/`readLine` may wait for a complete line.
    public var timeout: Double
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var nextID: Int64 = 1

    /// Connects; throws `.notRunning`, `.permissionDenied` or `.io`.
    public init(path: String, timeout: Double) throws {
        self.path = path
        self.timeout = timeout
        var address = sockaddr_un()
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ControlClientError.io(path: path, call: "connect", reason: "path is \(bytes.count) bytes; a Unix socket path must be under 108")
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlClientError.io(path: path, call: "socket", reason: String(cString: strerror(errno))) }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if status != 0 {
            let error = errno
            close(fd)
            switch error {
            case ENOENT: throw ControlClientError.notRunning(path: path, reason: "no socket")
            case ECONNREFUSED: throw ControlClientError.notRunning(path: path, reason: "nothing accepts on the socket")
            case ENOTSOCK: throw ControlClientError.notTheDaemon(path: path, detail: "it is not a socket")
            case EACCES, EPERM: throw ControlClientError.permissionDenied(path: path)
            default: throw ControlClientError.io(path: path, call: "connect", reason: String(cString: strerror(error)))
            }
        }
        self.fd = fd
        // A daemon that went away mid-write must be an error, not SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
    }

    deinit { close(fd) }

    /// Sends one request (adding `"v"` and an `"id"` when missing) and
    /// returns the reply with that id. Lines of other ids (a stream's
    /// events) are skipped.
    public func request(_ fields: [String: JSONValue]) throws -> JSONValue {
        var fields = fields
        if fields["v"] == nil { fields["v"] = .int(ControlProtocol.version) }
        if fields["id"] == nil {
            fields["id"] = .int(nextID)
            nextID += 1
        }
        let id = fields["id"]!
        let deadline = Date().addingTimeInterval(timeout)
        do {
            try send(JSONValue.object(fields).encoded())
        } catch let error as ControlClientError {
            // A daemon that refuses a peer writes why and closes at once,
            // possibly before the request went out: that line is the answer.
            guard case .io = error else { throw error }
            if let refusal = try readMessage(deadline: deadline) { return refusal }
            throw ControlClientError.notTheDaemon(path: path, detail: "it closed the connection without answering")
        }
        while true {
            let reply = try readReply(deadline: deadline)
            if reply["event"] == nil, reply["id"] == id || reply["id"] == nil || reply["id"] == .null { return reply }
        }
    }

    /// Writes one line (a newline is added); `raw` is not checked, so tests
    /// can send what a broken client would.
    public func send(_ raw: Data) throws {
        var bytes = [UInt8](raw)
        bytes.append(UInt8(ascii: "\n"))
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw ControlClientError.io(path: path, call: "send", reason: String(cString: strerror(errno)))
            }
            offset += written
        }
    }

    /// Tells the daemon nothing more will be sent (a half-close): what was
    /// sent is still answered, then the daemon closes the connection.
    public func finishSending() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// The next line parsed, checked to be this protocol's: a JSON object
    /// with `"v"`. nil when the daemon closed the connection cleanly between lines.
    public func readMessage(deadline: Date) throws -> JSONValue? {
        guard let line = try readLine(deadline: deadline) else { return nil }
        let value: JSONValue
        do { value = try JSONValue.parse(line) } catch {
            throw ControlClientError.notTheDaemon(path: path, detail: "it answered something that is not JSON: \(Self.excerpt(line))")
        }
        guard value.object != nil, value["v"]?.int != nil else {
            throw ControlClientError.notTheDaemon(path: path, detail: "its answer has no protocol version: \(Self.excerpt(line))")
        }
        return value
    }

    private func readReply(deadline: Date) throws -> JSONValue {
        guard let reply = try readMessage(deadline: deadline) else {
            throw ControlClientError.notTheDaemon(path: path, detail: "it closed the connection without answering")
        }
        return reply
    }

    /// One raw line without its newline; nil at end of stream with nothing
    /// pending. Throws `.timedOut` when no complete line came by `deadline`.
    public func readLine(deadline: Date) throws -> Data? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw ControlClientError.timedOut(path: path, seconds: timeout) }
            var pollfd = Glibc.pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollfd, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
            if ready < 0 {
                if errno == EINTR { continue }
                throw ControlClientError.io(path: path, call: "poll", reason: String(cString: strerror(errno)))
            }
            if ready == 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if errno == ECONNRESET {
                    if buffer.isEmpty { return nil }
                    throw ControlClientError.notTheDaemon(path: path, detail: "it reset the connection mid-line")
                }
                throw ControlClientError.io(path: path, call: "recv", reason: String(cString: strerror(errno)))
            }
            if count == 0 {
                if buffer.isEmpty { return nil }
                throw ControlClientError.notTheDaemon(path: path, detail: "it closed the connection mid-line: \(Self.excerpt(Data(buffer)))")
            }
            buffer.append(contentsOf: chunk[..<count])
        }
    }

    static func excerpt(_ data: Data) -> String {
        let text = String(decoding: data.prefix(80), as: UTF8.self)
        return data.count > 80 ? "\"\(text)…\"" : "\"\(text)\""
    }
}
