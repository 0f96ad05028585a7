import Foundation

/// Core Data's context notification names and userInfo keys (MOC-NT-*,
/// MOC-UK-*), posted on `NotificationCenter.default` with the context as the
/// object. Values are `Set<ManagedObject>`; keys with empty sets are left out
/// and no notification has every set empty (MOC-UK-07).
///
/// ```swift
/// NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: writer, queue: nil) { note in
///     reader.perform { reader.mergeChanges(fromContextDidSave: note) }
/// }
/// ```
extension ManagedObjectContext {
    public static let objectsDidChangeNotification = Notification.Name("NSManagedObjectContextObjectsDidChangeNotification")
    public static let willSaveNotification = Notification.Name("NSManagedObjectContextWillSaveNotification")
    public static let didSaveNotification = Notification.Name("NSManagedObjectContextDidSaveNotification")

    /// `NSInsertedObjectsKey` and friends; their string values are Core Data's.
    public static let insertedObjectsKey = "inserted"
    public static let updatedObjectsKey = "updated"
    public static let deletedObjectsKey = "deleted"
    public static let refreshedObjectsKey = "refreshed"
    public static let invalidatedObjectsKey = "invalidated"
    /// Posted by `reset()`: an array of the IDs of every forgotten object (MOC-UK-06).
    public static let invalidatedAllObjectsKey = "invalidatedAll"
    /// The did-save notification's `ContextChangeSet` (MOC-MG-06).
    public static let changeSetKey = "ObjectGraphChangeSet"

    func post(_ name: Notification.Name, inserted: Set<ManagedObject> = [], updated: Set<ManagedObject> = [], deleted: Set<ManagedObject> = [],
              refreshed: Set<ManagedObject> = [], invalidated: Set<ManagedObject> = [], extra: [String: Any] = [:]) {
        var info = extra
        if !inserted.isEmpty { info[Self.insertedObjectsKey] = inserted }
        if !updated.isEmpty { info[Self.updatedObjectsKey] = updated }
        if !deleted.isEmpty { info[Self.deletedObjectsKey] = deleted }
        if !refreshed.isEmpty { info[Self.refreshedObjectsKey] = refreshed }
        if !invalidated.isEmpty { info[Self.invalidatedObjectsKey] = invalidated }
        if name == Self.objectsDidChangeNotification && info.isEmpty { return }
        NotificationCenter.default.post(name: name, object: self, userInfo: info)
    }
}
