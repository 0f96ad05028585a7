import Foundation
@testable import ObjectGraph

/// Files and helpers the migration tests share.
enum MigrationFixtures {
    static let directory = TestPaths.repositoryRoot.appendingPathComponent("Tests/Fixtures/migration")
    static let xcServerMapping = directory.appendingPathComponent("XCServerCoreData-1.2.0-to-2.0.0.json")

    static func xcServerModel(_ version: String) throws -> ManagedObjectModel {
        try XcodeModelBundle(url: TestPaths.xcServerBundle).model(named: "XCServerCoreData\(version).xcdatamodel")
    }
}

/// A store file's rows as `sqlite3` sees them, read through SQLite's C API
/// (`RawSQLite`), independently of ObjectGraph's store.
struct StoreDump {
    /// Table → rows, each row column name → value.
    var tables: [String: [[String: RawSQLite.Value]]] = [:]

    init(_ url: URL) throws {
        for row in try RawSQLite.query(url.path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%' AND name NOT IN ('Z_PRIMARYKEY', 'Z_METADATA', 'Z_MODELCACHE')") {
            let table = row[0].text!
            let columns = try RawSQLite.query(url.path, "PRAGMA table_info(\(table))").map { $0[1].text! }
            tables[table] = try RawSQLite.query(url.path, "SELECT \(columns.joined(separator: ", ")) FROM \(table)").map {
                Dictionary(uniqueKeysWithValues: zip(columns, $0))
            }
        }
    }

    func rows(_ table: String) -> [[String: RawSQLite.Value]] { tables[table] ?? [] }

    /// Rows by primary key.
    func byKey(_ table: String) -> [Int64: [String: RawSQLite.Value]] {
        Dictionary(uniqueKeysWithValues: rows(table).map { ($0["Z_PK"]!.int!, $0) })
    }
}

extension RawSQLite.Value: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let v): return "i\(v)"
        case .real(let v): return "r\(v)"
        case .text(let v): return "t\(v.debugDescription)"
        case .blob(let v): return "b\(v.count):\(v.prefix(8).map { String($0) }.joined(separator: ","))"
        }
    }
}
