import Foundation

// Persistent history and global identifiers across a coordinator's stores.
extension PersistentStoreCoordinator {
    /// The newest history position of the first of `stores` (nil: of all
    /// stores) that records history (Core Data's
    /// `currentPersistentHistoryToken(fromStores:)`). A token names one
    /// store's position; with several stores, ask for each.
    ///
    /// ```swift
    /// let token = try coordinator.currentPersistentHistoryToken(fromStores: nil)
    /// ```
    public func currentPersistentHistoryToken(fromStores stores: [PersistentStore]?) throws -> PersistentHistoryToken? {
        for store in stores ?? persistentStores {
            if let token = try store.currentPersistentHistoryToken() { return token }
        }
        return nil
    }

    /// Runs a history request on the stores it names (`affectedStores`), on
    /// the store its token belongs to, or on every store that records
    /// history; fetched transactions of several stores come in time order.
    ///
    /// ```swift
    /// let transactions = try coordinator.execute(.fetchHistory(after: token)).transactions
    /// ```
    public func execute(_ request: PersistentHistoryChangeRequest) throws -> PersistentHistoryResult {
        var stores = request.affectedStores ?? persistentStores
        switch request.operation {
        case .fetchAfterToken(let token?), .deleteThroughToken(let token):
            let matching = stores.filter { $0.identifier == token.storeIdentifier }
            guard !matching.isEmpty else {
                throw CoreDataError(.persistentStoreOperation, "the history token \(token) belongs to no store of this coordinator")
            }
            stores = matching
        default:
            if request.affectedStores == nil { stores = try stores.filter { try $0.currentPersistentHistoryToken() != nil } }
        }
        var transactions: [PersistentHistoryTransaction] = []
        var deleted = 0
        for store in stores {
            switch try store.executeHistoryRequest(request) {
            case .transactions(let t): transactions += t
            case .deleted(let n): deleted += n
            }
        }
        switch request.operation {
        case .deleteThroughToken, .deleteBeforeDate: return .deleted(deleted)
        default:
            if stores.count > 1 { transactions.sort { ($0.timestamp, $0.token) < ($1.timestamp, $1.token) } }
            return .transactions(transactions)
        }
    }

    /// Posted (object: the coordinator) when `checkForRemoteChanges()` finds
    /// that another connection or process committed to a store that records
    /// history (Core Data's `NSPersistentStoreRemoteChange`), with the
    /// store's URL under `persistentStoreURLKey` and its newest token under
    /// `persistentHistoryTokenKey`.
    public static let persistentStoreRemoteChangeNotification = Notification.Name("NSPersistentStoreRemoteChangeNotification")
    public static let persistentStoreURLKey = "storeURL"
    public static let persistentHistoryTokenKey = "historyToken"

    /// Looks at each store that records history for commits made by other
    /// connections or processes since the last look (SQLite's
    /// `PRAGMA data_version`, confirmed by the history position) and posts
    /// `persistentStoreRemoteChangeNotification` for each store that has
    /// some. ObjectGraph has no event loop: call it when the store's files
    /// change (the daemon does, from its file watcher) or on a timer.
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.persistentStoreRemoteChangeNotification,
    ///                                        object: coordinator, queue: nil) { note in … }
    /// let changed = try coordinator.checkForRemoteChanges()
    /// ```
    /// - Returns: the stores that had remote changes.
    @discardableResult
    public func checkForRemoteChanges() throws -> [PersistentStore] {
        var changed: [PersistentStore] = []
        for case let store as SQLiteStore in persistentStores where store.recordsPersistentHistory {
            guard let token = try store.noticeRemoteCommit() else { continue }
            changed.append(store)
            var info: [String: Any] = [Self.persistentHistoryTokenKey: token]
            if let url = store.url { info[Self.persistentStoreURLKey] = url }
            NotificationCenter.default.post(name: Self.persistentStoreRemoteChangeNotification, object: self, userInfo: info)
        }
        return changed
    }

    /// The global identifiers of objects, asked of the stores that hold them.
    public func globalIdentifiers(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: UUID] {
        var byStore: [String: [ManagedObjectID]] = [:]
        for id in ids where !id.isTemporaryID { byStore[id.storeIdentifier ?? "", default: []].append(id) }
        var out: [ManagedObjectID: UUID] = [:]
        for (identifier, group) in byStore {
            guard let store = store(withIdentifier: identifier) else { continue }
            out.merge(try store.globalIdentifiers(for: group)) { a, _ in a }
        }
        return out
    }

    /// The IDs of the objects global identifiers name, each from the first
    /// store that holds it; identifiers no store holds are left out. One
    /// call for many objects costs a query per few hundred of them, where
    /// `objectID(forGlobalIdentifier:)` costs two per object.
    ///
    /// ```swift
    /// let ids = try coordinator.objectIDs(forGlobalIdentifiers: changes.map(\.globalIdentifier))
    /// ```
    public func objectIDs(forGlobalIdentifiers globalIdentifiers: [UUID]) throws -> [UUID: ManagedObjectID] {
        var out: [UUID: ManagedObjectID] = [:]
        var missing = globalIdentifiers
        for store in persistentStores where !missing.isEmpty {
            out.merge(try store.objectIDs(forGlobalIdentifiers: missing)) { a, _ in a }
            missing = missing.filter { out[$0] == nil }
        }
        return out
    }

    /// The ID of the object a global identifier names, in the first store that holds it.
    public func objectID(forGlobalIdentifier globalIdentifier: UUID) throws -> ManagedObjectID? {
        for store in persistentStores {
            if let id = try store.objectID(forGlobalIdentifier: globalIdentifier) { return id }
        }
        return nil
    }
}
