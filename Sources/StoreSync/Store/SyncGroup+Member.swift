import Foundation
import ObjectGraph

extension SyncGroup {
    /// One store of the group as the engine holds it.
    final class Member {
        let configuration: SyncStoreConfiguration
        /// The group's name: the engine's metadata keys in the store carry it.
        let groupName: String
        let coordinator: PersistentStoreCoordinator
        let store: PersistentStore
        let access: GraphAccess
        var paused = false
        /// The store history position up to which, after the cursor, only
        /// the engine's own transactions were found (in memory: a push then
        /// looks for application changes only after it).
        var checkedThrough: Int64 = 0
        /// A pull's advance over the engine's own pushes, not committed to
        /// the hub (`from`: the hub's cursor it starts from; `to`: where
        /// reading those pushes led). See `pull(_:)`.
        var deferredCursor: (from: SyncCursor, to: SyncCursor)?
        var lastError: String?
        var failed = false
        var name: String { configuration.name }
        var context: ManagedObjectContext { access.context }

        init(_ configuration: SyncStoreConfiguration, group: String, model: ManagedObjectModel) throws {
            self.configuration = configuration
            groupName = group
            coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                       configurationName: configuration.configurationName, at: configuration.url,
                                                       options: [PersistentStore.persistentHistoryTrackingKey: true])
            let context = ManagedObjectContext(coordinator: coordinator)
            context.transactionAuthor = SyncGroup.author
            // A writer committing between the engine's read and its write
            // fails the push; it is retried after that change is pulled.
            context.mergePolicy = .error
            // Applications write these files too: never trust a cached row.
            context.stalenessInterval = 0
            access = GraphAccess(context: context)
        }

        func token(_ position: Int64) -> PersistentHistoryToken {
            PersistentHistoryToken(storeIdentifier: store.identifier, position: position)
        }

        /// The first application transaction (any author but the engine's)
        /// after `position`: its fields only, nothing decoded. What a pull
        /// would still find, what a push must not write over, and how old
        /// the oldest change not pulled is.
        func firstApplicationTransaction(after position: Int64) throws -> PersistentHistoryTransaction? {
            let request = PersistentHistoryChangeRequest.fetchHistory(after: token(position))
            request.resultType = .transactionsOnly
            request.transactionPredicate = try FetchPredicate(format: "author == nil OR author != %@", argumentArray: [SyncGroup.author])
            request.fetchLimit = 1
            return try coordinator.execute(request).transactions.first
        }
    }
}
