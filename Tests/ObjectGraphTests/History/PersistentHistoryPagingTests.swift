import Foundation
import Testing
@testable import ObjectGraph

/// Reading history in pages (`fetchLimit`, `changeLimit`, transactions
/// without changes), looking many objects up by global identifier at once,
/// several saves in one store transaction, loading many faults at once, and
/// emptying the coordinator's row cache: what a reader or writer that goes
/// through millions of changes in bounded memory needs.
@Suite struct PersistentHistoryPagingTests {
    func newURL() throws -> URL {
        try TestPaths.temporaryDirectory().appendingPathComponent("Paging.sqlite")
    }

    /// Saves `counts.count` transactions, the n-th inserting `counts[n]` owners named "t<n>-<i>".
    func saveTransactions(_ context: ManagedObjectContext, _ counts: [Int], author: String = "app") throws {
        context.transactionAuthor = author
        try context.performAndWait {
            for (n, count) in counts.enumerated() {
                for i in 0..<count { try context.insertNewObject(forEntityName: "Owner").setValue("t\(n)-\(i)", forKey: "name") }
                try context.save()
            }
            context.reset()
        }
    }

    @Test func fetchLimitAndChangeLimitPageThroughWholeTransactions() throws {
        let (_, context) = try HistoryModel.stack(try newURL())
        try saveTransactions(context, [3, 1, 5, 2, 4])
        let all = try context.execute(.fetchHistory(after: nil)).transactions
        try #require(all.count == 5)

        // fetchLimit: the oldest transactions first; paging after the last token goes on where it stopped.
        let first = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        first.fetchLimit = 2
        let page1 = try context.execute(first).transactions
        #expect(page1.map(\.changes.count) == [3, 1])
        let second = PersistentHistoryChangeRequest.fetchHistory(after: page1.last!.token)
        second.fetchLimit = 2
        #expect(try context.execute(second).transactions.map(\.token) == Array(all[2...3]).map(\.token))

        // changeLimit: stops at the end of the transaction that reaches it, never inside one.
        let byChanges = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        byChanges.changeLimit = 4
        #expect(try context.execute(byChanges).transactions.map(\.changes.count) == [3, 1])
        let oneBig = PersistentHistoryChangeRequest.fetchHistory(after: all[1].token)
        oneBig.changeLimit = 2
        #expect(try context.execute(oneBig).transactions.map(\.changes.count) == [5])   // larger than the limit: whole, alone

        // Paging with either limit reads every transaction exactly once.
        var token: PersistentHistoryToken?
        var seen: [PersistentHistoryToken] = []
        while true {
            let request = PersistentHistoryChangeRequest.fetchHistory(after: token)
            request.changeLimit = 3
            let page = try context.execute(request).transactions
            guard let last = page.last else { break }
            seen += page.map(\.token)
            token = last.token
        }
        #expect(seen == all.map(\.token))
    }

    @Test func cutsTransactionsPagesThroughOneLargeTransaction() throws {
        let (_, context) = try HistoryModel.stack(try newURL())
        try saveTransactions(context, [2, 7, 1])
        let all = try context.execute(.fetchHistory(after: nil)).transactions
        try #require(all.map(\.changes.count) == [2, 7, 1])

        // Parts of 3 row changes: the large transaction comes in three parts, each
        // with its own changes and the token of its last row, all with its number.
        var after = all[0].token
        var parts: [PersistentHistoryTransaction] = []
        while after.position < all[1].token.position {
            let request = PersistentHistoryChangeRequest.fetchHistory(after: after)
            request.fetchLimit = 1
            request.changeLimit = 3
            request.cutsTransactions = true
            let part = try #require(try context.execute(request).transactions.first)
            parts.append(part)
            after = part.token
        }
        #expect(parts.map(\.changes.count) == [3, 3, 1])
        #expect(parts.allSatisfy { $0.transactionNumber == all[1].transactionNumber && $0.author == "app" })
        #expect(parts.last?.token == all[1].token)
        // Every change of the whole transaction exactly once, in order.
        #expect(parts.flatMap(\.changes).map(\.globalIdentifier) == all[1].changes.map(\.globalIdentifier))
        #expect(parts.flatMap(\.changes).map(\.changeType) == all[1].changes.map(\.changeType))

        // Without a fetchLimit, the cut also falls inside a later transaction.
        let across = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        across.changeLimit = 4
        across.cutsTransactions = true
        let page = try context.execute(across).transactions
        #expect(page.map(\.changes.count) == [2, 2])
        #expect(page[1].transactionNumber == all[1].transactionNumber && page[1].token.position < all[1].token.position)

        // Off (the default), a transaction is never cut.
        let whole = PersistentHistoryChangeRequest.fetchHistory(after: all[0].token)
        whole.changeLimit = 3
        #expect(try context.execute(whole).transactions.map(\.changes.count) == [7])
    }

