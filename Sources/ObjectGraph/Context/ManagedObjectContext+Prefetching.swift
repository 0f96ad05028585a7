import Foundation

/// Relationship prefetching (FR `relationshipKeyPathsForPrefetching`):
/// loading the objects behind a key path for many objects with a few store
/// round-trips per level of the path, instead of firing one fault per object.
extension ManagedObjectContext {
    /// Loads what `keyPaths` lead to for every object of `objects`, level by
    /// level, as a fetch request's `relationshipKeyPathsForPrefetching`
    /// does. Each path is dotted relationship names ("department",
    /// "employees.projects"). Per level: owners that are faults are loaded
    /// in one batch; to-many faults of all owners are filled with one
    /// `relatedObjectIDs(for:ofAll:)` call per relationship and store (one
    /// SQL query per 500 owners on SQLite); the destinations that are still
    /// faults are then loaded in one batch. Rows come from the coordinator's
    /// row cache when fresh enough (`stalenessInterval`), as a fault would.
    ///
    /// With no key paths, only `objects` themselves are loaded: the faults
    /// among them with one store round-trip per 500 (what a fault fired on
    /// each would cost one query each for), as Core Data's fetch of
    /// `SELF IN` objects with `returnsObjectsAsFaults` off does.
    ///
    /// Objects already loaded are never reloaded, so pending changes stay;
    /// loading is not a change (nothing becomes updated). A destination whose
    /// row is gone stays a fault (firing it reports 133000). Objects of
    /// another context are skipped: their faults must load in their own.
    ///
    /// ```swift
    /// let staff = try context.fetch(FetchRequest(entityName: "Employee"))
    /// try context.prefetch(["department.manager", "projects"], for: staff)
    /// // staff[i].department?.manager and staff[i].projects are now in memory.
    /// try context.prefetch([], for: ids.map(context.object(with:)))   // the objects themselves
    /// ```
    /// - Throws: 134060 naming the path when a step is not a relationship
    ///   of the entity it is read from (unknown key, attribute, fetched
    ///   property, empty step); nothing is loaded then. Store errors pass through.
    public func prefetch(_ keyPaths: [String], for objects: [ManagedObject]) throws {
        checkConfinement()
        guard !objects.isEmpty else { return }
        guard !keyPaths.isEmpty else {
            try fulfillFaults(Self.unique(objects.filter { $0.belongs(to: self) && !$0.objectID.isTemporaryID }))
            return
        }
        var roots: [ObjectIdentifier: EntityDescription] = [:]
        for object in objects { roots[ObjectIdentifier(object.entity)] = object.entity }
        // Every path is checked before anything is loaded: a bad path must
        // not leave half of the work done.
        var paths: [[String]] = []
        for entity in roots.values { paths = try Self.checkPrefetchPaths(keyPaths, from: entity) }
        let start = Self.unique(objects.filter { $0.belongs(to: self) })
        for steps in paths {
            var level = start
            for key in steps where !level.isEmpty {
                level = try prefetchStep(key, of: level)
            }
        }
    }

    /// The steps of each path, after checking them from `root` (see
    /// `prefetch(_:for:)` for the error); batched fetches check up front,
    /// because their batches are loaded later, where errors cannot be thrown.
    static func checkPrefetchPaths(_ keyPaths: [String], from root: EntityDescription) throws -> [[String]] {
        try keyPaths.map { path in
            let steps = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            try checkPrefetchPath(steps, path, from: root)
            return steps
        }
    }

    /// Walks the path through destination entities. Sub-entities reached at
    /// run time inherit the relationships checked here.
    private static func checkPrefetchPath(_ steps: [String], _ path: String, from root: EntityDescription) throws {
        var entity = root
        for key in steps {
            guard let property = entity.propertiesByName[key] else {
                throw CoreDataError(.coreData, "Invalid key path '\(path)' for prefetching from \(root.name): \(entity.name) has no relationship '\(key)'",
                                    userInfo: [CoreDataError.entityNameErrorKey: entity.name, CoreDataError.propertyNameErrorKey: key])
            }
            guard let relationship = property as? RelationshipDescription, let destination = relationship.destinationEntity else {
                throw CoreDataError(.coreData, "Invalid key path '\(path)' for prefetching from \(root.name): '\(key)' of \(entity.name) is not a relationship",
                                    userInfo: [CoreDataError.entityNameErrorKey: entity.name, CoreDataError.propertyNameErrorKey: key])
            }
            entity = destination
        }
    }

    /// One level: the destinations of `key` for every owner, loaded.
    private func prefetchStep(_ key: String, of owners: [ManagedObject]) throws -> [ManagedObject] {
        // An owner's to-one values are in its row, and loading a row resets
        // its to-many faults: owners are loaded before anything else.
        try fulfillFaults(owners)
        var groups: [ObjectIdentifier: (RelationshipDescription, [ManagedObject])] = [:]
        for owner in owners where !owner.isFault {
            guard let relationship = owner.layout.relationshipsByName[key] else { continue }
            groups[ObjectIdentifier(relationship), default: (relationship, [])].1.append(owner)
        }
        var destinations: [ManagedObject] = []
        for (relationship, members) in groups.values {
            if relationship.isToMany {
                try fulfillToManyFaults(relationship, of: members)
                for owner in members { destinations += owner.storage[relationship.name] as? [ManagedObject] ?? [] }
            } else {
                for owner in members { if let destination = owner.storage[relationship.name] as? ManagedObject { destinations.append(destination) } }
            }
        }
        let next = Self.unique(destinations)
        try fulfillFaults(next)
        return next
    }

    /// Loads the faults among `objects` with one coordinator call; objects
    /// already loaded (maybe with pending changes) are left alone, and an
    /// object whose row is gone stays a fault.
    func fulfillFaults(_ objects: [ManagedObject]) throws {
        let faults = objects.filter(\.isFault)
        guard !faults.isEmpty else { return }
        let rows = try persistentStoreCoordinator.snapshots(for: faults.map(\.objectID), staleness: stalenessInterval)
        for object in faults where object.isFault {
            guard let row = rows[object.objectID] else { continue }
            object.load(values: lazyValues(from: row), version: row.version, context: self)
        }
    }

    /// `loadToMany` for many owners: one coordinator call for every owner
    /// whose relationship is still a fault. Owners never saved have nothing
    /// stored, as in `fetchRelated(_:of:)`.
    private func fulfillToManyFaults(_ relationship: RelationshipDescription, of owners: [ManagedObject]) throws {
        var stored: [ManagedObject] = []
        for owner in owners where owner.unloadedToMany.contains(relationship.name) {
            if owner.objectID.isTemporaryID || insertedSet.contains(owner) {
                owner.fulfillToMany(relationship, with: [])
            } else {
                stored.append(owner)
            }
        }
        guard !stored.isEmpty else { return }
        let membership = try persistentStoreCoordinator.relatedObjectIDs(for: relationship, ofAll: stored.map(\.objectID))
        for owner in stored where owner.unloadedToMany.contains(relationship.name) {
            owner.fulfillToMany(relationship, with: (membership[owner.objectID] ?? []).map(objectForID))
        }
    }

    private static func unique(_ objects: [ManagedObject]) -> [ManagedObject] {
        var seen = Set<ObjectIdentifier>()
        return objects.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}
