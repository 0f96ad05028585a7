// Over 600 lines, not split yet (issue 31): the TOML reading and the checks
// with their error locations are one pass over the file; the split planned
// is the `[group]` and `[hub]` tables into files of their own.
import Foundation
import Logging
import ObjectGraph
import StoreSync
import TOMLKit

/// A configuration file that cannot be used: the file, the key (a dotted
/// path such as `group[1].store[2].policy`, arrays of tables counted from 1
/// in file order) and why. Printed as `FILE: key KEY: reason`, the form
/// `--check-config` and a refused reload report, so an administrator can go
/// straight to the line.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var file: String
    public var key: String
    public var reason: String

    public init(file: String, key: String, reason: String) {
        self.file = file
        self.key = key
        self.reason = reason
    }

    public var description: String { "\(file): key \(key): \(reason)" }
}

/// The log output formats (`log_format`, `--log-format`).
public enum LogFormat: String, CaseIterable, Sendable {
    /// journald when `$JOURNAL_STREAM` is stderr, logfmt otherwise.
    case auto
    /// `<N>` priority prefix, no timestamp: journald adds its own.
    case journal
    /// `time=… level=… msg=…` for terminals and plain files.
    case logfmt
    /// One JSON object per line.
    case json
}

/// Settings given on the command line; each one wins over the file.
public struct ConfigurationOverrides: Sendable {
    public var stateDirectory: String?
    public var runtimeDirectory: String?
    public var logLevel: Logger.Level?
    public var logFormat: LogFormat?

    public init(stateDirectory: String? = nil, runtimeDirectory: String? = nil, logLevel: Logger.Level? = nil, logFormat: LogFormat? = nil) {
        self.stateDirectory = stateDirectory
        self.runtimeDirectory = runtimeDirectory
        self.logLevel = logLevel
        self.logFormat = logFormat
    }
}

/// One store of a group, validated.
public struct StoreSettings: Equatable {
    public var name: String
    public var path: URL
    public var policy: SyncPolicy
    public var configuration: String?
}

/// A group's `[group.export]` table, validated: where and how the daemon
/// keeps the group's external records (docs/EXTERNAL-RECORDS.md, "Daemon").
///
/// ```toml
/// [group.export]
/// directory = "/srv/notes/records"
/// format = "xml"
/// plain_text = true
/// ```
public struct ExportSettings: Equatable {
    /// The formats `format` takes: Core Data's "xml" and "binary" plus "json".
    public static let formats = ["json", "xml", "binary"]

    public var directory: URL
    /// One of `formats`; the daemon maps it to ObjectGraph's `ExternalRecordFormat`.
    public var format: String
    /// nil: the format's own ("json", "xml", "plist").
    public var fileExtension: String?
    public var writesPlainText: Bool
    public var writesChangeFeed: Bool
    public var exportsAllAttributesWhenNoneFlagged: Bool

    public init(directory: URL, format: String = "json", fileExtension: String? = nil, writesPlainText: Bool = false,
                writesChangeFeed: Bool = false, exportsAllAttributesWhenNoneFlagged: Bool = true) {
        self.directory = directory
        self.format = format
        self.fileExtension = fileExtension
        self.writesPlainText = writesPlainText
        self.writesChangeFeed = writesChangeFeed
        self.exportsAllAttributesWhenNoneFlagged = exportsAllAttributesWhenNoneFlagged
    }
}

/// Where a group's hub lives: `hub` absent, the embedded hub in the state
/// directory; `hub = "postgresql://…"`, a PostgreSQL database that the
/// daemons of several hosts share (docs/DAEMON.md, "PostgreSQL hub").
public enum HubSettings: Equatable {
    case embedded
    case postgreSQL(PostgreSQLHubSettings)

    /// The PostgreSQL settings, nil for the embedded hub.
    public var postgreSQL: PostgreSQLHubSettings? {
        if case .postgreSQL(let settings) = self { return settings }
        return nil
    }
}

