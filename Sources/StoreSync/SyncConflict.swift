import Foundation

/// A conflict the `error` policy recorded: a store's change to an object the
/// hub had changed since the store last saw it. The object's later changes
/// from that store wait until it is resolved.
public struct SyncConflict: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Both changed properties of the object.
        case update
        /// The store deleted the object the hub had updated.
        case deleteVersusUpdate = "delete-update"
        /// The store updated the object the hub had deleted.
        case updateVersusDelete = "update-delete"
    }
    public var id: Int64
    public var store: String
    public var globalIdentifier: UUID
    public var entityName: String
    public var kind: Kind
    /// The hub position the store's change was based on, and the hub's when it was recorded.
    public var basePosition: Int64
    public var hubPosition: Int64
    /// Property values as text: before both changes, the store's, the hub's.
    public var base: [String: String]
    public var incoming: [String: String]
    public var hub: [String: String]
    public var created: Date

    /// Public, so a hub in another module can hand back the conflicts it stores.
    ///
    /// ```swift
    /// SyncConflict(id: 1, store: "s2", globalIdentifier: gid, entityName: "Record", kind: .update, basePosition: 3,
    ///              hubPosition: 5, base: ["a": "Int32:1"], incoming: ["a": "Int32:3"], hub: ["a": "Int32:2"], created: Date())
    /// ```
    public init(id: Int64, store: String, globalIdentifier: UUID, entityName: String, kind: Kind, basePosition: Int64, hubPosition: Int64,
                base: [String: String], incoming: [String: String], hub: [String: String], created: Date) {
        self.id = id
        self.store = store
        self.globalIdentifier = globalIdentifier
        self.entityName = entityName
        self.kind = kind
        self.basePosition = basePosition
        self.hubPosition = hubPosition
        self.base = base
        self.incoming = incoming
        self.hub = hub
        self.created = created
    }
}

/// Which side a resolution takes.
public enum ConflictResolution: String, Sendable {
    /// The store's current object (or its deletion) goes to the hub and every store.
    case incoming
    /// The hub's object goes back to the store.
    case hub
}

/// Where a store stands, for status and the control socket.
public struct SyncStoreStatus: Sendable {
    public enum State: String, Sendable { case ok, paused, catchingUp = "catching-up", failed }
    public var name: String
    public var state: State
    /// The store's history position the hub has pulled through, and the store's newest.
    public var pulledThrough: Int64
    public var storePosition: Int64
    /// The hub position pushed to the store, and the hub's newest.
    public var pushedThrough: Int64
    public var hubPosition: Int64
    public var conflictsWaiting: Int
    public var lastError: String?
    /// Seconds since the oldest change not yet pulled was committed (0 when none).
    public var lagSeconds: Double
}
