import Foundation

// Persistent history and global identifiers seen from a context.
extension ManagedObjectContext {
    /// Runs a persistent history request (Core Data's `execute(_:)` with an
    /// `NSPersistentHistoryChangeRequest`).
    ///
    /// ```swift
    /// let transactions = try context.execute(.fetchHistory(after: token)).transactions
    /// ```
    public func execute(_ request: PersistentHistoryChangeRequest) throws -> PersistentHistoryResult {
        try persistentStoreCoordinator.execute(request)
    }

    /// Gives an inserted object the global identifier it has in another
    /// store, so one object has one identifier in every store (what the sync
    /// engine does when it copies an object). Takes effect at the next save;
    /// an identifier never changes afterwards.
    ///
    /// ```swift
    /// let copy = try context.insertNewObject(forEntityName: "Note")
    /// try context.assignGlobalIdentifier(change.globalIdentifier, to: copy)
    /// ```
    /// - Throws: 134030 when the object is not inserted in this context.
    public func assignGlobalIdentifier(_ globalIdentifier: UUID, to object: ManagedObject) throws {
        checkConfinement()
        guard object.belongs(to: self), insertedSet.contains(object) else {
            throw CoreDataError(.persistentStoreSave, "a global identifier can only be given to an object inserted in this context and not yet saved (\(object.objectID))")
        }
        assignedGlobalIdentifiers[object] = globalIdentifier
    }

    /// The ID of the object a global identifier names, in this context's stores.
    public func objectID(forGlobalIdentifier globalIdentifier: UUID) throws -> ManagedObjectID? {
        try persistentStoreCoordinator.objectID(forGlobalIdentifier: globalIdentifier)
    }

    /// The IDs of the objects global identifiers name in this context's
    /// stores (those held); see the coordinator's method of the same name.
    public func objectIDs(forGlobalIdentifiers globalIdentifiers: [UUID]) throws -> [UUID: ManagedObjectID] {
        try persistentStoreCoordinator.objectIDs(forGlobalIdentifiers: globalIdentifiers)
    }

    /// The object a global identifier names, or nil when no store holds it.
    ///
    /// ```swift
    /// if let note = try context.existingObject(withGlobalIdentifier: gid) { … }
    /// ```
    public func existingObject(withGlobalIdentifier globalIdentifier: UUID) throws -> ManagedObject? {
        guard let id = try objectID(forGlobalIdentifier: globalIdentifier) else { return nil }
        return try existingObject(with: id)
    }

    /// Merges fetched history into this context, like a did-save change set
    /// (Core Data's `mergeChanges(fromContextDidSave:)` fed from history):
    /// inserted objects are registered, updated ones refreshed, deleted ones
    /// let go of.
    public func mergeChanges(fromHistory transactions: [PersistentHistoryTransaction]) {
        var changes = ContextChangeSet()
        for transaction in transactions {
            for change in transaction.changes {
                var object = ObjectChange(objectID: change.changedObjectID, entityName: change.entity.name, changes: [:])
                object.globalIdentifier = change.globalIdentifier
                switch change.changeType {
                case .insert: changes.inserted.append(object)
                case .update: changes.updated.append(object)
                case .delete: changes.deleted.append(object)
                }
            }
        }
        mergeChanges(from: changes)
    }

    /// The global identifiers of what a save wrote, for its change set: asked
    /// of the stores once the save has committed (stores without history
    /// give none).
    func fillGlobalIdentifiers(_ changeSet: inout ContextChangeSet) {
        guard persistentStoreCoordinator.persistentStores.contains(where: \.recordsPersistentHistory) else { return }
        let ids = (changeSet.inserted + changeSet.updated + changeSet.deleted).map(\.objectID)
        guard !ids.isEmpty, let found = try? persistentStoreCoordinator.globalIdentifiers(for: ids), !found.isEmpty else { return }
        for i in changeSet.inserted.indices { changeSet.inserted[i].globalIdentifier = found[changeSet.inserted[i].objectID] }
        for i in changeSet.updated.indices { changeSet.updated[i].globalIdentifier = found[changeSet.updated[i].objectID] }
        for i in changeSet.deleted.indices { changeSet.deleted[i].globalIdentifier = found[changeSet.deleted[i].objectID] }
    }
}