/// A group's `hub = "postgresql://…"` with `hub_password_file` and
/// `hub_poll_interval`, validated. The URI never holds a password (the
/// reader refuses one); it comes from the file, read at every connection so
/// a rotated password is picked up, or from libpq's own `PGPASSWORD` /
/// `PGPASSFILE` / `~/.pgpass`.
///
/// ```swift
/// let settings = PostgreSQLHubSettings(uri: "postgresql://sync@db.example:5432/notes", passwordFile: URL(fileURLWithPath: "/etc/storesyncd/db.pw"))
/// let conninfo = try settings.conninfo()   // "postgresql://sync@db.example:5432/notes?password=…&connect_timeout=10"
/// ```
public struct PostgreSQLHubSettings: Equatable, Sendable {
    /// The URI as configured (no password in it).
    public var uri: String
    public var passwordFile: URL?
    /// Seconds between the slow fallback polls (`.hub` jobs) under LISTEN/NOTIFY.
    public var pollInterval: TimeInterval
    /// How long libpq may take to connect when the URI does not say
    /// (`connect_timeout`): libpq's own default is to wait forever, and a
    /// connection attempt holds the group's queue.
    public static let defaultConnectTimeout = 10

    public init(uri: String, passwordFile: URL? = nil, pollInterval: TimeInterval = 30) {
        self.uri = uri
        self.passwordFile = passwordFile
        self.pollInterval = pollInterval
    }

    /// The server for messages and `status`: `host:port/db` from the URI
    /// (libpq's defaults where it says nothing), never user or password.
    public var serverDescription: String {
        let parts = Self.parse(uri)
        let host = parts.query["host"] ?? parts.host.map { $0.removingPercentEncoding ?? $0 } ?? "localhost"
        let port = parts.query["port"] ?? parts.port ?? "5432"
        let user = parts.query["user"] ?? parts.user
        let database = parts.query["dbname"] ?? parts.database.flatMap { $0.isEmpty ? nil : ($0.removingPercentEncoding ?? $0) } ?? user ?? "(default)"
        return "\(host):\(port)/\(database)"
    }

    /// The connection string handed to libpq: the URI, plus the password
    /// file's first line as a `password` query parameter (percent-encoded;
    /// libpq takes any connection keyword as a URI parameter) and
    /// `connect_timeout` when the URI has none.
    /// - Throws: `ConfigurationError`-like text naming the file when it
    ///   cannot be read or its first line is empty.
    public func conninfo() throws -> String {
        var extra: [String] = []
        if let passwordFile {
            let text: String
            do {
                text = try String(contentsOf: passwordFile, encoding: .utf8)
            } catch {
                throw HubPasswordError(file: passwordFile.path, reason: "cannot read it: \((error as NSError).localizedDescription)")
            }
            // "\r\n" is one Character: isNewline splits LF and CRLF files alike.
            let password = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first.map(String.init) ?? ""
            guard !password.isEmpty else { throw HubPasswordError(file: passwordFile.path, reason: "its first line (the password) is empty") }
            extra.append("password=" + Self.percentEncode(password))
        }
        if Self.parse(uri).query["connect_timeout"] == nil { extra.append("connect_timeout=\(Self.defaultConnectTimeout)") }
        guard !extra.isEmpty else { return uri }
        return uri + (uri.contains("?") ? "&" : "?") + extra.joined(separator: "&")
    }

    /// Everything but unreserved characters percent-encoded, so `&`, `=`,
    /// `%`, `#` and spaces in a password survive the query string.
    static func percentEncode(_ text: String) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    /// The parts of a `postgresql://[user[:password]@][host][:port][/db][?k=v&…]`
    /// URI that matter here (one host; a list of hosts keeps its first for messages).
    struct Parts {
        var scheme: String?
        var user: String?
        var hasPassword = false
        var host: String?
        var port: String?
        var database: String?
        var query: [String: String] = [:]
    }

