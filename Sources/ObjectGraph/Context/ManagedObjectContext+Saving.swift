import Foundation

/// The save pipeline in Core Data's order (MOC-SV-06).
extension ManagedObjectContext {
    /// Commits every unsaved change to the stores (MOC-SV-01):
    /// 1. processPendingChanges; 2. will-save notification; 3. delete rules
    /// (when not propagated at end of event); 4. validation, every error at
    /// once (1560 with details); 5. `willSave` hooks; 6. store assignment and
    /// permanent IDs; 7. conflict detection; 8. the merge policy; 9. one
    /// `StoreSaveRequest` per store; 10. commit in memory and `didSave`;
    /// 11. did-save notification with a `ContextChangeSet`.
    /// A failed save leaves objects, sets and temporary IDs as they were (MOC-SV-04).
    ///
    /// ```swift
    /// do { try context.save() }
    /// catch let error as CoreDataError where error.code == .validationMultipleErrors {
    ///     for detail in error.detailedErrors { print(detail.message) }
    /// }
    /// ```
    public func save() throws {
        checkConfinement()
        guard !isSaving && !isProcessingPendingChanges else {
            throw CoreDataError(.coreData, "save() was called while the context is saving or posting objects-did-change; save after the handler returns (MOC-SV-05)")
        }
        processPendingChanges()
        guard hasChanges || !lockedSet.isEmpty else { return }
        isSaving = true
        defer { isSaving = false; objectsChangedDuringWillSave = nil }
        post(Self.willSaveNotification, inserted: insertedSet, updated: updatedSet, deleted: deletedSet)
        if !propagatesDeletesAtEndOfEvent {
            propagateDeletes()
            for object in forgottenInserts { updatedSet.remove(object) }
        }

        try validateForSave()
        try runWillSaveHooks()

        // Steps 7–8: conflicts against what the stores hold now. With one
        // store the write itself detects them (each UPDATE and DELETE checks
        // the version inside the transaction) and only then are they looked
        // up and resolved, and the save written again: reading every changed
        // row back before each save doubled its cost. With several stores
        // they are resolved first, so no store is written when another would
        // refuse its part. Uniqueness constraints come after optimistic
        // locking, as Apple's NSMergePolicy orders them, and before the
        // permanent IDs: merging removes inserted objects.
        let checksFirst = persistentStoreCoordinator.persistentStores.count > 1
        if checksFirst { try settleConflicts() }
        try resolveUniquenessConflicts()
        guard hasChanges || !lockedSet.isEmpty else { return finishEmptySave() }

        // Step 6: stores and permanent IDs, not applied until the writes succeed.
        var inserted = insertedInOrder
        var insertedStores = try stores(for: inserted)
        // A failed save leaves temporary IDs as they were (MOC-SV-04).
        var idsApplied = false
        defer { if !idsApplied { for object in inserted { object.pendingPermanentID = nil } } }
        try allocatePermanentIDs(for: inserted, in: insertedStores)
        func finalID(_ object: ManagedObject) -> ManagedObjectID { object.pendingPermanentID ?? object.objectID }
        try checkCrossStoreRelationships(inserted + Array(updatedSet), finalID)

        var retriedAfterConflict = false
        var changeSet = ContextChangeSet()
        var writtenUpdates: [ManagedObject] = []
        var writtenUpdateSet = Set<ManagedObject>()
        while true {
            do {
                // Step 9: one request per store.
                var requests: [ObjectIdentifier: (PersistentStore, StoreSaveRequest)] = [:]
                // Requests are edited in place: copying one out and back per object
                // made a save of n objects copy its arrays n times (quadratic).
                func edit(_ store: PersistentStore, _ body: (inout StoreSaveRequest) throws -> Void) rethrows {
                    let key = ObjectIdentifier(store)
                    if requests[key] == nil {
                        var r = StoreSaveRequest()
                        r.contextName = name
                        r.transactionAuthor = transactionAuthor
                        // `propertyChanges` compares with the committed values,
                        // which are the stored row's (after a conflict, the
                        // resolved store row's): it is the complete list.
                        r.changedValuesAreComplete = true
                        requests[key] = (store, r)
                    }
                    try body(&requests[key]!.1)
                }
                changeSet = ContextChangeSet()
                changeSet.contextName = name
                changeSet.transactionAuthor = transactionAuthor

                for (index, object) in inserted.enumerated() {
                    let store = insertedStores[index]
                    let snapshot = StoreSnapshot(objectID: finalID(object), version: 1, slots: storedSlots(of: object, finalID))
                    let toMany = toManyChanges(of: object, finalID, onlyChanged: false)
                    let globalIdentifier = assignedGlobalIdentifiers.isEmpty ? nil : assignedGlobalIdentifiers[object]
                    edit(store) { r in
                        r.inserted.append(snapshot)
                        r.toManyChanges += toMany
                        if let globalIdentifier { r.globalIdentifiers[snapshot.objectID] = globalIdentifier }
                    }
                    changeSet.inserted.append(ObjectChange(inserted: snapshot))
                }
                writtenUpdates = []
                writtenUpdateSet = []
                for object in updatedInOrder + lockedSet.filter({ !updatedSet.contains($0) }) where !deletedSet.contains(object) && !insertedSet.contains(object) {
                    guard let store = object.objectID.persistentStore ?? persistentStoreCoordinator.store(withIdentifier: object.objectID.storeIdentifier) else { continue }
                    let changes = propertyChanges(of: object, finalID)
                    let toMany = toManyChanges(of: object, finalID, onlyChanged: true)
                    if changes.isEmpty && toMany.isEmpty && !lockedSet.contains(object) { continue }
                    let snapshot = StoreSnapshot(objectID: object.objectID, version: object.storeVersion + 1, slots: storedSlots(of: object, finalID))
                    edit(store) { r in
                        r.updated.append((snapshot, object.storeVersion))
                        r.toManyChanges += toMany
                        if !changes.isEmpty { r.changedValues[object.objectID] = changes }
                    }
                    writtenUpdates.append(object)
                    writtenUpdateSet.insert(object)
                    if !changes.isEmpty || !toMany.isEmpty {
                        var all = changes
                        for change in toMany {
                            let old = (object.committed[change.relationship.name] as? [ManagedObject])?.map(finalID)
                            all[change.relationship.name] = PropertyChange(oldValue: old, newValue: change.destinations)
                        }
                        changeSet.updated.append(ObjectChange(objectID: object.objectID, entityName: object.entity.name, changes: all))
                    }
                }
                for object in deletedInOrder {
                    guard let store = object.objectID.persistentStore ?? persistentStoreCoordinator.store(withIdentifier: object.objectID.storeIdentifier) else { continue }
                    edit(store) { $0.deleted.append((object.objectID, object.storeVersion)) }
                    changeSet.deleted.append(ObjectChange(objectID: object.objectID, entityName: object.entity.name,
                                                          changes: object.isFault ? [:] : deletionChanges(of: object, finalID)))
                }

                var written: [PersistentStore] = []
                for (store, r) in requests.values where !r.isEmpty {
                    do {
                        if let token = try persistentStoreCoordinator.save(r, to: store) { changeSet.historyTokens[store.identifier] = token }
                        written.append(store)
                    } catch let conflict as StoreVersionConflict {
                        if written.isEmpty && !checksFirst && !retriedAfterConflict { throw RetryAfterConflict() }
                        throw CoreDataError(written.isEmpty ? .managedObjectContextMerge : .persistentStoreIncompleteSave,
                                            "Another writer changed \(conflict.current.count) object(s) while this save was being written",
                                            userInfo: [CoreDataError.affectedStoresErrorKey: [store], MergeConflict.conflictListKey: [MergeConflict]()])
                    } catch {
                        if written.isEmpty { throw error }
                        throw CoreDataError(.persistentStoreIncompleteSave, "The save reached \(written.count) store(s) and then failed: \(error)",
                                            userInfo: [CoreDataError.affectedStoresErrorKey: [store], CoreDataError.underlyingErrorKey: error])
                    }
                }

            } catch is RetryAfterConflict {
                retriedAfterConflict = true
                try settleConflicts()
                // The stores' values the policy took may break a constraint;
                // objects merged away leave the insert list (and their IDs).
                if try resolveUniquenessConflicts() {
                    let kept = inserted.indices.filter { insertedSet.contains(inserted[$0]) }
                    for object in inserted where !insertedSet.contains(object) { object.pendingPermanentID = nil }
                    insertedStores = kept.map { insertedStores[$0] }
                    inserted = kept.map { inserted[$0] }
                }
                guard hasChanges || !lockedSet.isEmpty else { return finishEmptySave() }
                continue
            }
            break
        }

        // Step 10: commit in memory.
        idsApplied = true
        for object in inserted {
            let id = finalID(object)
            object.pendingPermanentID = nil
            if id !== object.objectID { rekey(object, to: id) }
            object.storeVersion = 1
            commitValues(object)
        }
        for object in writtenUpdates {
            object.storeVersion += 1
            commitValues(object)
        }
        for object in updatedInOrder where !writtenUpdateSet.contains(object) { commitValues(object) }
        let committedInserted = insertedSet, committedDeleted = deletedSet
        let committedUpdated = writtenUpdates.isEmpty ? updatedSet : updatedSet.union(writtenUpdates)
        for object in committedDeleted { unregister(object) }
        for object in forgottenInserts { unregister(object) }
        forgottenInserts.removeAll()
        insertedSet.removeAll(); updatedSet.removeAll(); deletedSet.removeAll(); lockedSet.removeAll(); mergeRetained.removeAll()
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll()
        pendingUndo.removeAll()
        undoManager?.removeAllActions()
        isSaving = false
        // Three passes instead of a union of the sets: building a set of every
        // saved object retained and released each one again.
        for object in inserted.count == committedInserted.count ? inserted : Array(committedInserted) { object.didSave() }
        for object in committedUpdated where !committedInserted.contains(object) { object.didSave() }
        for object in committedDeleted where !committedInserted.contains(object) && !committedUpdated.contains(object) { object.didSave() }
        assignedGlobalIdentifiers.removeAll()
        fillGlobalIdentifiers(&changeSet)
        post(Self.didSaveNotification, inserted: committedInserted, updated: committedUpdated, deleted: committedDeleted,
             extra: [Self.changeSetKey: changeSet])
    }

