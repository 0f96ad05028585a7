import Foundation

/// One object's part of a change set.
///
/// ```swift
/// for change in changeSet.updated where change.changes["salary"] != nil { audit(change.objectID) }
/// ```
public struct ObjectChange: @unchecked Sendable {
    public var objectID: ManagedObjectID
    public var entityName: String
    /// The object's global identifier, when its store records persistent history.
    public var globalIdentifier: UUID?
    /// Changed keys: for an insert, every stored value (old nil); for an update,
    /// the changed keys; for a delete, the last committed values (new nil).
    public var changes: [String: PropertyChange] {
        get {
            switch storage {
            case .changes(let changes): return changes
            case .inserted(let snapshot): return snapshot.values.mapValues { PropertyChange(oldValue: nil, newValue: $0) }
            }
        }
        set { storage = .changes(newValue) }
    }

    /// An insert keeps the snapshot it saved and builds its dictionary when
    /// asked: a save of many new objects then makes no dictionary per object
    /// for a change set nobody may read.
    private enum Storage {
        case changes([String: PropertyChange])
        case inserted(StoreSnapshot)
    }
    private var storage: Storage

    public init(objectID: ManagedObjectID, entityName: String, changes: [String: PropertyChange]) {
        self.objectID = objectID
        self.entityName = entityName
        self.storage = .changes(changes)
    }

    /// The change of an inserted object: every stored value of `snapshot`, old nil.
    init(inserted snapshot: StoreSnapshot) {
        self.objectID = snapshot.objectID
        self.entityName = snapshot.objectID.entity.name
        self.storage = .inserted(snapshot)
    }
}
