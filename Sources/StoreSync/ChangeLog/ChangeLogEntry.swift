import Foundation

/// One committed transaction of one source's history, as the change log
/// shows it. See docs/CHANGELOG-FORMAT.md for the JSON form (`jsonObject`).
///
/// ```swift
/// while let entry = try log.next() {
///     print(entry.source, entry.position, entry.author ?? "(foreign writer)", entry.changes.count)
/// }
/// ```
public struct ChangeLogEntry: @unchecked Sendable {
    public var source: ChangeLogSource
    /// The transaction's position in its source's history (the position of
    /// its last change; Core Data's token).
    public var position: Int64
    /// Where a reader resumes to continue after this entry (`--after`).
    public var cursor: ChangeLogPosition
    public var timestamp: Date
    /// The context's `transactionAuthor`; nil for a foreign writer (SQL, a
    /// program not using ObjectGraph), whose consecutive commits are one
    /// transaction (docs/HISTORY.md).
    public var author: String?
    public var contextName: String?
    /// The ObjectGraph save's number; nil for a foreign writer.
    public var transactionNumber: Int64?
    /// Set when the sync engine wrote the transaction (author `storesync`).
    public var engineWrite: ChangeLogEngineWrite?
    /// The objects changed, in the order of their last row change.
    public var changes: [ChangeLogChange]
    /// Hub only: conflicts this transaction recorded or resolved.
    public var conflictEvents: [ChangeLogConflictEvent]
    /// Numbers of the conflicts this transaction is involved in (see
    /// `ChangeLogFilter.onlyConflicts` for the rule).
    public var conflicts: [Int64]
}

/// What the sync engine was doing when it wrote a transaction, read from
/// its context name (docs/SYNC.md).
public enum ChangeLogEngineWrite: Equatable, Sendable, CustomStringConvertible {
    /// A hub transaction applying a store's transactions (`pull:<store>`):
    /// a chunk of them, or one save of a large one; also a store's bootstrap.
    case pull(store: String)
    /// A store transaction writing the hub's changes through this hub
    /// position (`push:<position>`): one save of a push, which may take several.
    case push(hubPosition: Int64)
    /// A hub transaction of no store (`hub`): a conflict's resolution, or the
    /// engine's own bookkeeping after a push.
    case hub
    /// Authored `storesync` with a context name the engine does not write.
    case other(String?)

    init(contextName: String?, isHub: Bool) {
        if let name = contextName {
            if isHub, let store = EmbeddedHub.origin(ofContextName: name) { self = .pull(store: store); return }
            if !isHub, let position = SyncGroup.pushedPosition(name) { self = .push(hubPosition: position); return }
            if isHub, name == "hub" { self = .hub; return }
        }
        self = .other(contextName)
    }

    public var description: String {
        switch self {
        case .pull(let store): return "pull from \(store)"
        case .push(let position): return "push of hub position \(position)"
        case .hub: return "hub"
        case .other(let name): return "context \(name ?? "none")"
        }
    }
}

/// One object's change in a transaction.
public struct ChangeLogChange: Sendable {
    public enum Kind: String, Sendable { case insert, update, delete }
    public var kind: Kind
    /// The object's own entity (a sub-entity where it has one).
    public var entity: String
    public var globalIdentifier: UUID
    /// Sorted by name. Insert: every stored attribute and to-one with its
    /// new value, to-manys with the members added. Update: the changed
    /// properties. Delete: every stored attribute and to-one with its last
    /// value (the tombstone), to-manys with the members removed.
    public var properties: [ChangeLogPropertyChange]
}

/// One property's part of a change.
public struct ChangeLogPropertyChange: Sendable, Equatable {
    public var name: String
    /// Before (nil for an insert, and for to-manys).
    public var old: StoredValue?
    /// After (nil for a delete, and for to-manys).
    public var new: StoredValue?
    /// A to-many's members added and removed, by global identifier.
    public var added: [UUID]
    public var removed: [UUID]
    /// An ordered to-many: new 1-based positions of the members written.
    public var positions: [UUID: Int]
    public var isToMany: Bool

    public init(name: String, old: StoredValue? = nil, new: StoredValue? = nil, added: [UUID] = [], removed: [UUID] = [],
                positions: [UUID: Int] = [:], isToMany: Bool = false) {
        self.name = name
        self.old = old
        self.new = new
        self.added = added
        self.removed = removed
        self.positions = positions
        self.isToMany = isToMany
    }
}

/// A conflict the hub recorded or resolved in a transaction (read from the
/// engine's bookkeeping rows, `StoreSyncConflict`).
public enum ChangeLogConflictEvent: Equatable, Sendable {
    case recorded(id: Int64, store: String, object: UUID, entity: String, kind: String)
    case resolved(id: Int64, taking: String)

    public var id: Int64 {
        switch self {
        case .recorded(let id, _, _, _, _), .resolved(let id, _): return id
        }
    }
}

// MARK: - JSON

extension ChangeLogEntry {
    /// The entry as one JSON object (docs/CHANGELOG-FORMAT.md): the fields
    /// are stable; new ones may be added, none renamed or removed.
    public var jsonObject: [String: Any] {
        var object: [String: Any] = [
            "cursor": cursor.description,
            "source": source.key,
            "group": source.group ?? NSNull(),
            "store": source.store ?? NSNull(),
            "hub": source.isHub,
            "position": position,
            "time": StoredValue.isoFormatter.string(from: timestamp),
            "author": author ?? NSNull(),
            "context": contextName ?? NSNull(),
            "transaction": transactionNumber ?? NSNull(),
            "conflicts": conflicts,
        ]
        switch engineWrite {
        case nil: object["engine"] = NSNull()
        case .pull(let store)?: object["engine"] = ["write": "pull", "store": store]
        case .push(let position)?: object["engine"] = ["write": "push", "hubPosition": position] as [String: Any]
        case .hub?: object["engine"] = ["write": "hub"]
        case .other?: object["engine"] = ["write": "other"]
        }
        object["conflictEvents"] = conflictEvents.map { event -> [String: Any] in
            switch event {
            case let .recorded(id, store, gid, entity, kind):
                return ["event": "recorded", "id": id, "store": store, "object": gid.uuidString, "entity": entity, "kind": kind]
            case let .resolved(id, taking):
                return ["event": "resolved", "id": id, "taking": taking]
            }
        }
        object["changes"] = changes.map { change -> [String: Any] in
            var properties: [String: Any] = [:]
            for property in change.properties {
                var fields: [String: Any] = [:]
                if property.isToMany {
                    fields["added"] = property.added.map(\.uuidString)
                    fields["removed"] = property.removed.map(\.uuidString)
                    if !property.positions.isEmpty {
                        fields["positions"] = Dictionary(uniqueKeysWithValues: property.positions.map { ($0.key.uuidString, $0.value) })
                    }
                } else {
                    if let old = property.old { fields["old"] = old.jsonValue }
                    if let new = property.new { fields["new"] = new.jsonValue }
                }
                properties[property.name] = fields
            }
            return ["type": change.kind.rawValue, "entity": change.entity, "object": change.globalIdentifier.uuidString,
                    "properties": properties]
        }
        return object
    }

    /// `jsonObject` as one line of text (keys sorted), without the newline.
    public func jsonLine() throws -> String {
        let data = try JSONSerialization.data(withJSONObject: jsonObject, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }
}
