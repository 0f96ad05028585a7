import Foundation

/// Fetching (MOC-FE-*, FR-*): store results merged with the context's
/// unsaved state, then filtered, sorted and cut in memory on the objects.
extension ManagedObjectContext {
    /// Runs a request of any result type: managed objects, object IDs,
    /// dictionaries, or a one-element `[Int]` count (MOC-FE-01).
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Employee")
    /// request.resultType = .managedObjectID
    /// let ids = try context.execute(request) as! [ManagedObjectID]
    /// ```
    public func execute(_ request: AnyFetchRequest) throws -> [Any] {
        checkConfinement()
        switch request.resultType {
        case .count: try checkPropertiesToFetch(request); return [try countResult(request)]
        case .dictionary: return try dictionaryResults(request)
        case .managedObject, .managedObjectID: try checkPropertiesToFetch(request)
        }
        let objects = try matchingObjects(request, prefetching: request.resultType == .managedObject)
        switch request.resultType {
        case .managedObject: return objects
        case .managedObjectID: return objects.map(\.objectID)
        // Trap kept (issue 28 audit): unreachable, both result types returned before the switch.
        case .count, .dictionary: preconditionFailure("answered above")
        }
    }

    /// The managed objects matching `request` (MOC-FE-01…07); throws if its
    /// result type is not `.managedObject`. Disfavoured, so that a typed
    /// `FetchRequest<Result>` picks the typed `fetch(_:) -> [Result]`.
    @_disfavoredOverload
    public func fetch(_ request: AnyFetchRequest) throws -> [ManagedObject] {
        guard request.resultType == .managedObject else {
            throw CoreDataError(.coreData, "fetch(_:) returns managed objects; use execute(_:) for result type \(request.resultType)")
        }
        checkConfinement()
        return try matchingObjects(request)
    }

    /// Typed form of `fetch(_:)`.
    public func fetch<T: ManagedObject>(_ request: AnyFetchRequest, as type: T.Type) throws -> [T] {
        try fetch(request).map { object in
            guard let typed = object as? T else {
                throw CoreDataError(.coreData, "Fetched \(object.entity.name) is a \(Swift.type(of: object)), not a \(T.self); register the class with ManagedObjectClassRegistry")
            }
            return typed
        }
    }

    /// The number of objects `fetch` would return (MOC-FE-08).
    public func count(for request: AnyFetchRequest) throws -> Int {
        checkConfinement()
        return try countResult(request)
    }

    func resolveEntity(_ request: AnyFetchRequest) throws -> EntityDescription {
        let model = persistentStoreCoordinator.managedObjectModel
        if let entity = request.entity, entity.managedObjectModel === model { return entity }
        guard let name = request.entityName ?? request.entity?.name, let entity = model.entitiesByName[name] else {
            throw CoreDataError(.coreData, "A fetch request needs an entity of this context's model; '\(request.entityName ?? "nil")' is not one")
        }
        return entity
    }

    /// The objects a request matches, registered in this context; with
    /// `prefetching`, its `relationshipKeyPathsForPrefetching` are loaded too
    /// (counts, dictionaries and object IDs leave them alone, as in Core Data).
    func matchingObjects(_ request: AnyFetchRequest, prefetching: Bool = true) throws -> [ManagedObject] {
        let entity = try resolveEntity(request)
        if request.includesPendingChanges { processPendingChanges() }

        // With no unsaved changes to overlay (or when the request ignores
        // them), a store that applied predicate, sort, offset and limit
        // itself has given the answer: Core Data's SQL fetch is the result,
        // and filtering, sorting and cutting it again in memory only cost time.
        let overlaysChanges = request.includesPendingChanges && (!insertedSet.isEmpty || !updatedSet.isEmpty || !deletedSet.isEmpty)
        if !overlaysChanges {
            // When the store's answer is the result, each row becomes its
            // object as the store reads it, while the row is in the
            // processor's cache (a pass over the finished rows met each one
            // cold again). `awakeFromFetch` waits until the store is done, so
            // no application code runs while its statement is stepping.
            var made: [ManagedObject] = []
            var toAwake: [ManagedObject] = []
            let populate = !request.returnsObjectsAsFaults
            // Every object made here is held by `made`, so a sweep in the
            // middle could free nothing it makes: it runs once after, if
            // the table crossed the threshold.
            let threshold = sweepThreshold
            sweepThreshold = Int.max
            defer {
                sweepThreshold = threshold
                if registry.count >= threshold && !retainsRegisteredObjects {
                    sweepUnreferencedObjects(untilStable: false)
                    sweepThreshold = max(Self.minimumSweepThreshold, registry.count * 2)
                }
            }
            let fetched = try persistentStoreCoordinator.fetchSnapshots(for: entity, request: request, storeAppliesWindow: true) { snapshot in
                let object = objectForID(snapshot.objectID)
                if populate && object.isFault {
                    object.load(values: lazyValues(from: snapshot), version: snapshot.version, context: self, awake: false)
                    if !object.isPlainManagedObject { toAwake.append(object) }
                }
                made.append(object)
            }
            withChangeProcessingDisabled { for object in toAwake { object.awakeFromFetch() } }
            if fetched.isExact {
                if prefetching { try prefetchRelationships(request, made) }
                return made
            }
            // The store could not apply everything: no object was made yet,
            // and rows that do not match are filtered before any is.
            return try finishInMemory(request, entity: entity, snapshots: fetched.snapshots, prefetching: prefetching)
        }
        let fetched = try persistentStoreCoordinator.fetchSnapshots(for: entity, request: request, storeAppliesWindow: false)
        return try finishInMemory(request, entity: entity, snapshots: fetched.snapshots, prefetching: prefetching)
    }

