import Foundation

/// A store that holds every record in memory as cache nodes and reads and
/// writes its whole file at once: Core Data's `NSAtomicStore` (AS-*). It
/// implements the row-level `PersistentStore` contract over the nodes; a
/// subclass supplies the file format by overriding `load()` and `save()`.
///
/// Recipe (AS-1.7): in `load()`, read the file (a missing or zero-length file
/// is a new, empty store: AS-08, AS-09), apply the stored metadata, make an
/// ID per record with `objectID(for:referenceObject:)`, build nodes (to-one
/// values are nodes, to-many values arrays of nodes) and `addCacheNodes(_:)`.
/// In `save()`, write `cacheNodes()` with `referenceObject(for:)` as each
/// record's key, plus `metadata`. Register the class with
/// `PersistentStoreCoordinator.registerStoreClass(_:forStoreType:)`.
///
/// Reference objects are `Int64` keys, unique per store and saved with the
/// records (AS-22), so object IDs survive reopening.
///
/// ```swift
/// final class JSONStore: AtomicStore {
///     override class var storeType: String { "JSON" }
///     override func load() throws { /* read url, addCacheNodes(...) */ }
///     override func save() throws { /* write cacheNodes() and metadata */ }
/// }
/// ```
open class AtomicStore: PersistentStore {
    private var nodes: [ManagedObjectID: AtomicStoreCacheNode] = [:]
    /// The metadata key holding the next unused reference object.
    public static let nextReferenceObjectKey = "ObjectGraphNextReferenceObject"

    public required init(model: ManagedObjectModel, configurationName: String?, url: URL?, options: [String: Any]) {
        super.init(model: model, configurationName: configurationName, url: url, options: options)
    }

    // MARK: - Subclass responsibilities (AS-02)

    /// Reads the file; must be overridden.
    open override func load() throws {
        throw CoreDataError(.persistentStoreOperation, "\(type(of: self)) must override load() (AS-13)")
    }

    /// Writes every cache node and the metadata to the file; must be overridden (AS-26).
    open func save() throws {
        throw CoreDataError(.persistentStoreOperation, "\(type(of: self)) must override save() (AS-26)")
    }

    /// A new, unique, stable reference object for an object of `entity`
    /// (AS-21, AS-22). The default counts up and keeps the counter in metadata.
    open func newReferenceObject(for entity: EntityDescription) -> Int64 {
        let next = (metadata[Self.nextReferenceObjectKey] as? Int64) ?? Int64((metadata[Self.nextReferenceObjectKey] as? Int) ?? 1)
        let candidate = max(next, 1)
        metadata[Self.nextReferenceObjectKey] = candidate + 1
        return candidate
    }

    /// A node for a newly saved object (AS-23); the default fills it with
    /// `updateCacheNode(_:from:)`.
    open func newCacheNode(for snapshot: StoreSnapshot) -> AtomicStoreCacheNode {
        AtomicStoreCacheNode(objectID: snapshot.objectID)
    }

    /// Copies a saved object's attribute and to-one values into its node
    /// (AS-24). The default stores attributes as they are and to-ones as nodes.
    open func updateCacheNode(_ node: AtomicStoreCacheNode, from snapshot: StoreSnapshot) {
        var cache = node.propertyCache ?? [:]
        let layout = EntityLayout.of(node.objectID.entity)
        for attribute in layout.attributes where !attribute.isTransient { cache[attribute.name] = snapshot[attribute.name] }
        for rel in layout.relationships where !rel.isToMany && !rel.isTransient {
            cache[rel.name] = (snapshot[rel.name] as? ManagedObjectID).flatMap { nodes[$0] }
        }
        node.propertyCache = cache
    }

    /// Called with the nodes of deleted objects before they are removed and
    /// before `save()` (AS-25).
    open func willRemoveCacheNodes(_ nodes: Set<AtomicStoreCacheNode>) {}

    // MARK: - Utilities for subclasses (AS-16…AS-20)

