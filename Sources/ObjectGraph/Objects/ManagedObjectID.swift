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
    public internal(set) var persistentStore: PersistentStore? {
        get { storeHandle?.store }
        set { storeHandle = newValue?.objectIDHandle }
    }
    /// The store, through a handle shared by all its IDs: a stored ID
    /// retains the handle (a plain retain) instead of forming a weak
    /// reference of its own, which cost an atomic side-table update per
    /// fetched row.
    @exclusivity(unchecked) private var storeHandle: PersistentStore.Handle?

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
        self.referenceObject = .temporary(Self.nextTemporaryUUID())
    }

    /// Temporary IDs are made for every inserted object, so they come from a
    /// per-process random prefix and a counter: `UUID()` asks the kernel for
    /// random bytes each time, which dominated inserting many objects. They
    /// stay unique within the process, which is all a temporary ID promises.
    private static let temporaryPrefix: (UInt64) = UInt64.random(in: .min ... .max)
    nonisolated(unsafe) private static var temporaryCounter: UInt64 = 0
    private static let temporaryLock = NSLock()

    private static func nextTemporaryUUID() -> UUID {
        temporaryLock.lock()
        temporaryCounter &+= 1
        let n = temporaryCounter
        temporaryLock.unlock()
        // Version 4 / variant 1 bits set so the value is a well-formed UUID.
        let hi = temporaryHigh
        let lo = (n & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        func b(_ v: UInt64, _ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: v >> (56 - 8 * i)) }
        return UUID(uuid: (b(hi, 0), b(hi, 1), b(hi, 2), b(hi, 3), b(hi, 4), b(hi, 5), b(hi, 6), b(hi, 7),
                           b(lo, 0), b(lo, 1), b(lo, 2), b(lo, 3), b(lo, 4), b(lo, 5), b(lo, 6), b(lo, 7)))
    }

    public var entityName: String { entity.name }

    /// The sequence number of a temporary ID this process made (nil for
    /// any other ID): uniquing tables file inserted objects by it, as they
    /// file stored ones by primary key.
    var temporaryNumber: Int? {
        guard case .temporary(let uuid) = referenceObject else { return nil }
        let (hi, lo) = Self.halves(of: uuid)
        guard hi == Self.temporaryHigh else { return nil }
        let number = lo & 0x3FFF_FFFF_FFFF_FFFF
        return number < UInt64(Int32.max) ? Int(number) : nil
    }

    /// A UUID's 16 bytes as two big-endian 64-bit halves.
    private static func halves(of uuid: UUID) -> (hi: UInt64, lo: UInt64) {
        let u = uuid.uuid
        let hi = UInt64(u.0) << 56 | UInt64(u.1) << 48 | UInt64(u.2) << 40 | UInt64(u.3) << 32 | UInt64(u.4) << 24 | UInt64(u.5) << 16 | UInt64(u.6) << 8 | UInt64(u.7)
        let lo = UInt64(u.8) << 56 | UInt64(u.9) << 48 | UInt64(u.10) << 40 | UInt64(u.11) << 32 | UInt64(u.12) << 24 | UInt64(u.13) << 16 | UInt64(u.14) << 8 | UInt64(u.15)
        return (hi, lo)
    }

    /// The high half of every temporary UUID this process makes.
    private static let temporaryHigh = (temporaryPrefix & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000

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
        if a === b { return true }
        return a.referenceObject == b.referenceObject && (a.entity === b.entity || a.entity.name == b.entity.name) && a.storeIdentifier == b.storeIdentifier
    }

    // Only the reference object is hashed: equal IDs have equal references,
    // and hashing the store UUID and entity name strings on every uniquing
    // lookup cost more than the rare bucket shared by two entities' keys.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(referenceObject)
    }

    /// Uniquing tables and the row cache hash the reference with one mix
    /// (see `IdentityHash`): equal IDs have equal references, as above.
    public func _rawHashValue(seed: Int) -> Int {
        switch referenceObject {
        case .primaryKey(let key):
            return IdentityHash.mix(UInt64(bitPattern: key), seed: seed)
        case .temporary(let uuid):
            let (hi, lo) = Self.halves(of: uuid)
            // Temporary keys never equal primary keys, so sharing a mix is harmless.
            return IdentityHash.mix(hi ^ IdentityHash.mixBits(lo), seed: seed)
        }
    }

    public var description: String { uriRepresentation.absoluteString }
}