    static let schemes = ["postgresql://", "postgres://"]

    static func parse(_ uri: String) -> Parts {
        var parts = Parts()
        guard let scheme = schemes.first(where: { uri.hasPrefix($0) }) else { return parts }
        parts.scheme = scheme
        var rest = Substring(uri.dropFirst(scheme.count))
        if let mark = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: mark)...].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = String(kv[0]).removingPercentEncoding ?? String(kv[0])
                let value = kv.count > 1 ? (String(kv[1]).removingPercentEncoding ?? String(kv[1])) : ""
                parts.query[key] = value
            }
            rest = rest[..<mark]
        }
        var authority = rest
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            parts.database = String(rest[rest.index(after: slash)...])
        }
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                parts.hasPassword = true
                parts.user = String(userInfo[..<colon]).removingPercentEncoding
            } else {
                parts.user = String(userInfo).removingPercentEncoding
            }
            if parts.user?.isEmpty == true { parts.user = nil }
        }
        // The first of a host list; "[::1]:5432" keeps its brackets.
        let first = authority.split(separator: ",", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        if first.hasPrefix("["), let close = first.firstIndex(of: "]") {
            parts.host = String(first[...close])
            let after = first[first.index(after: close)...]
            if after.hasPrefix(":") { parts.port = String(after.dropFirst()) }
        } else if let colon = first.lastIndex(of: ":") {
            parts.host = String(first[..<colon])
            parts.port = String(first[first.index(after: colon)...])
        } else {
            parts.host = first
        }
        if parts.host?.isEmpty == true { parts.host = nil }
        if parts.port?.isEmpty == true { parts.port = nil }
        return parts
    }
}

/// The hub's password file could not give a password (read at connection time).
public struct HubPasswordError: Error, CustomStringConvertible {
    public var file: String
    public var reason: String
    public var description: String { "hub_password_file \(file): \(reason)" }
}

/// One `[[group]]`, validated; its model is loaded.
public struct GroupSettings {
    public var name: String
    public var modelPath: URL
    public var model: ManagedObjectModel
    public var stores: [StoreSettings]
    /// `[group.export]`: nil when the group exports no records.
    public var export: ExportSettings?
    /// `hub`: embedded (the default) or PostgreSQL.
    public var hub: HubSettings = .embedded

    /// The engine's configuration: the hub lives in `<state>/<group>/`.
    public func syncConfiguration(stateDirectory: URL, historyRetention: TimeInterval) -> SyncGroupConfiguration {
        SyncGroupConfiguration(name: name, model: model, stateDirectory: stateDirectory.appendingPathComponent(name, isDirectory: true),
                               stores: stores.map { SyncStoreConfiguration(name: $0.name, url: $0.path, policy: $0.policy, configurationName: $0.configuration) },
                               historyRetention: historyRetention)
    }
}

/// The daemon's whole configuration: `storesyncd.toml` after defaults from
/// systemd's environment and overrides from the command line. The daemon runs
/// on it; `storesyncctl` reads the same file to find the control socket and,
/// when the daemon is not running, a group's stores and model.
///
/// ```swift
/// let configuration = try DaemonConfiguration.load(file: DaemonConfiguration.defaultPath())
/// for group in configuration.groups { print(group.name, group.stores.map(\.path.path)) }
/// ```
public struct DaemonConfiguration {
    /// The file it was read from (for messages and SIGHUP re-reads).
    public var file: String
    public var stateDirectory: URL
    public var runtimeDirectory: URL
    /// The control socket (`control_socket`, default `<runtime_directory>/control.sock`).
    public var controlSocket: URL
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    public var historyRetention: TimeInterval
    /// How often every group runs a round even without file events: a
    /// safety net for events inotify cannot see (network file systems,
    /// a watch limit reached, a directory replaced).
    public var rescanInterval: TimeInterval
    /// The least time between the starts of two rounds of one store. The
    /// first file event on an idle store starts a round at once; events
    /// during that round are coalesced into one follow-up round, started no
    /// sooner than this after it (until 2026-11 it was how long the files
    /// had to be quiet before a round started).
    public var debounce: TimeInterval
    /// `host_name`: this host's name in a shared (PostgreSQL) hub, which
    /// records stores as (host, store). Default: the machine's host name.
    /// It must stay the same across restarts: under a new name the hub
    /// sees new stores (the old name's cursors stay behind, unused).
    public var hostName: String
    public var groups: [GroupSettings]

