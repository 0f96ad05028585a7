import ArgumentParser
import CSQLite
import Foundation
import ObjectGraph

/// The SQLite work of carrying new `Item`s from s1 to s2 and s3 through a hub,
/// done with the raw C API as a careful hand-written program would: the
/// reference `storesync-bench sync` measures the engine against, in the same
/// run (what the two workloads cost SQLite alone, so what part of the engine's
/// time is the engine's).
///
/// Four files of the benchmark's model with persistent history on, made by
/// ObjectGraph (s1, hub, s2, s3: the hub is a store of the same model, as the
/// embedded hub is), so every write below fires the same history triggers the
/// engine's writes fire. The copy does no more than any program keeping those
/// files in step would have to:
/// 1. read s1's recorded changes after its position (`OGH_CHANGE`, values and
///    global identifier), in pages of `page` changes;
/// 2. write each page into the hub in one transaction: a history transaction
///    row with the author (so the copy is not copied back), then per object
///    its global identifier (`OGH_GLOBALID`, so the hub names it as s1 does)
///    and its row, with prepared single-row statements; `Z_PRIMARYKEY`;
/// 3. read the hub's recorded changes after its position, page by page, and
///    write each into s2 and s3 as in 2, one transaction per store for the
///    whole push (the engine's push is one store transaction too).
/// Left out, because the engine's own bookkeeping is not SQLite's cost of the
/// copy: cursors and positions kept in metadata, conflict checks (nothing
/// conflicts here), reading the hub's rows (the history already has them).
final class RawSyncCopy {
    let directory: URL
    private let page: Int

