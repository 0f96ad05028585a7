#if canImport(Glibc)
import Glibc
#endif
// Not for libuv: in a release (whole-module) build `SOCK_DGRAM` and
// `SOCK_CLOEXEC` are found only through the module that brought in
// <sys/socket.h> first, libuv's (ControlListener imports it too).
import CLibUV
import Foundation

/// systemd's notify protocol spoken directly: one `AF_UNIX` datagram of
/// newline-separated `KEY=VALUE` lines to `$NOTIFY_SOCKET`, so the daemon
/// needs no libsystemd (sd_notify(3) documents the protocol as stable and
/// meant to be reimplemented).
///
/// Without `$NOTIFY_SOCKET` (not started by systemd, or `Type=simple`)
/// every send does nothing.
final class SystemdNotifier {
    private let fd: Int32
    private var address = sockaddr_un()
    private let addressLength: socklen_t
    /// Where messages go, for logs.
    let socketName: String

    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let name = environment["NOTIFY_SOCKET"], name.hasPrefix("/") || name.hasPrefix("@") else { return nil }
        var bytes = Array(name.utf8)
        // '@' names a Linux abstract socket: its name starts with a NUL byte.
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            for (index, byte) in bytes.enumerated() { path[index] = byte }
        }
        // The exact length: with sizeof(sockaddr_un) the trailing NULs would
        // become part of an abstract name and the datagram would go nowhere.
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes[0] == 0 ? 0 : 1))
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        socketName = name
    }

    deinit { close(fd) }

    /// Sends one message; false when systemd could not be reached (the
    /// daemon goes on: notifications are advisory).
    @discardableResult
    func send(_ fields: [String]) -> Bool {
        var message = Array(fields.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeMutableBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, addressLength) }
            }
        }
        return sent == message.count
    }

    /// `CLOCK_MONOTONIC` in microseconds, as `MONOTONIC_USEC=` wants it with
    /// `RELOADING=1`.
    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    /// The watchdog interval systemd expects pings within (`WatchdogSec=`),
    /// or nil when there is no watchdog for this process.
    static func watchdogInterval(environment: [String: String] = ProcessInfo.processInfo.environment) -> TimeInterval? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        // WATCHDOG_PID names the process the watchdog is meant for; a child
        // that inherited the variables must not ping for its parent.
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return TimeInterval(usec) / 1_000_000
    }
}
