import Foundation
import Testing
@testable import ObjectGraph

/// Writing through `SQLiteStore.save` into a copy of Apple's 2.0.1 store:
/// inserts, updates, deletes, many-to-many, Z_OPT and Z_MAX, optimistic
/// locking between two stores on one file.
@Suite struct SQLiteStoreSaveTests {
    static let fixture = "XCServerCoreData_2.0.1.sqlite"

    private func open(_ url: URL, _ model: ManagedObjectModel) throws -> SQLiteStore {
        try SQLiteFixtures.openStore(url, model: model)
    }

    private func firstBot(_ store: SQLiteStore) throws -> StoreSnapshot {
        try #require(try store.fetchSnapshots(FetchRequest(entityName: "Bot")).snapshots.first)
    }

    @Test func insertUpdateDeleteKeepApplesSchemaAndReopen() throws {
        let url = try SQLiteFixtures.copy(Self.fixture)
        let model = try SQLiteFixtures.model(for: Self.fixture)
        let masterBefore = try RawSQLite.master(url.path)
        let botMaxBefore = try RawSQLite.query(url.path, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Bot'").first!.first!.int!
        let store = try open(url, model)
        let bot = model.entitiesByName["Bot"]!

        // Insert a bot with a permanent ID from Z_MAX.
        let ids = try store.newObjectIDs(for: bot, count: 2)
        #expect(ids.map(\.primaryKey) == [botMaxBefore + 1, botMaxBefore + 2])
        let existing = try firstBot(store)
        let statsID = existing.values["stats"] as? ManagedObjectID
        let when = Date(timeIntervalSinceReferenceDate: 700_000_000.5)
        var request = StoreSaveRequest()
        request.inserted = [StoreSnapshot(objectID: ids[0], version: 1, values: [
            "name": "Linux Nightly", "identifier": "linux-1", "type": Int32(3), "lastUpdate": when,
        ])]
        // Update an existing bot.
        var changed = existing
        changed.values["name"] = "Renamed"
        changed.values["revision"] = nil
        changed.version = existing.version + 1
        request.updated = [(changed, existing.version)]
        // Delete a commit change.
        let change = try #require(try store.fetchSnapshots(FetchRequest(entityName: "CommitChange")).snapshots.first)
        request.deleted = [(change.objectID, change.version)]
        try store.save(request)
        store.close()

        // Schema unchanged; values visible to an independent reader.
        #expect(try RawSQLite.master(url.path) == masterBefore)
        let row = try RawSQLite.query(url.path, "SELECT Z_ENT, Z_OPT, ZNAME, ZIDENTIFIER, ZTYPE, ZLASTUPDATE FROM ZBOT WHERE Z_PK = \(ids[0].primaryKey!)")
        #expect(row.first == [.integer(2), .integer(1), .text("Linux Nightly"), .text("linux-1"), .integer(3), .real(700_000_000.5)])
        #expect(try RawSQLite.query(url.path, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Bot'").first!.first!.int! == botMaxBefore + 2)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZCOMMITCHANGE WHERE Z_PK = \(change.objectID.primaryKey!)").first!.first!.int == 0)

        // Reopens cleanly with the new values.
        let reopened = try open(url, model)
        defer { reopened.close() }
        let again = try reopened.snapshots(for: [existing.objectID, ids[0]])
        #expect(again[existing.objectID]?.values["name"] as? String == "Renamed")
        #expect(again[existing.objectID]?.values["revision"] == nil)
        #expect(again[existing.objectID]?.version == existing.version + 1)
        #expect((again[existing.objectID]?.values["stats"] as? ManagedObjectID) == statsID)
        #expect(again[ids[0]]?.values["lastUpdate"] as? Date == when)
        #expect(again[ids[0]]?.version == 1)
    }

    @Test func manyToManyChangesRewriteTheJoinTable() throws {
        let url = try SQLiteFixtures.copy(Self.fixture)
        let model = try SQLiteFixtures.model(for: Self.fixture)
        let store = try open(url, model)
        defer { store.close() }
        let device = model.entitiesByName["Device"]!
        let integration = model.entitiesByName["Integration"]!
        let devicePK = try RawSQLite.query(url.path, "SELECT min(Z_PK) FROM ZDEVICE").first!.first!.int!
        let integrationPKs = try RawSQLite.query(url.path, "SELECT Z_PK FROM ZINTEGRATION ORDER BY Z_PK LIMIT 3").map { $0[0].int! }
        let deviceID = ManagedObjectID(entity: device, storeIdentifier: store.identifier, primaryKey: devicePK)
        var request = StoreSaveRequest()
        request.toManyChanges = [ToManyChange(objectID: deviceID, relationship: device.relationshipsByName["integrations"]!,
                                              destinations: integrationPKs.map { ManagedObjectID(entity: integration, storeIdentifier: store.identifier, primaryKey: $0) })]
        try store.save(request)
        let rows = try RawSQLite.query(url.path, "SELECT Z_13INTEGRATIONS FROM Z_9INTEGRATIONS WHERE Z_9TESTEDDEVICES = \(devicePK) ORDER BY 1")
        #expect(rows.map { $0[0].int! } == integrationPKs)
        let back = try store.relatedObjectIDs(for: device.relationshipsByName["integrations"]!, of: deviceID)
        #expect(back.compactMap(\.primaryKey).sorted() == integrationPKs)
        // The inverse side sees it too.
        let firstIntegration = ManagedObjectID(entity: integration, storeIdentifier: store.identifier, primaryKey: integrationPKs[0])
        #expect(try store.relatedObjectIDs(for: integration.relationshipsByName["testedDevices"]!, of: firstIntegration).contains(deviceID))
    }

    @Test func conflictingUpdateFromAnotherStoreRollsBackTheWholeSave() throws {
        let url = try SQLiteFixtures.copy(Self.fixture)
        let model = try SQLiteFixtures.model(for: Self.fixture)
        let a = try open(url, model)
        let b = try open(url, model)
        defer { a.close(); b.close() }
        let seenByA = try firstBot(a)
        let seenByB = try #require(try b.snapshots(for: [seenByA.objectID])[seenByA.objectID])
        #expect(seenByA.version == seenByB.version)

        var first = StoreSaveRequest()
        var updateA = seenByA
        updateA.values["name"] = "A wins"
        updateA.version = seenByA.version + 1
        first.updated = [(updateA, seenByA.version)]
        try a.save(first)

        var second = StoreSaveRequest()
        var updateB = seenByB
        updateB.values["name"] = "B loses"
        updateB.version = seenByB.version + 1
        second.updated = [(updateB, seenByB.version)]
        let newID = try b.newObjectIDs(for: model.entitiesByName["Bot"]!, count: 1)[0]
        second.inserted = [StoreSnapshot(objectID: newID, version: 1, values: ["identifier": "never"])]
        do {
            try b.save(second)
            Issue.record("expected StoreVersionConflict")
        } catch let conflict as StoreVersionConflict {
            let current = try #require(conflict.current[seenByB.objectID])
            #expect(current?.version == seenByA.version + 1)
            #expect(current?.values["name"] as? String == "A wins")
        }
        // Nothing of B's save was written.
        #expect(try RawSQLite.query(url.path, "SELECT ZNAME FROM ZBOT WHERE Z_PK = \(seenByA.objectID.primaryKey!)").first?.first?.text == "A wins")
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZBOT WHERE Z_PK = \(newID.primaryKey!)").first?.first?.int == 0)
    }

    @Test func deletingAChangedOrMissingObjectConflicts() throws {
        let url = try SQLiteFixtures.copy(Self.fixture)
        let model = try SQLiteFixtures.model(for: Self.fixture)
        let store = try open(url, model)
        defer { store.close() }
        let bot = try firstBot(store)
        var request = StoreSaveRequest()
        request.deleted = [(bot.objectID, bot.version + 5)]
        do {
            try store.save(request)
            Issue.record("expected StoreVersionConflict")
        } catch let conflict as StoreVersionConflict {
            #expect(conflict.current[bot.objectID]??.version == bot.version)
        }
        let ghost = ManagedObjectID(entity: model.entitiesByName["Bot"]!, storeIdentifier: store.identifier, primaryKey: 424_242)
        request.deleted = [(ghost, 1)]
        do {
            try store.save(request)
            Issue.record("expected StoreVersionConflict")
        } catch let conflict as StoreVersionConflict {
            let entry = try #require(conflict.current[ghost])
            #expect(entry == nil, "a vanished object is reported as nil")
        }
        #expect(try store.snapshots(for: [bot.objectID]).count == 1)
    }

    @Test func newStoreRoundTripsEveryAttributeType() throws {
        let model = ManagedObjectModel()
        let thing = EntityDescription(name: "Thing")
        let types: [AttributeType] = [.integer16, .integer32, .integer64, .decimal, .double, .float, .string, .boolean, .date, .binaryData, .uuid, .uri]
        thing.properties = types.map { AttributeDescription(name: "a\($0.rawValue)", type: $0) }
        model.entities = [thing]
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Things.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        let values: [String: Any] = [
            "a100": Int16(7), "a200": Int32(-8), "a300": Int64(1) << 40, "a400": Decimal(string: "1.25")!,
            "a500": 2.5, "a600": Float(0.1), "a700": "text", "a800": true, "a900": Date(timeIntervalSinceReferenceDate: 1),
            "a1000": Data([9, 9]), "a1100": UUID(), "a1200": URL(string: "https://example.com")!,
        ]
        let id = try store.newObjectIDs(for: thing, count: 1)[0]
        #expect(id.primaryKey == 1)
        var request = StoreSaveRequest()
        request.inserted = [StoreSnapshot(objectID: id, version: 1, values: values)]
        try store.save(request)
        store.close()
        let reopened = try SQLiteFixtures.openStore(url, model: model)
        defer { reopened.close() }
        let back = try #require(try reopened.snapshots(for: [id])[id])
        for (key, value) in values { #expect(ModelValue.equal(back.values[key], value), "\(key)") }
    }
}

/// Two stores on one file see each other's commits, and one store used from
/// several threads at once stays consistent (its calls are serialised).
@Suite struct SQLiteStoreSharingTests {
    @Test func dataVersionAndFetchesSeeAnotherStoresCommit() throws {
        let url = try SQLiteFixtures.copy("XCServerCoreData_2.0.1.sqlite")
        let model = try SQLiteFixtures.model(for: "XCServerCoreData_2.0.1.sqlite")
        let a = try SQLiteFixtures.openStore(url, model: model)
        let b = try SQLiteFixtures.openStore(url, model: model)
        defer { a.close(); b.close() }
        let before = try b.dataVersion()
        let count = try b.fetchSnapshots(FetchRequest(entityName: "Platform")).snapshots.count
        let id = try a.newObjectIDs(for: model.entitiesByName["Platform"]!, count: 1)[0]
        var request = StoreSaveRequest()
        request.inserted = [StoreSnapshot(objectID: id, version: 1, values: ["displayName": "Linux"])]
        try a.save(request)
        #expect(try b.dataVersion() != before)
        #expect(try b.fetchSnapshots(FetchRequest(entityName: "Platform")).snapshots.count == count + 1)
    }

    @Test func concurrentCallsOnOneStoreAreSerialised() async throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Threads.sqlite")
        let model = SQLiteStoreRelationshipTests.makeModel()
        let store = try SQLiteFixtures.openStore(url, model: model)
        defer { store.close() }
        let tag = model.entitiesByName["Tag"]!
        nonisolated(unsafe) let shared = store
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for i in 0..<10 {
                        let id = try shared.newObjectIDs(for: tag, count: 1)[0]
                        var request = StoreSaveRequest()
                        request.inserted = [StoreSnapshot(objectID: id, version: 1, values: ["label": "\(worker)-\(i)"])]
                        try shared.save(request)
                        _ = try shared.fetchSnapshots(FetchRequest(entityName: "Tag"))
                    }
                }
            }
            try await group.waitForAll()
        }
        let all = try store.fetchSnapshots(FetchRequest(entityName: "Tag")).snapshots
        #expect(all.count == 80)
        #expect(Set(all.compactMap(\.objectID.primaryKey)).count == 80)
        #expect(try RawSQLite.query(url.path, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Tag'").first?.first == .integer(80))
    }
}

