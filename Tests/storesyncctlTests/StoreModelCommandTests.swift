import CSQLite
import Foundation
import ObjectGraph
import Testing
@testable import storesyncctl

/// `query` and `model show` without `--model` (the store's own model, cached
/// or derived from its schema) and with a whole bundle (the version matching
/// the store), on every Apple-written fixture store.
@Suite struct StoreModelCommandTests {
    static let fixtures = [
        "XCServerCoreData_1.2.0.sqlite", "XCServerCoreData_1.2.0_empty.sqlite",
        "XCServerCoreData_2.0.0_empty.sqlite", "XCServerCoreData_2.0.1.sqlite",
    ]
    static let versions: [String: String] = [
        "XCServerCoreData_1.2.0.sqlite": "XCServerCoreData1.2.0.xcdatamodel",
        "XCServerCoreData_1.2.0_empty.sqlite": "XCServerCoreData1.2.0.xcdatamodel",
        "XCServerCoreData_2.0.0_empty.sqlite": "XCServerCoreData2.0.0.xcdatamodel",
        "XCServerCoreData_2.0.1.sqlite": "XCServerCoreData2.0.1.xcdatamodel",
    ]
    let query = QueryCommandTests()

    static func path(_ fixture: String) -> String { QueryCommandTests.fixtureDirectory.appendingPathComponent(fixture).path }

    /// A private copy of a fixture, its Z_MODELCACHE row deleted.
    static func copyWithoutModelCache(_ fixture: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-model-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(fixture)
        try FileManager.default.copyItem(atPath: path(fixture), toPath: url.path)
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        try #require(sqlite3_open_v2(url.path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK)
        try #require(sqlite3_exec(db, "DELETE FROM Z_MODELCACHE", nil, nil, nil) == SQLITE_OK)
        return url.path
    }

    /// Entity names from the store's Z_PRIMARYKEY, through the C API.
    func entityNames(_ path: String) throws -> [String] {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        try #require(sqlite3_open_v2("file:\(path)?immutable=1", &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK)
        var stmt: OpaquePointer?
        try #require(sqlite3_prepare_v2(db, "SELECT Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT", -1, &stmt, nil) == SQLITE_OK)
        defer { sqlite3_finalize(stmt) }
        var names: [String] = []
        while sqlite3_step(stmt) == SQLITE_ROW { names.append(String(cString: sqlite3_column_text(stmt, 0))) }
        return names
    }

    /// Every entity of the store: `query STORE ENTITY --json` gives the rows SQLite holds.
    func everyEntityMatchesSQL(_ store: String, modelArguments: [String]) throws {
        let names = try entityNames(store)
        #expect(names.count == 23)
        for name in names {
            let expected = try query.rawKeys(store, "SELECT Z_PK FROM Z\(name.uppercased()) ORDER BY Z_PK")
            let outcome = try query.run([store, name, "--json"] + modelArguments)
            #expect(try query.jsonKeys(outcome) == expected, "\(store) \(name) \(modelArguments)")
        }
    }

    @Test(arguments: fixtures)
    func queryWithoutModelUsesTheCachedModel(fixture: String) throws {
        try everyEntityMatchesSQL(Self.path(fixture), modelArguments: [])
    }

