import Foundation

/// One uniqueness-constraint violation found by a save: Core Data's
/// `NSConstraintConflict`. Under the error merge policy the save fails with
/// 133021 (`NSManagedObjectConstraintMergeError`) and the error's
/// `conflictList` holds these; under the other policies the save merges the
/// conflicting objects instead (see `MergePolicy`).
///
/// As Apple's header describes it, a conflict is one of two kinds:
/// - between objects of one save (a *context-level* conflict): no database
///   object or snapshot, two or more conflicting objects;
/// - between an object of the save and a row already in the store: the
///   database object and its row, and one conflicting object.
///
/// ```swift
/// do { try context.save() }
/// catch let error as CoreDataError where error.code == .managedObjectConstraintMerge {
///     for conflict in error.userInfo[ConstraintConflict.conflictListKey] as? [ConstraintConflict] ?? [] {
///         print(conflict.constraint, conflict.constraintValues, conflict.conflictingObjects.count)
///     }
/// }
/// ```
public struct ConstraintConflict {
    /// The userInfo key of the list, the same as a merge conflict's (`conflictList`).
    public static let conflictListKey = MergeConflict.conflictListKey

    /// The constraint violated: the names of its properties, as the entity's
    /// `uniquenessConstraints` lists them.
    public let constraint: [String]
    /// The values the conflicting objects had when the conflict was found,
    /// by property name (to-one relationships as object IDs).
    public let constraintValues: [String: Any]
    /// The object whose stored row already uses the values; nil for a
    /// context-level conflict.
    public let databaseObject: ManagedObject?
    /// That row's values (attributes and to-ones as object IDs); nil for a
    /// context-level conflict.
    public let databaseSnapshot: [String: Any]?
    /// The objects of the save that violate the constraint: one against a
    /// stored row, two or more within the save.
    public let conflictingObjects: [ManagedObject]
    /// For each conflicting object, its values when it was fetched (its
    /// stored values); an object inserted by this save has none (empty).
    public let conflictingSnapshots: [[String: Any]]

    public init(constraint: [String], constraintValues: [String: Any], databaseObject: ManagedObject?, databaseSnapshot: [String: Any]?,
                conflictingObjects: [ManagedObject], conflictingSnapshots: [[String: Any]]) {
        self.constraint = constraint
        self.constraintValues = constraintValues
        self.databaseObject = databaseObject
        self.databaseSnapshot = databaseSnapshot
        self.conflictingObjects = conflictingObjects
        self.conflictingSnapshots = conflictingSnapshots
    }
}
