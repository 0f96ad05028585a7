import CSQLite
import Foundation
@testable import ObjectGraph

/// Apple-written XCServerCoreData stores and their model versions.
enum SQLiteFixtures {
    static let directory = TestPaths.appleFixtures.appendingPathComponent("XCServerCoreData/Tests")

    /// Fixture file name → model version folder.
    static let modelVersions: [String: String] = [
        "XCServerCoreData_1.2.0.sqlite": "XCServerCoreData1.2.0.xcdatamodel",
        "XCServerCoreData_1.2.0_empty.sqlite": "XCServerCoreData1.2.0.xcdatamodel",
        "XCServerCoreData_2.0.0_empty.sqlite": "XCServerCoreData2.0.0.xcdatamodel",
        "XCServerCoreData_2.0.1.sqlite": "XCServerCoreData2.0.1.xcdatamodel",
    ]
    static let all = modelVersions.keys.sorted()

    static func model(for fixture: String) throws -> ManagedObjectModel {
        try XcodeModelBundle(url: TestPaths.xcServerBundle).model(named: modelVersions[fixture]!)
    }

    /// A private copy of a fixture: tests never open the originals.
    static func copy(_ fixture: String) throws -> URL {
        let dir = try TestPaths.temporaryDirectory()
        let target = dir.appendingPathComponent(fixture)
        try FileManager.default.copyItem(at: directory.appendingPathComponent(fixture), to: target)
        return target
    }

    static func openStore(_ url: URL, model: ManagedObjectModel, options: [String: Any] = [:]) throws -> SQLiteStore {
        let store = SQLiteStore(model: model, configurationName: nil, url: url, options: options)
        try store.load()
        return store
    }
}

/// Reads a database straight through SQLite's C API, independently of
/// `SQLiteConnection`, to give "what sqlite3 shows".
enum RawSQLite {
    enum Value: Equatable {
        case null, integer(Int64), real(Double), text(String), blob([UInt8])
        var int: Int64? { if case .integer(let v) = self { return v } else { return nil } }
        var text: String? { if case .text(let v) = self { return v } else { return nil } }
        var real: Double? { if case .real(let v) = self { return v } else { return nil } }
    }

    struct Failure: Error { let message: String }

    /// `readWrite` opens the file as the `sqlite3` shell does: such a
    /// connection, when it is the file's last, checkpoints and removes the
    /// `-wal` as it closes.
    static func query(_ path: String, _ sql: String, readWrite: Bool = false) throws -> [[Value]] {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, readWrite ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, nil) == SQLITE_OK else {
            defer { sqlite3_close(db) }
            throw Failure(message: "open \(path)")
        }
        defer { sqlite3_close(db) }
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else {
            throw Failure(message: String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(stmt) }
        var rows: [[Value]] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw Failure(message: String(cString: sqlite3_errmsg(db))) }
            var row: [Value] = []
            for i in 0..<sqlite3_column_count(stmt) {
                switch sqlite3_column_type(stmt, i) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(stmt, i)))
                case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(stmt, i)))
                case SQLITE_TEXT: row.append(.text(String(cString: sqlite3_column_text(stmt, i))))
                case SQLITE_BLOB:
                    let n = Int(sqlite3_column_bytes(stmt, i))
                    let p = sqlite3_column_blob(stmt, i)
                    row.append(.blob(n > 0 && p != nil ? Array(UnsafeRawBufferPointer(start: p, count: n)) : []))
                default: row.append(.null)
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// `sqlite_master` as (type, name, table, sql) rows, sorted by name.
    static func master(_ path: String) throws -> [[String]] {
        try query(path, "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY name")
            .map { $0.map { $0.text ?? "" } }
    }

    /// `PRAGMA table_info` of every table: name → [(column, type)].
    static func tableColumns(_ path: String) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        for row in try query(path, "SELECT name FROM sqlite_master WHERE type = 'table'") {
            let name = row[0].text!
            out[name] = try query(path, "PRAGMA table_info(\(name))").map { "\($0[1].text!) \($0[2].text!)" }
        }
        return out
    }
}

extension Error {
    /// The Core Data code of this error, or -1.
    var coreDataCode: Int { (self as? CoreDataError)?.code.rawValue ?? -1 }
}