    @Test(arguments: fixtures)
    func queryWithTheWholeBundleUsesTheMatchingVersion(fixture: String) throws {
        try everyEntityMatchesSQL(Self.path(fixture), modelArguments: ["--model", CLI.xcServerBundle])
        // Matching read the fixture in place, leaving nothing beside it.
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: Self.path(fixture) + suffix), "\(fixture)\(suffix)")
        }
    }

    @Test(arguments: fixtures)
    func queryWithoutModelCacheUsesTheDerivedModel(fixture: String) throws {
        let store = try Self.copyWithoutModelCache(fixture)
        try everyEntityMatchesSQL(store, modelArguments: [])
    }

    @Test func predicatesWithoutModelMatchSQL() throws {
        let store = Self.path("XCServerCoreData_2.0.1.sqlite")
        let derived = try Self.copyWithoutModelCache("XCServerCoreData_2.0.1.sqlite")
        let cases: [(path: String, entity: String, arguments: [String], sql: String)] = [
            // (store, entity, arguments after the entity, SQL)
            (store, "Integration", ["result == 'succeeded'", "--sort", "number:desc"],
             "SELECT Z_PK FROM ZINTEGRATION WHERE ZRESULT = 'succeeded' ORDER BY ZNUMBER DESC, Z_PK"),
            (store, "Integration", ["bot.name == 'Pocket Bot iOS' AND number > 30"],
             "SELECT i.Z_PK FROM ZINTEGRATION i JOIN ZBOT b ON b.Z_PK = i.ZBOT WHERE b.ZNAME = 'Pocket Bot iOS' AND i.ZNUMBER > 30 ORDER BY i.Z_PK"),
            // The derived model's names are the lowercased column names.
            (derived, "Integration", ["result == 'succeeded'", "--sort", "number:desc"],
             "SELECT Z_PK FROM ZINTEGRATION WHERE ZRESULT = 'succeeded' ORDER BY ZNUMBER DESC, Z_PK"),
            (derived, "Integration", ["bot.name == 'Pocket Bot iOS' AND number > 30", "--sort", "endedtime"],
             "SELECT i.Z_PK FROM ZINTEGRATION i JOIN ZBOT b ON b.Z_PK = i.ZBOT WHERE b.ZNAME = 'Pocket Bot iOS' AND i.ZNUMBER > 30 ORDER BY i.ZENDEDTIME, i.Z_PK"),
            // To-ones chain; a to-many whose inverse is a to-one has no column, so it is not in a derived model.
            (derived, "RevisionBlueprint", ["commit.message BEGINSWITH 'Merge' AND integration.number > 100"],
             "SELECT r.Z_PK FROM ZREVISIONBLUEPRINT r JOIN ZCOMMIT c ON c.Z_PK = r.ZCOMMIT JOIN ZINTEGRATION i ON i.Z_PK = r.ZINTEGRATION WHERE substr(c.ZMESSAGE, 1, 5) = 'Merge' AND i.ZNUMBER > 100 ORDER BY r.Z_PK"),
            // A many-to-many, from its join table.
            (derived, "Device", ["ANY integrations.number > 100"],
             "SELECT Z_PK FROM ZDEVICE d WHERE EXISTS (SELECT 1 FROM Z_9INTEGRATIONS j JOIN ZINTEGRATION i ON i.Z_PK = j.Z_13INTEGRATIONS WHERE j.Z_9TESTEDDEVICES = d.Z_PK AND i.ZNUMBER > 100) ORDER BY Z_PK"),
        ]
        for (path, entity, arguments, sql) in cases {
            let expected = try query.rawKeys(path, sql)
            #expect(!expected.isEmpty, "\(sql)")
            #expect(try query.jsonKeys(try query.run([path, entity] + arguments + ["--json"])) == expected, "\(entity) \(arguments)")
        }
        // A camel-case key the derived model lacks: refused, and the message says why.
        let camel = try query.run([derived, "Integration", "endedTime != nil"])
        #expect(camel.exitCode == 65)
        #expect(camel.standardError.contains("derived from the schema"))
    }

    @Test func derivedValuesAreSQLitesValues() throws {
        let store = try Self.copyWithoutModelCache("XCServerCoreData_2.0.1.sqlite")
        let outcome = try query.run([store, "Bot", "--json"])
        #expect(outcome.exitCode == 0, "\(outcome.standardError)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(outcome.standardOutput.utf8)) as? [[String: Any]])
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        try #require(sqlite3_open_v2("file:\(store)?immutable=1", &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK)
        var stmt: OpaquePointer?
        try #require(sqlite3_prepare_v2(db, "SELECT ZNAME, ZTYPE, ZXCODESERVER FROM ZBOT ORDER BY Z_PK", -1, &stmt, nil) == SQLITE_OK)
        defer { sqlite3_finalize(stmt) }
        var row = 0
        while sqlite3_step(stmt) == SQLITE_ROW {
            let object = objects[row]
            #expect(object["name"] as? String == String(cString: sqlite3_column_text(stmt, 0)))
            #expect((object["type"] as? NSNumber)?.int64Value == sqlite3_column_int64(stmt, 1))
            #expect((object["xcodeserver"] as? String)?.hasSuffix("/XcodeServer/p\(sqlite3_column_int64(stmt, 2))") == true)
            row += 1
        }
        #expect(row == objects.count && row > 0)
    }

    @Test(arguments: fixtures)
    func modelShowOfAStorePrintsItsVersionsEntities(fixture: String) throws {
        let version = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: CLI.xcServerBundle + "/" + Self.versions[fixture]!))
        func attributes(_ json: String) throws -> [String: Set<String>] {
            let report = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            let entities = try #require(report["entities"] as? [[String: Any]])
            return Dictionary(uniqueKeysWithValues: entities.map { entity in
                (entity["name"] as! String, Set((entity["attributes"] as! [[String: Any]]).map { $0["name"] as! String }))
            })
        }
        let expected = Dictionary(uniqueKeysWithValues: version.entities.map { ($0.name, Set($0.attributesByName.keys)) })
        // The cached model, and the matching version of the bundle.
        for extra in [[], ["--model", CLI.xcServerBundle]] {
            let result = try CLI.run(["model", "show", Self.path(fixture), "--json"] + extra)
            try #require(result.status == 0, "\(result.stderr)")
            #expect(try attributes(result.stdout) == expected)
            #expect(result.stderr.contains(extra.isEmpty ? "Z_MODELCACHE" : Self.versions[fixture]!))
        }
        // Text output as for a model file.
        let text = try CLI.run(["model", "show", Self.path(fixture)])
        #expect(text.status == 0)
        #expect(text.stdout.contains("entity Integration\n"))
        // Without a cache: the derived model, lowercased names, and what it cannot know.
        let derived = try CLI.run(["model", "show", try Self.copyWithoutModelCache(fixture), "--json"])
        try #require(derived.status == 0, "\(derived.stderr)")
        #expect(derived.stderr.contains("derived from the schema"))
        #expect(try attributes(derived.stdout).keys.sorted() == expected.keys.sorted())
        #expect(try attributes(derived.stdout)["Bot"]?.contains("lastupdate") == true)
        #expect(derived.stdout.contains("StoreSync.unknown"))
        let derivedText = try CLI.run(["model", "show", try Self.copyWithoutModelCache(fixture)])
        #expect(derivedText.stdout.contains("  unknown: "))
    }

    @Test func aBundleWithoutTheStoresVersionIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-model-\(UUID().uuidString)")
        let bundle = dir.appendingPathComponent("Later.xcdatamodeld")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: CLI.xcServerBundle + "/XCServerCoreData2.0.3.xcdatamodel",
                                         toPath: bundle.appendingPathComponent("XCServerCoreData2.0.3.xcdatamodel").path)
        let store = Self.path("XCServerCoreData_2.0.1.sqlite")
        let refused = try query.run([store, "Bot", "--model", bundle.path])
        #expect(refused.exitCode == 65)
        #expect(refused.standardError.contains("no version of"))
        #expect(refused.standardError.contains("XCServerCoreData2.0.3.xcdatamodel: "))
        let show = try CLI.run(["model", "show", store, "--model", bundle.path])
        #expect(show.status == 65)
        #expect(show.stderr.contains("no version of"))
        // Missing store: 66, whichever model source.
        #expect(try query.run([dir.appendingPathComponent("none.sqlite").path, "Bot"]).exitCode == 66)
        #expect(try CLI.run(["model", "show", CLI.companyModel, "--model", CLI.xcServerBundle]).status == 64)
    }
}
