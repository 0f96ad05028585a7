import Foundation

// Public initialisers of the records a hub hands the engine: a hub in another
// module (StoreSyncPostgreSQL) builds them from its own rows. The synthesised
// memberwise initialisers are internal, and an extension cannot redeclare
// them, hence the first label (`at:`, `number:`).

extension HubChange {
    /// ```swift
    /// HubChange(at: 7, origin: "s1", globalIdentifier: gid, entityName: "Record",
    ///           isInsert: false, isDelete: false, changedProperties: ["a": Int32(1)])
    /// ```
    public init(at position: Int64, origin: String?, globalIdentifier: UUID, entityName: String, isInsert: Bool, isDelete: Bool,
                changedProperties: [String: Any?]) {
        self.position = position
        self.origin = origin
        self.globalIdentifier = globalIdentifier
        self.entityName = entityName
        self.isInsert = isInsert
        self.isDelete = isDelete
        self.changedProperties = changedProperties
    }
}

extension SyncConflict {
    /// ```swift
    /// SyncConflict(number: 1, store: "s2", globalIdentifier: gid, entityName: "Record", kind: .update, basePosition: 3,
    ///              hubPosition: 5, base: ["a": "Int32:1"], incoming: ["a": "Int32:3"], hub: ["a": "Int32:2"], created: Date())
    /// ```
    public init(number id: Int64, store: String, globalIdentifier: UUID, entityName: String, kind: Kind, basePosition: Int64, hubPosition: Int64,
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
