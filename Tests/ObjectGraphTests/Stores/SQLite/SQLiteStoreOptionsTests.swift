import Foundation
import Testing
@testable import ObjectGraph

/// NSSQLitePragmasOption, NSSQLiteAnalyzeOption and NSSQLiteManualVacuumOption
/// (PC-35a–c) on SQLiteStore.
@Suite struct SQLiteStoreOptionsTests {
    static func model() -> ManagedObjectModel {
        let model = ManagedObjectModel()
        let note = EntityDescription(name: "Note")
        let body = AttributeDescription(name: "body", type: .string)
        body.isIndexed = true
        note.properties = [body]
        model.entities = [note]
        return model
    }

    func newURL() throws -> URL { try TestPaths.temporaryDirectory().appendingPathComponent("Options.sqlite") }

    func insertNotes(_ store: SQLiteStore, count: Int, body: String) throws -> [ManagedObjectID] {
        let ids = try store.newObjectIDs(for: store.model.entitiesByName["Note"]!, count: count)
        var request = StoreSaveRequest()
        request.inserted = ids.map { StoreSnapshot(objectID: $0, version: 1, values: ["body": body + "\($0.primaryKey!)"]) }
        try store.save(request)
        return ids
    }

    /// PC-35a: the pragmas run on the store's connection.
    @Test func pragmasAreAppliedAtOpen() throws {
        let url = try newURL()
        let store = try SQLiteFixtures.openStore(url, model: Self.model(), options: [
            SQLiteStore.pragmasOption: ["journal_mode": "DELETE", "synchronous": "FULL", "cache_size": "-4000"],
        ])
        #expect(try store.pragmaValue("journal_mode") == .text("delete"))
        #expect(try store.pragmaValue("synchronous") == .integer(2))
        #expect(try store.pragmaValue("cache_size") == .integer(-4000))
        _ = try insertNotes(store, count: 3, body: "n")
        store.close()
        // journal_mode persists in the file header: 1 is rollback journal, 2 WAL.
        let header = try Data(contentsOf: url).prefix(20)
        #expect(header[18] == 1 && header[19] == 1)
        // Reopened without the option: connection pragmas are back to SQLite's defaults.
        let plain = try SQLiteFixtures.openStore(url, model: Self.model())
        defer { plain.close() }
        #expect(try plain.pragmaValue("cache_size") == .integer(-2000))
        #expect(try plain.pragmaValue("journal_mode") == .text("wal"))
    }

    @Test func readOnlyStoresSkipPragmasThatWrite() throws {
        let url = try newURL()
        let created = try SQLiteFixtures.openStore(url, model: Self.model())
        created.close()
        let before = try Data(contentsOf: url)
        let store = try SQLiteFixtures.openStore(url, model: Self.model(), options: [
            PersistentStore.readOnlyOption: true,
            SQLiteStore.pragmasOption: ["journal_mode": "DELETE", "cache_size": "-3000"],
            SQLiteStore.manualVacuumOption: true, SQLiteStore.analyzeOption: true,
        ])
        #expect(try store.pragmaValue("cache_size") == .integer(-3000))
        store.close()
        #expect(try Data(contentsOf: url) == before)
    }

    @Test(arguments: [
        (["writable_schema": "1"] as [String: Any], "pragma 'writable_schema' is not allowed"),
        (["query_only": "1"], "pragma 'query_only' is not allowed"),
        (["synchronous": 2], "must be a string"),
        (["synchronous": "OFF; DROP TABLE ZNOTE"], "may only hold letters"),
        (["cache_size": ""], "may only hold letters"),
    ])
    func badPragmasAreRefusedBeforeTheFileIsMade(pragmas: [String: Any], message: String) throws {
        let url = try newURL()
        let store = SQLiteStore(model: Self.model(), configurationName: nil, url: url, options: [SQLiteStore.pragmasOption: pragmas])
        let error = try #require(throws: CoreDataError.self) { try store.load() }
        #expect(error.code == .persistentStoreOpen)
        #expect(error.message.contains("NSSQLitePragmasOption"))
        #expect(error.message.contains(message), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test func pragmasMustBeADictionary() throws {
        let store = SQLiteStore(model: Self.model(), configurationName: nil, url: try newURL(), options: [SQLiteStore.pragmasOption: "synchronous=FULL"])
        #expect(throws: CoreDataError.self) { try store.load() }
    }

    /// PC-35b: ANALYZE leaves statistics in sqlite_stat1.
    @Test func analyzeWritesStatistics() throws {
        let url = try newURL()
        let store = try SQLiteFixtures.openStore(url, model: Self.model())
        _ = try insertNotes(store, count: 20, body: "row")
        store.close()
        #expect(try RawSQLite.query(url.path, "SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'").isEmpty)
        let analyzed = try SQLiteFixtures.openStore(url, model: Self.model(), options: [SQLiteStore.analyzeOption: true])
        analyzed.close()
        let stats = try RawSQLite.query(url.path, "SELECT tbl FROM sqlite_stat1")
        #expect(stats.contains { $0.first?.text == "ZNOTE" })
    }

    /// PC-35c: VACUUM gives back the pages of deleted rows.
    @Test func manualVacuumShrinksTheFile() throws {
        let url = try newURL()
        let store = try SQLiteFixtures.openStore(url, model: Self.model(), options: [SQLiteStore.pragmasOption: ["journal_mode": "DELETE"]])
        let ids = try insertNotes(store, count: 400, body: String(repeating: "x", count: 2_000))
        var delete = StoreSaveRequest()
        delete.deleted = ids.dropFirst(10).map { ($0, Int64(1)) }
        try store.save(delete)
        store.close()
        let before = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as! Int
        let vacuumed = try SQLiteFixtures.openStore(url, model: Self.model(), options: [
            SQLiteStore.manualVacuumOption: true, SQLiteStore.pragmasOption: ["journal_mode": "DELETE"],
        ])
        #expect(try vacuumed.fetchSnapshots(FetchRequest(entityName: "Note")).snapshots.count == 10)
        vacuumed.close()
        let after = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as! Int
        #expect(after * 4 < before, "\(before) → \(after) bytes")
    }

    @Test func optionFlagsAcceptCoreDataSpellings() throws {
        #expect(try SQLiteStoreOptions([SQLiteStore.analyzeOption: NSNumber(value: true)]).analyze)
        #expect(try SQLiteStoreOptions([SQLiteStore.manualVacuumOption: "YES"]).manualVacuum)
        #expect(try SQLiteStoreOptions([:]) == SQLiteStoreOptions())
        let sorted = try SQLiteStoreOptions([SQLiteStore.pragmasOption: ["Synchronous": "NORMAL", "cache_size": "10"]])
        #expect(sorted.pragmas.map(\.name) == ["cache_size", "synchronous"])
    }
}
