import Foundation

/// Batched fetching (FR-* `fetchBatchSize`): the IDs of every match first,
/// objects a batch at a time as they are used.
extension ManagedObjectContext {
    /// Runs a managed-object request and returns its results as a lazily
    /// loading collection when `request.fetchBatchSize > 0`; with a batch
    /// size of 0 every object is loaded at once (a `FetchedResults` over
    /// `fetch(_:)`). `fetch(_:)` itself keeps returning a loaded array.
    ///
    /// The elements, and their order, are exactly those of `fetch(_:)` at
    /// the time of the call: pending inserts, deletes and edits are
    /// overlaid, then predicate, sort, offset and limit are applied. When the
    /// predicate and sort keys read only attributes of the entity, this is
    /// done on the store's rows without making objects; otherwise the
    /// objects are made once to decide membership and order, and dropped
    /// (memory then peaks like a plain fetch). Objects already registered
    /// are returned as they are (their in-memory values are not overwritten).
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Employee")
    /// request.sortDescriptors = [FetchSortDescriptor(key: "lastName")]
    /// request.fetchBatchSize = 500
    /// for employee in try context.fetchBatched(request) { export(employee) }
    /// ```
    public func fetchBatched(_ request: AnyFetchRequest) throws -> FetchedResults {
        checkConfinement()
        guard request.resultType == .managedObject else {
            throw CoreDataError(.coreData, "fetchBatched(_:) returns managed objects; use execute(_:) for result type \(request.resultType)")
        }
        try checkPropertiesToFetch(request)
        let prefetch = request.relationshipKeyPathsForPrefetching
        _ = try Self.checkPrefetchPaths(prefetch, from: try resolveEntity(request))
        guard request.fetchBatchSize > 0 else {
            let objects = try matchingObjects(request)
            return FetchedResults(context: self, entries: objects.map { .object($0) }, batchSize: max(1, objects.count), prefetchKeyPaths: [])
        }
        let entries = try matchingEntries(request)
        return FetchedResults(context: self, entries: entries, batchSize: request.fetchBatchSize, prefetchKeyPaths: prefetch)
    }

    /// The result of `matchingObjects(request)` as IDs, computed on rows
    /// when the predicate and sort keys allow it.
    private func matchingEntries(_ request: AnyFetchRequest) throws -> [FetchedResults.Entry] {
        let entity = try resolveEntity(request)
        let attributes = EntityLayout.of(entity).attributesByName
        let sortKeys = request.sortDescriptors.map(\.key)
        let rowFilter = request.predicate.flatMap { RowPredicateFilter($0, entity: entity) }
        let rowsSuffice = (request.predicate == nil || rowFilter != nil)
            && sortKeys.allSatisfy { attributes[$0].map { !$0.isTransient } ?? false }
        guard rowsSuffice else {
            return try matchingObjects(request, prefetching: false).map { insertedSet.contains($0) ? .object($0) : .id($0.objectID) }
        }
        if request.includesPendingChanges { processPendingChanges() }
        func fits(_ e: EntityDescription) -> Bool { request.includesSubentities ? e.isKindOf(entity: entity) : e === entity }

        var entries: [FetchedResults.Entry] = []
        // What sort descriptors read: the live object, or only the sort-key
        // values of a row, in `sortKeys` order (an array, not a dictionary:
        // one per match is held until the sort is done).
        var sortSubjects: [SortSubject] = []
        var seen = Set<ManagedObjectID>()
        func add(_ entry: FetchedResults.Entry, _ subject: @autoclosure () -> SortSubject.Base) {
            if !sortKeys.isEmpty { sortSubjects.append(SortSubject(index: entries.count, base: subject(), keys: sortKeys)) }
            entries.append(entry)
        }
        try persistentStoreCoordinator.forEachSnapshotPage(for: entity, request: request, pageSize: Swift.max(request.fetchBatchSize, 5_000)) { page in
            for snapshot in page where seen.insert(snapshot.objectID).inserted {
                let registered = registry[snapshot.objectID]
                if let registered, request.includesPendingChanges, deletedSet.contains(registered) { continue }
                if let registered, !registered.isFault {
                    guard try matches(request, registered) else { continue }
                    add(.id(snapshot.objectID), .object(registered))
                } else {
                    if let rowFilter { guard try rowFilter.matches(snapshot.values) else { continue } }
                    add(.id(snapshot.objectID), .row(sortKeys.map { snapshot[$0] }))
                }
            }
        }
        if request.includesPendingChanges {
            for object in insertedSet where fits(object.entity) {
                guard try matches(request, object) else { continue }
                add(.object(object), .object(object))
            }
            // Changed objects whose stored rows the store's SQL left out (MOC-FE-05).
            for object in updatedSet where fits(object.entity) && seen.insert(object.objectID).inserted {
                guard try matches(request, object) else { continue }
                add(.id(object.objectID), .object(object))
            }
        }
        if !sortKeys.isEmpty {
            let sorted = try FetchSortDescriptor.sort(sortSubjects, using: request.sortDescriptors)
            entries = sorted.map { entries[$0.index] }
        }
        if request.fetchOffset > 0 { entries = Array(entries.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 && entries.count > request.fetchLimit { entries = Array(entries.prefix(request.fetchLimit)) }
        return entries
    }

    /// The objects of one batch: registered ones as they are, the others
    /// loaded with their stored values in one store query. A row that is
    /// gone (or a store that fails) leaves a fault, which reports 133000
    /// when fired.
    func materializeBatch(_ entries: ArraySlice<FetchedResults.Entry>, prefetching paths: [String]) -> [ManagedObject] {
        checkConfinement()
        var toLoad: [ManagedObjectID] = []
        for case .id(let id) in entries where registry[id]?.isFault ?? true { toLoad.append(id) }
        let rows = toLoad.isEmpty ? [:] : ((try? persistentStoreCoordinator.batchSnapshots(for: toLoad)) ?? [:])
        let objects: [ManagedObject] = entries.map { entry in
            switch entry {
            case .object(let object):
                return object
            case .id(let id):
                let object = objectForID(id)
                if object.isFault, let row = rows[id] {
                    object.load(values: lazyValues(from: row), version: row.version, context: self)
                }
                return object
            }
        }
        // A batch has no way to report an error; a failed prefetch leaves
        // faults that report it when fired.
        try? prefetch(paths, for: objects)
        return objects
    }
}

/// One element as sort descriptors see it, remembering its position.
private struct SortSubject: KeyValueCoding {
    enum Base {
        case object(ManagedObject)
        /// A row's sort-key values in `keys` order.
        case row([Any?])
    }

    let index: Int
    let base: Base
    let keys: [String]

    func value(forKey key: String) throws -> Any? {
        switch base {
        case .object(let object): return try object.value(forKey: key)
        case .row(let values): return keys.firstIndex(of: key).flatMap { values[$0] }
        }
    }
}
