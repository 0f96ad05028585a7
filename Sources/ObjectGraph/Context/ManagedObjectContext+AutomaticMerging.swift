import Foundation

/// `automaticallyMergesChangesFromParent`: merging the saves of sibling
/// contexts without a did-save observer of the app's own.
///
/// Contexts here always sit directly on a coordinator (there are no child
/// contexts), so "the parent" is the coordinator, and a change reaches it
/// when another context on it saves. That is what Core Data merges for a
/// context whose parent is the coordinator.
///
/// ```swift
/// container.viewContext.automaticallyMergesChangesFromParent = true
/// try background.performAndWait { try background.save() }
/// // viewContext merges the save on the main queue and posts objects-did-change.
/// ```
extension ManagedObjectContext {
    func updateAutomaticMerging() {
        if let automaticMergeObserver {
            NotificationCenter.default.removeObserver(automaticMergeObserver)
            self.automaticMergeObserver = nil
        }
        guard automaticallyMergesChangesFromParent else { return }
        let coordinator = persistentStoreCoordinator
        // Observed for every context (object nil) and filtered by coordinator:
        // the sibling contexts are not known in advance.
        automaticMergeObserver = NotificationCenter.default.addObserver(forName: Self.didSaveNotification, object: nil, queue: nil) { [weak self] note in
            guard let self, let saver = note.object as? ManagedObjectContext, saver !== self,
                  saver.persistentStoreCoordinator === coordinator,
                  let changes = note.userInfo?[Self.changeSetKey] as? ContextChangeSet else { return }
            // The saver's queue posts; the merge runs on this context's own.
            self.perform { [weak self] in self?.mergeChanges(from: changes) }
        }
    }
}