    /// The ID for a record of `entity` with `referenceObject` in this store (AS-16).
    public final func objectID(for entity: EntityDescription, referenceObject: Int64) -> ManagedObjectID {
        let id = ManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: referenceObject)
        id.persistentStore = self
        return id
    }

    /// The reference object inside one of this store's IDs (AS-20).
    public final func referenceObject(for objectID: ManagedObjectID) -> Int64? { objectID.primaryKey }

    /// Registers loaded nodes (AS-17).
    public final func addCacheNodes(_ newNodes: [AtomicStoreCacheNode]) {
        var next = (metadata[Self.nextReferenceObjectKey] as? Int64) ?? Int64((metadata[Self.nextReferenceObjectKey] as? Int) ?? 1)
        for node in newNodes {
            nodes[node.objectID] = node
            if let key = node.objectID.primaryKey, key >= next { next = key + 1 }
        }
        metadata[Self.nextReferenceObjectKey] = next
    }

    /// Every registered node (AS-18).
    public final func cacheNodes() -> Set<AtomicStoreCacheNode> { Set(nodes.values) }

    /// The node for an ID, or nil (AS-19).
    public final func cacheNode(for objectID: ManagedObjectID) -> AtomicStoreCacheNode? { nodes[objectID] }

    // MARK: - Row-level contract

    open override func fetchSnapshots(_ request: AnyFetchRequest) throws -> StoreFetchResult {
        guard let name = request.entityName, let entity = model.entitiesByName[name] else {
            throw CoreDataError(.persistentStoreOperation, "Fetch request names no entity of this store's model")
        }
        let wanted = request.includesSubentities ? Set(entity.selfAndDescendants.map { ObjectIdentifier($0) }) : [ObjectIdentifier(entity)]
        var matching: [(Int64, AtomicStoreCacheNode)] = []
        for (id, node) in nodes where wanted.contains(ObjectIdentifier(id.entity)) { matching.append((id.primaryKey ?? 0, node)) }
        matching.sort { $0.0 < $1.0 }
        return StoreFetchResult(snapshots: matching.map { snapshot(of: $0.1) }, isExact: false)
    }

    open override func snapshots(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: StoreSnapshot] {
        var out: [ManagedObjectID: StoreSnapshot] = [:]
        for id in ids { if let node = nodes[id] { out[id] = snapshot(of: node) } }
        return out
    }

    open override func relatedObjectIDs(for relationship: RelationshipDescription, of id: ManagedObjectID) throws -> [ManagedObjectID] {
        guard let node = nodes[id] else { return [] }
        return (node.propertyCache?[relationship.name] as? [AtomicStoreCacheNode] ?? []).map(\.objectID)
    }

    open override func newObjectIDs(for entity: EntityDescription, count: Int) throws -> [ManagedObjectID] {
        (0..<count).map { _ in objectID(for: entity, referenceObject: newReferenceObject(for: entity)) }
    }

    open override func save(_ request: StoreSaveRequest) throws {
        if isReadOnly { throw CoreDataError(.persistentStoreSave, "The store is read-only") }
        var conflicts: [ManagedObjectID: StoreSnapshot?] = [:]
        for (snapshot, expected) in request.updated {
            guard let node = nodes[snapshot.objectID] else { conflicts[snapshot.objectID] = .some(nil); continue }
            if node.version != expected { conflicts[snapshot.objectID] = self.snapshot(of: node) }
        }
        for (id, expected) in request.deleted {
            guard let node = nodes[id] else { conflicts[id] = .some(nil); continue }
            if node.version != expected { conflicts[id] = self.snapshot(of: node) }
        }
        if !conflicts.isEmpty { throw StoreVersionConflict(current: conflicts) }

        // Keep the previous state so a failed file write changes nothing.
        let savedNodes = nodes
        let savedCaches = nodes.mapValues { ($0.propertyCache, $0.version) }
        let savedMetadata = metadata
        do {
            var created: [(AtomicStoreCacheNode, StoreSnapshot)] = []
            for snapshot in request.inserted {
                let node = newCacheNode(for: snapshot)
                node.version = snapshot.version
                nodes[snapshot.objectID] = node
                created.append((node, snapshot))
            }
            for (node, snapshot) in created { updateCacheNode(node, from: snapshot) }
            var toOneMoves: [(AtomicStoreCacheNode, RelationshipDescription, AtomicStoreCacheNode?, AtomicStoreCacheNode?)] = []
            for (node, _) in created {
                for rel in EntityLayout.of(node.objectID.entity).relationships where Self.isForeignKey(rel) {
                    toOneMoves.append((node, rel, nil, node.propertyCache?[rel.name] as? AtomicStoreCacheNode))
                }
            }
            for (snapshot, _) in request.updated {
                guard let node = nodes[snapshot.objectID] else { continue }
                let before = node.propertyCache
                updateCacheNode(node, from: snapshot)
                node.version = snapshot.version
                for rel in EntityLayout.of(node.objectID.entity).relationships where Self.isForeignKey(rel) {
                    let old = before?[rel.name] as? AtomicStoreCacheNode, new = node.propertyCache?[rel.name] as? AtomicStoreCacheNode
                    if old !== new { toOneMoves.append((node, rel, old, new)) }
                }
            }
            // A to-many whose inverse is a to-one follows the to-one values
            // (like a foreign key), so both sides always agree on disk; the
            // request's list for it only gives the order of ordered ones.
            for (node, rel, old, new) in toOneMoves {
                let inverse = rel.inverseRelationship!.name
                if let old, var members = old.propertyCache?[inverse] as? [AtomicStoreCacheNode] {
                    members.removeAll { $0 === node }
                    old.propertyCache![inverse] = members
                }
                if let new {
                    var members = new.propertyCache?[inverse] as? [AtomicStoreCacheNode] ?? []
                    if !members.contains(where: { $0 === node }) { members.append(node) }
                    if new.propertyCache == nil { new.propertyCache = [:] }
                    new.propertyCache![inverse] = members
                }
            }
            for change in request.toManyChanges {
                guard let node = nodes[change.objectID] else { continue }
                let wanted = change.destinations.compactMap { nodes[$0] }
                if let inverse = change.relationship.inverseRelationship, !inverse.isToMany {
                    guard change.relationship.isOrdered else { continue }
                    let members = node.propertyCache?[change.relationship.name] as? [AtomicStoreCacheNode] ?? []
                    let ordered = wanted.filter { w in members.contains { $0 === w } } + members.filter { m in !wanted.contains { $0 === m } }
                    try node.setValue(ordered, forKey: change.relationship.name)
                } else {
                    try node.setValue(wanted, forKey: change.relationship.name)
                }
            }
            let doomed = Set(request.deleted.compactMap { nodes[$0.objectID] })
            if !doomed.isEmpty {
                willRemoveCacheNodes(doomed)
                for node in doomed { nodes[node.objectID] = nil }
                for node in nodes.values {
                    guard var cache = node.propertyCache else { continue }
                    var changed = false
                    for (key, value) in cache {
                        if let one = value as? AtomicStoreCacheNode, doomed.contains(one) { cache[key] = nil; changed = true }
                        if let many = value as? [AtomicStoreCacheNode], many.contains(where: doomed.contains) { cache[key] = many.filter { !doomed.contains($0) }; changed = true }
                    }
                    if changed { node.propertyCache = cache }
                }
            }
            try save()
        } catch {
            nodes = savedNodes
            for (id, state) in savedCaches { nodes[id]?.propertyCache = state.0; nodes[id]?.version = state.1 }
            metadata = savedMetadata
            throw error
        }
    }

    /// A to-one relationship whose inverse is a to-many: the store keeps
    /// the to-many list in step with it.
    static func isForeignKey(_ rel: RelationshipDescription) -> Bool {
        !rel.isToMany && !rel.isTransient && (rel.inverseRelationship?.isToMany ?? false)
    }

    func snapshot(of node: AtomicStoreCacheNode) -> StoreSnapshot {
        if let cached = node.cachedSnapshot { return cached }
        var values: [String: Any] = [:]
        for (key, value) in node.propertyCache ?? [:] {
            if let other = value as? AtomicStoreCacheNode { values[key] = other.objectID }
            else if value is [AtomicStoreCacheNode] { continue }
            else { values[key] = value }
        }
        let snapshot = StoreSnapshot(objectID: node.objectID, version: node.version, values: values)
        node.cachedSnapshot = snapshot
        return snapshot
    }
}
