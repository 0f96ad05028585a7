import Foundation

/// The identity of a managed object, valid across contexts (MOID-*): objects
/// never cross contexts, their IDs do. Temporary at insert, permanent once a
/// store has assigned a primary key (at save or `obtainPermanentIDs`).
///
/// URI forms, as Core Data writes them:
/// `x-coredata://<store UUID>/<Entity>/p<primary key>` and, for temporary IDs,
/// `x-coredata:///<Entity>/t<UUID>`.
///
/// ```swift
/// let id = ManagedObjectID(entity: employee, storeIdentifier: store.identifier, primaryKey: 42)
/// id.uriRepresentation   // x-coredata://6F1C…/Employee/p42
/// ```
public final class ManagedObjectID: Hashable, CustomStringConvertible, @unchecked Sendable {
    /// What identifies the object inside its store.
    public enum ReferenceObject: Hashable, Sendable {
        /// A store-assigned primary key (SQLite's `Z_PK`, an atomic store's key).
        case primaryKey(Int64)
        /// A temporary identifier given at insert.
        case temporary(UUID)
    }

    /// The entity of the object (MOID-01). Immutable, like the model in use.
    public let entity: EntityDescription
    /// The `NSStoreUUID` of the store holding the object; nil while temporary.
    public let storeIdentifier: String?
    public let referenceObject: ReferenceObject
    /// The store holding the object, set by the coordinator when it knows it.
    public internal(set) weak var persistentStore: PersistentStore?

    /// A permanent ID for a stored object.
    public init(entity: EntityDescription, storeIdentifier: String, primaryKey: Int64) {
        self.entity = entity
        self.storeIdentifier = storeIdentifier
        self.referenceObject = .primaryKey(primaryKey)
    }

    /// A new temporary ID for an inserted object.
    public init(temporaryFor entity: EntityDescription) {
        self.entity = entity
        self.storeIdentifier = nil
        self.referenceObject = .temporary(UUID())
    }

    public var entityName: String { entity.name }

    /// True until a store assigns a primary key (MOID-03).
    public var isTemporaryID: Bool {
        if case .temporary = referenceObject { return true }
        return false
    }

    /// The store's primary key, nil for a temporary ID.
    public var primaryKey: Int64? {
        if case .primaryKey(let key) = referenceObject { return key }
        return nil
    }

    /// The archivable URI form (MOID-04).
    public var uriRepresentation: URL {
        switch referenceObject {
        case .primaryKey(let key):
            return URL(string: "x-coredata://\(storeIdentifier ?? "")/\(Self.escape(entity.name))/p\(key)")!
        case .temporary(let uuid):
            return URL(string: "x-coredata:///\(Self.escape(entity.name))/t\(uuid.uuidString)")!
        }
    }

    /// The parts of a Core Data object URI, or nil if `uri` is not one.
    public static func parse(uri: URL) -> (storeIdentifier: String?, entityName: String, reference: ReferenceObject)? {
        guard uri.scheme == "x-coredata" else { return nil }
        let parts = uri.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard parts.count == 2, let entityName = parts[0].removingPercentEncoding else { return nil }
        let tag = parts[1]
        let body = String(tag.dropFirst())
        if tag.hasPrefix("p"), let key = Int64(body), key > 0 {
            guard let host = uri.host, !host.isEmpty else { return nil }
            return (host, entityName, .primaryKey(key))
        }
        if tag.hasPrefix("t"), let uuid = UUID(uuidString: body), uri.host?.isEmpty ?? true {
            return (nil, entityName, .temporary(uuid))
        }
        return nil
    }

    private static func escape(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? name
    }

    // Equal when they name the same object of the same entity in the same store
    // (MOID-02); a temporary ID equals only itself.
    public static func == (a: ManagedObjectID, b: ManagedObjectID) -> Bool {
        a.referenceObject == b.referenceObject && a.storeIdentifier == b.storeIdentifier && a.entity.name == b.entity.name
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(referenceObject)
        hasher.combine(storeIdentifier)
        hasher.combine(entity.name)
    }

    public var description: String { uriRepresentation.absoluteString }
}
