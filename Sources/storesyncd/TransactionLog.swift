import Foundation
import Logging
import ObjectGraph
import StoreSync
import StoreSyncConfig

/// At debug level, one log line per transaction a store's history gained
/// since the last round: the applications' transactions (pulled into the
/// hub, or not yet) and the engine's pushes into the store. Read from each
/// store's history through a connection of its own, opened for the read
/// and closed after it, only when debug is on.
struct TransactionLog {
    /// The history position of each store logged through.
    private var through: [String: Int64] = [:]

    /// Logs the transactions of each store after what was logged before,
    /// up to the position `stores` report; a store seen for the first time
    /// only sets where to start (its past is not logged).
    mutating func log(_ stores: [SyncStoreStatus], settings: GroupSettings, logger: Logger) {
        for status in stores where status.state != .failed {
            defer { through[status.name] = status.storePosition }
            guard let after = through[status.name], status.storePosition > after,
                  let store = settings.stores.first(where: { $0.name == status.name }) else { continue }
            do {
                for line in try Self.transactions(in: store.path, model: settings.model, after: after, through: status.storePosition) {
                    var metadata: Logger.Metadata = [
                        "store": "\(status.name)", "position": "\(line.position)", "author": "\(line.author ?? "")",
                        "changes": "\(line.changes)", "inserted": "\(line.inserted)", "updated": "\(line.updated)", "deleted": "\(line.deleted)",
                    ]
                    if let name = line.contextName { metadata["context"] = "\(name)" }
                    if line.author == SyncGroup.author {
                        metadata["direction"] = "pushed"
                    } else {
                        metadata["direction"] = "from-application"
                        metadata["pulled"] = "\(line.position <= status.pulledThrough)"
                    }
                    logger.debug("transaction", metadata: metadata)
                }
            } catch {
                logger.debug("transactions not readable", metadata: ["store": "\(status.name)", "error": "\(error)"])
            }
        }
    }

    struct Line {
        var position: Int64
        var author: String?
        var contextName: String?
        var changes = 0
        var inserted = 0
        var updated = 0
        var deleted = 0
    }

    static func transactions(in url: URL, model: ManagedObjectModel, after: Int64, through: Int64) throws -> [Line] {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        // Read-only: never creates a store that is missing, never writes one.
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                                       options: [PersistentStore.persistentHistoryTrackingKey: true,
                                                                 PersistentStore.readOnlyOption: true])
        defer { try? coordinator.remove(store) }
        let token = PersistentHistoryToken(storeIdentifier: store.identifier, position: after)
        return try coordinator.execute(.fetchHistory(after: token)).transactions.compactMap { transaction in
            guard transaction.token.position <= through else { return nil }
            var line = Line(position: transaction.token.position, author: transaction.author, contextName: transaction.contextName)
            for change in transaction.changes {
                line.changes += 1
                switch change.changeType {
                case .insert: line.inserted += 1
                case .update: line.updated += 1
                case .delete: line.deleted += 1
                }
            }
            return line
        }
    }
}
