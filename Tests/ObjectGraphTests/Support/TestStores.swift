import Foundation
@testable import ObjectGraph

/// The store types issue 28's behaviours are pinned on, and stacks over them.
enum TestStores {
    /// SQLite (a fresh file) and in-memory: the acceptance runs each item on both.
    static let sqliteAndInMemory = [PersistentStoreCoordinator.sqliteStoreType, PersistentStoreCoordinator.inMemoryStoreType]

    /// Where a store of `type` lives for one test: a new SQLite file, or none.
    static func url(for type: String) throws -> URL? {
        type == PersistentStoreCoordinator.sqliteStoreType ? try TestPaths.temporaryDirectory().appendingPathComponent("Store.sqlite") : nil
    }

    /// A coordinator over `model` with one store of `type`.
    static func coordinator(_ model: ManagedObjectModel, type: String, url: URL? = nil) throws -> PersistentStoreCoordinator {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: type, at: url ?? self.url(for: type))
        return coordinator
    }
}
