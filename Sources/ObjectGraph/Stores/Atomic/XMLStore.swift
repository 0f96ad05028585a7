import Foundation

/// Core Data's XML store type (`"XML"`): an atomic store written as an XML
/// property list (docs/STORE-FORMATS.md).
///
/// ```swift
/// try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.xmlStoreType, at: url)
/// ```
public final class XMLStore: PropertyListAtomicStore {
    public override class var storeType: String { PersistentStoreCoordinator.xmlStoreType }
    public override class var fileFormat: PropertyListSerialization.PropertyListFormat { .xml }
}
