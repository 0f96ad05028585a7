/// How a save resolves its conflicts (MOC-MP-*): optimistic-locking
/// conflicts (an object changed in this context whose stored version moved
/// since it was fetched) and then uniqueness-constraint conflicts (objects
/// left sharing a constraint's values, within the save or with a stored row).
///
/// For a constraint conflict every policy but `.error` merges the duplicates
/// into one survivor: the object whose row is already stored when there is
/// one, else the save's first (an already stored object before an inserted
/// one). The others are merged into it and deleted, and their to-many
/// members (other objects) move to it under every policy. Attributes and
/// to-ones move as each case says, a later duplicate of one save playing the
/// in-memory side against an earlier one.
///
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump   // upsert by constraint
/// ```
public enum MergePolicy: Sendable {
    /// Fail the save with 133020 and a `conflictList` of `MergeConflict`s
    /// (the default, MOC-MP-03); a constraint conflict fails it with 133021
    /// and `ConstraintConflict`s.
    case error
    /// Property by property; where both sides changed, the store wins
    /// (MOC-MP-04). Constraint: the survivor keeps its values and takes a
    /// duplicate's only where it has none.
    case mergeByPropertyStoreTrump
    /// Property by property; where both sides changed, memory wins
    /// (MOC-MP-05). Constraint: the survivor takes each value a duplicate
    /// set (changed) and keeps the others.
    case mergeByPropertyObjectTrump
    /// Write the in-memory object over the stored one whole (MOC-MP-06).
    /// Constraint: the survivor takes all of a duplicate's values.
    case overwrite
    /// Drop the in-memory changes and take the stored object (MOC-MP-07).
    /// Constraint: the survivor keeps its values; a stored object whose
    /// change made the duplicate has that change reverted instead of being
    /// merged away.
    case rollback
}