    /// Resolves conflicts until none are left; resolving can touch more
    /// objects (inverse repairs), which are checked in turn, and a few rounds
    /// settle any realistic graph.
    private func settleConflicts() throws {
        var rounds = 0
        while try resolveConflicts() {
            rounds += 1
            if rounds >= 8 {
                throw CoreDataError(.managedObjectContextMerge, "Conflicts kept appearing while the merge policy resolved them; save again")
            }
        }
    }

    /// Thrown inside `save()` when its single store found a version conflict
    /// on the first write: resolve, then write again.
    private struct RetryAfterConflict: Error {}

    private func finishEmptySave() {
        undoManager?.removeAllActions()
    }

    private func validateForSave() throws {
        var errors: [Error] = []
        for object in insertedInOrder { do { try object.validateForInsert() } catch { errors.append(error) } }
        for object in updatedInOrder where !insertedSet.contains(object) { do { try object.validateForUpdate() } catch { errors.append(error) } }
        for object in deletedInOrder { do { try object.validateForDelete() } catch { errors.append(error) } }
        if let error = CoreDataError.combining(errors) { throw error }
    }

    /// Calls `willSave` on every changed object, and again on objects its
    /// public setters changed (LIFE-20); endless re-dirtying fails the save.
    private func runWillSaveHooks() throws {
        // The first round visits the three sets in turn (building their union
        // retained every changed object once more); later rounds visit what
        // the hooks changed.
        objectsChangedDuringWillSave = []
        for object in insertedInOrder { object.willSave() }
        for object in updatedInOrder where !insertedSet.contains(object) { object.willSave() }
        for object in deletedInOrder where !insertedSet.contains(object) && !updatedSet.contains(object) { object.willSave() }
        var round = objectsChangedDuringWillSave ?? []
        objectsChangedDuringWillSave = nil
        var rounds = 1
        while !round.isEmpty {
            rounds += 1
            if rounds > 100 {
                throw CoreDataError(.coreData, "willSave kept changing \(round.count) object(s) for 100 rounds; change values only when they differ (LIFE-20)",
                                    userInfo: [CoreDataError.affectedObjectsErrorKey: Array(round)])
            }
            objectsChangedDuringWillSave = []
            for object in round { object.willSave() }
            round = objectsChangedDuringWillSave ?? []
            objectsChangedDuringWillSave = nil
        }
        propagateDeletes()
    }

