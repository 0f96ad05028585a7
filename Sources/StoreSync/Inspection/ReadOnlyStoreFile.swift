import Foundation
import ObjectGraph

/// A store or hub file opened for inspection: read-only, through ObjectGraph,
/// as an ordinary SQLite reader (`SQLiteStore.liveReadOnlyOption`), so it is
/// safe while the daemon and applications write the file, and commits they
/// make while it is open are seen. Nothing is ever written (SQLite may create
/// the `-wal`/`-shm` files a WAL-mode file has whenever it is in use).
final class ReadOnlyStoreFile {
    let url: URL
    let coordinator: PersistentStoreCoordinator
    let store: PersistentStore
    let context: ManagedObjectContext

    /// - Throws: 260 (`fileReadNoSuchFile`) when there is no file; the
    ///   store's errors (not a store, another model …) otherwise.
    init(url: URL, model: ManagedObjectModel, configurationName: String? = nil) throws {
        self.url = url
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw CoreDataError(.fileReadNoSuchFile, "no store file at \(url.path)", userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, configurationName: configurationName,
                                                   at: url, options: [PersistentStore.readOnlyOption: true,
                                                                      SQLiteStore.liveReadOnlyOption: true])
        context = ManagedObjectContext(coordinator: coordinator)
        // Other programs write the file: never answer from a cached row.
        context.stalenessInterval = 0
    }

    var recordsHistory: Bool { store.recordsPersistentHistory }

    func token(_ position: Int64) -> PersistentHistoryToken {
        PersistentHistoryToken(storeIdentifier: store.identifier, position: position)
    }

    func currentPosition() throws -> Int64 {
        try store.currentPersistentHistoryToken()?.position ?? 0
    }

    func close() {
        for store in coordinator.persistentStores { try? coordinator.remove(store) }
    }

    deinit { close() }
}