/// Z_OPT and Z_MAX bookkeeping rules of `save(_:)`.
@Suite struct SQLiteStoreBookkeepingTests {
    private func noteStore() throws -> (SQLiteStore, EntityDescription, URL) {
        let model = ManagedObjectModel()
        let note = EntityDescription(name: "Note")
        note.properties = [AttributeDescription(name: "title", type: .string)]
        model.entities = [note]
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Notes.sqlite")
        return (try SQLiteFixtures.openStore(url, model: model), note, url)
    }

    @Test func zOptAlwaysMovesOnUpdate() throws {
        let (store, note, url) = try noteStore()
        defer { store.close() }
        let id = try store.newObjectIDs(for: note, count: 1)[0]
        var insert = StoreSaveRequest()
        insert.inserted = [StoreSnapshot(objectID: id, version: 1, values: ["title": "a"])]
        try store.save(insert)
        // A snapshot that does not advance its version still moves Z_OPT.
        var update = StoreSaveRequest()
        update.updated = [(StoreSnapshot(objectID: id, version: 1, values: ["title": "b"]), 1)]
        try store.save(update)
        #expect(try RawSQLite.query(url.path, "SELECT Z_OPT, ZTITLE FROM ZNOTE") == [[.integer(2), .text("b")]])
        // A snapshot that names its new version gets it.
        update.updated = [(StoreSnapshot(objectID: id, version: 7, values: ["title": "c"]), 2)]
        try store.save(update)
        #expect(try RawSQLite.query(url.path, "SELECT Z_OPT FROM ZNOTE") == [[.integer(7)]])
    }

