#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a Unix socket, as the kernel recorded it at
/// `connect()` (`SO_PEERCRED`, unix(7)): it cannot be forged by the peer,
/// unlike anything it could send.
struct PeerCredentials: Equatable, CustomStringConvertible {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32

    /// `struct ucred` is three 32-bit fields (pid, uid, gid). It is read
    /// into a plain buffer: Glibc's Swift module only declares `ucred`
    /// under `_GNU_SOURCE`, which a module import cannot set.
    static func of(socket fd: Int32) -> PeerCredentials? {
        var fields: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(12)
        let status = withUnsafeMutableBytes(of: &fields) { raw in
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, raw.baseAddress, &length)
        }
        guard status == 0, length == 12 else { return nil }
        return PeerCredentials(pid: fields.0, uid: fields.1, gid: fields.2)
    }

    /// The control socket's rule (issue 16): root, or the user the daemon
    /// runs as. The file's mode 0660 keeps everyone else from connecting at
    /// all; members of the socket's group can connect but are refused here,
    /// since every op can change what the daemon does (pause, resolve, reload).
    func isAllowed(daemonUID: UInt32 = geteuid()) -> Bool { uid == 0 || uid == daemonUID }

    var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}
