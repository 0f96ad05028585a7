import Foundation
import Testing
@testable import ObjectGraph

/// Opening stores Apple's Core Data wrote, and reading them through the
/// row-level store contract (PS-*), checked against the file read directly
/// through SQLite's C API.
@Suite struct SQLiteStoreFixtureTests {
    /// Entity name → Z_ENT, read from the file's own Z_PRIMARYKEY.
    private func rawEntityNumbers(_ path: String) throws -> [String: Int64] {
        var out: [String: Int64] = [:]
        for row in try RawSQLite.query(path, "SELECT Z_NAME, Z_ENT FROM Z_PRIMARYKEY") { out[row[0].text!] = row[1].int! }
        return out
    }

    @Test(arguments: SQLiteFixtures.all)
    func everyFixtureOpensAndRowCountsMatch(fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteFixtures.model(for: fixture)
        let store = try SQLiteFixtures.openStore(url, model: model)
        defer { store.close() }
        #expect(store.identifier == (try RawSQLite.query(url.path, "SELECT Z_UUID FROM Z_METADATA").first?.first?.text))
        let numbers = try rawEntityNumbers(url.path)
        var total = 0
        for entity in model.entities {
            let table = "Z" + entity.name.uppercased()
            let expected = try RawSQLite.query(url.path, "SELECT COUNT(*) FROM \(table) WHERE Z_ENT = \(numbers[entity.name]!)").first!.first!.int!
            let result = try store.fetchSnapshots(FetchRequest(entityName: entity.name))
            #expect(Int64(result.snapshots.count) == expected, "\(entity.name)")
            #expect(result.isExact)
            #expect(result.snapshots.allSatisfy { $0.objectID.entity === entity && $0.objectID.storeIdentifier == store.identifier })
            total += result.snapshots.count
        }
        if fixture == "XCServerCoreData_2.0.1.sqlite" { #expect(total == 13_225) }  // sum of the 23 entity tables' rows
        if fixture.contains("empty") { #expect(total == 0) }
    }

    @Test func botValuesMatchTheFile() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let store = try SQLiteFixtures.openStore(url, model: try SQLiteFixtures.model(for: fixture))
        defer { store.close() }
        let raw = try RawSQLite.query(url.path, "SELECT Z_PK, Z_OPT, ZNAME, ZIDENTIFIER, ZLASTUPDATE, ZTYPE, ZSTATS, ZCONFIGURATION, ZREVISION FROM ZBOT ORDER BY Z_PK")
        let bots = try store.fetchSnapshots(FetchRequest(entityName: "Bot")).snapshots
        #expect(bots.count == raw.count)
        #expect(raw.count >= 2)
        for (row, bot) in zip(raw, bots) {
            #expect(bot.objectID.primaryKey == row[0].int)
            #expect(bot.version == row[1].int)
            #expect(bot.values["name"] as? String == row[2].text)
            #expect(bot.values["identifier"] as? String == row[3].text)
            #expect((bot.values["lastUpdate"] as? Date)?.timeIntervalSinceReferenceDate == row[4].real)
            #expect(bot.values["type"] as? Int32 == row[5].int.map { Int32($0) })
            let stats = bot.values["stats"] as? ManagedObjectID
            #expect(stats?.primaryKey == row[6].int)
            #expect(stats?.entity.name == (row[6].int == nil ? nil : "Stats"))
            #expect((bot.values["configuration"] as? ManagedObjectID)?.primaryKey == row[7].int)
            #expect(bot.values["revision"] as? String == row[8].text)
            // To-many relationships are not in snapshots.
            #expect(bot.values["integrations"] == nil)
        }
        // A known row (checked with the sqlite3 CLI when writing this test).
        #expect(bots.contains { $0.values["name"] as? String == "Crazy Monkey iOS" })
    }

    @Test func statsBreakdownFloatsAndIntegrationBooleansDecode() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let store = try SQLiteFixtures.openStore(url, model: try SQLiteFixtures.model(for: fixture))
        defer { store.close() }
        let raw = try RawSQLite.query(url.path, "SELECT Z_PK, ZAVG, ZCOUNT FROM ZSTATSBREAKDOWN ORDER BY Z_PK")
        let rows = try store.fetchSnapshots(FetchRequest(entityName: "StatsBreakdown")).snapshots
        for (r, s) in zip(raw, rows) {
            #expect(s.objectID.primaryKey == r[0].int)
            #expect((s.values["avg"] as? Float).map(Double.init) == r[1].real.map { Double(Float($0)) })
            #expect(s.values["count"] as? Int32 == r[2].int.map { Int32($0) })
        }
        let integrations = try store.fetchSnapshots(FetchRequest(entityName: "Integration")).snapshots
        let rawFlags = try RawSQLite.query(url.path, "SELECT Z_PK, ZSHOULDCLEAN FROM ZINTEGRATION ORDER BY Z_PK")
        for (r, s) in zip(rawFlags, integrations) {
            #expect(s.values["shouldClean"] as? Bool == r[1].int.map { $0 != 0 })
        }
    }