    @Test func transactionsOnlyReturnsTheSameTransactionsWithoutChanges() throws {
        let (_, context) = try HistoryModel.stack(try newURL())
        try saveTransactions(context, [2, 3])
        try saveTransactions(context, [1], author: "sync")
        let full = try context.execute(.fetchHistory(after: nil)).transactions
        let request = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        request.resultType = .transactionsOnly
        let light = try context.execute(request).transactions
        #expect(light.map(\.token) == full.map(\.token))
        #expect(light.map(\.author) == ["app", "app", "sync"])
        #expect(light.allSatisfy { $0.changes.isEmpty })

        // The author filter applies before anything is decoded, with either result type.
        let others = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        others.transactionPredicate = try FetchPredicate(format: "author != %@", argumentArray: ["app"])
        let filtered = try context.execute(others).transactions
        #expect(filtered.map(\.token) == [full[2].token] && filtered[0].changes.count == 1)
    }

    @Test func manyGlobalIdentifiersAreLookedUpAtOnce() throws {
        let (coordinator, context) = try HistoryModel.stack(try newURL())
        let (items, gone) = try context.performAndWait {
            var items: [ManagedObject] = []
            for i in 0..<1_200 {   // more than one query's worth of identifiers
                let object = try context.insertNewObject(forEntityName: i % 3 == 0 ? "SpecialItem" : "Item")
                try object.setValue("i\(i)", forKey: "title")
                items.append(object)
            }
            let gone = try context.insertNewObject(forEntityName: "Tag")
            try context.save()
            return (items, gone)
        }
        let gids = try coordinator.globalIdentifiers(for: items.map(\.objectID) + [gone.objectID])
        let goneGID = try #require(gids[gone.objectID])
        try context.performAndWait {
            context.delete(gone)
            try context.save()
        }
        let unknown = UUID()
        let found = try context.objectIDs(forGlobalIdentifiers: Array(gids.values) + [unknown])
        #expect(found.count == items.count)   // the deleted object and the unknown identifier are left out
        #expect(found[goneGID] == nil && found[unknown] == nil)
        for item in items {
            let id = try #require(found[gids[item.objectID]!])
            #expect(id == item.objectID)
            #expect(id.entity.name == item.entity.name)   // the row's own (sub-)entity
        }
    }

    @Test func savesInsidePerformInTransactionCommitTogetherOrNotAtAll() throws {
        let url = try newURL()
        let (coordinator, context) = try HistoryModel.stack(url)
        let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        func names() throws -> [String] {
            let (_, reader) = try HistoryModel.stack(url)
            return try reader.performAndWait { try reader.fetch(FetchRequest(entityName: "Owner")).compactMap { try $0.value(forKey: "name") as? String }.sorted() }
        }
        context.transactionAuthor = "batch"
        try store.performInTransaction {
            for name in ["a", "b"] {
                try context.performAndWait {
                    try context.insertNewObject(forEntityName: "Owner").setValue(name, forKey: "name")
                    try context.save()
                    context.reset()
                }
                // Inside, another connection sees nothing yet.
                #expect(try names().isEmpty)
            }
        }
        #expect(try names() == ["a", "b"])
        let transactions = try context.execute(.fetchHistory(after: nil)).transactions
        let authors = transactions.map(\.author)
        #expect(authors == ["batch", "batch"])   // each save keeps its own

        // A throw rolls every save back, metadata included.
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.performInTransaction {
                try context.performAndWait {
                    try context.insertNewObject(forEntityName: "Owner").setValue("c", forKey: "name")
                    try context.save()
                }
                store.metadata["mark"] = 1
                try store.save(StoreSaveRequest())
                throw Stop()
            }
        }
        context.performAndWait { context.reset() }
        #expect(try names() == ["a", "b"])
        #expect(try SQLiteStore.metadataForStore(at: url)["mark"] == nil)

