import ArgumentParser
import CSQLite
import Foundation
import ObjectGraph

/// `storesync-bench migrate [--count N] [--runs R] [--copy-count M] [--json]`:
/// migrating a SQLite store of N rows to a model version that adds one
/// optional attribute (docs/benchmarks/migrate.md; issue 14's target: 1,000,000
/// rows in under 10 s, in place).
///
/// Per run, on a fresh file: a store of `Item` (title, count, created,
/// flag, indexed title) with N rows written with SQL after ObjectGraph
/// created its schema, closed and checkpointed; then timed, what an
/// application does: `addPersistentStore` with the coordinator's model at
/// v2 and `NSMigratePersistentStoresAutomaticallyOption` +
/// `NSInferMappingModelAutomaticallyOption` (compatibility check, source
/// model from the store's cached model, inferred mapping, in-place SQL in one
/// transaction, then the normal open). Checked after each run: the plan ran
/// in place, the row count and the largest key are unchanged, the new column
/// exists and is empty, `integrity_check` passes. The figure is the median.
///
/// With `--copy-count M` (default 100,000; 0 skips it), the same change with
/// a mapping that computes the new attribute (`uppercase:` of the title),
/// which cannot run in SQL, migrates M rows by copying every object: the
/// copy path's rate, for comparison.
struct MigrateBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Migrate a store of N rows to a version with one more attribute (in place), and M rows by copying."
    )

    static let target = 10.0

    @Option(help: "Rows in the store migrated in place.")
    var count = 1_000_000

    @Option(help: "Repetitions on fresh files; the figure is the median.")
    var runs = 3

    @Option(help: "Rows migrated by copying every object (0 skips it).")
    var copyCount = 100_000

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    /// The in-place changes measured; the target is for the first.
    enum Change: String, CaseIterable {
        case addOptional = "one optional attribute added (ALTER TABLE ADD COLUMN)"
        case addWithDefault = "one required attribute with a default added (ADD COLUMN, UPDATE of every row)"
        case remove = "one attribute removed (the table rebuilt: CREATE, INSERT … SELECT, DROP, RENAME)"
    }

    static func model(version: Int, change: Change = .addOptional) -> ManagedObjectModel {
        let item = EntityDescription(name: "Item")
        let title = AttributeDescription(name: "title", type: .string)
        title.isIndexed = true
        var properties: [PropertyDescription] = [title, AttributeDescription(name: "count", type: .integer64),
                                                 AttributeDescription(name: "created", type: .date), AttributeDescription(name: "flag", type: .boolean)]
        if version >= 2 {
            switch change {
            case .addOptional: properties.append(AttributeDescription(name: "note", type: .string))
            case .addWithDefault:
                let note = AttributeDescription(name: "note", type: .string)
                note.isOptional = false
                note.defaultValue = "none"
                properties.append(note)
            case .remove: properties.removeAll { $0.name == "flag" }
            }
        }
        item.properties = properties
        let model = ManagedObjectModel()
        model.entities = [item]
        return model
    }

    /// A v1 store of `rows` rows at a new path.
    static func makeStore(rows: Int) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("Items.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model(version: 1))
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        try coordinator.remove(store)
        try exec(url.path, """
            BEGIN;
            WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \(rows))
            INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZCOUNT, ZFLAG, ZCREATED, ZTITLE)
            SELECT x, 1, 1, x * 7, x % 2, 600000000.0 + x, 'item ' || x FROM n;
            UPDATE Z_PRIMARYKEY SET Z_MAX = \(rows) WHERE Z_NAME = 'Item';
            COMMIT;
            PRAGMA wal_checkpoint(TRUNCATE);
            """)
        return url
    }

    static func exec(_ path: String, _ sql: String) throws {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK,
              sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw ValidationError("SQLite: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    static func scalar(_ path: String, _ sql: String) throws -> String {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        var stmt: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK,
              sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, sqlite3_step(stmt) == SQLITE_ROW else {
            throw ValidationError("SQLite: \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(stmt) }
        return sqlite3_column_text(stmt, 0).map { String(cString: $0) } ?? "NULL"
    }

    func run() throws {
        var medians: [(Change, Double, [Double])] = []
        for change in Change.allCases {
            var times: [Double] = []
            for run in 1...max(1, runs) {
                times.append(try measureInPlace(change, run: run))
            }
            medians.append((change, times.sorted()[times.count / 2], times))
        }
        let median = medians[0].1
        let inPlace = medians[0].2

        var copySeconds: Double?
        if copyCount > 0 {
            let url = try Self.makeStore(rows: copyCount)
            defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
            let v1 = Self.model(version: 1), v2 = Self.model(version: 2)
            let mapping = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
            let items = mapping.entityMappings.first { $0.destinationEntityName == "Item" }!
            items.attributeMappings.removeAll { $0.name == "note" }
            items.attributeMappings.append(try PropertyMapping(name: "note", valueExpressionFormat: "uppercase:($source.title)"))
            let start = Date()
            try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: MigrationManager(sourceModel: v1, destinationModel: v2))
            copySeconds = Date().timeIntervalSince(start)
            guard try Self.scalar(url.path, "SELECT count(*) FROM ZITEM WHERE ZNOTE LIKE 'ITEM %'") == "\(copyCount)" else {
                throw ValidationError("the copied store is not what it should be")
            }
        }

        if json {
            var object: [String: Any] = ["benchmark": "migrate", "count": count, "runs": runs, "in_place_s": median,
                                         "in_place_runs_s": inPlace, "target_s": Self.target, "met": median < Self.target,
                                         "rows_per_second": Double(count) / median]
            object["in_place_changes"] = medians.map { ["change": $0.0.rawValue, "median_s": $0.1, "runs_s": $0.2] as [String: Any] }
            if let copySeconds {
                object["copy_count"] = copyCount
                object["copy_s"] = copySeconds
                object["copy_rows_per_second"] = Double(copyCount) / copySeconds
            }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(String(format: "in place: %d rows, one attribute added: median %.3f s over %d runs (target < %.0f s: %@)",
                         count, median, inPlace.count, Self.target, median < Self.target ? "met" : "NOT met"))
            for (change, seconds, _) in medians.dropFirst() {
                print(String(format: "in place: %d rows, %@: median %.3f s", count, change.rawValue, seconds))
            }
            if let copySeconds {
                print(String(format: "by copying: %d rows, a computed attribute: %.3f s (%.0f rows/s)", copyCount, copySeconds, Double(copyCount) / copySeconds))
            }
        }
    }

    /// One timed automatic migration of a fresh store of `count` rows.
    private func measureInPlace(_ change: Change, run: Int) throws -> Double {
        let url = try Self.makeStore(rows: count)
        defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let v1 = Self.model(version: 1), v2 = Self.model(version: 2, change: change)
        let preview = try SQLiteStore.migrationPreview(at: url, sourceModel: v1, destinationModel: v2,
                                                       mappingModel: try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2))
        guard preview.inPlace else { throw ValidationError("the migration would not run in place: \(preview.changes)") }
        let start = Date()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model(version: 2, change: change))
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url, options: [
            PersistentStore.migratePersistentStoresAutomaticallyOption: true,
            PersistentStore.inferMappingModelAutomaticallyOption: true,
        ])
        let seconds = Date().timeIntervalSince(start)
        try coordinator.remove(store)
        let emptyNotes = change == .addWithDefault ? "SELECT count(*) FROM ZITEM WHERE ZNOTE IS NOT 'none'"
            : change == .addOptional ? "SELECT count(*) FROM ZITEM WHERE ZNOTE IS NOT NULL" : "SELECT 0"
        guard try Self.scalar(url.path, "SELECT count(*) FROM ZITEM") == "\(count)",
              try Self.scalar(url.path, "SELECT max(Z_PK) FROM ZITEM") == "\(count)",
              try Self.scalar(url.path, "SELECT sum(ZCOUNT) FROM ZITEM") == "\(7 * count * (count + 1) / 2)",
              try Self.scalar(url.path, emptyNotes) == "0",
              try Self.scalar(url.path, "PRAGMA integrity_check") == "ok" else {
            throw ValidationError("run \(run) (\(change.rawValue)): the migrated store is not what it should be")
        }
        if !json { print(String(format: "run %d: %d rows, %@: %.3f s", run, count, change.rawValue, seconds)) }
        return seconds
    }
}
