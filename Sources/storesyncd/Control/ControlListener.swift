#if canImport(Glibc)
import Glibc
#endif
import CLibUV
import Foundation

/// Why the control socket could not be set up; the daemon does not start.
struct ControlSocketError: Error, CustomStringConvertible {
    var description: String
}

/// The listening `uv_pipe_t` at the control socket's path: claims the path
/// (replacing a stale socket, refusing to start beside a live daemon),
/// binds it with mode 0660, and hands each accepted connection on.
final class ControlListener: LoopHandle {
    let path: String
    private let loop: EventLoop
    private let onConnection: (ControlConnection) -> Void
    /// The bound file's identity, so closing removes our socket only, not
    /// one a newer daemon put at the same path meanwhile.
    private var boundFile: (device: UInt64, inode: UInt64)?

    /// What `claim` found at the path, for the start-up log.
    enum Claim: Equatable { case free, staleReplaced }

    init(_ loop: EventLoop, path: String, onConnection: @escaping (ControlConnection) -> Void) throws {
        self.path = path
        self.loop = loop
        self.onConnection = onConnection
        loop.assertOnLoop()
        super.init(type: UV_NAMED_PIPE, thread: loop.thread)
        try LoopError.check("uv_pipe_init", uv_pipe_init(loop.loop, pointer(uv_pipe_t.self), 0))
        attach()
    }

    /// Takes the path and starts listening. The socket is created with
    /// umask 0117, so it is 0660 from its first instant (a chmod after bind
    /// would leave a moment in which anyone could connect), then chmod'ed
    /// anyway in case the file system ignores the umask for sockets.
    @discardableResult
    func listen(backlog: Int32 = 16) throws -> Claim {
        let claim = try Self.claim(path)
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let previousMask = umask(0o117)
        let bound = uv_pipe_bind(pointer(uv_pipe_t.self), path)
        umask(previousMask)
        if bound != 0 {
            throw ControlSocketError(description: "cannot bind the control socket \(path): \(String(cString: uv_strerror(bound)))")
        }
        guard chmod(path, 0o660) == 0 else {
            throw ControlSocketError(description: "cannot set mode 0660 on the control socket \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        if lstat(path, &info) == 0 { boundFile = (UInt64(info.st_dev), UInt64(info.st_ino)) }
        let status = pointer(uv_pipe_t.self).withMemoryRebound(to: uv_stream_t.self, capacity: 1) { stream in
            uv_listen(stream, backlog) { server, status in
                guard let server, status == 0,
                      let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(server)) as? ControlListener else { return }
                owner.accept()
            }
        }
        if status != 0 {
            throw ControlSocketError(description: "cannot listen on the control socket \(path): \(String(cString: uv_strerror(status)))")
        }
        return claim
    }

    private func accept() {
        guard !closed, let connection = try? ControlConnection(loop) else { return }
        let status = pointer(uv_pipe_t.self).withMemoryRebound(to: uv_stream_t.self, capacity: 1) { server in
            connection.pointer(uv_pipe_t.self).withMemoryRebound(to: uv_stream_t.self, capacity: 1) { client in
                uv_accept(server, client)
            }
        }
        guard status == 0 else {
            connection.close()
            return
        }
        onConnection(connection)
    }

    /// Stops listening and removes the socket file if it is still ours.
    func closeAndRemove() {
        close()
        guard let boundFile else { return }
        var info = stat()
        if lstat(path, &info) == 0, UInt64(info.st_dev) == boundFile.device, UInt64(info.st_ino) == boundFile.inode {
            unlink(path)
        }
        self.boundFile = nil
    }

    /// Makes sure the path can be bound. A socket nobody accepts on is a
    /// crashed daemon's and is removed; a socket someone accepts on means a
    /// daemon is running, and a second one must not take its socket away;
    /// anything else at the path is not ours to delete.
    static func claim(_ path: String) throws -> Claim {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return .free }
            throw ControlSocketError(description: "cannot inspect the control socket path \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlSocketError(description: "\(path) exists and is not a socket; not replacing it (set control_socket elsewhere or remove it)")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError(description: "socket(): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if connected == 0 {
            let owner = PeerCredentials.of(socket: fd).map { " (pid \($0.pid))" } ?? ""
            throw ControlSocketError(description: "another storesyncd\(owner) is already running on the control socket \(path); stop it first, or give this one another control_socket")
        }
        let error = errno
        guard error == ECONNREFUSED else {
            throw ControlSocketError(description: "cannot tell whether a daemon is running on \(path): connect: \(String(cString: strerror(error)))")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw ControlSocketError(description: "cannot remove the stale control socket \(path): \(String(cString: strerror(errno)))")
        }
        return .staleReplaced
    }
}