    /// The rest of `matchingObjects` when the store's rows are not the
    /// answer: unsaved changes overlaid, then predicate, sort and window
    /// applied in memory.
    private func finishInMemory(_ request: AnyFetchRequest, entity: EntityDescription, snapshots: [StoreSnapshot], prefetching: Bool) throws -> [ManagedObject] {
        func fits(_ e: EntityDescription) -> Bool { request.includesSubentities ? e.isKindOf(entity: entity) : e === entity }

        // Rows of records not loaded here are filtered before any object is
        // made when the predicate reads only attributes (RowPredicateFilter).
        let rowFilter = request.predicate.flatMap { RowPredicateFilter($0, entity: entity) }
        var seen = Set<ObjectIdentifier>()
        var prematched = Set<ObjectIdentifier>()
        var candidates: [ManagedObject] = []
        candidates.reserveCapacity(snapshots.count + insertedSet.count)
        for snapshot in snapshots {
            let registered = registry[snapshot.objectID]
            var rowMatched = false
            if let rowFilter, registered == nil || registered!.isFault {
                guard try rowFilter.matches(snapshot.values) else { continue }
                rowMatched = true
            }
            let object = registered ?? objectForID(snapshot.objectID)
            if object.isFault && !request.returnsObjectsAsFaults {
                object.load(values: lazyValues(from: snapshot), version: snapshot.version, context: self)
            }
            if seen.insert(ObjectIdentifier(object)).inserted {
                candidates.append(object)
                if rowMatched { prematched.insert(ObjectIdentifier(object)) }
            }
        }
        if request.includesPendingChanges {
            candidates.removeAll { deletedSet.contains($0) }
            for object in insertedSet where fits(object.entity) && seen.insert(ObjectIdentifier(object)).inserted {
                candidates.append(object)
            }
            // A changed object may match now though its stored row does not,
            // and a store that filtered in SQL left that row out (MOC-FE-05):
            // it is judged on its in-memory values like the rest.
            for object in updatedSet where fits(object.entity) && seen.insert(ObjectIdentifier(object)).inserted {
                candidates.append(object)
            }
        }
        var result = try candidates.filter { try prematched.contains(ObjectIdentifier($0)) || matches(request, $0) }
        if !request.sortDescriptors.isEmpty {
            result = try FetchSortDescriptor.sort(result, using: request.sortDescriptors)
        }
        if request.fetchOffset > 0 { result = Array(result.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 && result.count > request.fetchLimit { result = Array(result.prefix(request.fetchLimit)) }
        if prefetching { try prefetchRelationships(request, result) }
        return result
    }

    /// Loads the relationships `relationshipKeyPathsForPrefetching` names for
    /// a fetch's results, in batches (`prefetch(_:for:)`).
    func prefetchRelationships(_ request: AnyFetchRequest, _ result: [ManagedObject]) throws {
        guard !request.relationshipKeyPathsForPrefetching.isEmpty else { return }
        try prefetch(request.relationshipKeyPathsForPrefetching, for: result)
    }

    func matches(_ request: AnyFetchRequest, _ object: ManagedObject, variables: [String: Any?] = [:]) throws -> Bool {
        guard let predicate = request.predicate else { return true }
        return try predicate.evaluate(with: object, substitutionVariables: variables)
    }
}

extension ManagedObjectContext {
    /// The value of a fetched property (FP-*): its request run with
    /// `$FETCH_SOURCE` bound to the owner and `$FETCHED_PROPERTY` to the
    /// description, evaluated lazily and cached on the owner until it is
    /// refreshed or turned into a fault. Returns an array of objects.
    func fetchedPropertyValue(_ property: FetchedPropertyDescription, of object: ManagedObject) throws -> Any? {
        if let cached = object.fetchedValues[property.name] { return cached }
        guard let template = property.fetchRequest else {
            throw CoreDataError(.coreData, "Fetched property \(object.entity.name).\(property.name) has no fetch request")
        }
        let request = template.copy()
        let variables: [String: Any?] = ["FETCH_SOURCE": object, "FETCHED_PROPERTY": property]
        request.predicate = template.predicate?.withSubstitutionVariables(variables)
        let result: [Any] = try execute(request)
        object.fetchedValues[property.name] = result
        return result
    }
}

/// Lets predicate expressions (`FETCH(...)`) run requests in a context.
extension ManagedObjectContext: FetchRequestExecuting {
    public func execute(_ request: Any) throws -> [Any] {
        guard let request = request as? AnyFetchRequest else {
            throw CoreDataError(.coreData, "A context executes AnyFetchRequest values, not \(type(of: request))")
        }
        return try execute(request)
    }

    public func count(for request: Any) throws -> Int {
        guard let request = request as? AnyFetchRequest else {
            throw CoreDataError(.coreData, "A context counts AnyFetchRequest values, not \(type(of: request))")
        }
        return try count(for: request)
    }
}
