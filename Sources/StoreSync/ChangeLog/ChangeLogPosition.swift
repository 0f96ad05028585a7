import Foundation

/// One history the change log reads: a store of a sync group, the group's
/// hub, or a lone store file read without a group.
///
/// Its `key` names it in a `ChangeLogPosition`: `GROUP/STORE` for a store of
/// a group, `GROUP` alone for the group's hub (the hub's history is the
/// group's own), and `STORE` for a lone store file.
///
/// ```swift
/// let source = ChangeLogSource(group: "notes", store: "app")
/// print(source.key)            // notes/app
/// print(ChangeLogSource(group: "notes", store: nil).key)   // notes (the hub)
/// ```
public struct ChangeLogSource: Hashable, Sendable, CustomStringConvertible {
    /// The sync group; nil for a lone store file.
    public var group: String?
    /// The store's name; nil for the group's hub.
    public var store: String?

    public init(group: String?, store: String?) {
        precondition(group != nil || store != nil, "a change log source is a store, a group's hub, or both names")
        self.group = group
        self.store = store
    }

    public var isHub: Bool { store == nil }

    public var key: String {
        [group, store].compactMap { $0.map(ChangeLogPosition.escape) }.joined(separator: "/")
    }

    /// For people: `notes/app`, `notes/hub`, `app`.
    public var description: String {
        store == nil ? "\(group ?? "")/hub" : key
    }
}

/// Where a change-log reader stands: for each source, the history position
/// it has read through. Resuming after a position gives every transaction
/// committed after it in each source exactly once: no gap, no repeat, even
/// across processes, restarts and new writers (positions only grow in a
/// store's history).
///
/// Text form (stable, what `storesyncctl log --after` takes and `--json`
/// prints as `cursor`): `KEY:POSITION` for each source, comma-separated,
/// sorted by key, e.g. `notes:120,notes/app:45,notes/web:33`. A source that
/// is not named starts at its beginning; the empty text is the start of
/// everything. Characters other than letters, digits, `_`, `.` and `-` in a
/// name are percent-escaped (configuration names never need it).
///
/// ```swift
/// let position = try ChangeLogPosition(parsing: "notes:120,notes/app:45")
/// print(position[ChangeLogSource(group: "notes", store: "app")])   // 45
/// ```
public struct ChangeLogPosition: Equatable, Sendable, CustomStringConvertible {
    /// Source key → history position read through.
    public var positions: [String: Int64]

    public init(positions: [String: Int64] = [:]) { self.positions = positions }

    /// The start of every source.
    public static let start = ChangeLogPosition()

    /// - Throws: `ChangeLogError.badPosition` naming the part that is wrong.
    public init(parsing text: String) throws {
        positions = [:]
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return }
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let part = part.trimmingCharacters(in: .whitespaces)
            guard let colon = part.lastIndex(of: ":"), colon != part.startIndex else {
                throw ChangeLogError.badPosition(text, "'\(part)' is not KEY:POSITION")
            }
            let key = String(part[..<colon])
            guard let position = Int64(part[part.index(after: colon)...]), position >= 0 else {
                throw ChangeLogError.badPosition(text, "'\(part[part.index(after: colon)...])' in '\(part)' is not a position (a whole number, 0 or more)")
            }
            guard key.split(separator: "/", omittingEmptySubsequences: false).count <= 2,
                  !key.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty),
                  key.removingPercentEncoding != nil else {
                throw ChangeLogError.badPosition(text, "'\(key)' is not a source (GROUP, GROUP/STORE or STORE)")
            }
            guard positions[key] == nil else { throw ChangeLogError.badPosition(text, "source '\(key)' appears twice") }
            positions[key] = position
        }
    }

    public subscript(source: ChangeLogSource) -> Int64 {
        get { positions[source.key] ?? 0 }
        set { positions[source.key] = newValue }
    }

    public var description: String {
        positions.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
    }

    private static let plain = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")

    static func escape(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: plain) ?? name
    }
}

/// What the change log refuses or cannot do, naming the input or file.
public enum ChangeLogError: Error, CustomStringConvertible, Equatable {
    /// A position text that does not parse: the text and what is wrong.
    case badPosition(String, String)
    /// A filter that cannot apply to these sources, and why.
    case badFilter(String)
    /// A change-log entry in JSON (the daemon's `log` stream) that cannot be read back.
    case badEntry(String)

    public var description: String {
        switch self {
        case .badPosition(let text, let why): return "bad change-log position '\(text)': \(why)"
        case .badFilter(let why): return why
        case .badEntry(let why): return "bad change-log entry: \(why)"
        }
    }
}
