import Foundation

/// One entry of a failed save's `conflictList` (MOC-CR-*). Of `snapshot`,
/// `cachedRow` and `databaseRow` exactly two are present (MOC-CR-02):
/// context vs coordinator gives `snapshot` + `cachedRow`; coordinator vs store
/// gives `cachedRow` + `databaseRow`. Relationship values are object IDs.
///
/// ```swift
/// catch let error as CoreDataError where error.code == .managedObjectContextMerge {
///     let conflicts = error.userInfo[MergeConflict.conflictListKey] as! [MergeConflict]
/// }
/// ```
public struct MergeConflict {
    public static let conflictListKey = "conflictList"

    /// The object that could not be saved (MOC-CR-03).
    public let object: ManagedObject
    /// The context's last fetched or saved values (MOC-CR-04).
    public let snapshot: [String: Any]?
    /// What the coordinator last cached for the object (MOC-CR-05).
    public let cachedRow: [String: Any]?
    /// What the store holds now (MOC-CR-06); nil in a context–coordinator conflict.
    public let databaseRow: [String: Any]?
    /// The latest stored version; 0 when the record was deleted (MOC-CR-07).
    public let newVersion: Int64
    /// The version this context last saw (MOC-CR-08).
    public let oldVersion: Int64
}
