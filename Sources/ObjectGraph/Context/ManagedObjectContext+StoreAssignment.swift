import Foundation

/// Which store an object goes to, permanent IDs and optimistic-locking
/// conflict marks.
extension ManagedObjectContext {
    // MARK: - Store assignment, permanent IDs, conflicts

    /// Chooses the store a newly inserted object is saved to (MOC-MO-07).
    public func assign(_ object: ManagedObject, to store: PersistentStore) {
        checkConfinement()
        // Trap kept (issue 28 audit): Core Data raises too ("Can't reassign an object to a different store once it has been saved").
        precondition(insertedSet.contains(object) && object.objectID.isTemporaryID, "ObjectGraph: assign(_:to:) takes a newly inserted object (MOC-MO-07)")
        precondition(persistentStoreCoordinator.persistentStores.contains { $0 === store }, "ObjectGraph: assign(_:to:) takes a store of this context's coordinator")
        assignedStores[ObjectIdentifier(object)] = store
    }

    /// Gives inserted objects permanent IDs now (MOC-MO-08…MOC-MO-10); objects
    /// with permanent IDs are skipped. They stay inserted until saved.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        checkConfinement()
        let pending = objects.filter { $0.objectID.isTemporaryID && $0.belongs(to: self) }
        try allocatePermanentIDs(for: pending, in: stores(for: pending))
        for object in pending {
            if let id = object.pendingPermanentID { rekey(object, to: id) }
            object.pendingPermanentID = nil
        }
    }

    /// Sets `pendingPermanentID` of each temporary object of `objects`
    /// (whose stores are `stores`, in the same order): one store call per
    /// store and entity. The save applies them once its writes succeed.
    func allocatePermanentIDs(for objects: [ManagedObject], in stores: [PersistentStore]) throws {
        struct GroupKey: Hashable { let store: ObjectIdentifier; let entity: ObjectIdentifier }
        var groups: [(store: PersistentStore, entity: EntityDescription, members: [Int])] = []
        var groupOf: [GroupKey: Int] = [:]
        // Objects of one entity usually come in runs: the run's group is
        // reused without hashing its key for every object.
        var last: (key: GroupKey, group: Int)?
        for (index, object) in objects.enumerated() where object.objectID.isTemporaryID {
            let key = GroupKey(store: ObjectIdentifier(stores[index]), entity: ObjectIdentifier(object.entity))
            let group: Int
            if let last, last.key == key {
                group = last.group
            } else if let known = groupOf[key] {
                group = known
            } else {
                group = groups.count
                groups.append((stores[index], object.entity, []))
                groupOf[key] = group
            }
            last = (key, group)
            groups[group].members.append(index)
        }
        for group in groups {
            let ids = try persistentStoreCoordinator.newObjectIDs(in: group.store, for: group.entity, count: group.members.count)
            for (index, id) in zip(group.members, ids) { objects[index].pendingPermanentID = id }
        }
    }

    /// The stores of `objects`, in order. Temporary objects not assigned to a
    /// store go to their entity's default store, looked up once per run of
    /// one entity rather than once per object (a locked scan of the stores).
    func stores(for objects: [ManagedObject]) throws -> [PersistentStore] {
        var out: [PersistentStore] = []
        out.reserveCapacity(objects.count)
        var last: (entity: EntityDescription, store: PersistentStore)?
        for object in objects {
            let usesDefault = object.objectID.isTemporaryID && (assignedStores.isEmpty || assignedStores[ObjectIdentifier(object)] == nil)
            if usesDefault, let last, last.entity === object.entity {
                out.append(last.store)
                continue
            }
            let store = try store(for: object)
            if usesDefault { last = (object.entity, store) }
            out.append(store)
        }
        return out
    }

    func store(for object: ManagedObject) throws -> PersistentStore {
        if let store = object.objectID.persistentStore ?? persistentStoreCoordinator.store(withIdentifier: object.objectID.storeIdentifier) { return store }
        if let assigned = assignedStores[ObjectIdentifier(object)] { return assigned }
        guard let store = persistentStoreCoordinator.defaultStore(for: object.entity) else {
            throw CoreDataError(.persistentStoreSave, "No writable persistent store holds the entity \(object.entity.name)", userInfo: [CoreDataError.affectedObjectsErrorKey: [object]])
        }
        return store
    }

    func rekey(_ object: ManagedObject, to id: ManagedObjectID) {
        // One removal and one insertion; an entry of another object under
        // the old ID (not expected) is put back.
        if let old = registry.removeValue(forKey: object.objectID), old !== object { registry[old.objectID] = old }
        object.objectID = id
        registry[id] = object
    }

    /// Marks an unchanged object so the next save fails (or resolves per the
    /// merge policy) if its record changed meanwhile (MOC-MO-13).
    public func detectConflicts(for object: ManagedObject) {
        checkConfinement()
        guard object.belongs(to: self), !object.objectID.isTemporaryID else { return }
        lockedSet.insert(object)
    }
}
