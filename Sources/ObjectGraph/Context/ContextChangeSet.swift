import Foundation

/// What one save committed, in a form that outlives the saving context and
/// can cross threads or processes (MOC-MG-06): object IDs, entity names and,
/// for updates, every changed key with its old and new value. It travels in
/// the did-save notification under `ManagedObjectContext.changeSetKey`, and
/// `mergeChanges(from:)` applies it to another context.
///
/// Relationship values are `ManagedObjectID` (to-one) or `[ManagedObjectID]`
/// (to-many). A future stable global identifier would be one more field of
/// `ObjectChange`.
///
/// ```swift
/// let changes = note.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet
/// for update in changes?.updated ?? [] { print(update.objectID, update.changes.keys) }
/// ```
public struct ContextChangeSet: @unchecked Sendable {
    public var inserted: [ObjectChange] = []
    public var updated: [ObjectChange] = []
    public var deleted: [ObjectChange] = []
    public var contextName: String?
    public var transactionAuthor: String?

    public init() {}

    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}

/// One object's part of a change set.
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

/// One property's old and new value.
public struct PropertyChange: @unchecked Sendable {
    public var oldValue: Any?
    public var newValue: Any?

    public init(oldValue: Any?, newValue: Any?) {
        self.oldValue = oldValue
        self.newValue = newValue
    }
}
