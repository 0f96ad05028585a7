import CSQLite
import Foundation
import Testing
@testable import ObjectGraph

/// Persistent history in the SQLite store: what a save records, what a
/// foreign writer's SQL records, tokens, global identifiers, switching
/// history on and off, and damaged history.
@Suite struct PersistentHistoryTests {
    func newURL(_ name: String = "History.sqlite") throws -> URL {
        try TestPaths.temporaryDirectory().appendingPathComponent(name)
    }

    func fetchAll(_ context: ManagedObjectContext, after token: PersistentHistoryToken? = nil) throws -> [PersistentHistoryTransaction] {
        try context.execute(.fetchHistory(after: token)).transactions
    }

    /// Runs SQL on the file through SQLite's C API, as a foreign writer would.
    static func foreignSQL(_ path: String, _ sql: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { throw RawSQLite.Failure(message: "open \(path)") }
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5000)
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
            defer { sqlite3_free(message) }
            throw RawSQLite.Failure(message: message.map { String(cString: $0) } ?? "error")
        }
    }

    @Test func aSaveRecordsItsChangesWithAuthorOldValuesAndGlobalIdentifiers() throws {
        let url = try newURL()
        let (_, context) = try HistoryModel.stack(url)
        context.transactionAuthor = "app"
        context.name = "main"
        var saved: ContextChangeSet?
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil) {
            saved = $0.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let when = Date(timeIntervalSinceReferenceDate: 12345.678)
        let (item, owner) = try context.performAndWait {
            let owner = try context.insertNewObject(forEntityName: "Owner")
            try owner.setValue("Ann", forKey: "name")
            let item = try context.insertNewObject(forEntityName: "Item")
            try item.setValue("first", forKey: "title")
            try item.setValue(Decimal(string: "12.34")!, forKey: "amount")
            try item.setValue(when, forKey: "when")
            try item.setValue(Data([0, 1, 2]), forKey: "blob")
            try item.setValue(owner, forKey: "owner")
            try context.save()
            return (item, owner)
        }
        let insertedIDs = try #require(saved).inserted.compactMap(\.globalIdentifier)
        #expect(insertedIDs.count == 2)   // the did-save change set carries them

        var transactions = try fetchAll(context)
        try #require(transactions.count == 1)
        #expect(transactions[0].author == "app" && transactions[0].contextName == "main" && transactions[0].transactionNumber != nil)
        let insert = try #require(transactions[0].changes.first { $0.entity.name == "Item" })
        #expect(insert.changeType == .insert && insert.changedObjectID == item.objectID)
        #expect(insert.values["title"]?.newValue as? String == "first")
        #expect(insert.values["amount"]?.newValue as? Decimal == Decimal(string: "12.34"))
        #expect(insert.values["when"]?.newValue as? Date == when)
        #expect(insert.values["blob"]?.newValue as? Data == Data([0, 1, 2]))
        let ownerGID = try #require(transactions[0].changes.first { $0.entity.name == "Owner" }?.globalIdentifier)
        #expect(insert.values["owner"]?.newValue as? UUID == ownerGID)
        #expect(Set(insertedIDs) == Set(transactions[0].changes.map(\.globalIdentifier)))
        // The owner's inverse to-many is reported as a member added.
        let ownerChange = try #require(transactions[0].changes.first { $0.globalIdentifier == ownerGID })
        #expect(ownerChange.values["items"]?.addedMembers == [insert.globalIdentifier])

        let token = transactions[0].token
        try context.performAndWait {
            try item.setValue("second", forKey: "title")
            try item.setValue(nil, forKey: "owner")
            try context.save()
            context.delete(owner)
            try context.save()
        }
        transactions = try fetchAll(context, after: token)
        try #require(transactions.count == 2)
        let update = try #require(transactions[0].changes.first { $0.globalIdentifier == insert.globalIdentifier })
        #expect(update.changeType == .update && update.updatedProperties == ["title", "owner"])
        #expect(update.values["title"]?.oldValue as? String == "first" && update.values["title"]?.newValue as? String == "second")
        #expect(update.values["owner"]?.oldValue as? UUID == ownerGID && update.values["owner"]?.newValue == nil)
        let removed = try #require(transactions[0].changes.first { $0.globalIdentifier == ownerGID })
        #expect(removed.updatedProperties == ["items"] && removed.values["items"]?.removedMembers == [insert.globalIdentifier])
        let delete = try #require(transactions[1].changes.first)
        #expect(delete.changeType == .delete && delete.globalIdentifier == ownerGID)
        #expect(delete.tombstone?["name"] as? String == "Ann")
        #expect(transactions[0].token < transactions[1].token)
        #expect(try context.objectID(forGlobalIdentifier: ownerGID) == nil)   // deleted
        #expect(try context.objectID(forGlobalIdentifier: insert.globalIdentifier) == item.objectID)
    }

    /// A writer that does not use ObjectGraph (raw SQL through the C API)
    /// is recorded too, with no author, inside its own transaction.
    @Test func aForeignWritersSQLIsRecordedWithoutAuthor() throws {
        let url = try newURL()
        let (coordinator, context) = try HistoryModel.stack(url)
        try context.performAndWait {
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try tag.setValue("red", forKey: "name")
            try context.save()
        }
        let token = try #require(try coordinator.currentPersistentHistoryToken(fromStores: nil))
        try Self.foreignSQL(url.path, """
            BEGIN; UPDATE ZTAG SET ZNAME = 'crimson', Z_OPT = Z_OPT + 1; \
            INSERT INTO ZTAG (Z_PK, Z_ENT, Z_OPT, ZNAME) VALUES (100, (SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Tag'), 1, 'blue'); \
            UPDATE Z_PRIMARYKEY SET Z_MAX = 100 WHERE Z_NAME = 'Tag'; COMMIT;
            """)
        let transactions = try fetchAll(context, after: token)
        try #require(transactions.count == 1)
        #expect(transactions[0].author == nil && transactions[0].transactionNumber == nil)
        let changes = transactions[0].changes
        try #require(changes.count == 2)
        #expect(changes[0].changeType == .update && changes[0].values["name"]?.oldValue as? String == "red")
        #expect(changes[1].changeType == .insert && changes[1].values["name"]?.newValue as? String == "blue")
        #expect(changes[1].changedObjectID.primaryKey == 100)
        // A failed foreign transaction records nothing.
        #expect(throws: RawSQLite.Failure.self) {
            try Self.foreignSQL(url.path, "BEGIN; UPDATE ZTAG SET ZNAME = 'never'; SELECT no_such_function(); COMMIT;")
        }
        #expect(try fetchAll(context, after: transactions[0].token).isEmpty)
    }

    /// Tokens: after a token holds exactly the later transactions, across
    /// reopening and across processes; deleting up to a token keeps the
    /// rest; an older token then expires (134301); another store's token
    /// is refused.
    @Test func tokensAcrossReopeningAndDeletion() async throws {
        let url = try newURL()
        var tokens: [PersistentHistoryToken] = []
        do {
            let (coordinator, context) = try HistoryModel.stack(url)
            for n in 0..<3 {
                try context.performAndWait {
                    let tag = try context.insertNewObject(forEntityName: "Tag")
                    try tag.setValue("t\(n)", forKey: "name")
                    try context.save()
                }
                tokens.append(try #require(try coordinator.currentPersistentHistoryToken(fromStores: nil)))
            }
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        // Another process saves twice.
        let path = url.path
        await #expect(processExitsWith: .success) { [path = path as String] in
            let (_, context) = try HistoryModel.stack(URL(fileURLWithPath: path))
            context.transactionAuthor = "child"
            for n in 3..<5 {
                try context.performAndWait {
                    let tag = try context.insertNewObject(forEntityName: "Tag")
                    try tag.setValue("t\(n)", forKey: "name")
                    try context.save()
                }
            }
        }
        let (coordinator, context) = try HistoryModel.stack(url)
        func names(after token: PersistentHistoryToken?) throws -> [String] {
            try fetchAll(context, after: token).flatMap(\.changes).compactMap { $0.values["name"]?.newValue as? String }
        }
        #expect(try names(after: nil) == ["t0", "t1", "t2", "t3", "t4"])
        #expect(try names(after: tokens[0]) == ["t1", "t2", "t3", "t4"])
        #expect(try names(after: tokens[2]) == ["t3", "t4"])
        #expect(try fetchAll(context, after: tokens[2]).map(\.author) == ["child", "child"])
        let restored = try PersistentHistoryToken(data: tokens[1].data)
        #expect(restored == tokens[1])

        guard case .deleted(let count) = try context.execute(.deleteHistory(before: tokens[1])) else { Issue.record("not a delete result"); return }
        #expect(count == 2)
        #expect(try names(after: tokens[1]) == ["t2", "t3", "t4"])
        let expired = #expect(throws: CoreDataError.self) { try fetchAll(context, after: tokens[0]) }
        #expect(expired?.code == .persistentHistoryTokenExpired)
        let foreign = PersistentHistoryToken(storeIdentifier: UUID().uuidString, position: 1)
        #expect(throws: CoreDataError.self) { try fetchAll(context, after: foreign) }
        let store = try #require(coordinator.persistentStores.first)
        let direct = #expect(throws: CoreDataError.self) { try store.executeHistoryRequest(.fetchHistory(after: foreign)) }
        #expect(direct?.message.contains(url.path) == true)
        #expect(throws: CoreDataError.self) { try PersistentHistoryToken(data: Data("junk".utf8)) }
    }

    /// Global identifiers: a caller copying an object from another store
    /// sets it; it never changes; an identifier alive elsewhere is refused.
    @Test func assignedGlobalIdentifiersAreKept() throws {
        let (_, context) = try HistoryModel.stack(try newURL())
        let gid = UUID()
        let tag = try context.performAndWait {
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try context.assignGlobalIdentifier(gid, to: tag)
            try context.save()
            return tag
        }
        #expect(try context.performAndWait { try context.existingObject(withGlobalIdentifier: gid) } === tag)
        #expect(try context.persistentStoreCoordinator.globalIdentifiers(for: [tag.objectID]) == [tag.objectID: gid])
        #expect(try fetchAll(context).first?.changes.first?.globalIdentifier == gid)
        // Saved objects keep theirs.
        #expect(throws: CoreDataError.self) { try context.performAndWait { try context.assignGlobalIdentifier(UUID(), to: tag) } }
        // The same identifier on another object fails the save, and nothing is written.
        let error = #expect(throws: CoreDataError.self) {
            try context.performAndWait {
                let other = try context.insertNewObject(forEntityName: "Tag")
                try context.assignGlobalIdentifier(gid, to: other)
                try context.save()
            }
        }
        #expect(error?.message.contains(gid.uuidString) == true)
        #expect(try fetchAll(context).count == 1)

        // Once its object is deleted, the identifier can name an object again
        // (an object deleted here coming back from another store).
        try context.performAndWait {
            context.rollback()
            context.delete(tag)
            try context.save()
            let back = try context.insertNewObject(forEntityName: "Tag")
            try back.setValue("back", forKey: "name")
            try context.assignGlobalIdentifier(gid, to: back)
            try context.save()
        }
        let back = try context.performAndWait { try context.existingObject(withGlobalIdentifier: gid)?.value(forKey: "name") as? String }
        #expect(back == "back")
    }

    /// Switching history on for a store with data records nothing for the
    /// past and gives every row an identifier; removing it keeps the data.
    @Test func switchingOnAndOff() throws {
        let url = try newURL()
        do {
            let (_, context) = try HistoryModel.stack(url, options: [:])
            try context.performAndWait {
                for n in 0..<3 { try context.insertNewObject(forEntityName: "Tag").setValue("old\(n)", forKey: "name") }
                try context.save()
            }
        }
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'OGH%'").first?.first?.int == 0)
        do {
            let (coordinator, context) = try HistoryModel.stack(url)
            #expect(try fetchAll(context).isEmpty)
            let ids = try context.performAndWait { try context.fetch(FetchRequest(entityName: "Tag")).map(\.objectID) }
            let gids = try coordinator.globalIdentifiers(for: ids)
            #expect(gids.count == 3 && Set(gids.values).count == 3)
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        try SQLiteStore.removePersistentHistory(fromStoreAt: url)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'OGH%'").first?.first?.int == 0)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZTAG").first?.first?.int == 3)
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
    }

    /// Damaged history or an unknown format: a clear error naming the
    /// store when history is asked for; without the option the data opens.
    @Test func damagedOrUnknownHistoryIsReportedAndDataStaysReadable() throws {
        for damage in ["UPDATE OGH_META SET VALUE = 99 WHERE KEY = 'format'", "DROP TABLE OGH_TRANSACTION", "DELETE FROM OGH_COLUMN"] {
            let url = try newURL()
            do {
                let (_, context) = try HistoryModel.stack(url)
                try context.performAndWait {
                    try context.insertNewObject(forEntityName: "Tag").setValue("kept", forKey: "name")
                    try context.save()
                }
            }
            try Self.foreignSQL(url.path, damage)
            let error = #expect(throws: CoreDataError.self, "\(damage)") { try HistoryModel.stack(url) }
            #expect(error?.code == .persistentStoreOpen)
            #expect(error?.message.contains(url.path) == true, "\(error?.message ?? "")")
            if damage.contains("99") { #expect(error?.message.contains("format 99") == true) }
            // Read-only, without the option: the data reads, history requests say why not.
            let (_, reader) = try HistoryModel.stack(url, options: [PersistentStore.readOnlyOption: true])
            #expect(try reader.performAndWait { try reader.count(for: FetchRequest(entityName: "Tag")) } == 1)
            let store = try #require(reader.persistentStoreCoordinator.persistentStores.first)
            #expect(throws: CoreDataError.self) { try store.executeHistoryRequest(.fetchHistory(after: nil)) }
        }
    }

    /// The Apple-written fixtures (copies) take history on, record changes,
    /// and keep their schema apart from the documented `OGH_` objects.
    @Test(arguments: SQLiteFixtures.all)
    func appleFixturesTakeHistory(_ fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let before = try RawSQLite.master(url.path)
        let model = try SQLiteFixtures.model(for: fixture)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: HistoryModel.sqlite, at: url, options: HistoryModel.historyOn)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = "linux"
        try context.performAndWait {
            let bot = try context.insertNewObject(forEntityName: "Bot")
            try bot.setValue("History Bot", forKey: "name")
            try context.save()
        }
        let transactions = try fetchAll(context)
        #expect(transactions.count == 1 && transactions.first?.author == "linux")
        #expect(transactions.first?.changes.first?.values["name"]?.newValue as? String == "History Bot")
        let existing = try RawSQLite.query(url.path, "SELECT count(*) FROM ZBOT").first?.first?.int ?? 0
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM OGH_GLOBALID g JOIN Z_PRIMARYKEY p ON p.Z_ENT = g.TBL WHERE p.Z_NAME = 'Bot'").first?.first?.int == existing)
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        let after = try RawSQLite.master(url.path).filter { !$0[1].hasPrefix("OGH_") && !($0[1] == "sqlite_sequence") && !$0[1].hasPrefix("sqlite_autoindex_OGH_") }
        #expect(after == before)
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
    }

    /// Another connection's and another process's commits are noticed and
    /// posted as remote changes with the store URL and the newest token;
    /// this coordinator's own saves are not.
    @Test func remoteChangesArePostedWithTheNewestToken() async throws {
        let url = try newURL()
        let (coordinator, context) = try HistoryModel.stack(url)
        let (_, other) = try HistoryModel.stack(url)
        nonisolated(unsafe) var posted: [[AnyHashable: Any]] = []
        let observer = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.persistentStoreRemoteChangeNotification,
                                                              object: coordinator, queue: nil) { posted.append($0.userInfo ?? [:]) }
        defer { NotificationCenter.default.removeObserver(observer) }
        try context.performAndWait {
            try context.insertNewObject(forEntityName: "Tag").setValue("own", forKey: "name")
            try context.save()
        }
        #expect(try coordinator.checkForRemoteChanges().isEmpty)
        try other.performAndWait {
            try other.insertNewObject(forEntityName: "Tag").setValue("theirs", forKey: "name")
            try other.save()
        }
        #expect(try coordinator.checkForRemoteChanges().count == 1)
        let token = try #require(posted.last?[PersistentStoreCoordinator.persistentHistoryTokenKey] as? PersistentHistoryToken)
        #expect(token == (try coordinator.currentPersistentHistoryToken(fromStores: nil)))
        #expect(posted.last?[PersistentStoreCoordinator.persistentStoreURLKey] as? URL == url)
        #expect(try coordinator.checkForRemoteChanges().isEmpty)   // nothing new since

        let path = url.path
        await #expect(processExitsWith: .success) { [path = path as String] in
            let (_, child) = try HistoryModel.stack(URL(fileURLWithPath: path))
            try child.performAndWait {
                try child.insertNewObject(forEntityName: "Tag").setValue("child", forKey: "name")
                try child.save()
            }
        }
        #expect(try coordinator.checkForRemoteChanges().count == 1)
        #expect(posted.count == 2)
        let names = try context.execute(.fetchHistory(after: token)).transactions.flatMap(\.changes).compactMap { $0.values["name"]?.newValue as? String }
        #expect(names == ["child"])
    }
}
