import CSQLite
import Foundation
import Testing
@testable import storesyncctl

/// `storesyncctl query` against Apple-written XCServerCoreData stores,
/// checked against the same filters written in SQL and run through
/// SQLite's C API directly.
@Suite struct QueryCommandTests {
    static let fixtureDirectory = CLI.repositoryRoot
        .appendingPathComponent("Tests/Fixtures/apple/XCServerCoreData/Tests")
    static let fixture = fixtureDirectory.appendingPathComponent("XCServerCoreData_2.0.1.sqlite").path
    static let model = CLI.xcServerBundle + "/XCServerCoreData2.0.1.xcdatamodel"

    /// A private copy of the 2.0.1 fixture in a writable directory of its own.
    func copyFixture() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("query-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent("Store.sqlite")
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: url.path)
        return url
    }

    func run(_ arguments: [String]) throws -> QueryCommand.Outcome {
        try QueryCommand.parse(arguments).execute()
    }

    /// The first column of every row of `sql`, read with the C API (immutable, so nothing is written).
    func rawKeys(_ path: String, _ sql: String) throws -> [Int64] {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2("file:\(path)?immutable=1", &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil)
        defer { sqlite3_close(db) }
        try #require(rc == SQLITE_OK)
        var stmt: OpaquePointer?
        try #require(sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, "\(String(cString: sqlite3_errmsg(db)))")
        defer { sqlite3_finalize(stmt) }
        var keys: [Int64] = []
        while sqlite3_step(stmt) == SQLITE_ROW { keys.append(sqlite3_column_int64(stmt, 0)) }
        return keys
    }

    /// Primary keys from `--json` output (object URIs end in `/p<key>`).
    func jsonKeys(_ outcome: QueryCommand.Outcome) throws -> [Int64] {
        #expect(outcome.exitCode == 0, "\(outcome.standardError)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(outcome.standardOutput.utf8)) as? [[String: Any]])
        return try objects.map { object in
            let uri = try #require(object["objectID"] as? String)
            return try #require(Int64(uri.split(separator: "/").last!.dropFirst()))
        }
    }

    @Test(arguments: [
        // (predicate, sorts, limit, the same in SQL)
        ("result == 'succeeded'", [String](), 0, "SELECT Z_PK FROM ZINTEGRATION WHERE ZRESULT = 'succeeded' ORDER BY Z_PK"),
        ("bot.name == 'Pocket Bot iOS' AND number > 30", [], 0,
         "SELECT i.Z_PK FROM ZINTEGRATION i JOIN ZBOT b ON b.Z_PK = i.ZBOT WHERE b.ZNAME = 'Pocket Bot iOS' AND i.ZNUMBER > 30 ORDER BY i.Z_PK"),
        ("", ["number:desc"], 5, "SELECT Z_PK FROM ZINTEGRATION ORDER BY ZNUMBER DESC, Z_PK LIMIT 5"),
        ("result IN {'warnings', 'build-errors'}", ["result", "endedTime:desc"], 10,
         "SELECT Z_PK FROM ZINTEGRATION WHERE ZRESULT IN ('warnings', 'build-errors') ORDER BY ZRESULT, ZENDEDTIME DESC, Z_PK LIMIT 10"),
        ("duration >= 100 OR currentStep != 'completed'", ["bot.name", "number"], 0,
         "SELECT i.Z_PK FROM ZINTEGRATION i LEFT JOIN ZBOT b ON b.Z_PK = i.ZBOT WHERE i.ZDURATION >= 100 OR coalesce(i.ZCURRENTSTEP != 'completed', 1) ORDER BY b.ZNAME, i.ZNUMBER, i.Z_PK"),
    ])
    func integrationsMatchSQL(predicate: String, sorts: [String], limit: Int, sql: String) throws {
        var arguments = [Self.fixture, "Integration", predicate, "--model", Self.model, "--json"]
        for sort in sorts { arguments += ["--sort", sort] }
        if limit > 0 { arguments += ["--limit", String(limit)] }
        let expected = try rawKeys(Self.fixture, sql)
        #expect(!expected.isEmpty)
        #expect(try jsonKeys(try run(arguments)) == expected)
    }

    @Test(arguments: [
        // (predicate, sorts, offset, limit, the same in SQL); limit 0 means none
        ("", ["number:desc"], 5, 10, "SELECT Z_PK FROM ZINTEGRATION ORDER BY ZNUMBER DESC, Z_PK LIMIT 10 OFFSET 5"),
        ("result == 'succeeded'", [], 3, 0, "SELECT Z_PK FROM ZINTEGRATION WHERE ZRESULT = 'succeeded' ORDER BY Z_PK LIMIT -1 OFFSET 3"),
        ("", ["bot.name", "number"], 20, 7,
         "SELECT i.Z_PK FROM ZINTEGRATION i LEFT JOIN ZBOT b ON b.Z_PK = i.ZBOT ORDER BY b.ZNAME, i.ZNUMBER, i.Z_PK LIMIT 7 OFFSET 20"),
        ("", ["number"], 0, 4, "SELECT Z_PK FROM ZINTEGRATION ORDER BY ZNUMBER, Z_PK LIMIT 4 OFFSET 0"),
    ])
    func offsetMatchesSQL(predicate: String, sorts: [String], offset: Int, limit: Int, sql: String) throws {
        var arguments = [Self.fixture, "Integration", predicate, "--model", Self.model, "--json", "--offset", String(offset)]
        for sort in sorts { arguments += ["--sort", sort] }
        if limit > 0 { arguments += ["--limit", String(limit)] }
        let expected = try rawKeys(Self.fixture, sql)
        #expect(!expected.isEmpty)
        #expect(try jsonKeys(try run(arguments)) == expected)
    }

    @Test func offsetPagesThroughAFilterFinishedInMemory() throws {
        // SUBQUERY does not compile: offset and limit are applied in memory after the sort, as SQL would.
        let predicate = "SUBQUERY(commitChanges, $c, $c.status == 1).@count > 0"
        let sql = """
            SELECT Z_PK FROM ZCOMMIT c WHERE EXISTS (SELECT 1 FROM ZCOMMITCHANGE x WHERE x.ZCOMMIT = c.Z_PK AND x.ZSTATUS = 1)
            ORDER BY ZMESSAGE, Z_PK
            """
        let all = try rawKeys(Self.fixture, sql)
        #expect(all.count > 6)
        var pages: [Int64] = []
        for start in stride(from: 0, to: all.count + 3, by: 3) {
            let page = try jsonKeys(try run([Self.fixture, "Commit", predicate, "--model", Self.model, "--sort", "message",
                                             "--offset", String(start), "--limit", "3", "--json"]))
            #expect(page == Array(all.dropFirst(start).prefix(3)))
            pages += page
        }
        #expect(pages == all)
        // Past the end: nothing, and success.
        let beyond = try run([Self.fixture, "Commit", predicate, "--model", Self.model, "--offset", String(all.count), "--json"])
        #expect(try jsonKeys(beyond).isEmpty)
    }

    @Test func negativeOffsetIsAUsageError() throws {
        #expect(throws: (any Error).self) { try QueryCommand.parse([Self.fixture, "Commit", "--model", Self.model, "--offset", "-1"]) }
    }

    @Test func commitsAndBotsMatchSQL() throws {
        let merges = try run([Self.fixture, "Commit", "message BEGINSWITH 'Merge'", "--model", Self.model, "--json"])
        #expect(try jsonKeys(merges) == (try rawKeys(Self.fixture, "SELECT Z_PK FROM ZCOMMIT WHERE substr(ZMESSAGE, 1, 5) = 'Merge' ORDER BY Z_PK")))
        // SUBQUERY does not compile to SQL: the store returns every row and the command filters in memory.
        let changed = try run([Self.fixture, "Commit", "SUBQUERY(commitChanges, $c, $c.status == 1).@count > 0", "--model", Self.model,
                               "--sort", "message", "--limit", "7", "--json"])
        let changedSQL = """
            SELECT Z_PK FROM ZCOMMIT c WHERE EXISTS (SELECT 1 FROM ZCOMMITCHANGE x WHERE x.ZCOMMIT = c.Z_PK AND x.ZSTATUS = 1)
            ORDER BY ZMESSAGE, Z_PK LIMIT 7
            """
        let expectedChanged = try rawKeys(Self.fixture, changedSQL)
        #expect(expectedChanged.count == 7)
        #expect(try jsonKeys(changed) == expectedChanged)
        let bots = try run([Self.fixture, "Bot", "name CONTAINS 'iOS'", "--model", Self.model, "--sort", "name:desc", "--json"])
        #expect(try jsonKeys(bots) == (try rawKeys(Self.fixture, "SELECT Z_PK FROM ZBOT WHERE instr(ZNAME, 'iOS') > 0 ORDER BY ZNAME DESC")))
    }

    @Test func jsonShape() throws {
        let outcome = try run([Self.fixture, "Integration", "number == 105 AND bot.name == 'Pocket Bot iOS'", "--model", Self.model, "--json"])
        #expect(outcome.exitCode == 0)
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(outcome.standardOutput.utf8)) as? [[String: Any]])
        let object = try #require(objects.first)
        #expect(objects.count == 1)
        #expect(object["number"] as? Int == 105)
        #expect(object["result"] as? String == "internal-build-error")
        #expect(object["currentStep"] as? String == "completed")
        #expect((object["objectID"] as? String)?.hasPrefix("x-coredata://") == true)
        #expect((object["objectID"] as? String)?.contains("/Integration/p") == true)
        // Dates are ISO 8601; to-one relationships object URIs; to-many arrays of URIs.
        let ended = try #require(object["endedTime"] as? String)
        #expect((try? QueryOutput.isoStyle.parse(ended)) != nil)
        #expect(ended.hasSuffix("Z"))
        #expect((object["bot"] as? String)?.hasSuffix("/Bot/p6") == true)
        #expect(object["buildResultSummary"] is String || object["buildResultSummary"] is NSNull)
        #expect(object["inverseBestSuccessStreak"] is NSNull || object["inverseBestSuccessStreak"] is String)
        // To-many: arrays of URIs, as many as the file's rows.
        let blueprints = try #require(object["revisionBlueprints"] as? [String])
        let pk = try #require(Int64((object["objectID"] as! String).split(separator: "/").last!.dropFirst()))
        #expect(blueprints.count == (try rawKeys(Self.fixture, "SELECT Z_PK FROM ZREVISIONBLUEPRINT WHERE ZINTEGRATION = \(pk)")).count)
        #expect(blueprints.allSatisfy { $0.contains("/RevisionBlueprint/p") })
        #expect(object["testedDevices"] is [String])
        // Every attribute is a key, nil ones as null.
        #expect(object.keys.contains("testHierachyData"))
    }

    @Test func jsonValuesOfEachKind() throws {
        #expect(QueryOutput.jsonValue(nil) is NSNull)
        #expect(QueryOutput.jsonValue(Int16(3)) as? Int == 3)
        #expect(QueryOutput.jsonValue(true) as? Bool == true)
        #expect(QueryOutput.jsonValue(Decimal(string: "0.1")!) as? String == "0.1")
        #expect(QueryOutput.jsonValue(Double.nan) as? String == "nan")
        #expect(QueryOutput.jsonValue(Data([1, 2, 255])) as? String == "AQL/")
        #expect(QueryOutput.jsonValue(Date(timeIntervalSinceReferenceDate: 0)) as? String == "2001-01-01T00:00:00.000Z")
    }

    @Test func tableOutput() throws {
        let outcome = try run([Self.fixture, "Bot", "name ENDSWITH 'tvOS' OR name BEGINSWITH 'Dyn'", "--model", Self.model, "--sort", "name"])
        try #require(outcome.exitCode == 0, "query failed: \(outcome.standardError)")
        let lines = outcome.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // Checked before indexing, so a short output fails the test instead of crashing the runner.
        try #require(lines.count >= 5, "expected a header, a rule, two rows and a count; got \(lines)")
        #expect(lines[0].hasPrefix("objectID"))
        #expect(lines[0].contains("  name") && lines[0].contains("  lastUpdate") && lines[0].contains("  stats"))
        #expect(lines[1].allSatisfy { $0 == "-" || $0 == " " })
        #expect(lines[2].contains("Dynumite macOS"))
        #expect(lines[3].contains("Pocket Bot tvOS"))
        #expect(lines[4] == "(2 objects)")
        // Aligned: every column starts at the same offset in each line.
        let nameColumn = try #require(lines[0].range(of: "  name  ")).lowerBound.utf16Offset(in: lines[0]) + 2
        for line in lines[2...3] {
            let offset = try #require(line.range(of: "Dynumite macOS") ?? line.range(of: "Pocket Bot tvOS")).lowerBound.utf16Offset(in: line)
            #expect(offset == nameColumn)
        }
        #expect(lines[2].contains("x-coredata://") && lines[2].contains("/Stats/p"))
    }

    /// `--model` takes a bundle (the version matching the store), a version folder or a contents file.
    @Test func modelInEveryForm() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("query-model-\(UUID().uuidString)")
        let bundle = dir.appendingPathComponent("Server.xcdatamodeld")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.model, toPath: bundle.appendingPathComponent("Server2.0.1.xcdatamodel").path)
        try FileManager.default.copyItem(atPath: CLI.xcServerBundle + "/XCServerCoreData2.0.3.xcdatamodel",
                                         toPath: bundle.appendingPathComponent("Server2.0.3.xcdatamodel").path)
        func setCurrent(_ name: String) throws {
            let plist = ["_XCCurrentVersionName": name]
            try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
                .write(to: bundle.appendingPathComponent(".xccurrentversion"))
        }
        try setCurrent("Server2.0.1.xcdatamodel")
        let expected = try rawKeys(Self.fixture, "SELECT Z_PK FROM ZBOT ORDER BY ZNAME, Z_PK")
        for model in [bundle.path, Self.model, Self.model + "/contents"] {
            #expect(try jsonKeys(try run([Self.fixture, "Bot", "--model", model, "--sort", "name", "--json"])) == expected, "\(model)")
        }
        // The bundle's current version need not be the store's: the matching version is used.
        try setCurrent("Server2.0.3.xcdatamodel")
        #expect(try jsonKeys(try run([Self.fixture, "Bot", "--model", bundle.path, "--sort", "name", "--json"])) == expected)
        // A single version that is not the store's is refused, and the message says what to do.
        let wrongVersion = try run([Self.fixture, "Bot", "--model", bundle.appendingPathComponent("Server2.0.3.xcdatamodel").path])
        #expect(wrongVersion.exitCode == 65)
        #expect(wrongVersion.standardError.contains("give --model the model version the store was made with"))
    }

    @Test func neverWritesTheStore() throws {
        let url = try copyFixture()
        let dir = url.deletingLastPathComponent()
        let before = try Data(contentsOf: url)
        let listing = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(listing == ["Store.sqlite"])
        // Through the built binary, as a user runs it.
        let result = try CLI.run(["query", url.path, "Integration", "result != 'succeeded'", "--model", Self.model,
                                  "--sort", "bot.name", "--limit", "3"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("(3 objects)"))
        #expect(try Data(contentsOf: url) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == listing)
        // A SUBQUERY the compiler declines: finished in memory, still read-only.
        let json = try run([url.path, "Commit", "SUBQUERY(commitChanges, $c, $c.status == 1).@count > 0", "--model", Self.model, "--json"])
        #expect(json.exitCode == 0)
        #expect(try Data(contentsOf: url) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == listing)
    }

    @Test func readsTheFixtureInItsReadOnlyDirectory() throws {
        // A plain read-only open of a WAL file there would fail: SQLite could not create -shm.
        let result = try CLI.run(["query", Self.fixture, "Bot", "--model", Self.model, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: Self.fixture + "-shm"))
    }

    @Test func badPredicatesAndKeysExit65() throws {
        let syntax = try CLI.run(["query", Self.fixture, "Bot", "(name == 'x'", "--model", Self.model])
        #expect(syntax.status == 65)
        #expect(syntax.stderr.contains("column 13"))
        #expect(syntax.stdout.isEmpty)
        let unknownKey = try run([Self.fixture, "Bot", "nmae == 'x'", "--model", Self.model])
        #expect(unknownKey.exitCode == 65)
        #expect(unknownKey.standardError.contains("entity Bot has no property 'nmae'"))
        let badPath = try run([Self.fixture, "Integration", "bot.name.foo == 'x'", "--model", Self.model])
        #expect(badPath.exitCode == 65)
        #expect(badPath.standardError.contains("Bot.name is not a relationship"))
        let entity = try run([Self.fixture, "Robot", "--model", Self.model])
        #expect(entity.exitCode == 65)
        #expect(entity.standardError.contains("no entity 'Robot'"))
        let sortKey = try run([Self.fixture, "Bot", "--model", Self.model, "--sort", "integrations"])
        #expect(sortKey.exitCode == 65)
        let direction = try run([Self.fixture, "Bot", "--model", Self.model, "--sort", "name:sideways"])
        #expect(direction.exitCode == 65)
        let mismatch = try run([Self.fixture, "Bot", "name > 3", "--model", Self.model])
        #expect(mismatch.exitCode == 65)
        // A model the store was not made with.
        let otherModel = try run([Self.fixture, "Bot", "--model", CLI.companyModel])
        #expect(otherModel.exitCode == 65)
    }

    @Test func missingStoreOrModelExit66() throws {
        let store = try CLI.run(["query", "/nonexistent/Store.sqlite", "Bot", "--model", Self.model])
        #expect(store.status == 66)
        #expect(store.stderr.contains("no store file"))
        let model = try run([Self.fixture, "Bot", "--model", "/nonexistent/Model.xcdatamodeld"])
        #expect(model.exitCode == 66)
        let url = try copyFixture()
        try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: url.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path) }
        if !FileManager.default.isReadableFile(atPath: url.path) {  // root reads anything
            #expect(try run([url.path, "Bot", "--model", Self.model]).exitCode == 66)
        }
    }

    /// A store that opens but whose table pages are damaged: SQLite reports
    /// "malformed" mid-query. A damaged input file is a data error (65),
    /// like every other corrupt-file path, not an internal error (70).
    @Test func storeDamagedMidQueryExits65() throws {
        let url = try copyFixture()
        var db: OpaquePointer?
        try #require(sqlite3_open_v2("file:\(url.path)?immutable=1", &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK)
        var stmt: OpaquePointer?
        try #require(sqlite3_prepare_v2(db, "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master WHERE tbl_name = 'ZINTEGRATION' AND rootpage > 0", -1, &stmt, nil) == SQLITE_OK)
        var roots: [(page: Int64, size: Int64)] = []
        while sqlite3_step(stmt) == SQLITE_ROW { roots.append((sqlite3_column_int64(stmt, 0), sqlite3_column_int64(stmt, 1))) }
        sqlite3_finalize(stmt)
        sqlite3_close(db)
        try #require(roots.count >= 2)   // the table and its indexes
        // Overwrite the root page headers of the table and its indexes: the
        // schema still reads, the first step over any of them fails with
        // SQLITE_CORRUPT.
        let handle = try FileHandle(forWritingTo: url)
        for root in roots {
            try handle.seek(toOffset: UInt64((root.page - 1) * root.size))
            try handle.write(contentsOf: Data(repeating: 0xEE, count: 64))
        }
        try handle.close()

        // Reading the damaged table itself, and reading it for the to-many
        // `integrations` of each Bot while writing JSON.
        for arguments in [["Integration"], ["Bot", "--json"]] {
            let outcome = try run([url.path] + arguments + ["--model", Self.model])
            #expect(outcome.exitCode == 65, "\(arguments): \(outcome.standardError)")
            #expect(outcome.standardError.contains("malformed"), "\(arguments): \(outcome.standardError)")
            #expect(outcome.standardOutput.isEmpty)
        }
    }
}
