import Foundation

/// Which transactions and changes a change log shows. Every filter given
/// must hold (they combine with AND); within one filter any listed value
/// matches (OR).
///
/// ```swift
/// var filter = ChangeLogFilter()
/// filter.stores = ["app"]                      // only store app (not the hub)
/// filter.includesHub = false
/// filter.entities = ["Record"]                 // its changes to Records (and sub-entities)
/// filter.since = Date(timeIntervalSinceNow: -3600)
/// ```
public struct ChangeLogFilter: Sendable {
    /// Only sources of these groups.
    public var groups: Set<String>?
    /// Only these stores' transactions (names as in the configuration).
    public var stores: Set<String>?
    /// Whether hub transactions are shown (with `stores` set, usually false).
    public var includesHub = true
    /// Only changes to objects of these entities or their sub-entities; a
    /// transaction left with none is not shown.
    public var entities: Set<String>?
    /// Only changes to these objects (global identifiers); a transaction
    /// left with none is not shown, except a hub transaction recording or
    /// resolving a conflict on one of them.
    public var objects: Set<UUID>?
    /// Only transactions by these authors; the empty string stands for a
    /// foreign writer (no author).
    public var authors: Set<String>?
    /// Only transactions committed at or after / at or before these times.
    /// A source read from its start skips to the first change at or after
    /// `since` (commit order and time agree, as for purging history).
    public var since: Date?
    public var until: Date?
    /// Only transactions involved in a conflict the hub recorded (waiting or
    /// resolved), and in them only the changes to the conflicting objects.
    /// Involved: a hub transaction that recorded or resolved the conflict,
    /// or changed its object after the hub position the store's change was
    /// based on; a transaction of the conflict's store that changed its
    /// object at or after the time of that hub position (except the engine's
    /// push of that position or an older one, which only brought the store
    /// where its change started from).
    public var onlyConflicts = false
    /// Show the engine's bookkeeping rows in the hub (cursors, pending
    /// pushes, conflict rows) as changes, and hub transactions made only of
    /// them. Off: conflict rows appear as conflict events, the rest is hidden.
    public var includesBookkeeping = false

    public init() {}

    /// True when a filter narrows the changes shown within a transaction.
    var narrowsChanges: Bool { entities != nil || objects != nil || onlyConflicts }
}
