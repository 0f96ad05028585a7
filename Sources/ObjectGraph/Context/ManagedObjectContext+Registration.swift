import Foundation

/// One instance per record (MOC-00a): the registry, faults made for IDs,
/// and the sweep that forgets objects nothing else holds.
extension ManagedObjectContext {
    // MARK: - Registration

    /// Every registered object, faults included (MOC-00d).
    public var registeredObjects: Set<ManagedObject> {
        checkConfinement()
        sweepUnreferencedObjects(untilStable: true)
        return Set(registry.values)
    }
    public var insertedObjects: Set<ManagedObject> { checkConfinement(); return insertedSet }
    public var updatedObjects: Set<ManagedObject> { checkConfinement(); return updatedSet }
    public var deletedObjects: Set<ManagedObject> { checkConfinement(); return deletedSet }
    /// Uncommitted changes exist (MOC-HC-01).
    public var hasChanges: Bool { !insertedSet.isEmpty || !updatedSet.isEmpty || !deletedSet.isEmpty }

    /// The registered object for `id`, or nil; never touches a store.
    public func registeredObject(for id: ManagedObjectID) -> ManagedObject? {
        checkConfinement()
        // An entry only the registry holds is an object the application let
        // go of: it is gone (MOC-RR-02), even if no sweep has run yet.
        if !retainsRegisteredObjects, registry[id] != nil, isKnownUniquelyReferenced(&registry[id]!) {
            registry.removeValue(forKey: id)?.managedObjectContext = nil
            return nil
        }
        return registry[id]
    }

    /// The object for `id`: registered, or a new fault (not checked against
    /// the store until fired) (MOC-00a).
    public func object(with id: ManagedObjectID) -> ManagedObject {
        checkConfinement()
        return objectForID(id)
    }

    /// The object for `id`, loaded; throws 133000 if its record does not exist.
    public func existingObject(with id: ManagedObjectID) throws -> ManagedObject {
        checkConfinement()
        if let o = registry[id] {
            if deletedSet.contains(o) || o.wasForgotten { throw missingObject(id) }
            try o.fireFaultIfNeeded()
            return o
        }
        // The context's staleness applies as when a fault fires (MOC-ST-*):
        // with 0, a row another coordinator changed is read again.
        guard !id.isTemporaryID, let snapshot = try persistentStoreCoordinator.snapshot(for: id, staleness: stalenessInterval) else { throw missingObject(id) }
        let o = objectForID(id)
        o.load(values: lazyValues(from: snapshot), version: snapshot.version, context: self)
        return o
    }

    func missingObject(_ id: ManagedObjectID) -> CoreDataError {
        CoreDataError(.managedObjectContextReferentialIntegrity, "No \(id.entityName) object exists with ID \(id)", userInfo: [CoreDataError.affectedObjectsErrorKey: [id]])
    }

    func objectForID(_ id: ManagedObjectID) -> ManagedObject {
        // One hash lookup finds the entry or puts the new fault in its place:
        // every fetched row and every related ID comes through here.
        let (object, made) = registry.value(for: id) { objectClass(for: id.entity).makeFault(entity: id.entity, id: id) }
        if made {
            object.managedObjectContext = self
            sweepIfGrown()
        }
        return object
    }

    /// The registered class for `entity`, remembered for the last entity
    /// asked while no class is (un)registered: the registry takes a lock
    /// and a table lookup, and a fetch asks once per row.
    func objectClass(for entity: EntityDescription) -> ManagedObject.Type {
        let registry = ManagedObjectClassRegistry.shared
        let generation = registry.generation
        let className = entity.managedObjectClassName
        if let last = lastObjectClass, last.entity === entity, last.generation == generation, last.className == className { return last.type }
        let type = registry.objectClass(for: entity)
        lastObjectClass = (entity, className, generation, type)
        return type
    }

    func register(_ object: ManagedObject) {
        object.managedObjectContext = self
        registry[object.objectID] = object
        sweepIfGrown()
    }

    /// Sweeps the uniquing table when it has doubled since the last sweep.
    private func sweepIfGrown() {
        if registry.count >= sweepThreshold && !retainsRegisteredObjects {
            // Changed objects are held by the change sets and cannot go: a
            // sweep is worth its pass over the table only when enough of it
            // could (not while inserting many objects, say).
            let sweepable = registry.count - insertedSet.count - updatedSet.count - deletedSet.count
            if sweepable >= Self.minimumSweepThreshold { sweepUnreferencedObjects(untilStable: false) }
            sweepThreshold = max(Self.minimumSweepThreshold, registry.count * 2)
        }
    }

    /// Removes registered objects that only the registry references: clean
    /// objects the application let go of, which Core Data frees (MOC-RR-02).
    /// Changed objects are held by the change sets, so they stay. Freeing
    /// one object can leave another unreferenced (a to-one it held);
    /// `untilStable` sweeps again until nothing more goes.
    func sweepUnreferencedObjects(untilStable: Bool) {
        guard !retainsRegisteredObjects else { return }
        while true {
            var freed = 0
            // In place: a copy of the entry would never be the only reference.
            registry.removeAll(where: { isKnownUniquelyReferenced(&$0) }, removed: { object in
                object.managedObjectContext = nil
                freed += 1
            })
            if freed == 0 || !untilStable { return }
        }
    }

    func unregister(_ object: ManagedObject) {
        if registry[object.objectID] === object { registry[object.objectID] = nil }
        mergeRetained.remove(object)
        assignedStores[ObjectIdentifier(object)] = nil
        object.managedObjectContext = nil
        object.wasForgotten = true
    }

    /// Turns stored snapshot values into object values (to-one IDs to
    /// objects). The slots are shared with the snapshot until a to-one is
    /// replaced, so a row of attributes becomes an object's values as is.
    func values(from snapshot: StoreSnapshot) -> PropertyValues {
        var values = lazyValues(from: snapshot)
        resolveToOnes(in: &values)
        return values
    }

    /// A snapshot's slots as object values with to-ones still IDs: what
    /// `ManagedObject.load` takes, resolved when first read.
    func lazyValues(from snapshot: StoreSnapshot) -> PropertyValues {
        PropertyValues(layout: EntityLayout.of(snapshot.objectID.entity), slots: snapshot.slots)
    }

    func resolveToOnes(in values: inout PropertyValues) {
        for slot in values.layout.toOneSlots {
            if let id = values[slot: slot] as? ManagedObjectID { values[slot: slot] = objectForID(id) }
        }
    }

    func withChangeProcessingDisabled(_ body: () -> Void) {
        changeProcessingDisabled += 1
        defer { changeProcessingDisabled -= 1 }
        body()
    }

    /// Inverse maintenance is off while loading (LIFE-10) and while undoing,
    /// which replays both sides of every change itself.
    var maintainsInverses: Bool { changeProcessingDisabled == 0 && !isApplyingUndo }
}
