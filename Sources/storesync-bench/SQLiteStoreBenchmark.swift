import ArgumentParser
import CSQLite
import Foundation
import ObjectGraph

/// `storesync-bench sqlite-store [--json] [--rows N]`: the SQLite store's row
/// layer alone (no contexts) against the raw SQLite C API doing the same work
/// on the same layout, to show what the store layer itself costs.
struct SQLiteStoreBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sqlite-store",
        abstract: "SQLiteStore vs the raw SQLite C API: insert, fetch, fault, predicate fetch."
    )

    @Flag(help: "Print one JSON object per workload instead of a table.")
    var json = false

    @Option(help: "Rows to insert and read.")
    var rows = 20_000

    struct Result {
        let workload: String
        let operations: Int
        let seconds: Double
        var perSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    }

    static func model() -> ManagedObjectModel {
        let model = ManagedObjectModel()
        let item = EntityDescription(name: "Item")
        item.properties = [
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "count", type: .integer64),
            AttributeDescription(name: "score", type: .double),
            AttributeDescription(name: "created", type: .date),
        ]
        model.entities = [item]
        return model
    }

    static func time(_ body: () throws -> Void) rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    func run() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let model = Self.model()
        let item = model.entitiesByName["Item"]!
        var results: [Result] = []

        // Store: insert through save(_:).
        let storeURL = dir.appendingPathComponent("Store.sqlite")
        let store = SQLiteStore(model: model, configurationName: nil, url: storeURL, options: [:])
        try store.load()
        var ids: [ManagedObjectID] = []
        let storeInsert = try Self.time {
            ids = try store.newObjectIDs(for: item, count: rows)
            var request = StoreSaveRequest()
            request.inserted = ids.enumerated().map { i, id in
                StoreSnapshot(objectID: id, version: 1, values: [
                    "name": "item\(i)", "count": Int64(i), "score": Double(i % 1000) / 10,
                    "created": Date(timeIntervalSinceReferenceDate: Double(i)),
                ])
            }
            try store.save(request)
        }
        results.append(Result(workload: "store insert", operations: rows, seconds: storeInsert))

        // Raw C API: same table layout, same values, one transaction.
        let rawURL = dir.appendingPathComponent("Raw.sqlite")
        var db: OpaquePointer?
        guard sqlite3_open(rawURL.path, &db) == SQLITE_OK else { throw ValidationError("cannot open \(rawURL.path)") }
        defer { sqlite3_close(db) }
        sqlite3_exec(db, "PRAGMA journal_mode=WAL", nil, nil, nil)
        sqlite3_exec(db, "CREATE TABLE ZITEM ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCOUNT INTEGER, ZSCORE FLOAT, ZCREATED TIMESTAMP, ZNAME VARCHAR )", nil, nil, nil)
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        let rawInsert = Self.time {
            sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
            var stmt: OpaquePointer?
            sqlite3_prepare_v2(db, "INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZCOUNT, ZSCORE, ZCREATED, ZNAME) VALUES (?, 1, 1, ?, ?, ?, ?)", -1, &stmt, nil)
            for i in 0..<rows {
                sqlite3_reset(stmt)
                sqlite3_bind_int64(stmt, 1, Int64(i + 1))
                sqlite3_bind_int64(stmt, 2, Int64(i))
                sqlite3_bind_double(stmt, 3, Double(i % 1000) / 10)
                sqlite3_bind_double(stmt, 4, Double(i))
                sqlite3_bind_text(stmt, 5, "item\(i)", -1, transient)
                sqlite3_step(stmt)
            }
            sqlite3_finalize(stmt)
            sqlite3_exec(db, "COMMIT", nil, nil, nil)
        }
        results.append(Result(workload: "raw C API insert", operations: rows, seconds: rawInsert))

        // Fetch every row.
        var fetched = 0
        let storeFetch = try Self.time { fetched = try store.fetchSnapshots(FetchRequest(entityName: "Item")).snapshots.count }
        guard fetched == rows else { throw ValidationError("store fetched \(fetched) rows, expected \(rows)") }
        results.append(Result(workload: "store fetch all", operations: rows, seconds: storeFetch))
        var rawRows: [(Int64, Int64, Double, Double, String)] = []
        let rawFetch = Self.time {
            var stmt: OpaquePointer?
            sqlite3_prepare_v2(db, "SELECT Z_PK, ZCOUNT, ZSCORE, ZCREATED, ZNAME FROM ZITEM WHERE Z_ENT = 1 ORDER BY Z_PK", -1, &stmt, nil)
            rawRows.reserveCapacity(rows)
            while sqlite3_step(stmt) == SQLITE_ROW {
                rawRows.append((sqlite3_column_int64(stmt, 0), sqlite3_column_int64(stmt, 1), sqlite3_column_double(stmt, 2),
                                sqlite3_column_double(stmt, 3), String(cString: sqlite3_column_text(stmt, 4))))
            }
            sqlite3_finalize(stmt)
        }
        guard rawRows.count == rows else { throw ValidationError("raw fetched \(rawRows.count) rows") }
        results.append(Result(workload: "raw C API fetch all", operations: rows, seconds: rawFetch))

        // Fault 1,000 objects by ID, in batches of 100.
        let sample = stride(from: 0, to: ids.count, by: max(1, ids.count / 1000)).map { ids[$0] }
        let storeFault = try Self.time {
            for start in stride(from: 0, to: sample.count, by: 100) {
                _ = try store.snapshots(for: Array(sample[start..<min(start + 100, sample.count)]))
            }
        }
        results.append(Result(workload: "store fault by ID (batches of 100)", operations: sample.count, seconds: storeFault))

        // Predicate fetch: compiled to SQL by the store, vs evaluated in memory over every row.
        let request = FetchRequest(entityName: "Item")
        let predicate = try FetchPredicate(format: "score > 50 AND name BEGINSWITH 'item1'")
        request.predicateFormat = predicate.predicateFormat
        var compiledCount = 0
        let compiled = try Self.time {
            let result = try store.fetchSnapshots(request)
            guard result.isExact else { throw ValidationError("predicate was not compiled") }
            compiledCount = result.snapshots.count
        }
        results.append(Result(workload: "store predicate fetch (compiled SQL)", operations: rows, seconds: compiled))
        var memoryCount = 0
        let inMemory = try Self.time {
            memoryCount = try store.fetchSnapshots(FetchRequest(entityName: "Item")).snapshots.filter { try predicate.evaluate(with: $0.values) }.count
        }
        guard compiledCount == memoryCount else { throw ValidationError("compiled \(compiledCount) ≠ in-memory \(memoryCount)") }
        results.append(Result(workload: "fetch all + in-memory predicate", operations: rows, seconds: inMemory))
        store.close()

        for r in results {
            if json {
                print("{\"workload\": \"\(r.workload)\", \"operations\": \(r.operations), \"seconds\": \(r.seconds), \"perSecond\": \(Int(r.perSecond))}")
            } else {
                print(r.workload.padding(toLength: 40, withPad: " ", startingAt: 0), String(format: "%10.4f s %12.0f /s", r.seconds, r.perSecond))
            }
        }
    }
}
