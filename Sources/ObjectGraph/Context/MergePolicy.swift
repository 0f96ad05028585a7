/// How a save resolves optimistic-locking conflicts (MOC-MP-*): an object
/// changed in this context whose stored version moved since it was fetched.
///
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump
/// ```
public enum MergePolicy: Sendable {
    /// Fail the save with 133020 and a `conflictList` (the default, MOC-MP-03).
    case error
    /// Property by property; where both sides changed, the store wins (MOC-MP-04).
    case mergeByPropertyStoreTrump
    /// Property by property; where both sides changed, memory wins (MOC-MP-05).
    case mergeByPropertyObjectTrump
    /// Write the in-memory object over the stored one whole (MOC-MP-06).
    case overwrite
    /// Drop the in-memory changes and take the stored object (MOC-MP-07).
    case rollback
}
