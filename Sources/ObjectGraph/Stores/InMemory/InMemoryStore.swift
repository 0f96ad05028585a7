import Foundation

/// A store that lives only in memory (Core Data's `NSInMemoryStoreType`):
/// an atomic store with no file. Fast; everything is lost with the coordinator.
///
/// ```swift
/// try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
/// ```
public final class InMemoryStore: AtomicStore {
    public override class var storeType: String { PersistentStoreCoordinator.inMemoryStoreType }

    public override func load() throws {}
    public override func save() throws {}
}