    public static let topLevelKeys: Set<String> = ["state_directory", "runtime_directory", "log_level", "log_format",
                                            "history_retention", "rescan_interval", "debounce", "control_socket", "host_name", "group"]
    public static let groupKeys: Set<String> = ["name", "model", "store", "export", "hub", "hub_password_file", "hub_poll_interval"]
    public static let exportKeys: Set<String> = ["directory", "format", "extension", "plain_text", "change_feed",
                                                 "all_attributes_when_none_flagged"]
    public static let storeKeys: Set<String> = ["name", "path", "policy", "configuration"]

    /// The file read when `--config` is not given: systemd's
    /// `$CONFIGURATION_DIRECTORY` (from `ConfigurationDirectory=`), else `/etc/storesyncd`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let directory = firstPath(environment["CONFIGURATION_DIRECTORY"]) ?? "/etc/storesyncd"
        return (directory as NSString).appendingPathComponent("storesyncd.toml")
    }

    /// systemd passes several directories colon-separated when a unit names
    /// several; the first is this daemon's.
    public static func firstPath(_ value: String?) -> String? {
        guard let value, let first = value.split(separator: ":").first, !first.isEmpty else { return nil }
        return String(first)
    }

    /// The machine's host name (gethostname(2)), the default `host_name`.
    public static func machineHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(cString: buffer)
        return name.isEmpty ? "localhost" : name
    }

    /// Reads and validates a file. Every relative path in it is taken
    /// relative to the file's directory, so a config and its stores can move
    /// together (the demo relies on it).
    public static func load(file: String, overrides: ConfigurationOverrides = ConfigurationOverrides(),
                     environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DaemonConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw ConfigurationError(file: file, key: "(file)", reason: "cannot read the file: \((error as NSError).localizedDescription)")
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError(file: file, key: "(syntax)",
                                     reason: "line \(error.source.begin.line), column \(error.source.begin.column): \(error.description)")
        }
        var reader = Reader(file: file, base: URL(fileURLWithPath: file).deletingLastPathComponent())
        return try reader.configuration(table, overrides: overrides, environment: environment)
    }
}

/// Walks the TOML table, naming the key of every problem.
private struct Reader {
    let file: String
    let base: URL

    func fail(_ key: String, _ reason: String) -> ConfigurationError {
        ConfigurationError(file: file, key: key, reason: reason)
    }