    /// Makes the four files (untimed).
    init(label: String, page: Int = 2_000) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-bench-raw-\(label)-\(UUID().uuidString)")
        self.page = page
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["s1", "hub", "s2", "s3"] {
            let side = try GraphSide(model: SQLiteBenchmark.model(), url: url(name), options: [PersistentStore.persistentHistoryTrackingKey: true])
            try side.coordinator.remove(side.coordinator.persistentStores[0])
        }
    }

    func url(_ name: String) -> URL { directory.appendingPathComponent("\(name).sqlite") }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// One item as history records it.
    struct Copied {
        let gid: String
        let name: String?
        let count: Int64
        let score: Double
        let created: Double
    }

    /// One file through the C API.
    final class File {
        let db: OpaquePointer
        let itemEntity: Int64
        let itemTable: Int64
        /// `N<k>` column of each tracked `ZITEM` column in `OGH_CHANGE`.
        let valueColumn: [String: String]
        var position: Int64 = 0
        private var nextKey: Int64

        init(_ url: URL) throws {
            var handle: OpaquePointer?
            guard sqlite3_open_v2(url.path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let handle else {
                throw RawSyncCopy.failure("cannot open \(url.path)")
            }
            db = handle
            sqlite3_exec(db, "PRAGMA journal_mode=WAL", nil, nil, nil)
            var entity: Int64 = 0, max: Int64 = 0
            try RawSide.query(db, "SELECT Z_ENT, Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Item'") {
                entity = sqlite3_column_int64($0, 0)
                max = sqlite3_column_int64($0, 1)
            }
            itemEntity = entity
            // The table's root entity number: Item is a root.
            itemTable = entity
            nextKey = max + 1
            var columns: [String: String] = [:]
            try RawSide.query(db, "SELECT NAME, POSITION FROM OGH_COLUMN WHERE TBL = 'ZITEM'") {
                columns[String(cString: sqlite3_column_text($0, 0))] = "N\(sqlite3_column_int64($0, 1))"
            }
            valueColumn = columns
            try RawSide.query(db, "SELECT coalesce(max(ID), 0) FROM OGH_CHANGE") { self.position = sqlite3_column_int64($0, 0) }
        }

        deinit { sqlite3_close_v2(db) }

        func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw RawSyncCopy.failure("\(String(cString: sqlite3_errmsg(db))) in \(sql)")
            }
        }

        func prepare(_ sql: String) throws -> OpaquePointer {
            var stmt: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
                throw RawSyncCopy.failure("\(String(cString: sqlite3_errmsg(db))) in \(sql)")
            }
            return stmt
        }

        /// Up to `limit` inserted items recorded after `position`, which moves past them.
        func changes(limit: Int) throws -> [Copied] {
            let columns = try ["name", "count", "score", "created"].map { name -> String in
                guard let column = valueColumn["Z" + name.uppercased()] else {
                    throw RawSyncCopy.failure("no history column for \(name)")
                }
                return column
            }
            let stmt = try prepare("SELECT ID, GID, \(columns.joined(separator: ", ")) FROM OGH_CHANGE WHERE ID > ? AND KIND = 0 AND ENT = \(itemEntity) ORDER BY ID LIMIT \(limit)")
            defer { sqlite3_finalize(stmt) }
            sqlite3_bind_int64(stmt, 1, position)
            var out: [Copied] = []
            out.reserveCapacity(limit)
            while sqlite3_step(stmt) == SQLITE_ROW {
                position = sqlite3_column_int64(stmt, 0)
                let name = sqlite3_column_text(stmt, 2).map { String(cString: $0) }
                out.append(Copied(gid: String(cString: sqlite3_column_text(stmt, 1)), name: name, count: sqlite3_column_int64(stmt, 3),
                                  score: sqlite3_column_double(stmt, 4), created: sqlite3_column_double(stmt, 5)))
            }
            return out
        }

        /// Opens a write transaction recorded under `author`.
        func begin(author: String) throws {
            try exec("BEGIN IMMEDIATE")
            try exec("INSERT INTO OGH_TRANSACTION (TIMESTAMP, AUTHOR, CONTEXTNAME) VALUES (\(Date().timeIntervalSinceReferenceDate), '\(author)', NULL)")
            try exec("UPDATE OGH_STATE SET CURRENTTX = last_insert_rowid() WHERE ID = 1")
        }

        func commit() throws {
            try exec("UPDATE Z_PRIMARYKEY SET Z_MAX = \(nextKey - 1) WHERE Z_ENT = \(itemEntity)")
            try exec("UPDATE OGH_STATE SET CURRENTTX = NULL WHERE ID = 1")
            try exec("COMMIT")
        }

        /// Writes items with their identifiers inside the open transaction.
        func write(_ items: [Copied]) throws {
            let identify = try prepare("INSERT INTO OGH_GLOBALID (TBL, PK, GID) VALUES (\(itemTable), ?, ?)")
            let insert = try prepare("INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZNAME, ZCOUNT, ZSCORE, ZCREATED) VALUES (?, \(itemEntity), 1, ?, ?, ?, ?)")
            defer {
                sqlite3_finalize(identify)
                sqlite3_finalize(insert)
            }
            let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
            for item in items {
                let key = nextKey
                nextKey += 1
                sqlite3_bind_int64(identify, 1, key)
                sqlite3_bind_text(identify, 2, item.gid, -1, transient)
                guard sqlite3_step(identify) == SQLITE_DONE else { throw RawSyncCopy.failure(String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(identify)
                sqlite3_bind_int64(insert, 1, key)
                if let name = item.name { sqlite3_bind_text(insert, 2, name, -1, transient) } else { sqlite3_bind_null(insert, 2) }
                sqlite3_bind_int64(insert, 3, item.count)
                sqlite3_bind_double(insert, 4, item.score)
                sqlite3_bind_double(insert, 5, item.created)
                guard sqlite3_step(insert) == SQLITE_DONE else { throw RawSyncCopy.failure(String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(insert)
            }
        }

        func itemCount() throws -> Int {
            var n = 0
            try RawSide.query(db, "SELECT COUNT(*) FROM ZITEM") { n = Int(sqlite3_column_int64($0, 0)) }
            return n
        }
    }

    static func failure(_ message: String) -> Error { ValidationError("raw sync reference: \(message)") }

    /// Carries every item s1 recorded since the files were opened into the
    /// hub, then from the hub into s2 and s3 (timed by the caller).
    /// - Returns: the items s2 and s3 hold, and the seconds spent bringing
    /// them into the hub (the rest of the time is the two stores' part).
    func copy() throws -> (counts: [Int], hubSeconds: Double) {
        let s1 = try File(url("s1")), hub = try File(url("hub")), targets = [try File(url("s2")), try File(url("s3"))]
        // The files were made empty: everything s1 recorded is pending.
        s1.position = 0
        let hubSeconds = try Clock.seconds {
            while true {
                let items = try s1.changes(limit: page)
                if items.isEmpty { break }
                try hub.begin(author: "storesync")
                try hub.write(items)
                try hub.commit()
            }
        }
        hub.position = 0
        for target in targets { try target.begin(author: "storesync") }
        while true {
            let items = try hub.changes(limit: page)
            if items.isEmpty { break }
            for target in targets { try target.write(items) }
        }
        for target in targets { try target.commit() }
        return (try targets.map { try $0.itemCount() }, hubSeconds)
    }
}