    private func checkCrossStoreRelationships(_ objects: [ManagedObject], _ finalID: (ManagedObject) -> ManagedObjectID) throws {
        guard persistentStoreCoordinator.persistentStores.count > 1 else { return }
        for object in objects where !deletedSet.contains(object) {
            let home = try store(for: object)
            for rel in object.layout.relationships where !rel.isTransient {
                let related: [ManagedObject] = rel.isToMany ? (object.storage[rel.name] as? [ManagedObject] ?? []) : [(object.storage[rel.name] as? ManagedObject)].compactMap { $0 }
                for other in related where !deletedSet.contains(other) {
                    if try store(for: other) !== home {
                        throw CoreDataError(.managedObjectContextExternalRelationship, "\(object.entity.name).\(rel.name) relates objects in different stores; use a URI attribute for cross-store references (MOID-06)",
                                            userInfo: [CoreDataError.affectedObjectsErrorKey: [object, other]])
                    }
                }
            }
        }
    }

    /// An object's values as a snapshot holds them: the snapshot slots of
    /// its current (or committed) values, to-ones as IDs (deleted
    /// destinations as nil unless `committed`). The slots are the object's
    /// own, shared, when it has no to-one to translate.
    func storedSlots(of object: ManagedObject, _ finalID: (ManagedObject) -> ManagedObjectID, committed: Bool = false) -> [Any?] {
        let source = committed ? object.committed : object.storage
        let layout = object.layout
        var slots = source.slots
        if slots.count != layout.snapshotSlotCount {
            if slots.count > layout.snapshotSlotCount { slots.removeSubrange(layout.snapshotSlotCount...) }
            else { slots += repeatElement(nil, count: layout.snapshotSlotCount - slots.count) }
        }
        for slot in layout.toOneSlots {
            guard let value = slots[slot] else { continue }
            if let d = value as? ManagedObject, !(deletedSet.contains(d) && !committed) { slots[slot] = finalID(d) } else { slots[slot] = nil }
        }
        return slots
    }

