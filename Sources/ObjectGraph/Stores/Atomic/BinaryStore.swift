import Foundation

/// Core Data's binary store type (`"Binary"`): an atomic store written as a
/// binary property list (docs/STORE-FORMATS.md).
///
/// ```swift
/// try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.binaryStoreType, at: url)
/// ```
public final class BinaryStore: PropertyListAtomicStore {
    public override class var storeType: String { PersistentStoreCoordinator.binaryStoreType }
    public override class var fileFormat: PropertyListSerialization.PropertyListFormat { .binary }
}
