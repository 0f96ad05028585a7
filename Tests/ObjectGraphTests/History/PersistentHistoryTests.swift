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

    /// Saves of many rows write them several per statement (and assigned
    /// identifiers several per statement): every row, value, recorded change
    /// and identifier is as one statement per row wrote it; identifiers of
    /// deleted objects come back in bulk; a taken one still fails the save,
    /// named, with nothing written.
    @Test func bulkSavesWriteEveryRowValueAndAssignedIdentifier() throws {
        let url = try newURL()
        let (coordinator, context) = try HistoryModel.stack(url)
        let count = SQLiteStore.rowsPerInsert * 3 + 5
        let gids = (0..<count).map { _ in UUID() }
        func expected(_ i: Int) -> [String: Any] {
            ["title": "item \(i)", "count16": Int16(i), "count64": Int64(i) * 1_000_000_007, "flag": i % 2 == 0,
             "amount": Decimal(i) / 100, "ratio": Double(i) + 0.25, "when": Date(timeIntervalSinceReferenceDate: Double(i) * 60),
             "blob": Data([UInt8(i % 256), 0, 7]), "uid": gids[(i + 1) % count]]
        }
        func same(_ a: Any?, _ b: Any) -> Bool {
            if let data = b as? Data { return a as? Data == data }
            return a.map { "\(type(of: $0)) \($0)" } == "\(type(of: b)) \(b)"
        }
        let token = try coordinator.currentPersistentHistoryToken(fromStores: nil)
        try context.performAndWait {
            let owners = try (0..<SQLiteStore.rowsPerInsert + 3).map { n -> ManagedObject in
                let owner = try context.insertNewObject(forEntityName: "Owner")
                try owner.setValue("owner \(n)", forKey: "name")
                return owner
            }
            for i in 0..<count {
                let item = try context.insertNewObject(forEntityName: "Item")
                for (key, value) in expected(i) { try item.setValue(value, forKey: key) }
                try item.setValue(owners[i % owners.count], forKey: "owner")
                try context.assignGlobalIdentifier(gids[i], to: item)
            }
            try context.save()
            context.reset()
        }
        try context.performAndWait {
            for (i, gid) in gids.enumerated() {
                let item = try #require(try context.existingObject(withGlobalIdentifier: gid))
                for (key, value) in expected(i) {
                    #expect(same(try item.value(forKey: key), value), "\(key) of item \(i)")
                }
                let owner = try #require(try item.value(forKey: "owner") as? ManagedObject)
                #expect(try owner.value(forKey: "name") as? String == "owner \(i % (SQLiteStore.rowsPerInsert + 3))")
            }
        }
        let changes = try fetchAll(context, after: token).flatMap(\.changes)
        #expect(changes.count == count + SQLiteStore.rowsPerInsert + 3)
        let itemChanges = changes.filter { $0.entity.name == "Item" }
        #expect(itemChanges.allSatisfy { $0.changeType == .insert })
        #expect(Set(itemChanges.compactMap(\.globalIdentifier)) == Set(gids))
        for change in itemChanges {
            let i = try #require(gids.firstIndex(of: try #require(change.globalIdentifier)))
            #expect(change.values["title"]?.newValue as? String == "item \(i)")
        }

        // Deleted, then back under the same identifiers (held by dead rows) in one save.
        let back = Array(gids.prefix(SQLiteStore.identifiersPerStatement + 1))
        try context.performAndWait {
            for gid in back { context.delete(try #require(try context.existingObject(withGlobalIdentifier: gid))) }
            try context.save()
            for gid in back {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue("back", forKey: "title")
                try context.assignGlobalIdentifier(gid, to: item)
            }
            try context.save()
            context.reset()
            for gid in back { #expect(try context.existingObject(withGlobalIdentifier: gid)?.value(forKey: "title") as? String == "back") }
        }

        // One live identifier among many: the save fails naming it; nothing is written.
        let taken = gids[count - 1]
        let before = try RawSQLite.query(url.path, "SELECT count(*) FROM ZITEM").first?.first?.int
        let error = #expect(throws: CoreDataError.self) {
            try context.performAndWait {
                for n in 0..<SQLiteStore.identifiersPerStatement {
                    let item = try context.insertNewObject(forEntityName: "Item")
                    try context.assignGlobalIdentifier(n == 10 ? taken : UUID(), to: item)
                }
                try context.save()
            }
        }
        #expect(error?.message.contains(taken.uuidString) == true)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZITEM").first?.first?.int == before)
    }

    /// The insert trigger makes an identifier only for a row without a live
    /// one: an assigned one is kept, a foreign insert at the key of a deleted
    /// row gets a new one (never the placeholder the trigger skips with).
    /// Triggers another build wrote are replaced when the file is opened
    /// writable with history; opening a file whose triggers are current
    /// changes nothing in its schema.
    @Test func insertTriggerMakesIdentifiersOnlyWhenNeededAndIsReplacedWhenStale() throws {
        let url = try newURL()
        let assigned = UUID()
        do {
            let (coordinator, context) = try HistoryModel.stack(url)
            try context.performAndWait {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                try tag.setValue("assigned", forKey: "name")
                try context.assignGlobalIdentifier(assigned, to: tag)
                let other = try context.insertNewObject(forEntityName: "Tag")
                try other.setValue("made", forKey: "name")
                try context.save()
            }
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        func identifiers() throws -> [String: String] {
            Dictionary(try RawSQLite.query(url.path, "SELECT t.ZNAME, g.GID FROM ZTAG t JOIN OGH_GLOBALID g ON g.TBL = t.Z_ENT AND g.PK = t.Z_PK AND g.DEAD = 0")
                .map { ($0[0].text ?? "", $0[1].text ?? "") }, uniquingKeysWith: { a, _ in a })
        }
        var before = try identifiers()
        #expect(before["assigned"] == assigned.uuidString)
        let made = try #require(before["made"])
        #expect(UUID(uuidString: made) != nil && made != assigned.uuidString)

        // A foreign writer deletes a row and inserts another at its key: a new identifier.
        let row = try #require(try RawSQLite.query(url.path, "SELECT Z_PK, Z_ENT FROM ZTAG WHERE ZNAME = 'made'").first)
        let (pk, ent) = (try #require(row[0].int), try #require(row[1].int))
        try Self.foreignSQL(url.path, """
            BEGIN; DELETE FROM ZTAG WHERE Z_PK = \(pk); \
            INSERT INTO ZTAG (Z_PK, Z_ENT, Z_OPT, ZNAME) VALUES (\(pk), \(ent), 1, 'x'); COMMIT;
            """)
        before = try identifiers()
        #expect(before.count == 2)
        let again = try #require(before["x"])
        #expect(UUID(uuidString: again) != nil && again != made && again != assigned.uuidString)

        // A stale insert trigger (here one recording nothing) is replaced on open.
        let name = "OGH_ZTAG_INSERT"
        let current = try #require(try RawSQLite.query(url.path, "SELECT sql FROM sqlite_master WHERE name = '\(name)'").first?.first?.text)
        try Self.foreignSQL(url.path, "DROP TRIGGER \(name); CREATE TRIGGER \(name) AFTER INSERT ON ZTAG BEGIN SELECT 1; END;")
        do {
            let (coordinator, context) = try HistoryModel.stack(url)
            let token = try coordinator.currentPersistentHistoryToken(fromStores: nil)
            try context.performAndWait {
                try context.insertNewObject(forEntityName: "Tag").setValue("after", forKey: "name")
                try context.save()
            }
            let changes = try fetchAll(context, after: token).flatMap(\.changes)
            #expect(changes.count == 1 && changes.first?.changeType == .insert && changes.first?.globalIdentifier != nil)
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        #expect(try RawSQLite.query(url.path, "SELECT sql FROM sqlite_master WHERE name = '\(name)'").first?.first?.text == current)

        // Current triggers: opening again rewrites nothing (the schema cookie stays).
        let cookie = try RawSQLite.query(url.path, "PRAGMA schema_version").first?.first?.int
        do {
            let (coordinator, _) = try HistoryModel.stack(url)
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        #expect(try RawSQLite.query(url.path, "PRAGMA schema_version").first?.first?.int == cookie)
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
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
