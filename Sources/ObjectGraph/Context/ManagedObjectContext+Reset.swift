import Foundation

/// Discarding changes: rollback and reset.
extension ManagedObjectContext {
    // MARK: - Rollback and reset

    /// Discards every unsaved change and clears undo (MOC-RB-01): inserts are
    /// unregistered, deletes restored, updates reverted to the last committed
    /// values, not refetched (MOC-RB-02). Reverted objects get the Rollback
    /// event (MOC-RB-03) and are reported as refreshed.
    public func rollback() {
        checkConfinement()
        undoManager?.removeAllActions()
        pendingUndo.removeAll()
        for object in insertedSet { unregister(object) }
        for object in forgottenInserts { unregister(object) }
        forgottenInserts.removeAll()
        let reverted = updatedSet.union(deletedSet)
        for object in reverted where !object.isFault {
            for key in object.changedKeys {
                if let committed = object.committed[key] { object.storage[key] = committed }
                else if object.layout.relationshipsByName[key]?.isToMany == true { object.unloadedToMany.insert(key); object.storage[key] = nil }
                else { object.storage[key] = nil }
            }
            object.changedSlots = SlotSet()
        }
        insertedSet.removeAll(); updatedSet.removeAll(); deletedSet.removeAll(); lockedSet.removeAll()
        assignedGlobalIdentifiers.removeAll()
        deletesToPropagate.removeAll()
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll()
        for object in reverted { object.awake(fromSnapshotEvents: .rollback) }
        pendingRefreshed.formUnion(reverted)
        processPendingChanges()
    }

    /// Forgets every object (MOC-RS-01, MOC-RS-02): all sets empty, undo
    /// cleared, old instances detached; posts `invalidatedAll` with their IDs.
    public func reset() {
        checkConfinement()
        let ids = registry.values.map(\.objectID)
        // Every table is emptied below, so each object is only told it was
        // let go of (what `unregister` does beyond removing table entries).
        func forget(_ o: ManagedObject) {
            guard o.belongs(to: self) else { return }
            o.managedObjectContext = nil
            o.wasForgotten = true
        }
        for o in registry.values { forget(o) }
        for o in insertedSet { forget(o) }
        for o in updatedSet { forget(o) }
        for o in deletedSet { forget(o) }
        registry.removeAll(); mergeRetained.removeAll()
        insertedSet.removeAll(); updatedSet.removeAll(); deletedSet.removeAll(); lockedSet.removeAll()
        assignedGlobalIdentifiers.removeAll()
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll(); pendingRefreshed.removeAll()
        pendingUndo.removeAll(); deletesToPropagate.removeAll(); forgottenInserts.removeAll(); assignedStores.removeAll()
        undoManager?.removeAllActions()
        NotificationCenter.default.post(name: Self.objectsDidChangeNotification, object: self, userInfo: [Self.invalidatedAllObjectsKey: ids])
    }
}
