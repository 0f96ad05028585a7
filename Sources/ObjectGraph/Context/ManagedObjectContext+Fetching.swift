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
    public func execute(_ request: FetchRequest) throws -> [Any] {
        checkConfinement()
        let objects = try matchingObjects(request)
        switch request.resultType {
        case .managedObject: return objects
        case .managedObjectID: return objects.map(\.objectID)
        case .count: return [objects.count]
        case .dictionary:
            let entity = try resolveEntity(request)
            let layout = EntityLayout.of(entity)
            let keys = request.propertiesToFetch ?? layout.attributes.map(\.name)
            var rows: [[String: Any]] = []
            for object in objects {
                var row: [String: Any] = [:]
                for key in keys {
                    let value = try object.value(forKeyPath: key)
                    if let related = value as? ManagedObject { row[key] = related.objectID } else if let value { row[key] = value }
                }
                if request.returnsDistinctResults && rows.contains(where: { NSDictionary(dictionary: $0).isEqual(to: row) }) { continue }
                rows.append(row)
            }
            return rows
        }
    }

    /// The managed objects matching `request` (MOC-FE-01…07); throws if its
    /// result type is not `.managedObject`.
    public func fetch(_ request: FetchRequest) throws -> [ManagedObject] {
        guard request.resultType == .managedObject else {
            throw CoreDataError(.coreData, "fetch(_:) returns managed objects; use execute(_:) for result type \(request.resultType)")
        }
        return try execute(request) as! [ManagedObject]
    }

    /// Typed form of `fetch(_:)`.
    public func fetch<T: ManagedObject>(_ request: FetchRequest, as type: T.Type) throws -> [T] {
        try fetch(request).map { object in
            guard let typed = object as? T else {
                throw CoreDataError(.coreData, "Fetched \(object.entity.name) is a \(Swift.type(of: object)), not a \(T.self); register the class with ManagedObjectClassRegistry")
            }
            return typed
        }
    }

    /// The number of objects `fetch` would return (MOC-FE-08).
    public func count(for request: FetchRequest) throws -> Int {
        checkConfinement()
        return try matchingObjects(request).count
    }

    func resolveEntity(_ request: FetchRequest) throws -> EntityDescription {
        let model = persistentStoreCoordinator.managedObjectModel
        if let entity = request.entity, entity.managedObjectModel === model { return entity }
        guard let name = request.entityName ?? request.entity?.name, let entity = model.entitiesByName[name] else {
            throw CoreDataError(.coreData, "A fetch request needs an entity of this context's model; '\(request.entityName ?? "nil")' is not one")
        }
        return entity
    }

    func matchingObjects(_ request: FetchRequest) throws -> [ManagedObject] {
        let entity = try resolveEntity(request)
        if request.includesPendingChanges { processPendingChanges() }
        func fits(_ e: EntityDescription) -> Bool { request.includesSubentities ? e.isKindOf(entity: entity) : e === entity }

        let snapshots = try persistentStoreCoordinator.fetchSnapshots(for: entity, request: request)
        var seen = Set<ObjectIdentifier>()
        var candidates: [ManagedObject] = []
        candidates.reserveCapacity(snapshots.count + insertedSet.count)
        for snapshot in snapshots {
            let object = objectForID(snapshot.objectID)
            if object.isFault && !request.returnsObjectsAsFaults {
                object.load(values: values(from: snapshot), version: snapshot.version, context: self)
            }
            if seen.insert(ObjectIdentifier(object)).inserted { candidates.append(object) }
        }
        if request.includesPendingChanges {
            candidates.removeAll { deletedSet.contains($0) }
            for object in insertedSet where fits(object.entity) && seen.insert(ObjectIdentifier(object)).inserted {
                candidates.append(object)
            }
        }
        var result = try candidates.filter { try matches(request, $0) }
        if let order = request.objectOrder {
            var failure: Error?
            result.sort { a, b in
                do { return try order(a, b) } catch { failure = error; return false }
            }
            if let failure { throw failure }
        }
        if request.fetchOffset > 0 { result = Array(result.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 && result.count > request.fetchLimit { result = Array(result.prefix(request.fetchLimit)) }
        for path in request.relationshipKeyPathsForPrefetching {
            for object in result { _ = try? object.value(forKeyPath: path) }
        }
        return result
    }

    func matches(_ request: FetchRequest, _ object: ManagedObject) throws -> Bool {
        if let filter = request.objectFilter { return try filter(object) }
        if let format = request.predicateFormat, !format.isEmpty {
            throw CoreDataError(.coreData, "Fetching with a predicate needs the predicate engine, which is not merged into this branch yet (predicate: \(format))")
        }
        return true
    }
}

extension ManagedObjectContext {
    /// Fetched properties need the predicate engine (`$FETCH_SOURCE`,
    /// `$FETCHED_PROPERTY`); until it is merged, reading one says so.
    func fetchedPropertyValue(_ property: FetchedPropertyDescription, of object: ManagedObject) throws -> Any? {
        throw CoreDataError(.coreData, "Fetched property \(object.entity.name).\(property.name) cannot be evaluated yet: it needs the predicate engine, not merged into this branch")
    }
}