    func storedValues(of object: ManagedObject, _ finalID: (ManagedObject) -> ManagedObjectID, committed: Bool = false) -> [String: Any] {
        StoreSnapshot(objectID: object.objectID, version: 0, slots: storedSlots(of: object, finalID, committed: committed)).values
    }

    /// A deleted object's stored values (committed, nil ones left out) as
    /// changes to nil, built from its slots in one pass.
    private func deletionChanges(of object: ManagedObject, _ finalID: (ManagedObject) -> ManagedObjectID) -> [String: PropertyChange] {
        let layout = object.layout
        let slots = storedSlots(of: object, finalID, committed: true)
        var out: [String: PropertyChange] = [:]
        out.reserveCapacity(layout.snapshotSlotCount)
        for slot in 0..<min(slots.count, layout.snapshotSlotCount) {
            if let value = slots[slot] { out[layout.slotProperties[slot].name] = PropertyChange(oldValue: value, newValue: nil) }
        }
        return out
    }

    func propertyChanges(of object: ManagedObject, _ finalID: (ManagedObject) -> ManagedObjectID) -> [String: PropertyChange] {
        var out: [String: PropertyChange] = [:]
        // The snapshot slots are exactly the stored attributes and to-ones.
        let layout = object.layout
        for slot in object.changedSlots.slots where slot < layout.snapshotSlotCount {
            let now = object.storage[slot: slot], then = object.committed[slot: slot]
            if ManagedObject.valuesEqual(now, then) { continue }
            func stored(_ v: Any?) -> Any? { layout.slotRelationships[slot] == nil ? v : (v as? ManagedObject).map(finalID) ?? v }
            out[layout.slotProperties[slot].name] = PropertyChange(oldValue: stored(then), newValue: stored(now))
        }
        // A to-one whose destination this save deletes is stored as nil
        // (`storedSlots`), so its column changes even if the slot did not.
        if !deletedSet.isEmpty {
            for slot in layout.toOneSlots {
                let name = layout.slotProperties[slot].name
                guard out[name] == nil, let destination = object.storage[slot: slot] as? ManagedObject, deletedSet.contains(destination),
                      let then = object.committed[slot: slot] as? ManagedObject else { continue }
                out[name] = PropertyChange(oldValue: finalID(then), newValue: nil)
            }
        }
        return out
    }

