import Foundation

/// Refreshing objects and merging other contexts' saves (MOC-RF-*, MOC-MG-*).
extension ManagedObjectContext {
    /// With `mergeChanges` false: the object turns into a fault and loses its
    /// pending changes (MOC-RF-01/02); a pending delete is discarded. With
    /// true: stored values are reloaded and local changes re-applied on top;
    /// transient values stay (MOC-RF-03). Inserted objects are left alone
    /// (MOC-RF-07). Reported as refreshed at the next processPendingChanges (MOC-RF-06).
    ///
    /// ```swift
    /// context.refresh(employee, mergeChanges: false)
    /// employee.isFault   // true
    /// ```
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        checkConfinement()
        // Trap kept (issue 28 audit): another context's object, as MOC-RF-07 recommends (a programming error).
        precondition(object.belongs(to: self) || object.managedObjectContext == nil, "ObjectGraph: refresh(_:mergeChanges:) takes an object of this context (MOC-RF-07)")
        guard object.belongs(to: self), !insertedSet.contains(object) else { return }
        try? refresh(object, mergeChanges: mergeChanges, staleness: stalenessInterval)
    }

    func refresh(_ object: ManagedObject, mergeChanges: Bool, staleness: TimeInterval) throws {
        if !mergeChanges || object.isFault {
            deletedSet.remove(object); updatedSet.remove(object); lockedSet.remove(object)
            object.turnIntoFault()
            if staleness == 0 { persistentStoreCoordinator.forgetCachedSnapshot(for: object.objectID) }
            pendingRefreshed.insert(object)
            return
        }
        guard let snapshot = try persistentStoreCoordinator.snapshot(for: object.objectID, staleness: staleness) else { return }
        var local: [String: Any?] = [:]
        for key in object.changedKeys where object.layout.persistentKeySet.contains(key) { local[key] = object.storage[key] }
        let fresh = values(from: snapshot)
        var storage = fresh
        for attribute in object.layout.attributes where attribute.isTransient { storage[attribute.name] = object.storage[attribute.name] }
        for rel in object.layout.relationships where rel.isTransient { storage[rel.name] = object.storage[rel.name] }
        var unloaded = Set(object.layout.toManyNames)
        for (key, value) in local {
            storage[key] = value ?? nil
            if object.layout.relationshipsByName[key]?.isToMany == true { unloaded.remove(key) }
        }
        object.storage = storage
        object.fetchedValues = [:]
        object.committed = fresh
        object.unloadedToMany = unloaded
        object.storeVersion = snapshot.version
        object.changedKeys = Set(local.keys.filter { !ManagedObject.valuesEqual(local[$0] ?? nil, fresh[$0]) })
        if object.changedKeys.isEmpty { updatedSet.remove(object) }
        pendingRefreshed.insert(object)
        object.awake(fromSnapshotEvents: .refresh)
    }

    /// Applies another context's did-save notification (MOC-MG-01…05):
    /// updated objects registered here are refreshed with local changes kept
    /// on top, inserted objects are registered as faults, deleted ones are
    /// removed as already committed. Posts objects-did-change.
    public func mergeChanges(fromContextDidSave notification: Notification) {
        guard let changes = notification.userInfo?[Self.changeSetKey] as? ContextChangeSet else { return }
        mergeChanges(from: changes)
    }

    /// The serialisable form of `mergeChanges(fromContextDidSave:)` (MOC-MG-06).
    public func mergeChanges(from changes: ContextChangeSet) {
        checkConfinement()
        var inserted = Set<ManagedObject>(), refreshed = Set<ManagedObject>(), deleted = Set<ManagedObject>()
        for change in changes.inserted {
            let object = objectForID(change.objectID)
            mergeRetained.insert(object)
            inserted.insert(object)
        }
        for change in changes.updated {
            guard let object = registry[change.objectID] else { continue }
            if object.isFault {
                persistentStoreCoordinator.forgetCachedSnapshot(for: object.objectID, ifOlderThan: nil)
                continue
            }
            try? refresh(object, mergeChanges: true, staleness: 0)
            refreshed.insert(object)
        }
        for change in changes.deleted {
            guard let object = registry[change.objectID] else { continue }
            // Already committed elsewhere: not a pending delete here (MOC-MG-04).
            for rel in object.layout.relationships {
                guard let inverse = rel.inverseRelationship, !object.isFault else { continue }
                let related = rel.isToMany ? (object.storage[rel.name] as? [ManagedObject] ?? []) : [(object.storage[rel.name] as? ManagedObject)].compactMap { $0 }
                for other in related where !other.isFault {
                    changeProcessingDisabled += 1
                    try? other.removeOneSide(inverse, object)
                    changeProcessingDisabled -= 1
                    if let committed = other.committed[inverse.name] as? [ManagedObject] { other.committed[inverse.name] = committed.filter { $0 !== object } }
                    else if other.committed[inverse.name] as? ManagedObject === object { other.committed[inverse.name] = nil }
                }
            }
            insertedSet.remove(object); updatedSet.remove(object); deletedSet.remove(object); lockedSet.remove(object)
            unregister(object)
            deleted.insert(object)
        }
        post(Self.objectsDidChangeNotification, inserted: inserted, updated: refreshed, deleted: deleted, refreshed: refreshed)
    }
}
