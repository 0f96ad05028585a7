import Foundation

/// The persistent values of one stored object as its store holds them: the
/// unit that crosses the boundary between the object graph and a store.
///
/// `values` maps attribute names to values (absent means nil) in the Swift
/// types `AttributeDescription` documents, and to-one relationship names to
/// the destination's `ManagedObjectID` (absent means nil). To-many
/// relationships are not in a snapshot; stores answer them through
/// `PersistentStore.relatedObjectIDs(for:of:)`. Transient properties are
/// never in a snapshot, and keys that are not stored attributes or to-one
/// relationships of the object's entity are ignored.
///
/// Internally the values sit in slots in the entity's layout order, the
/// same order a managed object keeps them in, so a fetched row becomes an
/// object's values without rebuilding a dictionary; `values` and the
/// subscript are views of those slots.
///
/// ```swift
/// let row = StoreSnapshot(objectID: id, version: 1, values: ["name": "Sales"])
/// row["name"] as? String   // "Sales"
/// ```
public struct StoreSnapshot {
    public var objectID: ManagedObjectID
    /// The optimistic-locking version (SQLite's `Z_OPT`): 1 after the first
    /// save, and one more after each save that changes the object.
    public var version: Int64
    /// One value per `EntityLayout.slotProperties` entry of the snapshot
    /// part (`snapshotSlotCount` of them) for `objectID.entity`.
    var slots: [Any?]

    public init(objectID: ManagedObjectID, version: Int64, values: [String: Any]) {
        self.objectID = objectID
        self.version = version
        let layout = EntityLayout.of(objectID.entity)
        var slots = StoreSnapshot.emptySlots(layout.snapshotSlotCount)
        for (key, value) in values {
            if let i = layout.slotIndex[key], i < slots.count { slots[i] = nilIfNSNull(value) }
        }
        self.slots = slots
    }

    /// A snapshot from values already in slot order (stores that build rows
    /// with `EntityLayout`, and saves).
    init(objectID: ManagedObjectID, version: Int64, slots: [Any?]) {
        self.objectID = objectID
        self.version = version
        self.slots = slots
    }

    /// `count` nil slots. `Array(repeating:count:)` of `Any?` copies the
    /// repeated existential through its value witness per element, which
    /// cost more than decoding the row it was made for.
    static func emptySlots(_ count: Int) -> [Any?] {
        [Any?](unsafeUninitializedCapacity: count) { buffer, initialized in
            for i in 0..<count { (buffer.baseAddress! + i).initialize(to: nil) }
            initialized = count
        }
    }

    /// The values by property name, nil values left out.
    public var values: [String: Any] {
        get {
            let layout = EntityLayout.of(objectID.entity)
            var out: [String: Any] = [:]
            out.reserveCapacity(slots.count)
            for (i, value) in slots.enumerated() where i < layout.snapshotSlotCount {
                if let value { out[layout.slotProperties[i].name] = value }
            }
            return out
        }
        set { self = StoreSnapshot(objectID: objectID, version: version, values: newValue) }
    }

    /// The value of one stored attribute or to-one relationship; nil when
    /// unset or not a snapshot key.
    public subscript(key: String) -> Any? {
        get {
            guard let i = EntityLayout.of(objectID.entity).slotIndex[key], i < slots.count else { return nil }
            return slots[i]
        }
        set {
            let layout = EntityLayout.of(objectID.entity)
            guard let i = layout.slotIndex[key], i < layout.snapshotSlotCount else { return }
            if slots.count < layout.snapshotSlotCount { slots += repeatElement(nil, count: layout.snapshotSlotCount - slots.count) }
            slots[i] = nilIfNSNull(newValue)
        }
    }
}

/// Everything one context save asks one store to write, in one transaction.
///
/// Stores check optimistic locking themselves, inside the transaction: an
/// updated or deleted object whose stored version is not `expectedVersion`
/// fails the whole save with `StoreVersionConflict`, so a writer in another
/// context, coordinator or process is never overwritten silently.
public struct StoreSaveRequest {
    /// An object to insert: its snapshot, with `version` the value to store (1).
    public var inserted: [StoreSnapshot] = []
    /// An object to update: the full new snapshot (`version` the value to
    /// store) and the version the saving context last saw.
    public var updated: [(snapshot: StoreSnapshot, expectedVersion: Int64)] = []
    /// An object to delete and the version the saving context last saw.
    public var deleted: [(objectID: ManagedObjectID, expectedVersion: Int64)] = []
    /// The complete new membership of each to-many relationship that changed
    /// (in order, for ordered relationships). Stores that keep to-many
    /// relationships through the inverse to-one (a foreign key) may ignore
    /// entries whose inverse is to-one; many-to-many needs them.
    public var toManyChanges: [ToManyChange] = []
    /// For each updated object, the changed attributes and to-one
    /// relationships with old and new values (to-ones as object IDs), for
    /// change history and sync; the snapshots in `updated` stay authoritative.
    public var changedValues: [ManagedObjectID: [String: PropertyChange]] = [:]
    /// True when `changedValues` names every attribute and to-one whose
    /// stored value differs from what the store holds (an updated object
    /// without an entry changed none: only its version and to-manys). Stores
    /// may then write just those columns, as Core Data's UPDATE does; when
    /// false they write whole rows from the snapshots.
    public var changedValuesAreComplete = false
    /// Who saved: the context's name and transaction author, for the change history.
    public var contextName: String?
    public var transactionAuthor: String?
    /// Global identifiers the caller chose for inserted objects (an object
    /// copied from another store keeps its identifier); stores recording
    /// history give the others new ones.
    public var globalIdentifiers: [ManagedObjectID: UUID] = [:]

    public init() {}

    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && toManyChanges.isEmpty }
}

/// The new members of one to-many relationship of one object.
public struct ToManyChange {
    public var objectID: ManagedObjectID
    public var relationship: RelationshipDescription
    public var destinations: [ManagedObjectID]

    public init(objectID: ManagedObjectID, relationship: RelationshipDescription, destinations: [ManagedObjectID]) {
        self.objectID = objectID
        self.relationship = relationship
        self.destinations = destinations
    }
}

/// Thrown by `PersistentStore.save(_:)` when optimistic locking fails: the
/// stored versions differ from what the saving context expected. The context
/// turns this into conflict records for its merge policy.
public struct StoreVersionConflict: Error {
    /// For each conflicting object, what the store holds now (nil: deleted).
    public var current: [ManagedObjectID: StoreSnapshot?]

    public init(current: [ManagedObjectID: StoreSnapshot?]) { self.current = current }
}