    func toManyChanges(of object: ManagedObject, _ finalID: (ManagedObject) -> ManagedObjectID, onlyChanged: Bool) -> [ToManyChange] {
        var out: [ToManyChange] = []
        for rel in object.layout.relationships where rel.isToMany && !rel.isTransient && !object.unloadedToMany.contains(rel.name) {
            let members = object.storage[rel.name] as? [ManagedObject] ?? []
            if onlyChanged && (!object.hasChangedKey(rel.name) || ManagedObject.valuesEqual(members, object.committed[rel.name], ordered: rel.isOrdered)) { continue }
            if !onlyChanged && members.isEmpty { continue }
            out.append(ToManyChange(objectID: finalID(object), relationship: rel, destinations: members.filter { !deletedSet.contains($0) }.map(finalID)))
        }
        return out
    }

    func commitValues(_ object: ManagedObject) {
        defer { object.changedSlots = SlotSet() }
        // Nothing to drop (no deleted destinations, no transients, every
        // to-many loaded): the committed values are the current ones, shared.
        if (deletedSet.isEmpty || object.layout.relationships.isEmpty) && !object.layout.hasTransientProperties && object.unloadedToMany.isEmpty {
            object.committed = object.storage
            return
        }
        for key in object.layout.persistentKeys {
            if object.unloadedToMany.contains(key) { continue }
            if var members = object.storage[key] as? [ManagedObject] {
                members.removeAll { deletedSet.contains($0) }
                object.storage[key] = members
            } else if let d = object.storage[key] as? ManagedObject, deletedSet.contains(d) {
                object.storage[key] = nil
            }
            object.committed[key] = object.storage[key]
        }
    }

    // MARK: - Conflicts (MOC-MO-13, MOC-MP-*, MOC-CR-*)

    /// Detects conflicts and applies the merge policy; true when it resolved any.
    private func resolveConflicts() throws -> Bool {
        let checked = updatedSet.union(deletedSet).union(lockedSet)
            .filter { !insertedSet.contains($0) && !$0.objectID.isTemporaryID && $0.storeVersion > 0 }
        guard !checked.isEmpty else { return false }
        let cached = persistentStoreCoordinator.cachedSnapshots(for: checked.map(\.objectID))
        let current = try persistentStoreCoordinator.currentSnapshots(for: checked.map(\.objectID))
        var conflicts: [(ManagedObject, StoreSnapshot?, StoreSnapshot?)] = []
        for object in checked {
            let now = current[object.objectID]
            if now?.version != object.storeVersion { conflicts.append((object, now, cached[object.objectID])) }
        }
        guard !conflicts.isEmpty else { return false }
        if mergePolicy == .error {
            let list = conflicts.map { object, now, cache -> MergeConflict in
                let snapshot = object.isFault ? [:] : storedValues(of: object, { $0.objectID }, committed: true)
                let cacheMatchesStore = cache?.version == now?.version
                return MergeConflict(object: object,
                                     snapshot: cacheMatchesStore ? snapshot : nil,
                                     cachedRow: cache?.values ?? now?.values ?? [:],
                                     databaseRow: cacheMatchesStore ? nil : (now?.values ?? [:]),
                                     newVersion: now?.version ?? 0, oldVersion: object.storeVersion)
            }
            throw CoreDataError(.managedObjectContextMerge, "\(list.count) object(s) changed in their store since this context read them (optimistic locking failure)",
                                userInfo: [MergeConflict.conflictListKey: list, CoreDataError.affectedObjectsErrorKey: list.map(\.object)])
        }
        for (object, now, _) in conflicts { try resolve(object, store: now) }
        return true
    }

