import ArgumentParser
import CSQLite
import Foundation
import ObjectGraph

/// `storesync-bench batch [--rows N] [--runs R] [--json]`: a batch delete
/// of N rows through `BatchDeleteRequest` against the raw statement
/// (`DELETE FROM ZROW WHERE ZN >= 0` through the SQLite C API), on two
/// copies of one file with persistent history on, so both record every
/// deleted row (issue 34's target: within 2x). Each figure is the median
/// over the runs; the order of the two sides alternates from run to run.
///
/// Per run: a store of N rows (`Row`: `n`, `title`) is written once by the
/// C API (untimed; the history triggers record the inserts), checkpointed
/// and copied. The graph side opens one copy with a coordinator and runs
/// the request (statement only, no result objects); the raw side opens the
/// other and runs the statement in one transaction. Both files are then
/// checked: no row left, N deletes recorded in history.
struct BatchBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "BatchDeleteRequest of N rows vs the raw DELETE, history on (target: within 2x)."
    )

    static let target = 2.0

    @Option(help: "Rows to delete.")
    var rows = 1_000_000

    @Option(help: "Repetitions on fresh files; figures are medians.")
    var runs = 3

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    static func model() -> ManagedObjectModel {
        let row = EntityDescription(name: "Row")
        row.properties = [AttributeDescription(name: "n", type: .integer64), AttributeDescription(name: "title", type: .string)]
        let model = ManagedObjectModel()
        model.entities = [row]
        return model
    }

    static let history: [String: Any] = [PersistentStore.persistentHistoryTrackingKey: true]

    func run() throws {
        var graph: [Double] = [], raw: [Double] = []
        for run in 0..<runs {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-bench-batch-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let graphURL = directory.appendingPathComponent("graph.sqlite"), rawURL = directory.appendingPathComponent("raw.sqlite")
            try populate(graphURL)
            try FileManager.default.copyItem(at: graphURL, to: rawURL)
            let sides: [() throws -> Void] = [
                { graph.append(try self.graphDelete(graphURL)) },
                { raw.append(try self.rawDelete(rawURL)) },
            ]
            for side in run % 2 == 0 ? sides : sides.reversed() { try side() }
            for url in [graphURL, rawURL] { try check(url) }
        }
        let g = median(graph), r = median(raw), ratio = g / r
        if json {
            let object: [String: Any] = [
                "benchmark": "batch", "rows": rows, "runs": runs, "target_ratio": Self.target,
                "graph_s": g, "raw_s": r, "ratio": ratio, "met": ratio <= Self.target,
                "graph_runs_s": graph, "raw_runs_s": raw,
            ]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(String(format: "batch delete of %d rows, history on (median of %d): BatchDeleteRequest %.3f s, raw DELETE %.3f s, ratio %.2f (target %.1f: %@)",
                         rows, runs, g, r, ratio, Self.target, ratio <= Self.target ? "met" : "missed"))
        }
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    /// An empty store with history made by ObjectGraph, then N rows written
    /// by the C API in one transaction.
    private func populate(_ url: URL) throws {
        do {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
            let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url, options: Self.history)
            try coordinator.remove(store)
        }
        let db = try open(url)
        defer { sqlite3_close_v2(db) }
        var entity: Int64 = 0
        try RawSide.query(db, "SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Row'") { entity = sqlite3_column_int64($0, 0) }
        try exec(db, "BEGIN IMMEDIATE")
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, "INSERT INTO ZROW (Z_PK, Z_ENT, Z_OPT, ZN, ZTITLE) VALUES (?, ?, 1, ?, ?)", -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw ValidationError("populate: \(String(cString: sqlite3_errmsg(db)))")
        }
        for key in 1...Int64(rows) {
            sqlite3_reset(stmt)
            sqlite3_bind_int64(stmt, 1, key)
            sqlite3_bind_int64(stmt, 2, entity)
            sqlite3_bind_int64(stmt, 3, key)
            sqlite3_bind_text(stmt, 4, "row \(key)", -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            guard sqlite3_step(stmt) == SQLITE_DONE else { throw ValidationError("populate: \(String(cString: sqlite3_errmsg(db)))") }
        }
        sqlite3_finalize(stmt)
        try exec(db, "UPDATE Z_PRIMARYKEY SET Z_MAX = \(rows) WHERE Z_ENT = \(entity)")
        try exec(db, "COMMIT")
        try exec(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    }

    private func graphDelete(_ url: URL) throws -> Double {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url, options: Self.history)
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            let request = FetchRequest(entityName: "Row")
            request.predicate = try FetchPredicate(format: "n >= 0")
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try context.execute(BatchDeleteRequest(fetchRequest: request))
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
    }

    private func rawDelete(_ url: URL) throws -> Double {
        let db = try open(url)
        defer { sqlite3_close_v2(db) }
        let start = DispatchTime.now().uptimeNanoseconds
        try exec(db, "BEGIN IMMEDIATE")
        try exec(db, "DELETE FROM ZROW WHERE ZN >= 0")
        try exec(db, "COMMIT")
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// No row left, and history recorded a delete of every one.
    private func check(_ url: URL) throws {
        let db = try open(url)
        defer { sqlite3_close_v2(db) }
        var left: Int64 = -1, deletes: Int64 = -1
        try RawSide.query(db, "SELECT count(*) FROM ZROW") { left = sqlite3_column_int64($0, 0) }
        try RawSide.query(db, "SELECT count(*) FROM OGH_CHANGE WHERE KIND = 2") { deletes = sqlite3_column_int64($0, 0) }
        guard left == 0, deletes == Int64(rows) else {
            throw ValidationError("\(url.lastPathComponent): \(left) rows left, \(deletes) deletes recorded (expected 0 and \(rows))")
        }
    }

    private func open(_ url: URL) throws -> OpaquePointer {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(url.path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let handle else {
            throw ValidationError("cannot open \(url.path)")
        }
        sqlite3_exec(handle, "PRAGMA journal_mode=WAL", nil, nil, nil)
        return handle
    }

    private func exec(_ db: OpaquePointer, _ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw ValidationError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
    }
}
