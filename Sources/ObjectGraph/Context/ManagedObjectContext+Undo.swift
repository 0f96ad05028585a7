import Foundation

/// Undo and redo of processed changes (MOC-UN-*).
extension ManagedObjectContext {
    // MARK: - Undo (MOC-UN-*)

    /// Processes pending changes, then reverses the latest undo group.
    public func undo() {
        checkConfinement()
        guard let manager = undoManager else { return }
        processPendingChanges()
        manager.undo()
    }

    public func redo() {
        checkConfinement()
        guard let manager = undoManager else { return }
        processPendingChanges()
        manager.redo()
    }

    func applyUndo(_ records: [UndoRecord]) {
        isApplyingUndo = true
        var events: [ObjectIdentifier: (ManagedObject, SnapshotEventType)] = [:]
        func note(_ o: ManagedObject, _ e: SnapshotEventType) {
            let current = events[ObjectIdentifier(o)]?.1 ?? []
            events[ObjectIdentifier(o)] = (o, current.union(e))
        }
        for record in records.reversed() {
            switch record {
            case let .change(object, key, old):
                guard let rel = object.layout.relationshipsByName[key] else {
                    object.willChangeValue(forKey: key)
                    object.storage[key] = old
                    object.didChangeValue(forKey: key)
                    note(object, .undoUpdate)
                    continue
                }
                if rel.isToMany { object.unloadedToMany.remove(key) }
                object.willChangeValue(forKey: key)
                object.storage[key] = rel.isToMany ? (old ?? [ManagedObject]()) : old
                object.didChangeValue(forKey: key)
                note(object, .undoUpdate)
            case let .insert(object):
                // Undoing an insert removes the object; redo re-inserts it
                // without a second awakeFromInsert (LIFE-03).
                if insertedSet.remove(object) != nil {
                    pendingInserted.remove(object)
                    updatedSet.remove(object)
                    recordUndo(.delete(object))
                    note(object, .undoInsertion)
                } else if deletedSet.remove(object) != nil {
                    recordUndo(.delete(object))
                }
            case let .delete(object):
                if object.objectID.isTemporaryID || object.wasForgotten && object.storeVersion == 0 {
                    // It was an inserted object: put it back as inserted.
                    register(object)
                    object.wasForgotten = false
                    if insertedSet.insert(object).inserted { insertionOrder.note(object) }
                    pendingInserted.insert(object)
                    recordUndo(.insert(object))
                } else {
                    deletedSet.remove(object)
                    if !object.changedValues().isEmpty, updatedSet.insert(object).inserted { updateOrder.note(object) }
                    pendingUpdated.insert(object)
                    recordUndo(.insert(object))
                }
                note(object, .undoDeletion)
            }
        }
        // An object whose every change was undone is clean again.
        for object in updatedSet where object.changedValues().isEmpty { updatedSet.remove(object) }
        deletesToPropagate.removeAll { !deletedSet.contains($0) }
        isApplyingUndo = false
        for (object, event) in events.values { object.awake(fromSnapshotEvents: event) }
        processPendingChanges()
    }
}
