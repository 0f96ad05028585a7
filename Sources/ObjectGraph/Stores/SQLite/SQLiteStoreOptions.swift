import Foundation

/// The SQLite-only store options (PC-35a–c), checked once before the store
/// touches its file and applied to each connection it opens.
///
/// - `NSSQLitePragmasOption`: pragma name → value, both strings, run as
///   `PRAGMA name = value` when the store opens. Only pragmas on a fixed list
///   are accepted: ones that tune speed, durability, memory or how far the
///   file may grow (`max_page_count`, per connection: a write past it fails
///   with SQLITE_FULL, as on a full disk) and cannot break Core Data's
///   layout or other processes' view of the file (`writable_schema`,
///   `query_only` and the like are refused). Values
///   are restricted to letters, digits, `_`, `-` and `.`, so a value cannot
///   carry more SQL. On a read-only store, pragmas that would write the file
///   (`journal_mode`, `auto_vacuum`, `page_size`) are skipped.
/// - `NSSQLiteAnalyzeOption`: `ANALYZE` when a writable store opens.
/// - `NSSQLiteManualVacuumOption`: `VACUUM` when a writable store opens
///   (Core Data: "when the store is added to the coordinator").
///
/// ```swift
/// let store = SQLiteStore(model: model, configurationName: nil, url: url, options: [
///     SQLiteStoreOptions.pragmasKey: ["synchronous": "FULL", "cache_size": "-8000"],
///     SQLiteStoreOptions.analyzeKey: true,
/// ])
/// try store.load()   // 134080 naming the option if a pragma is refused
/// ```
public struct SQLiteStoreOptions: Equatable, Sendable {
    public static let pragmasKey = "NSSQLitePragmasOption"
    public static let analyzeKey = "NSSQLiteAnalyzeOption"
    public static let manualVacuumKey = "NSSQLiteManualVacuumOption"

    /// Pragmas a store accepts. `fullfsync` and `checkpoint_fullfsync` are
    /// macOS-only in effect; SQLite accepts and ignores them on Linux.
    public static let allowedPragmas: Set<String> = [
        "auto_vacuum", "automatic_index", "cache_size", "cache_spill", "cell_size_check", "checkpoint_fullfsync",
        "fullfsync", "journal_mode", "journal_size_limit", "max_page_count", "mmap_size", "page_size", "secure_delete",
        "synchronous", "temp_store", "threads", "wal_autocheckpoint",
    ]
    /// Pragmas that change the file, skipped on read-only stores.
    static let writingPragmas: Set<String> = ["auto_vacuum", "journal_mode", "page_size"]

    /// The pragmas to run, sorted by name so every open runs them in the same order.
    public var pragmas: [(name: String, value: String)]
    public var analyze: Bool
    public var manualVacuum: Bool

    /// No pragmas, no ANALYZE, no VACUUM.
    public init() {
        pragmas = []
        analyze = false
        manualVacuum = false
    }

    /// Reads the options from a store's options dictionary.
    /// - Throws: 134080 (`persistentStoreOpen`) naming the option, for a
    ///   pragmas value that is not a dictionary of strings, a pragma not on
    ///   `allowedPragmas`, or a value with characters other than letters,
    ///   digits, `_`, `-` and `.`.
    public init(_ options: [String: Any]) throws {
        analyze = Self.flag(options[Self.analyzeKey])
        manualVacuum = Self.flag(options[Self.manualVacuumKey])
        pragmas = []
        guard let raw = options[Self.pragmasKey] else { return }
        guard let dictionary = raw as? [String: Any] else {
            throw Self.invalid("must be a dictionary of pragma name to string value, got \(type(of: raw))")
        }
        for (name, value) in dictionary {
            let key = name.lowercased()
            guard Self.allowedPragmas.contains(key) else {
                throw Self.invalid("pragma '\(name)' is not allowed (allowed: \(Self.allowedPragmas.sorted().joined(separator: ", ")))")
            }
            guard let text = value as? String else {
                throw Self.invalid("the value of pragma '\(name)' must be a string, got \(type(of: value))")
            }
            guard !text.isEmpty, text.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "_-.".unicodeScalars.contains($0)) }) else {
                throw Self.invalid("the value '\(text)' of pragma '\(name)' may only hold letters, digits, '_', '-' and '.'")
            }
            pragmas.append((key, text))
        }
        pragmas.sort { $0.name < $1.name }
    }

    public static func == (a: SQLiteStoreOptions, b: SQLiteStoreOptions) -> Bool {
        a.analyze == b.analyze && a.manualVacuum == b.manualVacuum
            && a.pragmas.map(\.name) == b.pragmas.map(\.name) && a.pragmas.map(\.value) == b.pragmas.map(\.value)
    }

    /// Runs the pragmas on a newly opened connection.
    func applyPragmas(to connection: SQLiteConnection, writable: Bool) throws {
        for (name, value) in pragmas where writable || !Self.writingPragmas.contains(name) {
            _ = try connection.query("PRAGMA \(name) = \(value)")
        }
    }

    /// ANALYZE and VACUUM, asked for and possible: a read-only store never runs them.
    func maintain(_ connection: SQLiteConnection, writable: Bool) throws {
        guard writable else { return }
        if manualVacuum { try connection.execute("VACUUM") }
        if analyze { try connection.execute("ANALYZE") }
    }

    private static func flag(_ value: Any?) -> Bool {
        switch value {
        case let b as Bool: return b
        case let n as Int: return n != 0
        case let n as NSNumber: return n.boolValue
        case let s as String: return ["1", "yes", "true"].contains(s.lowercased())
        default: return false
        }
    }

    private static func invalid(_ reason: String) -> CoreDataError {
        CoreDataError(.persistentStoreOpen, "\(pragmasKey): \(reason)")
    }
}