    @Test func callerChosenKeysRaiseZMax() throws {
        let (store, note, url) = try noteStore()
        defer { store.close() }
        let chosen = ManagedObjectID(entity: note, storeIdentifier: store.identifier, primaryKey: 41)
        var insert = StoreSaveRequest()
        insert.inserted = [StoreSnapshot(objectID: chosen, version: 1, values: [:])]
        try store.save(insert)
        #expect(try RawSQLite.query(url.path, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Note'") == [[.integer(41)]])
        #expect(try store.newObjectIDs(for: note, count: 1)[0].primaryKey == 42)
        // Inserting an existing key is a save error wrapping SQLITE_CONSTRAINT (19), and nothing changes.
        do {
            try store.save(insert)
            Issue.record("inserted a duplicate primary key")
        } catch let error as CoreDataError {
            #expect(error.code == .persistentStoreSave)
            #expect(error.sqliteResultCode == 19)
        }
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZNOTE") == [[.integer(1)]])
    }

    @Test func temporaryIDsAreRefused() throws {
        let (store, note, _) = try noteStore()
        defer { store.close() }
        var insert = StoreSaveRequest()
        insert.inserted = [StoreSnapshot(objectID: ManagedObjectID(temporaryFor: note), version: 1, values: [:])]
        do { try store.save(insert); Issue.record("saved a temporary ID") } catch { #expect(error.coreDataCode == 134030) }
    }
}
