import Foundation

/// What happened to an object (Core Data's `NSPersistentHistoryChangeType`).
public enum PersistentHistoryChangeType: Int, Sendable, CustomStringConvertible {
    case insert = 0, update = 1, delete = 2

    public var description: String {
        switch self {
        case .insert: return "insert"
        case .update: return "update"
        case .delete: return "delete"
        }
    }
}

/// One property's part of a change: the value before and after for an
/// attribute or a to-one (to-ones as the destination's global identifier),
/// the members added and removed for a to-many (as global identifiers).
public struct PersistentHistoryValueChange: @unchecked Sendable {
    public var oldValue: Any?
    public var newValue: Any?
    public var addedMembers: [UUID]
    public var removedMembers: [UUID]
    /// For an ordered to-many whose inverse is a to-one: the new 1-based
    /// position of each member whose position was written (Core Data keeps
    /// it in the member's row, `Z_FOK_`). Members not named keep theirs.
    public var memberPositions: [UUID: Int]

    public init(oldValue: Any? = nil, newValue: Any? = nil, addedMembers: [UUID] = [], removedMembers: [UUID] = [],
                memberPositions: [UUID: Int] = [:]) {
        self.oldValue = oldValue
        self.newValue = newValue
        self.addedMembers = addedMembers
        self.removedMembers = removedMembers
        self.memberPositions = memberPositions
    }
}

/// One object's change in one transaction (Core Data's
/// `NSPersistentHistoryChange`), extended with what a sync engine needs:
/// the object's global identifier, the old and new value of each changed
/// property, and a tombstone of every stored property for a delete.
///
/// Several row changes of one object in one transaction are reported as one
/// change: an insert followed by updates is an insert with the final values;
/// anything followed by a delete is a delete; an insert followed by a delete
/// is not reported.
///
/// ```swift
/// for change in transaction.changes where change.changeType == .update {
///     for name in change.updatedProperties { print(name, change.values[name]?.oldValue as Any, "→", change.values[name]?.newValue as Any) }
/// }
/// ```
public struct PersistentHistoryChange: @unchecked Sendable {
    /// The history position of the object's last row change in the transaction.
    public var changeID: Int64
    public var changeType: PersistentHistoryChangeType
    /// The object's ID in the store whose history this is.
    public var changedObjectID: ManagedObjectID
    /// The identifier that names this object in every store of a sync group.
    public var globalIdentifier: UUID
    public var entity: EntityDescription
    /// The names of the properties an update changed (to-many relationships
    /// included); empty for inserts and deletes.
    public var updatedProperties: Set<String>
    /// For an insert, every stored attribute and to-one with its new value
    /// (and to-manys with the members added); for an update, the properties
    /// in `updatedProperties`; for a delete, the to-many members removed.
    public var values: [String: PersistentHistoryValueChange]
    /// For a delete, the last value of every stored attribute and to-one.
    public var tombstone: [String: Any]?

    public init(changeID: Int64, changeType: PersistentHistoryChangeType, changedObjectID: ManagedObjectID, globalIdentifier: UUID,
                entity: EntityDescription, updatedProperties: Set<String> = [], values: [String: PersistentHistoryValueChange] = [:],
                tombstone: [String: Any]? = nil) {
        self.changeID = changeID
        self.changeType = changeType
        self.changedObjectID = changedObjectID
        self.globalIdentifier = globalIdentifier
        self.entity = entity
        self.updatedProperties = updatedProperties
        self.values = values
        self.tombstone = tombstone
    }
}