    /// Applies the merge policy to one conflicting object (MOC-MP-04…MOC-MP-10).
    private func resolve(_ object: ManagedObject, store row: StoreSnapshot?) throws {
        guard let row else {
            // Deleted in the store meanwhile (MOC-MP-10 ii).
            switch mergePolicy {
            case .mergeByPropertyStoreTrump, .rollback:
                deletedSet.remove(object); updatedSet.remove(object); lockedSet.remove(object)
                pendingDeleted.insert(object)
                unregister(object)
                return
            default:
                throw CoreDataError(.managedObjectContextReferentialIntegrity, "The \(object.entity.name) object \(object.objectID) was deleted from its store by another writer; it cannot be saved under \(mergePolicy)",
                                    userInfo: [CoreDataError.affectedObjectsErrorKey: [object]])
            }
        }
        let storeValues = values(from: row)
        if deletedSet.contains(object) {
            // Deleted here, updated in the store (MOC-MP-10 i).
            switch mergePolicy {
            case .mergeByPropertyStoreTrump, .rollback:
                deletedSet.remove(object)
                object.load(values: storeValues, version: row.version, context: self)
                object.awake(fromSnapshotEvents: .mergePolicy)
            default:
                object.storeVersion = row.version
            }
            return
        }
        let snapshot = object.committed
        var merged = object.storage
        let persistentScalars = object.layout.persistentKeys.filter { object.layout.relationshipsByName[$0]?.isToMany != true }
        switch mergePolicy {
        case .error: return
        case .overwrite:
            break
        case .rollback:
            for key in persistentScalars { merged[key] = storeValues[key] }
            object.changedKeys = object.changedKeys.filter { object.layout.relationshipsByName[$0]?.isToMany == true }
        case .mergeByPropertyStoreTrump:
            for key in persistentScalars where !ManagedObject.valuesEqual(storeValues[key], snapshot[key]) { merged[key] = storeValues[key] }
        case .mergeByPropertyObjectTrump:
            for key in persistentScalars where !object.hasChangedKey(key) || ManagedObject.valuesEqual(object.storage[key], snapshot[key]) {
                merged[key] = storeValues[key]
            }
        }
        // To-ones whose value the policy changed: move the object between
        // the inverse to-manys too, so the graph (and what is written) agrees.
        var moved: [(RelationshipDescription, ManagedObject?, ManagedObject?)] = []
        for rel in object.layout.relationships where !rel.isToMany && rel.inverseRelationship != nil {
            let before = object.storage[rel.name] as? ManagedObject, after = merged[rel.name] as? ManagedObject
            if before !== after { moved.append((rel.inverseRelationship!, before, after)) }
        }
        object.storage = merged
        for (inverse, before, after) in moved {
            try before?.removeOneSide(inverse, object)
            try after?.addOneSide(inverse, object)
        }
        for key in persistentScalars { object.committed[key] = storeValues[key] }
        object.storeVersion = row.version
        object.changedKeys = Set(persistentScalars.filter { !ManagedObject.valuesEqual(merged[$0], storeValues[$0]) })
            .union(object.changedKeys.filter { object.layout.relationshipsByName[$0]?.isToMany == true })
        if object.changedKeys.isEmpty && !lockedSet.contains(object) { updatedSet.remove(object) }
        if mergePolicy == .rollback { updatedSet.remove(object); lockedSet.remove(object) }
        object.awake(fromSnapshotEvents: .mergePolicy)
    }
}