    func checkKeys(_ table: TOMLTable, allowed: Set<String>, prefix: String) throws {
        for key in table.keys.sorted() where !allowed.contains(key) {
            throw fail(prefix + key, "unknown key (expected one of \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    func string(_ table: TOMLTable, _ key: String, prefix: String, required: Bool) throws -> String? {
        guard let value = table[key] else {
            if required { throw fail(prefix + key, "missing (required)") }
            return nil
        }
        guard let string = value.string else { throw fail(prefix + key, "expected a string, found \(value.type)") }
        guard !string.isEmpty else { throw fail(prefix + key, "must not be empty") }
        return string
    }

    func bool(_ table: TOMLTable, _ key: String, prefix: String) throws -> Bool? {
        guard let value = table[key] else { return nil }
        guard let bool = value.bool else { throw fail(prefix + key, "expected true or false, found \(value.type)") }
        return bool
    }

    func path(_ string: String) -> URL {
        let expanded = (string as NSString).expandingTildeInPath
        return expanded.hasPrefix("/") ? URL(fileURLWithPath: expanded).standardizedFileURL
            : base.appendingPathComponent(expanded).standardizedFileURL
    }

    /// A duration: an integer number of seconds, or a string such as
    /// `"90s"`, `"15m"`, `"12h"`, `"7d"`.
    func duration(_ table: TOMLTable, _ key: String, prefix: String = "") throws -> TimeInterval? {
        guard let value = table[key] else { return nil }
        if let seconds = value.int {
            guard seconds >= 0 else { throw fail(prefix + key, "must not be negative") }
            return TimeInterval(seconds)
        }
        if let seconds = value.double, value.type == .double {
            guard seconds >= 0 else { throw fail(prefix + key, "must not be negative") }
            return seconds
        }
        guard let text = value.string else { throw fail(prefix + key, "expected seconds or a duration string such as \"7d\", found \(value.type)") }
        guard let seconds = Self.parseDuration(text) else {
            throw fail(prefix + key, "'\(text)' is not a duration (a number followed by ms, s, m, h or d, e.g. \"7d\")")
        }
        return seconds
    }

    static func parseDuration(_ text: String) -> TimeInterval? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)
            // "5ms" also ends in "s": take the longest unit that leaves a number.
            if let value = Double(number), value >= 0 { return value * factor }
        }
        return nil
    }

    mutating func configuration(_ table: TOMLTable, overrides: ConfigurationOverrides,
                                environment: [String: String]) throws -> DaemonConfiguration {
        try checkKeys(table, allowed: DaemonConfiguration.topLevelKeys, prefix: "")

        // Precedence: flag, then the file, then systemd's environment, then
        // the FHS default; an explicit setting always beats an inherited one.
        let stateSetting = try string(table, "state_directory", prefix: "", required: false)
        let runtimeSetting = try string(table, "runtime_directory", prefix: "", required: false)
        let state = overrides.stateDirectory.map(path)
            ?? stateSetting.map(path)
            ?? DaemonConfiguration.firstPath(environment["STATE_DIRECTORY"]).map(path)
            ?? URL(fileURLWithPath: "/var/lib/storesyncd")
        let runtime = overrides.runtimeDirectory.map(path)
            ?? runtimeSetting.map(path)
            ?? DaemonConfiguration.firstPath(environment["RUNTIME_DIRECTORY"]).map(path)
            ?? URL(fileURLWithPath: "/run/storesyncd")

        let socket = try string(table, "control_socket", prefix: "", required: false).map(path)
            ?? runtime.appendingPathComponent("control.sock")
        // sun_path holds 108 bytes with its terminating NUL (unix(7)).
        guard socket.path.utf8.count < 108 else {
            throw fail("control_socket", "\(socket.path) is \(socket.path.utf8.count) bytes long; a Unix socket path must be under 108")
        }

        var level = Logger.Level.info
        if let text = try string(table, "log_level", prefix: "", required: false) {
            guard let parsed = Logger.Level(rawValue: text) else {
                throw fail("log_level", "'\(text)' is not a level (expected one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            level = parsed
        }
        var format = LogFormat.auto
        if let text = try string(table, "log_format", prefix: "", required: false) {
            guard let parsed = LogFormat(rawValue: text) else {
                throw fail("log_format", "'\(text)' is not a format (expected one of \(LogFormat.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            format = parsed
        }
        let retention = try duration(table, "history_retention") ?? 7 * 86400
        let rescan = try duration(table, "rescan_interval") ?? 30
        guard rescan >= 1 else { throw fail("rescan_interval", "must be at least 1 second (it is a safety net, not a polling loop)") }
        let debounce = try duration(table, "debounce") ?? 0.005
        guard debounce <= 10 else {
            throw fail("debounce", "must be at most 10 seconds (it is the least time between two rounds of one store; changes would wait that long)")
        }
        let hostName = try string(table, "host_name", prefix: "", required: false) ?? DaemonConfiguration.machineHostName()
        try checkName(hostName, key: "host_name")

        var groups: [GroupSettings] = []
        if let value = table["group"] {
            guard let array = value.array else { throw fail("group", "expected an array of tables ([[group]]), found \(value.type)") }
            for (index, element) in array.enumerated() {
                let prefix = "group[\(index + 1)]."
                guard let groupTable = element.table else { throw fail("group[\(index + 1)]", "expected a table, found \(element.type)") }
                let group = try self.group(groupTable, prefix: prefix)
                if groups.contains(where: { $0.name == group.name }) {
                    throw fail(prefix + "name", "group '\(group.name)' is defined twice")
                }
                groups.append(group)
            }
        }
        guard !groups.isEmpty else { throw fail("group", "no [[group]] defined: there is nothing to sync") }
        // Two groups writing one store would push to each other forever.
        var owners: [String: String] = [:]
        for (gi, group) in groups.enumerated() {
            for (si, store) in group.stores.enumerated() {
                if let other = owners[store.path.path] {
                    throw fail("group[\(gi + 1)].store[\(si + 1)].path", "\(store.path.path) is already store \(other)")
                }
                owners[store.path.path] = "\(store.name) of group \(group.name)"
            }
        }

        return DaemonConfiguration(file: file, stateDirectory: state, runtimeDirectory: runtime, controlSocket: socket,
                                   logLevel: overrides.logLevel ?? level, logFormat: overrides.logFormat ?? format,
                                   historyRetention: retention, rescanInterval: rescan, debounce: debounce, hostName: hostName, groups: groups)
    }

    /// Names become directory names (`<state>/<group>/`) and log fields.
    func checkName(_ name: String, key: String) throws {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
        guard name.unicodeScalars.allSatisfy(allowed.contains), name != ".", name != ".." else {
            throw fail(key, "'\(name)' may contain only letters, digits, '_', '.' and '-'")
        }
    }

    func group(_ table: TOMLTable, prefix: String) throws -> GroupSettings {
        try checkKeys(table, allowed: DaemonConfiguration.groupKeys, prefix: prefix)
        let name = try string(table, "name", prefix: prefix, required: true)!
        try checkName(name, key: prefix + "name")
        let modelPath = path(try string(table, "model", prefix: prefix, required: true)!)
        let known = ["xcdatamodeld", "xcdatamodel", "momd", "mom"]
        guard known.contains(modelPath.pathExtension) else {
            throw fail(prefix + "model", "\(modelPath.path) is not a model (expected a path ending in .\(known.joined(separator: ", ."))")
        }
        guard FileManager.default.fileExists(atPath: modelPath.path) else { throw fail(prefix + "model", "\(modelPath.path) does not exist") }
        let model: ManagedObjectModel
        do {
            model = try ManagedObjectModel(contentsOf: modelPath)
        } catch {
            throw fail(prefix + "model", "cannot load \(modelPath.path): \(error)")
        }
        guard !model.entities.isEmpty else { throw fail(prefix + "model", "\(modelPath.path) has no entities") }

        guard let value = table["store"] else { throw fail(prefix + "store", "missing (a group needs two or more [[group.store]] tables)") }
        guard let array = value.array else { throw fail(prefix + "store", "expected an array of tables ([[group.store]]), found \(value.type)") }
        var stores: [StoreSettings] = []
        for (index, element) in array.enumerated() {
            let storePrefix = "\(prefix)store[\(index + 1)]."
            guard let storeTable = element.table else { throw fail("\(prefix)store[\(index + 1)]", "expected a table, found \(element.type)") }
            let store = try self.store(storeTable, prefix: storePrefix, model: model)
            if stores.contains(where: { $0.name == store.name }) {
                throw fail(storePrefix + "name", "store '\(store.name)' is defined twice in group '\(name)'")
            }
            if stores.contains(where: { $0.path == store.path }) {
                throw fail(storePrefix + "path", "\(store.path.path) is already store '\(stores.first { $0.path == store.path }!.name)'")
            }
            stores.append(store)
        }
        let hub = try self.hub(table, prefix: prefix, group: name)
        // A shared hub syncs a single local store with the other hosts' stores.
        let least = hub == .embedded ? 2 : 1
        guard stores.count >= least else {
            throw fail(prefix + "store", "group '\(name)' has \(stores.count) store\(stores.count == 1 ? "" : "s"); syncing needs "
                       + (least == 2 ? "two or more (or one, with a PostgreSQL hub shared with other hosts)" : "one or more"))
        }
        var export: ExportSettings?
        if let value = table["export"] {
            guard let exportTable = value.table else {
                throw fail(prefix + "export", "expected a table ([group.export] under the group's [[group]]), found \(value.type)")
            }
            export = try self.export(exportTable, prefix: prefix + "export.", stores: stores)
            if hub != .embedded {
                // The exporter reads the embedded hub's own history (SyncRecordExporter).
                throw fail(prefix + "export", "group '\(name)': external records are written from an embedded hub only; not yet from a PostgreSQL hub")
            }
        }
        return GroupSettings(name: name, modelPath: modelPath, model: model, stores: stores, export: export, hub: hub)
    }

    /// `hub`, `hub_password_file`, `hub_poll_interval`. A password in the
    /// URI is refused without being echoed: configuration files get copied,
    /// pasted into tickets and read by storesyncctl's users.
    func hub(_ table: TOMLTable, prefix: String, group: String) throws -> HubSettings {
        guard let uri = try string(table, "hub", prefix: prefix, required: false) else {
            for key in ["hub_password_file", "hub_poll_interval"] where table[key] != nil {
                throw fail(prefix + key, "group '\(group)' has no hub = \"postgresql://…\"; \(key) applies only to a PostgreSQL hub")
            }
            return .embedded
        }
        let parts = PostgreSQLHubSettings.parse(uri)
        guard parts.scheme != nil else {
            throw fail(prefix + "hub", "group '\(group)': expected a PostgreSQL URI (postgresql://user@host:port/database, or postgres://…); leave hub out for the embedded hub")
        }
        // The group's schema is "storesync_<group>": an identifier of at most 63 bytes.
        guard group.count <= 53, !group.contains(".") else {
            throw fail(prefix + "name", "group '\(group)' has a PostgreSQL hub, whose schema it names: use 1 to 53 letters, digits, '_' or '-' (no '.')")
        }
        if parts.hasPassword || parts.query.keys.contains("password") {
            throw fail(prefix + "hub", "group '\(group)': the URI contains a password (\(parts.hasPassword ? "user:password@" : "a password= parameter"); not shown); "
                       + "never put it in the configuration: use hub_password_file, or libpq's PGPASSWORD or PGPASSFILE (~/.pgpass)")
        }
        var passwordFile: URL?
        if let file = try string(table, "hub_password_file", prefix: prefix, required: false) {
            let url = path(file)
            var isDirectory: ObjCBool = false
            // Only that it is there: storesyncctl reads this file too, often as
            // a user who may not read the password; the daemon reads it at
            // every connection and reports a failure as the hub's.
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
                throw fail(prefix + "hub_password_file", "\(url.path) does not exist")
            }
            guard !isDirectory.boolValue else { throw fail(prefix + "hub_password_file", "\(url.path) is a directory") }
            passwordFile = url
        }
        let poll = try duration(table, "hub_poll_interval", prefix: prefix) ?? 30
        guard poll >= 1 else {
            throw fail(prefix + "hub_poll_interval", "must be at least 1 second (it is the slow fallback under LISTEN/NOTIFY, not a polling loop)")
        }
        return .postgreSQL(PostgreSQLHubSettings(uri: uri, passwordFile: passwordFile, pollInterval: poll))
    }

    /// `[group.export]`. The directory itself may be missing (it is created
    /// at the first export) or unwritable for a while (the exporter catches
    /// up later): only what can never work is refused here.
    func export(_ table: TOMLTable, prefix: String, stores: [StoreSettings]) throws -> ExportSettings {
        try checkKeys(table, allowed: DaemonConfiguration.exportKeys, prefix: prefix)
        let directory = path(try string(table, "directory", prefix: prefix, required: true)!)
        guard directory.path != "/" else { throw fail(prefix + "directory", "the root directory cannot be a records directory") }
        for store in stores where store.path.deletingLastPathComponent().standardizedFileURL.path == directory.path {
            // The stores' directory is watched: every record written would
            // be a file event, and a rebuild would look at the store files.
            throw fail(prefix + "directory", "\(directory.path) holds store \(store.name); records need a directory of their own")
        }
        var format = "json"
        if let text = try string(table, "format", prefix: prefix, required: false) {
            guard ExportSettings.formats.contains(text) else {
                throw fail(prefix + "format", "'\(text)' is not a record format (expected one of \(ExportSettings.formats.joined(separator: ", ")))")
            }
            format = text
        }
        let fileExtension = try string(table, "extension", prefix: prefix, required: false)
        if let fileExtension {
            let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
            guard fileExtension.unicodeScalars.allSatisfy(allowed.contains) else {
                throw fail(prefix + "extension", "'\(fileExtension)' may contain only letters, digits, '_' and '-' (no dot: \"json\", not \".json\")")
            }
            guard fileExtension != "txt" && fileExtension != "tmp" else {
                throw fail(prefix + "extension", "'\(fileExtension)' is taken (.txt is the plain-text rendering, .tmp a record being written)")
            }
        }
        return ExportSettings(directory: directory, format: format, fileExtension: fileExtension,
                              writesPlainText: try bool(table, "plain_text", prefix: prefix) ?? false,
                              writesChangeFeed: try bool(table, "change_feed", prefix: prefix) ?? false,
                              exportsAllAttributesWhenNoneFlagged: try bool(table, "all_attributes_when_none_flagged", prefix: prefix) ?? true)
    }

    func store(_ table: TOMLTable, prefix: String, model: ManagedObjectModel) throws -> StoreSettings {
        try checkKeys(table, allowed: DaemonConfiguration.storeKeys, prefix: prefix)
        let name = try string(table, "name", prefix: prefix, required: true)!
        try checkName(name, key: prefix + "name")
        let url = path(try string(table, "path", prefix: prefix, required: true)!)
        var isDirectory: ObjCBool = false
        // The file itself may be missing (the engine creates or waits for
        // it); its directory must exist, or no file event could ever come.
        let directory = url.deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw fail(prefix + "path", "the directory \(directory) does not exist")
        }
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw fail(prefix + "path", "\(url.path) is a directory, not a SQLite store file")
        }
        let policyName = try string(table, "policy", prefix: prefix, required: true)!
        let policy: SyncPolicy
        do {
            policy = try SyncPolicy(configurationName: policyName)
        } catch {
            throw fail(prefix + "policy", "'\(policyName)' is not a policy (expected one of \(SyncPolicy.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let configuration = try string(table, "configuration", prefix: prefix, required: false)
        if let configuration, !model.configurations.contains(configuration) {
            let known = model.configurations.isEmpty ? "it has none" : "it has \(model.configurations.sorted().joined(separator: ", "))"
            throw fail(prefix + "configuration", "the model has no configuration '\(configuration)' (\(known))")
        }
        return StoreSettings(name: name, path: url, policy: policy, configuration: configuration)
    }
}
