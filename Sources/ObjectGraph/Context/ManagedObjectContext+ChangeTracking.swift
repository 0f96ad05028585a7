import Foundation

/// Recording changes as they are made, and processing them at the end of
/// an event (MOC-PP-*).
extension ManagedObjectContext {
    // MARK: - Change tracking

    func objectDidChange(_ object: ManagedObject, key: String, slot: Int?, oldValue: Any?, modeled: Bool) {
        guard changeProcessingDisabled == 0, object.belongs(to: self) else { return }
        // Unmodeled keys have no slot: they mark the object updated (when
        // the class asks for that) but are never saved, so nothing records them.
        if let slot { object.changedSlots.insert(slot) }
        // An inserted object is reported as inserted, never as updated, so
        // it need not join the update sets (one hash insert per setValue).
        if !insertedSet.contains(object) {
            if !deletedSet.contains(object), updatedSet.insert(object).inserted { updateOrder.note(object) }
            pendingUpdated.insert(object)
        }
        objectsChangedDuringWillSave?.insert(object)
        if modeled { recordUndo(.change(object, key, oldValue)) }
    }

    func recordUndo(_ record: @autoclosure () -> UndoRecord) {
        guard let manager = undoManager, manager.isUndoRegistrationEnabled else { return }
        pendingUndo.append(record())
    }

    /// Processes changes since the last call (MOC-PP-01): runs delete rules
    /// when `propagatesDeletesAtEndOfEvent`, registers one undo group and
    /// posts one objects-did-change notification if anything changed (MOC-PP-03).
    /// Called by save, undo, redo and fetches including pending changes (MOC-PP-02).
    public func processPendingChanges() {
        checkConfinement()
        guard !isProcessingPendingChanges else { return }
        isProcessingPendingChanges = true
        defer { isProcessingPendingChanges = false }
        if propagatesDeletesAtEndOfEvent { propagateDeletes() }
        for object in forgottenInserts where !insertedSet.contains(object) && !deletedSet.contains(object) {
            updatedSet.remove(object)
            pendingUpdated.remove(object)
            if undoManager == nil { unregister(object) }
        }
        forgottenInserts.removeAll()
        if !pendingUndo.isEmpty, let manager = undoManager {
            let records = pendingUndo
            pendingUndo.removeAll()
            manager.registerUndo { [weak self] in self?.applyUndo(records) }
        }
        pendingUndo.removeAll()
        // Usually every pending insert is still inserted: then the pending set
        // itself is the answer, without building a copy of it.
        let inserted = pendingInserted.allSatisfy(insertedSet.contains) ? pendingInserted : pendingInserted.intersection(insertedSet)
        let deleted = pendingDeleted.allSatisfy(deletedSet.contains) ? pendingDeleted : pendingDeleted.intersection(deletedSet)
        let updated = pendingUpdated.filter { $0.belongs(to: self) && !insertedSet.contains($0) && !deletedSet.contains($0) }
        let refreshed = pendingRefreshed
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll(); pendingRefreshed.removeAll()
        post(Self.objectsDidChangeNotification, inserted: inserted, updated: updated, deleted: deleted, refreshed: refreshed)
    }
}
