import CSQLite
import Foundation
import ObjectGraph
import Testing
@testable import storesyncctl

/// `storesyncctl migrate`, run as a user runs it: the Apple fixture through
/// its bundle, dry runs, bad input, and migrations stopped half-way in the
/// process running them (a full disk through RLIMIT_FSIZE, SIGKILL), after
/// which the store is untouched and opens with its old model.
@Suite(.serialized) struct MigrateCommandTests {
    static let fixtures = CLI.repositoryRoot.appendingPathComponent("Tests/Fixtures/apple/XCServerCoreData/Tests")
    static let mappings = CLI.repositoryRoot.appendingPathComponent("Tests/Fixtures/migration").path

    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrate-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func copyFixture(_ name: String) throws -> URL {
        let url = try directory().appendingPathComponent(name)
        try FileManager.default.copyItem(at: fixtures.appendingPathComponent(name), to: url)
        return url
    }

    /// Rows of `sql` through SQLite's C API, read-only (as `sqlite3` shows them).
    static func query(_ path: String, _ sql: String) throws -> [[String]] {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { throw CocoaError(.fileReadUnknown) }
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else {
            throw CoreDataError(.sqlite, String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(stmt) }
        var rows: [[String]] = []
        while sqlite3_step(stmt) == SQLITE_ROW {
            rows.append((0..<sqlite3_column_count(stmt)).map { i in sqlite3_column_text(stmt, i).map { String(cString: $0) } ?? "NULL" })
        }
        return rows
    }

    /// The Small model as an Xcode bundle of two versions: v1 (Person: name,
    /// age, nickname, department ↔ Department.people) and v2, where Person
    /// loses `nickname` (its table is rebuilt in place) or, with
    /// `copying`, where `department` becomes to-many (migrated by copying).
    static func smallBundle(copying: Bool) throws -> URL {
        func model(_ version: Int) -> ManagedObjectModel {
            let person = EntityDescription(name: "Person"), department = EntityDescription(name: "Department")
            let toDepartment = RelationshipDescription(name: "department", destination: department, toMany: version == 2 && copying)
            let people = RelationshipDescription(name: "people", destination: person, toMany: true)
            toDepartment.inverseRelationship = people
            people.inverseRelationship = toDepartment
            var properties: [PropertyDescription] = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "age", type: .integer32)]
            if version == 1 || copying { properties.append(AttributeDescription(name: "nickname", type: .string)) }
            person.properties = properties + [toDepartment]
            department.properties = [AttributeDescription(name: "title", type: .string), people]
            let m = ManagedObjectModel()
            m.entities = [department, person]
            return m
        }
        let bundle = try directory().appendingPathComponent("Small.xcdatamodeld")
        try XcodeModelWriter.write(model(1), to: bundle.appendingPathComponent("Small.xcdatamodel"))
        try XcodeModelWriter.write(model(2), to: bundle.appendingPathComponent("Small 2.xcdatamodel"))
        let current = try PropertyListSerialization.data(fromPropertyList: ["_XCCurrentVersionName": "Small 2.xcdatamodel"], format: .xml, options: 0)
        try current.write(to: bundle.appendingPathComponent(".xccurrentversion"))
        return bundle
    }

    /// A v1 store of `count` people in two departments, written with SQL
    /// after ObjectGraph created the schema (fast for large counts).
    static func smallStore(bundle: URL, people count: Int) throws -> URL {
        let url = try directory().appendingPathComponent("Small.sqlite")
        let model = try XcodeModelBundle(url: bundle).model(named: "Small.xcdatamodel")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        try coordinator.remove(store)
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        try #require(sqlite3_open_v2(url.path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK)
        let sql = """
            BEGIN;
            INSERT INTO ZDEPARTMENT (Z_PK, Z_ENT, Z_OPT, ZTITLE) VALUES (1, 1, 1, 'Sales'), (2, 1, 1, 'Research');
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(count))
            INSERT INTO ZPERSON (Z_PK, Z_ENT, Z_OPT, ZAGE, ZDEPARTMENT, ZNAME, ZNICKNAME)
            SELECT x, 2, 1, 20 + x % 50, 1 + x % 2, 'person ' || x, 'nick ' || x FROM n;
            UPDATE Z_PRIMARYKEY SET Z_MAX = 2 WHERE Z_NAME = 'Department';
            UPDATE Z_PRIMARYKEY SET Z_MAX = \(count) WHERE Z_NAME = 'Person';
            COMMIT;
            """
        try #require(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK, "\(String(cString: sqlite3_errmsg(db)))")
        return url
    }

    /// The store opens with its old model through ObjectGraph and holds every row.
    static func opensWithOldModel(_ url: URL, bundle: URL, people count: Int) throws {
        let model = try XcodeModelBundle(url: bundle).model(named: "Small.xcdatamodel")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let request = FetchRequest(entityName: "Person")
        request.predicate = try FetchPredicate(format: "nickname BEGINSWITH 'nick '")
        #expect(try context.performAndWait { try context.count(for: request) } == count)
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        #expect(try query(url.path, "PRAGMA integrity_check") == [["ok"]])
    }

    // MARK: - The Apple fixture

    /// A dry run names the store's version, each step with its mapping and
    /// how it runs, and what changes; nothing is written. The real run
    /// prints each step's stages with progress; the store then opens with
    /// 2.0.3, and a second run has nothing to do.
    @Test func migratesTheAppleFixtureThroughItsBundle() throws {
        let url = try Self.copyFixture("XCServerCoreData_1.2.0.sqlite")
        let before = try Data(contentsOf: url)
        let dry = try CLI.run(["migrate", url.path, "--model", CLI.xcServerBundle, "--mapping", Self.mappings, "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("store \(url.path): version XCServerCoreData1.2.0.xcdatamodel"))
        #expect(dry.stdout.contains("would migrate to XCServerCoreData2.0.3.xcdatamodel in 4 steps"))
        #expect(dry.stdout.contains("step 1/4: XCServerCoreData1.2.0.xcdatamodel -> XCServerCoreData2.0.0.xcdatamodel (mapping \(Self.mappings)/XCServerCoreData-1.2.0-to-2.0.0.json, by copying)"))
        #expect(dry.stdout.contains("step 4/4: XCServerCoreData2.0.2.xcdatamodel -> XCServerCoreData2.0.3.xcdatamodel (inferred mapping, in place)\n  ZASSET: add column ZISDIRECTORY INTEGER"))
        #expect(try Data(contentsOf: url) == before)

        let run = try CLI.run(["migrate", url.path, "--model", CLI.xcServerBundle, "--mapping", Self.mappings])
        #expect(run.status == 0, "\(run.stderr)")
        for line in ["step 1: XCServerCoreData1.2.0.xcdatamodel -> XCServerCoreData2.0.0.xcdatamodel",
                     "  create destination instances IntegrationToIntegration 0%", "  create relationships Asset->Asset",
                     "  validate XcodeServer->XcodeServer", "step 2: XCServerCoreData2.0.0.xcdatamodel -> XCServerCoreData2.0.1.xcdatamodel",
                     "  schema", "step 4: done", "migrated \(url.path) to XCServerCoreData2.0.3.xcdatamodel"] {
            #expect(run.stdout.contains(line), "\(line)")
        }
        #expect(try Self.query(url.path, "SELECT count(*) FROM ZINTEGRATION WHERE typeof(ZENDEDTIME) = 'real'") == [["24"]])
        #expect(try Self.query(url.path, "PRAGMA integrity_check") == [["ok"]])
        let query = try CLI.run(["query", url.path, "Integration", "successStreak >= 1", "--model", CLI.xcServerBundle])
        #expect(query.status == 0, "\(query.stderr)")
        let again = try CLI.run(["migrate", url.path, "--model", CLI.xcServerBundle])
        #expect(again.status == 0)
        #expect(again.stdout.contains("already at XCServerCoreData2.0.3.xcdatamodel; nothing to do"))
    }

    /// Bad input: a step no mapping covers (134190, 65); a mapping file
    /// whose value expression does not parse (65, with the column); a store
    /// of a model not in the bundle (134130, 65, with what did not match); a
    /// missing store (66). The store is never written.
    @Test func badInput() throws {
        let url = try Self.copyFixture("XCServerCoreData_1.2.0.sqlite")
        let before = try Data(contentsOf: url)
        let noMapping = try CLI.run(["migrate", url.path, "--model", CLI.xcServerBundle])
        #expect(noMapping.status == 65)
        #expect(noMapping.stderr.contains("Can't infer a mapping model: source and destination attribute types are incompatible (String to Date) (entity Integration, property endedTime)"))

        let bad = try Self.directory().appendingPathComponent("Bad.json")
        try Data(#"{"sourceModel": "XCServerCoreData1.2.0", "entityMappings": [{"source": "Bot", "destination": "Bot", "attributes": [{"name": "name", "value": "FUNCTION($source.name, 'uppercase:'"}]}]}"#.utf8).write(to: bad)
        let unparseable = try CLI.run(["migrate", url.path, "--model", CLI.xcServerBundle, "--mapping", bad.path])
        #expect(unparseable.status == 65)
        #expect(unparseable.stderr.contains("\(bad.path): the value expression of Bot->Bot.name does not parse at column 36"))
        #expect(unparseable.stderr.contains("FUNCTION($source.name, 'uppercase:'\n                                   ^"))

        let bundle = try Self.smallBundle(copying: false)
        let foreign = try Self.smallStore(bundle: bundle, people: 3)
        let notInBundle = try CLI.run(["migrate", foreign.path, "--model", CLI.xcServerBundle])
        #expect(notInBundle.status == 65)
        #expect(notInBundle.stderr.contains("no version of \(CLI.xcServerBundle) fits the store"))
        #expect(notInBundle.stderr.contains("XCServerCoreData2.0.3.xcdatamodel: version hashes differ for"))

        let missing = try CLI.run(["migrate", url.path + ".missing", "--model", CLI.xcServerBundle])
        #expect(missing.status == 66)
        #expect(try Data(contentsOf: url) == before)
    }

    // MARK: - Stopped half-way

    /// Runs `storesyncctl migrate` under `ulimit -f` (RLIMIT_FSIZE, in KiB):
    /// writing past the limit fails (SIGXFSZ ignored, so write(2) returns
    /// EFBIG), as on a full disk.
    static func runWithFileSizeLimit(_ kib: Int, _ arguments: [String]) throws -> CLI.Result {
        let quoted = ([CLI.binary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "trap '' XFSZ; ulimit -f \(kib); exec \(quoted)"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile(), stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CLI.Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// A full disk (simulated with RLIMIT_FSIZE) part-way through an
    /// in-place rebuild and through a copying migration: 74, the store's
    /// bytes unchanged, it opens with the old model; without the limit the
    /// same command then succeeds.
    @Test(arguments: [false, true])
    func fullDiskLeavesTheStoreUntouched(copying: Bool) throws {
        let bundle = try Self.smallBundle(copying: copying)
        let count = 20_000
        let url = try Self.smallStore(bundle: bundle, people: count)
        let before = try Data(contentsOf: url)
        let limit = before.count / 1024 / 2
        let full = try Self.runWithFileSizeLimit(limit, ["migrate", url.path, "--model", bundle.path])
        #expect(full.status == 74, "\(full.stdout)\n\(full.stderr)")
        #expect(full.stdout.contains(copying ? "by copying" : "in place"))
        #expect(try Data(contentsOf: url) == before)
        try Self.opensWithOldModel(url, bundle: bundle, people: count)
        let done = try CLI.run(["migrate", url.path, "--model", bundle.path])
        #expect(done.status == 0, "\(done.stderr)")
        #expect(try Self.query(url.path, "SELECT count(*) FROM ZPERSON") == [["\(count)"]])
    }

    /// SIGKILL while the migration runs in a second process (once it has
    /// printed that it is creating instances, or changing the schema): the
    /// store's file is unchanged (an in-place migration's uncommitted WAL
    /// frames are ignored), it opens with the old model, and migrating again
    /// works (a copying migration's leftover file is removed).
    @Test(arguments: [false, true])
    func sigkillMidMigrationLeavesTheStoreUntouched(copying: Bool) throws {
        let bundle = try Self.smallBundle(copying: copying)
        let count = copying ? 30_000 : 200_000
        let url = try Self.smallStore(bundle: bundle, people: count)
        let before = try Data(contentsOf: url)
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = ["migrate", url.path, "--model", bundle.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var seen = ""
        let marker = copying ? "create destination instances" : "  schema"
        while !seen.contains(marker) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal, "the migration finished before it was killed:\n\(seen)")
        #expect(!seen.contains("migrated "))
        #expect(try Data(contentsOf: url) == before)
        try Self.opensWithOldModel(url, bundle: bundle, people: count)
        let done = try CLI.run(["migrate", url.path, "--model", bundle.path])
        #expect(done.status == 0, "\(done.stderr)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path).filter { $0.contains("migrating") }
        #expect(leftovers.isEmpty)
        #expect(try Self.query(url.path, "SELECT count(*) FROM ZPERSON") == [["\(count)"]])
    }
}
