import CSQLite
import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// A foreign writer's SQL syncs like any other change; a store of another
/// model and a store whose file disappears are marked failed with the
/// reason while the others go on.
@Suite struct SyncBadInputTests {
    static func sql(_ path: String, _ text: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { throw CoreDataError(.sqlite, "open \(path)") }
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5000)
        guard sqlite3_exec(db, text, nil, nil, nil) == SQLITE_OK else { throw CoreDataError(.sqlite, String(cString: sqlite3_errmsg(db))) }
    }

    func names(_ url: URL) throws -> [String] {
        try SyncFixtures.contents(url).values.compactMap { $0["name"] }.sorted()
    }

    @Test func aForeignWritersSQLSyncsLikeAnyOtherChange() throws {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.objectTrump, .objectTrump], in: directory)
        let s1 = directory.appendingPathComponent("s1.sqlite"), s2 = directory.appendingPathComponent("s2.sqlite")
        try group.runUntilIdle()
        try Self.sql(s1.path, """
            BEGIN; UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Record'; \
            INSERT INTO ZRECORD (Z_PK, Z_ENT, Z_OPT, ZA, ZNAME) SELECT Z_MAX, Z_ENT, 1, 7, 'from sql' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record'; COMMIT;
            """)
        try group.runUntilIdle()
        #expect(try names(s2) == [ObjectState.canonical("from sql")])
        try Self.sql(s1.path, "UPDATE ZRECORD SET ZA = 8, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'from sql'")
        try group.runUntilIdle()
        #expect(try SyncFixtures.contents(s2).values.first?["a"] == ObjectState.canonical(Int32(8)))
        try Self.sql(s1.path, "DELETE FROM ZRECORD")
        try group.runUntilIdle()
        #expect(try SyncFixtures.contents(s2).isEmpty)
    }

    @Test func aStoreOfAnotherModelFailsAndTheOthersSync() throws {
        let directory = try SyncFixtures.directory()
        let other = ManagedObjectModel()
        let thing = EntityDescription(name: "Thing")
        thing.properties = [AttributeDescription(name: "name", type: .string)]
        other.entities = [thing]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: other)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("s2.sqlite"))
        for store in coordinator.persistentStores { try coordinator.remove(store) }

        let group = try SyncFixtures.group([.objectTrump, .objectTrump, .objectTrump], in: directory)
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        try app.performAndWait {
            try app.insertNewObject(forEntityName: "Record").setValue("kept", forKey: "name")
            try app.save()
        }
        try group.runUntilIdle()
        let s2 = try #require(try group.status().first { $0.name == "s2" })
        #expect(s2.state == .failed)
        #expect(s2.lastError?.contains("134100") == true || s2.lastError?.contains("134020") == true, "\(s2.lastError ?? "")")
        #expect(try names(directory.appendingPathComponent("s3.sqlite")) == [ObjectState.canonical("kept")])
    }

    @Test func aStoreThatDisappearsFailsAndTheOthersSync() throws {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.objectTrump, .objectTrump, .objectTrump], in: directory)
        try group.runUntilIdle()
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        func insert(_ name: String) throws {
            try app.performAndWait {
                try app.insertNewObject(forEntityName: "Record").setValue(name, forKey: "name")
                try app.save()
            }
        }
        // s2 disappears.
        try FileManager.default.moveItem(at: directory.appendingPathComponent("s2.sqlite"), to: directory.appendingPathComponent("moved.sqlite"))
        try insert("one")
        try group.runUntilIdle()
        var status = try group.status()
        #expect(status.first { $0.name == "s2" }?.state == .failed)
        #expect(status.first { $0.name == "s2" }?.lastError?.contains("missing") == true)
        #expect(try names(directory.appendingPathComponent("s3.sqlite")) == [ObjectState.canonical("one")])

        // Back in place, it syncs again (its history was kept).
        try FileManager.default.moveItem(at: directory.appendingPathComponent("moved.sqlite"), to: directory.appendingPathComponent("s2.sqlite"))
        try insert("two")
        try group.runUntilIdle()
        status = try group.status()
        #expect(status.allSatisfy { $0.lastError == nil }, "\(status.map { "\($0.name): \($0.lastError ?? "-")" })")
        #expect(status.allSatisfy { $0.state == .ok }, "idle stores are in sync: \(status.map { "\($0.name): \($0.state)" })")
        #expect(try names(directory.appendingPathComponent("s2.sqlite")) == ["one", "two"].map { ObjectState.canonical($0) })
    }

    /// A store only its application writes receives nothing from the hub;
    /// its received position still moves on (so the engine does not read
    /// the hub's history from its start on every round), and a change made
    /// after that is still settled against what the hub changed.
    @Test func aWriteOnlyStoreAdvancesItsReceivedPosition() throws {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.storeTrump, .storeTrump], in: directory)
        let s1 = directory.appendingPathComponent("s1.sqlite")
        let app = try SyncFixtures.app(s1)
        for n in 0..<Int(SyncGroup.idleAdvanceStep) {
            try app.performAndWait {
                try app.insertNewObject(forEntityName: "Record").setValue("r\(n)", forKey: "name")
                try app.save()
            }
            try group.storeDidChange("s1")
        }
        try group.runUntilIdle()
        let pushed = try SQLiteStore.metadataForStore(at: s1)[SyncGroup.metadataKey("test", "pushedThrough")] as? Int
        #expect((pushed ?? 0) >= Int(SyncGroup.idleAdvanceStep), "received position \(pushed.map(String.init) ?? "none")")
        // s2 changes a record, s1 changes the same one after its position moved: still a conflict, settled by store-trump.
        let app2 = try SyncFixtures.app(directory.appendingPathComponent("s2.sqlite"))
        func setA(_ context: ManagedObjectContext, _ value: Int32) throws {
            try context.performAndWait {
                context.reset()
                let request = FetchRequest(entityName: "Record")
                request.predicate = try FetchPredicate(format: "name == 'r0'")
                try #require(try context.fetch(request).first).setValue(value, forKey: "a")
                try context.save()
            }
        }
        try group.pause("s1")          // s1 does not receive s2's change before making its own
        try setA(app2, 2)
        try group.storeDidChange("s2")
        try setA(app, 1)
        try group.resume("s1")
        try group.runUntilIdle()
        for url in [s1, directory.appendingPathComponent("s2.sqlite")] {
            let record = try SyncFixtures.contents(url).values.first { $0["name"] == ObjectState.canonical("r0") }
            #expect(record?["a"] == ObjectState.canonical(Int32(2)), "\(url.lastPathComponent): \(record ?? [:])")
        }
    }

    /// Purging keeps history newer than the retention, deletes what every
    /// party moved past, and syncing goes on afterwards.
    @Test func purgingRespectsRetentionAndSyncGoesOn() throws {
        let directory = try SyncFixtures.directory()
        let stores = (1...2).map { SyncStoreConfiguration(name: "s\($0)", url: directory.appendingPathComponent("s\($0).sqlite"), policy: .objectTrump) }
        func group(retention: TimeInterval) throws -> SyncGroup {
            try SyncGroup(configuration: SyncGroupConfiguration(name: "test", model: SyncFixtures.model(), stateDirectory: directory.appendingPathComponent("state"),
                                                                stores: stores, historyRetention: retention))
        }
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        func insert(_ name: String) throws {
            try app.performAndWait {
                try app.insertNewObject(forEntityName: "Record").setValue(name, forKey: "name")
                try app.save()
            }
        }
        var keeping = try group(retention: 3600)
        try insert("one")
        try keeping.runUntilIdle()
        #expect(try keeping.purgeHistory() == 0)   // all of it is newer than an hour
        try keeping.close()
        keeping = try group(retention: 0)
        #expect(try keeping.purgeHistory() > 0)
        try insert("two")
        try keeping.runUntilIdle()
        #expect(try names(directory.appendingPathComponent("s2.sqlite")) == ["one", "two"].map { ObjectState.canonical($0) })
        try keeping.close()
    }
}