        // A save that fails inside rolls the whole transaction back even when the body goes on.
        let (_, other) = try HistoryModel.stack(url)
        let target = try context.performAndWait { try context.fetch(FetchRequest(entityName: "Owner")).first! }
        let untouched = try context.performAndWait { try target.value(forKey: "name") as? String == "a" ? "b" : "a" }
        try other.performAndWait {
            let same = try other.existingObject(with: target.objectID)
            try same.setValue("changed elsewhere", forKey: "name")
            try other.save()
        }
        context.mergePolicy = .error
        #expect(throws: (any Error).self) {
            try store.performInTransaction {
                try context.performAndWait {
                    try context.insertNewObject(forEntityName: "Owner").setValue("d", forKey: "name")
                    try context.save()
                    try target.setValue("stale write", forKey: "name")
                    do { try context.save() } catch { context.rollback() }   // caught: the transaction still rolls back
                }
            }
        }
        #expect(try names() == [untouched, "changed elsewhere"].sorted())
    }

    @Test func prefetchWithoutKeyPathsLoadsTheObjectsInOneGo() throws {
        let url = try newURL()
        let (coordinator, context) = try HistoryModel.stack(url)
        try saveTransactions(context, [600])
        _ = coordinator
        let (_, reader) = try HistoryModel.stack(url)
        try reader.performAndWait {
            let ids = try reader.fetch(FetchRequest(entityName: "Owner")).map(\.objectID)
            reader.reset()
            reader.persistentStoreCoordinator.discardCachedRows()
            let objects = ids.map(reader.object(with:))
            #expect(objects.allSatisfy { $0.isFault })
            let store = try #require(reader.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
            let before = store.executedStatementCount
            try reader.prefetch([], for: objects)
            // 600 rows in two batches of up to 500; reading them afterwards costs nothing more.
            let names = try objects.map { try $0.value(forKey: "name") as? String }
            #expect(store.executedStatementCount - before <= 2)
            #expect(Set(names.compactMap { $0 }).count == 600 && names[599] == "t0-599")
        }
    }

    @Test func discardingCachedRowsKeepsLoadedObjectsAndRereadsFaults() throws {
        let url = try newURL()
        let (coordinator, context) = try HistoryModel.stack(url)
        try saveTransactions(context, [1])
        let (id, loaded) = try context.performAndWait {
            let owner = try context.fetch(FetchRequest(entityName: "Owner")).first!
            _ = try owner.value(forKey: "name")   // loaded, not a fault
            return (owner.objectID, owner)
        }
        // Another coordinator changes the row; the cache still has the old one.
        let (_, other) = try HistoryModel.stack(url)
        try other.performAndWait {
            try other.existingObject(with: id).setValue("new", forKey: "name")
            try other.save()
        }
        coordinator.discardCachedRows()
        let kept = try context.performAndWait { try loaded.value(forKey: "name") as? String }
        #expect(kept == "t0-0")   // loaded objects keep their values
        let fresh = ManagedObjectContext(coordinator: coordinator)
        let reread = try fresh.performAndWait { try fresh.existingObject(with: id).value(forKey: "name") as? String }
        #expect(reread == "new")   // a fault reads the store
    }

    @Test func identifierTextIsFoundationsTextBothWays() {
        for _ in 0..<1_000 {
            let uuid = UUID()
            let text = GlobalIdentifierText.string(uuid)
            #expect(text == uuid.uuidString)
            #expect(GlobalIdentifierText.uuid(text) == uuid)
            #expect(GlobalIdentifierText.uuid(text.lowercased()) == uuid)
        }
        for bad in ["", "01A2115B-AA81-7918-90E0-DB3937B6377", "01A2115B-AA81-7918-90E0-DB3937B637777", "01A2115BXAA81-7918-90E0-DB3937B63777",
                    "01A2115B-AA81-7918-90E0-DB3937B6377G", "01A2115B-AA81-7918-90E0-DB3937B6377\u{E9}"] {
            #expect(GlobalIdentifierText.uuid(bad) == nil && UUID(uuidString: bad) == nil, "\(bad)")
        }
    }
}
