import Foundation

/// Batch requests run by a context against its coordinator's SQLite
/// stores, and merging what they did into contexts.
extension ManagedObjectContext {
    /// Runs a batch delete in every SQLite store of the coordinator that
    /// holds the request's entity (BD-01…04). The context's own objects are
    /// left as they are; pending changes are not saved.
    ///
    /// ```swift
    /// let result = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Note")))
    /// ```
    ///
    /// - Throws: 134091 (`NSPersistentStoreUnsupportedRequestTypeError`) when
    ///   a store holding the entity is not SQLite; 1600 when a deny rule
    ///   refuses; the store's errors (nothing is deleted then).
    public func execute(_ request: BatchDeleteRequest) throws -> BatchDeleteResult {
        checkConfinement()
        let entity = try resolveEntity(request.fetchRequest)
        let stores = try sqliteStores(holding: entity, for: "delete") { store in
            request.objectIDs?.contains { $0.storeIdentifier == store.identifier } ?? true
        }
        var matched = 0
        var deleted: [ManagedObjectID] = []
        for store in stores {
            let outcome = try store.executeBatchDelete(request, author: transactionAuthor, contextName: name)
            matched += outcome.matched
            if let listed = outcome.deleted {
                deleted += listed
                persistentStoreCoordinator.forgetCachedRows(of: listed)
            } else {
                // Deleted by one statement, unlisted: no row of the store may be served from the cache.
                persistentStoreCoordinator.forgetCachedRows(inStore: store.identifier)
            }
        }
        switch request.resultType {
        case .statusOnly: return BatchDeleteResult(resultType: .statusOnly, result: true)
        case .count: return BatchDeleteResult(resultType: .count, result: matched)
        case .objectIDs: return BatchDeleteResult(resultType: .objectIDs, result: deleted)
        }
    }

    /// Runs a batch update in every SQLite store of the coordinator that
    /// holds the entity (BU-01, BU-02). The context's objects keep their
    /// values until refreshed or told (`mergeChanges(fromRemoteContextSave:into:)`).
    ///
    /// ```swift
    /// let update = BatchUpdateRequest(entityName: "Note")
    /// update.propertiesToUpdate = ["archived": true]
    /// _ = try context.execute(update)
    /// ```
    ///
    /// - Throws: 134091 when a store holding the entity is not SQLite;
    ///   134070 for a property that is not a stored attribute, nothing to
    ///   set, or a predicate SQL cannot evaluate exactly; the store's errors.
    public func execute(_ request: BatchUpdateRequest) throws -> BatchUpdateResult {
        checkConfinement()
        let entity = try resolveEntity(FetchRequest(entityName: request.entityName))
        var count = 0
        var ids: [ManagedObjectID] = []
        for store in try sqliteStores(holding: entity, for: "update") {
            let outcome = try store.executeBatchUpdate(request, author: transactionAuthor, contextName: name)
            count += outcome.count
            ids += outcome.ids
            // Rows changed behind the cache: none may be served from it.
            persistentStoreCoordinator.forgetCachedRows(inStore: store.identifier)
        }
        switch request.resultType {
        case .statusOnly: return BatchUpdateResult(resultType: .statusOnly, result: true)
        case .updatedObjectsCount: return BatchUpdateResult(resultType: .updatedObjectsCount, result: count)
        case .updatedObjectIDs: return BatchUpdateResult(resultType: .updatedObjectIDs, result: ids)
        }
    }

    /// The coordinator's stores holding `entity` (and passing `included`),
    /// all SQLite: batch requests run only there (134091 otherwise).
    private func sqliteStores(holding entity: EntityDescription, for kind: String,
                              where included: (PersistentStore) -> Bool = { _ in true }) throws -> [SQLiteStore] {
        let stores = persistentStoreCoordinator.persistentStores.filter { store in store.entities.contains { $0 === entity } && included(store) }
        if let other = stores.first(where: { !($0 is SQLiteStore) }) {
            throw CoreDataError(.persistentStoreUnsupportedRequestType,
                                "batch \(kind) requests need a SQLite store; the \(type(of: other).storeType) store \(other.identifier) holds \(entity.name)")
        }
        return stores.compactMap { $0 as? SQLiteStore }
    }

    /// Tells `contexts` of changes made outside them (a batch request,
    /// another process): Core Data's `mergeChanges(fromRemoteContextSave:into:)`.
    /// `changes` holds `[ManagedObjectID]` (or their URIs) under
    /// `insertedObjectsKey`, `updatedObjectsKey` and `deletedObjectsKey`
    /// (also under Core Data's `NSInsertedObjectsKey`, … spellings). Each
    /// context, on its queue, forgets deleted objects, refreshes updated ones
    /// and posts objects-did-change (BD-04).
    ///
    /// ```swift
    /// ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.deletedObjectsKey: ids],
    ///                                   into: [container.viewContext])
    /// ```
    public static func mergeChanges(fromRemoteContextSave changes: [AnyHashable: Any], into contexts: [ManagedObjectContext]) {
        func ids(_ keys: [String], in context: ManagedObjectContext) -> [ManagedObjectID] {
            keys.flatMap { key -> [ManagedObjectID] in
                let values = (changes[key] as? [Any]) ?? Array((changes[key] as? Set<AnyHashable>) ?? [])
                return values.compactMap { value in
                    if let id = value as? ManagedObjectID { return id }
                    if let url = value as? URL { return context.persistentStoreCoordinator.managedObjectID(forURIRepresentation: url) }
                    return nil
                }
            }
        }
        for context in contexts {
            context.performAndWait {
                var set = ContextChangeSet()
                set.inserted = ids([insertedObjectsKey, "NSInsertedObjectsKey"], in: context).map { ObjectChange(objectID: $0, entityName: $0.entityName, changes: [:]) }
                set.updated = ids([updatedObjectsKey, "NSUpdatedObjectsKey"], in: context).map { ObjectChange(objectID: $0, entityName: $0.entityName, changes: [:]) }
                set.deleted = ids([deletedObjectsKey, "NSDeletedObjectsKey"], in: context).map { ObjectChange(objectID: $0, entityName: $0.entityName, changes: [:]) }
                context.mergeChanges(from: set)
            }
        }
    }
}
