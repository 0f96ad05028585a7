import Foundation
import Logging
import ObjectGraph
import StoreSync
import StoreSyncConfig

/// The runner's own view of each store's history, beside the engine's
/// connections, for the debug transaction lines.
/// Opened lazily on files that exist (never creating one), used only to
/// read, and dropped when a store fails or its file is replaced.
final class StoreHistoryReader {
    private let settings: GroupSettings
    private var open: [String: (coordinator: PersistentStoreCoordinator, store: PersistentStore)] = [:]

    init(settings: GroupSettings) { self.settings = settings }

    private func reader(_ name: String) throws -> (coordinator: PersistentStoreCoordinator, store: PersistentStore) {
        if let existing = open[name] { return existing }
        guard let settings = settings.stores.first(where: { $0.name == name }) else {
            throw CoreDataError(.persistentStoreOperation, "no store \(name)")
        }
        // Never create a store that is missing. Not opened with the
        // read-only option: on a WAL file whose -wal is empty that opens it
        // immutable, and a reader kept open would never see a later commit.
        // Without the history option nothing is installed or written; the
        // history the file has is read all the same.
        guard FileManager.default.fileExists(atPath: settings.path.path) else {
            throw CoreDataError(.fileReadNoSuchFile, "the store file \(settings.path.path) is missing")
        }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: self.settings.model)
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, configurationName: settings.configuration,
                                                       at: settings.path, options: [:])
        open[name] = (coordinator, store)
        return (coordinator, store)
    }

    /// The store's transactions after a history position.
    func transactions(_ name: String, after position: Int64) throws -> [PersistentHistoryTransaction] {
        do {
            let (coordinator, store) = try reader(name)
            let token = PersistentHistoryToken(storeIdentifier: store.identifier, position: position)
            return try coordinator.execute(.fetchHistory(after: token)).transactions
        } catch {
            close(name)
            throw error
        }
    }

    func close(_ name: String) {
        if let (coordinator, store) = open.removeValue(forKey: name) { try? coordinator.remove(store) }
    }

    func closeAll() {
        for name in Array(open.keys) { close(name) }
    }
}

/// At debug level, one log line per transaction a store's history gained
/// since the last round: the applications' transactions (pulled into the
/// hub, or not yet) and the engine's pushes into the store.
struct TransactionLog {
    /// The history position of each store logged through.
    private var through: [String: Int64] = [:]

    /// Logs the transactions of each store after what was logged before,
    /// up to the position `stores` report; a store seen for the first time
    /// only sets where to start (its past is not logged).
    mutating func log(_ stores: [SyncStoreStatus], reader: StoreHistoryReader, logger: Logger) {
        for status in stores where status.state != .failed {
            defer { through[status.name] = status.storePosition }
            guard let after = through[status.name], status.storePosition > after else { continue }
            do {
                for transaction in try reader.transactions(status.name, after: after) where transaction.token.position <= status.storePosition {
                    var metadata: Logger.Metadata = [
                        "store": "\(status.name)", "position": "\(transaction.token.position)", "author": "\(transaction.author ?? "")",
                        "changes": "\(transaction.changes.count)",
                        "inserted": "\(transaction.changes.filter { $0.changeType == .insert }.count)",
                        "updated": "\(transaction.changes.filter { $0.changeType == .update }.count)",
                        "deleted": "\(transaction.changes.filter { $0.changeType == .delete }.count)",
                    ]
                    if let name = transaction.contextName { metadata["context"] = "\(name)" }
                    if transaction.author == SyncGroup.author {
                        metadata["direction"] = "pushed"
                    } else {
                        metadata["direction"] = "from-application"
                        metadata["pulled"] = "\(transaction.token.position <= status.pulledThrough)"
                    }
                    logger.debug("transaction", metadata: metadata)
                }
            } catch {
                logger.debug("transactions not readable", metadata: ["store": "\(status.name)", "error": "\(error)"])
            }
        }
    }
}
