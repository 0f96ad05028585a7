/// One object's part of a change set.
///
/// ```swift
/// for change in changeSet.updated where change.changes["salary"] != nil { audit(change.objectID) }
/// ```
public struct ObjectChange: @unchecked Sendable {
    public var objectID: ManagedObjectID
    public var entityName: String
    /// Changed keys: for an insert, every stored value (old nil); for an update,
    /// the changed keys; for a delete, the last committed values (new nil).
    public var changes: [String: PropertyChange]

    public init(objectID: ManagedObjectID, entityName: String, changes: [String: PropertyChange]) {
        self.objectID = objectID
        self.entityName = entityName
        self.changes = changes
    }
}
