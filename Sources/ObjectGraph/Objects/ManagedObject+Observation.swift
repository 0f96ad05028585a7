import Foundation

/// Change and access notification (KVO-*, DEP-*, ACC-07): the hooks
/// generated accessors and KVC call, and custom accessors must call.
extension ManagedObject {
    /// Registers a handler for changes to `key`, including changes to the keys
    /// it depends on (DEP-01). Keep the token; the observation ends with it.
    ///
    /// ```swift
    /// let token = employee.addObserver(forKey: "fullName") { change in print(change.newValue ?? "nil") }
    /// ```
    public final func addObserver(forKey key: String, _ handler: @escaping (ObservedChange) -> Void) -> ObservationToken {
        nextObserverID += 1
        let id = nextObserverID
        observerTable[key, default: []].append((id, handler))
        return ObservationToken { [weak self] in
            self?.observerTable[key]?.removeAll { $0.id == id }
            if self?.observerTable[key]?.isEmpty == true { self?.observerTable[key] = nil }
        }
    }

    /// Fires the fault for any key (nil included) (FLT-06, FLT-07).
    public final func willAccessValue(forKey key: String?) {
        if isFault { try? fireFaultIfNeeded() }
    }

    /// The end of an access; a hook for symmetry with Core Data (KVO-06).
    public final func didAccessValue(forKey key: String?) {}

    /// Announces a change to `key`; pair it with `didChangeValue(forKey:)`
    /// around a primitive set in a custom setter (ACC-07, CHG-12).
    public final func willChangeValue(forKey key: String) {
        // The old value serves observers and undo only. Keeping it otherwise
        // holds a second reference to a to-many's member array, so the next
        // mutation copies the whole array: O(n) per added member.
        guard needsOldValues else { return }
        pendingOldValues[key] = storage[key] ?? NSNull()
    }

    private var needsOldValues: Bool {
        !observerTable.isEmpty || (withContext { $0.undoManager?.isUndoRegistrationEnabled ?? false } ?? false)
    }

    /// Completes a change: notifies observers (and observers of dependent
    /// keys) and tells the context, which records it for saving and undo.
    public final func didChangeValue(forKey key: String) {
        didChangeValue(forKey: key, slot: layout.slotIndex[key])
    }

    /// `didChangeValue(forKey:)` for a caller that has looked up the slot.
    final func didChangeValue(forKey key: String, slot: Int?) {
        let old = pendingOldValues.isEmpty ? nil : nilIfNSNull(pendingOldValues.removeValue(forKey: key))
        finishChange(key, slot: slot, kind: .setting, old: old, objects: [])
    }

    public final func willChangeValue(forKey key: String, withSetMutation kind: SetMutationKind, using objects: [ManagedObject]) {
        willChangeValue(forKey: key)
    }

    public final func didChangeValue(forKey key: String, withSetMutation kind: SetMutationKind, using objects: [ManagedObject]) {
        let old = pendingOldValues.isEmpty ? nil : nilIfNSNull(pendingOldValues.removeValue(forKey: key))
        finishChange(key, slot: layout.slotIndex[key], kind: kind == .minus ? .removal : .insertion, old: old, objects: objects)
    }

    private func finishChange(_ key: String, slot: Int?, kind: ObservedChange.Kind, old: Any?, objects: [ManagedObject]) {
        let modeled = slot != nil || layout.fetchedPropertiesByName[key] != nil
        if modeled || !type(of: self).contextShouldIgnoreUnmodeledPropertyChanges {
            withContext { $0.objectDidChange(self, key: key, slot: slot, oldValue: old, modeled: modeled) }
        }
        guard !observerTable.isEmpty else { return }
        let rel = layout.relationshipsByName[key]
        let change = ObservedChange(object: self, key: key, kind: kind, oldValue: ManagedObject.publicValue(old, rel),
                                    newValue: ManagedObject.publicValue(storage[key], rel), objects: objects)
        notifyObservers(of: key, change)
        for observed in observerTable.keys where observed != key {
            let affecting = type(of: self).keyPathsForValuesAffectingValue(forKey: observed)
            if affecting.contains(key) || affecting.contains(where: { $0.hasPrefix(key + ".") }) {
                notifyObservers(of: observed, ObservedChange(object: self, key: observed, kind: .setting, oldValue: nil, newValue: nil, objects: []))
            }
        }
    }

    private func notifyObservers(of key: String, _ change: ObservedChange) {
        for entry in observerTable[key] ?? [] { entry.handler(change) }
    }
}
