import Foundation

/// The store classes a coordinator can open, by type string (PC registry):
/// the built-in in-memory, XML, binary and SQLite stores, plus any registered with
/// `PersistentStoreCoordinator.registerStoreClass(_:forStoreType:)`.
final class StoreTypeRegistry: @unchecked Sendable {
    static let shared = StoreTypeRegistry()
    private let lock = NSLock()
    private var classes: [String: PersistentStore.Type] = [
        InMemoryStore.storeType: InMemoryStore.self,
        XMLStore.storeType: XMLStore.self,
        BinaryStore.storeType: BinaryStore.self,
        SQLiteStore.storeType: SQLiteStore.self,
    ]

    func register(_ type: PersistentStore.Type?, for name: String) {
        lock.lock(); defer { lock.unlock() }
        classes[name] = type
    }

    func storeClass(for name: String) -> PersistentStore.Type? {
        lock.lock(); defer { lock.unlock() }
        return classes[name]
    }

    var all: [String: PersistentStore.Type] {
        lock.lock(); defer { lock.unlock() }
        return classes
    }
}
