import Foundation

/// One record of an atomic store (CN-*): its object ID, its property values
/// and its optimistic-locking version. Attribute values are the model's
/// Swift types; a to-one relationship holds another node; a to-many holds an
/// array of nodes (CN-08).
///
/// ```swift
/// let node = AtomicStoreCacheNode(objectID: store.objectID(for: entity, referenceObject: 7))
/// try node.setValue("Sales", forKey: "name")
/// ```
open class AtomicStoreCacheNode: Hashable {
    /// Fixed for the node's lifetime (CN-03).
    public let objectID: ManagedObjectID
    /// Nil until set or until a value is stored (CN-04, CN-05).
    open var propertyCache: [String: Any]? { didSet { cachedSnapshot = nil } }
    /// The stored version (Z_OPT): 1 after the first save.
    open var version: Int64 = 1 { didSet { cachedSnapshot = nil } }
    /// The row form of this node, kept until the node changes: fetches of
    /// large stores then cost one copy per record.
    var cachedSnapshot: StoreSnapshot?

    public init(objectID: ManagedObjectID) { self.objectID = objectID }

    /// The value of a property of the node's entity (CN-07); throws for other keys.
    open func value(forKey key: String) throws -> Any? {
        try checkKey(key)
        return propertyCache?[key]
    }

    /// Stores a value for a property of the node's entity (CN-06); other keys throw.
    open func setValue(_ value: Any?, forKey key: String) throws {
        try checkKey(key)
        if let value {
            if propertyCache == nil { propertyCache = [:] }
            propertyCache![key] = value
        } else {
            propertyCache?[key] = nil
        }
    }

    private func checkKey(_ key: String) throws {
        guard EntityLayout.of(objectID.entity).propertiesByName[key] != nil else {
            throw CoreDataError(.persistentStoreOperation, "The entity \(objectID.entityName) has no property '\(key)'", userInfo: [CoreDataError.validationKeyErrorKey: key])
        }
    }

    public static func == (a: AtomicStoreCacheNode, b: AtomicStoreCacheNode) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
