import Foundation
import Testing
@testable import ObjectGraph

/// What a reader that follows stores other programs write needs from
/// history: pages of transactions (`fetchLimit`), a read-only store that
/// sees later commits (`liveReadOnlyOption`), and switching history off only
/// when no one else has the file open (`removePersistentHistory(exclusively:)`).
@Suite struct PersistentHistoryReadingTests {
    func insertTags(_ context: ManagedObjectContext, _ names: [String]) throws {
        try context.performAndWait {
            for name in names {
                try context.insertNewObject(forEntityName: "Tag").setValue(name, forKey: "name")
                try context.save()
            }
        }
    }

    @Test func pagesWithFetchLimitCoverTheHistoryWithNoGapOrRepeat() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Paged.sqlite")
        let (coordinator, context) = try HistoryModel.stack(url)
        context.transactionAuthor = "app"
        try insertTags(context, (0..<7).map { "t\($0)" })
        let whole = try coordinator.execute(.fetchHistory(after: nil)).transactions
        #expect(whole.count == 7)

        var after: PersistentHistoryToken?
        var paged: [PersistentHistoryTransaction] = []
        var pages = 0
        while true {
            let request = PersistentHistoryChangeRequest.fetchHistory(after: after)
            request.fetchLimit = 3
            let page = try coordinator.execute(request).transactions
            #expect(page.count <= 3)
            paged += page
            pages += 1
            guard let last = page.last, page.count == 3 else { break }
            after = last.token
        }
        #expect(pages == 3)
        #expect(paged.map(\.token) == whole.map(\.token))
        #expect(paged.flatMap { $0.changes.map(\.globalIdentifier) } == whole.flatMap { $0.changes.map(\.globalIdentifier) })

        // The limit counts transactions the filters keep.
        let filtered = PersistentHistoryChangeRequest.fetchHistory(after: nil)
        filtered.transactionPredicate = try FetchPredicate(format: "transactionNumber > 4")
        filtered.fetchLimit = 2
        #expect(try coordinator.execute(filtered).transactions.map(\.transactionNumber) == [5, 6])
    }

    @Test func aLiveReadOnlyStoreSeesCommitsMadeWhileItIsOpen() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Live.sqlite")
        let (writerCoordinator, writer) = try HistoryModel.stack(url)
        try insertTags(writer, ["first"])
        // Nothing pending in a -wal: a plain read-only open would be immutable.
        for store in writerCoordinator.persistentStores { try writerCoordinator.remove(store) }

        let live = SQLiteStore(model: HistoryModel.make(), configurationName: nil, url: url,
                               options: [PersistentStore.readOnlyOption: true, SQLiteStore.liveReadOnlyOption: true])
        try live.load()
        defer { live.close() }
        let start = try #require(try live.currentPersistentHistoryToken())
        let version = try live.dataVersion()

        let (_, again) = try HistoryModel.stack(url)
        try insertTags(again, ["second"])
        #expect(try live.dataVersion() != version)
        let later = try live.executeHistoryRequest(.fetchHistory(after: start)).transactions
        #expect(later.count == 1)
        #expect(later.first?.changes.first?.values["name"]?.newValue as? String == "second")
    }

    @Test func exclusiveRemovalIsRefusedWhileTheFileIsOpenElsewhere() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Open.sqlite")
        let (coordinator, context) = try HistoryModel.stack(url)
        try insertTags(context, ["kept"])
        #expect {
            try SQLiteStore.removePersistentHistory(fromStoreAt: url, exclusively: true)
        } throws: { error in
            (error as? CoreDataError)?.code == .persistentStoreTimeout && "\(error)".contains("open in another connection")
        }
        // Refused without a change: the open store still records and saves.
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM sqlite_master WHERE name = 'OGH_CHANGE'").first?.first?.int == 1)
        try insertTags(context, ["after"])

        for store in coordinator.persistentStores { try coordinator.remove(store) }
        try SQLiteStore.removePersistentHistory(fromStoreAt: url, exclusively: true)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'OGH%'").first?.first?.int == 0)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZTAG").first?.first?.int == 2)
    }
}
