#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import StoreSyncConfig
import StoreSyncControl

/// swift-log output for the daemon, one line per entry on stderr.
///
/// - journal: `<6>message key=value`. journald strips the `<N>` prefix into
///   the entry's priority (`SyslogLevelPrefix=`, on by default), so
///   `journalctl -p err` works; no timestamp, journald stamps every line.
/// - logfmt: `time=… level=info msg="…" key=value`, for terminals and files.
/// - json: one object per line with the same fields.
///
/// The level is process-wide and changeable (a SIGHUP may bring a new
/// `log_level`), so handlers read it from `DaemonLogHandler.level`.
struct DaemonLogHandler: LogHandler {
    /// The resolved output format (never `.auto`).
    enum Output { case journal, logfmt, json }

    private static let state = LogState()

    /// The level every daemon logger logs at.
    static var level: Logger.Level {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }

    static var output: Output {
        get { state.withLock { $0.output } }
        set { state.withLock { $0.output = newValue } }
    }

    /// `auto` becomes journal when stderr *is* the journal stream systemd
    /// named in `$JOURNAL_STREAM` ("device:inode"); a child whose stderr was
    /// redirected elsewhere inherits the variable, so its presence alone is
    /// not enough (systemd's JOURNAL_NATIVE_PROTOCOL.md).
    static func resolve(_ format: LogFormat, environment: [String: String] = ProcessInfo.processInfo.environment) -> Output {
        switch format {
        case .journal: return .journal
        case .logfmt: return .logfmt
        case .json: return .json
        case .auto:
            guard let stream = environment["JOURNAL_STREAM"] else { return .logfmt }
            let parts = stream.split(separator: ":").compactMap { UInt64($0) }
            var info = stat()
            guard parts.count == 2, fstat(2, &info) == 0 else { return .journal }
            return UInt64(info.st_dev) == parts[0] && UInt64(info.st_ino) == parts[1] ? .journal : .logfmt
        }
    }

    let label: String
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String) { self.label = label }

    /// Per-logger levels are not used: one level for the whole daemon.
    var logLevel: Logger.Level {
        get { Self.level }
        set { Self.level = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        guard event.level >= Self.level else { return }
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let line = Self.format(level: event.level, message: "\(event.message)", fields: fields, output: Self.output, date: Date())
        Self.write(line)
    }

    static func format(level: Logger.Level, message: String, fields: Logger.Metadata, output: Output, date: Date) -> String {
        let sorted = fields.sorted { $0.key < $1.key }
        switch output {
        case .journal:
            // A newline in a message would start a new journal entry at the
            // default priority: keep an entry on one line.
            var line = "<\(priority(level))>" + message.replacingOccurrences(of: "\n", with: "\\n")
            for (key, value) in sorted { line += " \(key)=\(logfmtValue("\(value)"))" }
            return line + "\n"
        case .logfmt:
            var line = "time=\(timestamp(date)) level=\(level.rawValue) msg=\(logfmtValue(message))"
            for (key, value) in sorted { line += " \(key)=\(logfmtValue("\(value)"))" }
            return line + "\n"
        case .json:
            var line = "{\"time\":\(jsonString(timestamp(date))),\"level\":\(jsonString(level.rawValue)),\"msg\":\(jsonString(message))"
            for (key, value) in sorted where !["time", "level", "msg"].contains(key) {
                line += ",\(jsonString(key)):\(jsonString("\(value)"))"
            }
            return line + "}\n"
        }
    }

    /// syslog priorities as sd-daemon.h numbers them.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// logfmt quotes only when needed (brandur.org/logfmt): spaces, quotes,
    /// '=' or control characters.
    static func logfmtValue(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || $0.value < 0x20 }
        guard needsQuotes else { return value }
        return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n").replacingOccurrences(of: "\t", with: "\\t") + "\""
    }

    static func jsonString(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    static func timestamp(_ date: Date) -> String { JSONValue.timestamp(date) }

    /// One write(2) per entry, under a lock, so lines from the loop thread
    /// and the group queues never interleave.
    static func write(_ line: String) {
        state.withLock { _ in
            var bytes = Array(line.utf8)
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress! + offset, $0.count - offset) }
                if written < 0 { if errno == EINTR { continue } else { return } }
                offset += written
            }
            bytes.removeAll()
        }
    }
}

/// The handler's process-wide settings behind a lock.
private final class LogState: @unchecked Sendable {
    struct Values {
        var level: Logger.Level = .info
        var output: DaemonLogHandler.Output = .logfmt
    }

    private let lock = NSLock()
    private var values = Values()

    func withLock<T>(_ body: (inout Values) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&values)
    }
}