    @Test func snapshotsForIDsFireFaultsAndSkipMissingOnes() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteFixtures.model(for: fixture)
        let store = try SQLiteFixtures.openStore(url, model: model)
        defer { store.close() }
        let bot = model.entitiesByName["Bot"]!
        let commit = model.entitiesByName["Commit"]!
        let pk = try RawSQLite.query(url.path, "SELECT min(Z_PK) FROM ZBOT").first!.first!.int!
        let present = ManagedObjectID(entity: bot, storeIdentifier: store.identifier, primaryKey: pk)
        let missing = ManagedObjectID(entity: bot, storeIdentifier: store.identifier, primaryKey: 999_999)
        let wrongEntity = ManagedObjectID(entity: commit, storeIdentifier: store.identifier, primaryKey: 999_998)
        let otherStore = ManagedObjectID(entity: bot, storeIdentifier: "OTHER", primaryKey: pk)
        let result = try store.snapshots(for: [present, missing, wrongEntity, otherStore])
        #expect(result.count == 1)
        #expect(result[present]?.values["name"] as? String == (try RawSQLite.query(url.path, "SELECT ZNAME FROM ZBOT WHERE Z_PK = \(pk)").first?.first?.text))
    }

    @Test func relatedObjectIDsFollowForeignKeysAndJoinTables() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteFixtures.model(for: fixture)
        let store = try SQLiteFixtures.openStore(url, model: model)
        defer { store.close() }
        let bot = model.entitiesByName["Bot"]!
        let device = model.entitiesByName["Device"]!
        let integration = model.entitiesByName["Integration"]!

        // One-to-many through the inverse foreign key ZINTEGRATION.ZBOT.
        for row in try RawSQLite.query(url.path, "SELECT Z_PK FROM ZBOT") {
            let id = ManagedObjectID(entity: bot, storeIdentifier: store.identifier, primaryKey: row[0].int!)
            let related = try store.relatedObjectIDs(for: bot.relationshipsByName["integrations"]!, of: id)
            let expected = try RawSQLite.query(url.path, "SELECT Z_PK FROM ZINTEGRATION WHERE ZBOT = \(row[0].int!) ORDER BY Z_PK").map { $0[0].int! }
            #expect(related.compactMap(\.primaryKey) == expected)
            #expect(related.allSatisfy { $0.entity === integration })
        }

        // Many-to-many through Z_9INTEGRATIONS, from both sides.
        let pairs = try RawSQLite.query(url.path, "SELECT Z_9TESTEDDEVICES, Z_13INTEGRATIONS FROM Z_9INTEGRATIONS")
        #expect(!pairs.isEmpty)
        let someDevice = pairs[0][0].int!
        let deviceID = ManagedObjectID(entity: device, storeIdentifier: store.identifier, primaryKey: someDevice)
        let integrations = try store.relatedObjectIDs(for: device.relationshipsByName["integrations"]!, of: deviceID)
        #expect(Set(integrations.compactMap(\.primaryKey)) == Set(pairs.filter { $0[0].int == someDevice }.map { $0[1].int! }))
        let someIntegration = pairs[0][1].int!
        let integrationID = ManagedObjectID(entity: integration, storeIdentifier: store.identifier, primaryKey: someIntegration)
        let devices = try store.relatedObjectIDs(for: integration.relationshipsByName["testedDevices"]!, of: integrationID)
        #expect(Set(devices.compactMap(\.primaryKey)) == Set(pairs.filter { $0[1].int == someIntegration }.map { $0[0].int! }))
        #expect(devices.allSatisfy { $0.entity === device })
    }

    @Test func limitAndOffsetApplyOnlyWithoutPredicate() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let store = try SQLiteFixtures.openStore(url, model: try SQLiteFixtures.model(for: fixture))
        defer { store.close() }
        let all = try store.fetchSnapshots(FetchRequest(entityName: "Commit")).snapshots
        let request = FetchRequest(entityName: "Commit")
        request.fetchLimit = 5
        request.fetchOffset = 10
        let page = try store.fetchSnapshots(request)
        #expect(page.isExact)
        #expect(page.snapshots.map(\.objectID) == Array(all[10..<15]).map(\.objectID))
        request.predicateFormat = "message == repository.url"  // key path vs key path: not compiled
        let superset = try store.fetchSnapshots(request)
        #expect(!superset.isExact)
        #expect(superset.snapshots.count == all.count)
    }

    @Test func readOnlyOpenLeavesTheFileUnchanged() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let before = try Data(contentsOf: url)
        let store = try SQLiteFixtures.openStore(url, model: try SQLiteFixtures.model(for: fixture),
                                                 options: [PersistentStore.readOnlyOption: true])
        _ = try store.fetchSnapshots(FetchRequest(entityName: "Bot"))
        store.close()
        #expect(try Data(contentsOf: url) == before)
    }

    /// A WAL-mode file with no pending `-wal` opens immutable: nothing appears beside it.
    @Test func readOnlyOpenOfACheckpointedWALFileLeavesNoSideFiles() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let dir = url.deletingLastPathComponent().path
        #expect(SQLiteStore.readOnlyOpenMode(forFileAt: url) == .readOnlyImmutable)
        let store = try SQLiteFixtures.openStore(url, model: try SQLiteFixtures.model(for: fixture),
                                                 options: [PersistentStore.readOnlyOption: true])
        #expect(try store.fetchSnapshots(FetchRequest(entityName: "Integration")).snapshots.count == 177)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [fixture])
        store.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [fixture])
    }

    /// While a writer holds committed rows only in `-wal`, a read-only store
    /// must still see them, so it opens plainly read-only (not immutable).
    @Test func readOnlyOpenSeesRowsStillInTheWAL() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Pending.sqlite")
        let model = SQLiteStoreRelationshipTests.makeModel()
        let writer = try SQLiteFixtures.openStore(url, model: model)
        defer { writer.close() }
        let tags = try writer.newObjectIDs(for: model.entitiesByName["Tag"]!, count: 3)
        var request = StoreSaveRequest()
        request.inserted = tags.map { StoreSnapshot(objectID: $0, version: 1, values: ["label": "t\($0.primaryKey!)"]) }
        try writer.save(request)
        let walSize = try FileManager.default.attributesOfItem(atPath: url.path + "-wal")[.size] as? Int ?? 0
        #expect(walSize > 0)
        #expect(SQLiteStore.readOnlyOpenMode(forFileAt: url) == .readOnly)
        let reader = try SQLiteFixtures.openStore(url, model: model, options: [PersistentStore.readOnlyOption: true])
        defer { reader.close() }
        #expect(try reader.fetchSnapshots(FetchRequest(entityName: "Tag")).snapshots.count == 3)
    }
}
