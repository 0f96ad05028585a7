import Foundation

/// The tables and triggers that record persistent history in a Core Data
/// SQLite file (see docs/HISTORY.md for the whole picture).
///
/// Everything lives under the `OGH_` prefix, which Core Data's own names
/// (`Z…`, `Z_…`, `A…`) never use, so the file keeps Apple's layout. The
/// triggers use only SQLite's built-in functions: any writer, including the
/// `sqlite3` shell and Apple's Core Data on a copied file, records its
/// changes in its own transaction, so a change is recorded exactly when its
/// data commits.
///
/// - `OGH_META (KEY, VALUE)`: `format` (this layout's version) and
///   `purgedThrough` (the last change position deleted by a purge).
/// - `OGH_STATE (ID = 1, CURRENTTX)`: the transaction an ObjectGraph save is
///   writing; set and cleared inside that save's transaction, so other
///   connections only ever see NULL and their changes record no transaction.
/// - `OGH_GLOBALID (TBL, PK, GID, DEAD)`: the global identifier (an upper-case
///   UUID string) of each row, keyed by the root entity number of its table
///   and its `Z_PK`. Rows of deleted objects stay, marked dead, so history
///   can still name what a foreign key pointed at; an insert at that key
///   later gets a new identifier.
/// - `OGH_TRANSACTION (TX, TIMESTAMP, AUTHOR, CONTEXTNAME)`: one row per
///   ObjectGraph save that changed something.
/// - `OGH_CHANGE (ID, TX, TIMESTAMP, KIND, ENT, PK, GID, MASK, O1, N1, …)`:
///   one row per changed row, in commit order (`ID` is the history
///   position). `Ok`/`Nk` hold the old and new value of the table's k-th
///   tracked column (`OGH_COLUMN`), typed as SQLite stored them; foreign keys
///   hold the destination's global identifier when it is known. `MASK` is a
///   string of `0`/`1` per tracked column for updates.
/// - `OGH_COLUMN (TBL, POSITION, NAME)`: each entity table's tracked columns,
///   and `OGH_JOIN (ID, NAME)` the join tables, numbered for `ENT` of
///   join-row changes.
struct SQLiteHistorySchema {
    /// The layout version this code writes and reads.
    static let formatVersion: Int64 = 1
    static let prefix = "OGH_"

    enum Kind: Int64 {
        case insert = 0, update = 1, delete = 2
        /// A many-to-many join row added or removed: `ENT` is the join
        /// table's `OGH_JOIN.ID`, `PK` the first column's key, `N1` the
        /// second's, `GID` and `N2` their global identifiers, `N3` the order.
        case joinInsert = 3, joinDelete = 4
    }

    /// A column whose changes are recorded, and where its value points.
    struct TrackedColumn {
        let name: String
        /// For foreign keys: the root entity number of the destination's table.
        let referencedTable: Int?
        /// A foreign key whose row also keeps its position in the owner's
        /// ordered to-many (`Z_FOK_`): its new value is recorded with every
        /// update, so a change of position names the owner.
        var recordsNewAlways = false
    }

    struct TrackedTable {
        let name: String
        /// The root entity number of the table: the `TBL` of its global identifiers.
        let number: Int
        let columns: [TrackedColumn]
    }

    struct TrackedJoin {
        let id: Int
        let name: String
        let firstColumn: String
        let secondColumn: String
        let orderColumn: String?
        let firstTable: Int
        let secondTable: Int
    }

    let tables: [TrackedTable]
    let joins: [TrackedJoin]
    /// The number of value column pairs: the widest table's tracked columns (at least 3, for joins).
    let width: Int

    init(_ schema: SQLiteSchema) {
        func rootNumber(ofTable name: String) -> Int? {
            guard let table = schema.table(named: name) else { return nil }
            return schema.entity(named: table.rootEntityName)?.number
        }
        func rootNumber(of entity: EntityDescription?) -> Int? {
            guard let entity, let mapping = schema.entity(named: entity.name) else { return nil }
            return rootNumber(ofTable: mapping.tableName)
        }
        var tables: [TrackedTable] = []
        for table in schema.tables {
            guard let number = rootNumber(ofTable: table.name) else { continue }
            let ordered = Set(table.columns.compactMap { column -> ObjectIdentifier? in
                if case .foreignOrder(let rel) = column.role { return ObjectIdentifier(rel) }
                return nil
            })
            let columns: [TrackedColumn] = table.columns.compactMap { column in
                switch column.role {
                case .primaryKey, .entity, .optimisticLock: return nil
                case .foreignKey(let rel):
                    return TrackedColumn(name: column.name, referencedTable: rootNumber(of: rel.destinationEntity),
                                         recordsNewAlways: ordered.contains(ObjectIdentifier(rel)))
                case .hiddenOwner(let rel): return TrackedColumn(name: column.name, referencedTable: rootNumber(of: rel.entity))
                case .foreignOrder:
                    // Recorded with every update, so a member moving to another
                    // owner at its old position still reports that position.
                    return TrackedColumn(name: column.name, referencedTable: nil, recordsNewAlways: true)
                case .attribute, .foreignEntity: return TrackedColumn(name: column.name, referencedTable: nil)
                }
            }
            tables.append(TrackedTable(name: table.name, number: number, columns: columns))
        }
        var joins: [TrackedJoin] = []
        for (i, join) in schema.joinTables.enumerated() {
            guard let first = rootNumber(of: join.relationship.entity), let second = rootNumber(of: join.relationship.destinationEntity) else { continue }
            joins.append(TrackedJoin(id: i + 1, name: join.name, firstColumn: join.firstColumn, secondColumn: join.secondColumn,
                                     orderColumn: join.orderColumn, firstTable: first, secondTable: second))
        }
        self.tables = tables
        self.joins = joins
        width = max(3, tables.map(\.columns.count).max() ?? 0)
    }

    // MARK: - SQL

    /// A new version-7 UUID (time-ordered: 48 bits of Unix milliseconds,
    /// then random bits) as upper-case text, from built-in functions only
    /// (foreign writers have none of ObjectGraph's registered functions).
    /// Time order matters: identifiers made one after another land next to
    /// each other in `OGH_GLOBALID`'s unique index instead of at random
    /// pages (a random version-4 identifier made that index the largest
    /// cost of an insert with history on, docs/benchmarks/history.md).
    static let newUUIDExpression = """
        (substr(printf('%012X', CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)), 1, 8) || '-' || \
        substr(printf('%012X', CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)), 9, 4) || '-7' || \
        substr(hex(randomblob(2)), 2) || '-' || substr('89AB', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || \
        hex(randomblob(6)))
        """
    /// Seconds since 2001-01-01 UTC (Core Data's reference date), from SQLite's clock.
    static let nowExpression = "((julianday('now') - 2451910.5) * 86400.0)"

    var valueColumns: [String] { (1...width).flatMap { ["O\($0)", "N\($0)"] } }

    /// Tables, their bookkeeping rows and indexes; run once when history is switched on.
    func createTableStatements() -> [String] {
        var sql = [
            "CREATE TABLE OGH_META (KEY TEXT PRIMARY KEY, VALUE)",
            "INSERT INTO OGH_META (KEY, VALUE) VALUES ('format', \(Self.formatVersion)), ('purgedThrough', 0)",
            "CREATE TABLE OGH_STATE (ID INTEGER PRIMARY KEY CHECK (ID = 1), CURRENTTX INTEGER)",
            "INSERT INTO OGH_STATE (ID, CURRENTTX) VALUES (1, NULL)",
            "CREATE TABLE OGH_GLOBALID (TBL INTEGER NOT NULL, PK INTEGER NOT NULL, GID TEXT NOT NULL UNIQUE, DEAD INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (TBL, PK)) WITHOUT ROWID",
            "CREATE TABLE OGH_TRANSACTION (TX INTEGER PRIMARY KEY AUTOINCREMENT, TIMESTAMP REAL NOT NULL, AUTHOR TEXT, CONTEXTNAME TEXT)",
            // Value columns are declared without a type: no affinity, so each
            // value keeps the storage class its data column gave it.
            "CREATE TABLE OGH_CHANGE (ID INTEGER PRIMARY KEY AUTOINCREMENT, TX INTEGER, TIMESTAMP REAL, KIND INTEGER NOT NULL, ENT INTEGER NOT NULL, PK INTEGER NOT NULL, GID TEXT, MASK TEXT, \(valueColumns.joined(separator: ", ")))",
            "CREATE TABLE OGH_COLUMN (TBL TEXT NOT NULL, POSITION INTEGER NOT NULL, NAME TEXT NOT NULL, PRIMARY KEY (TBL, POSITION))",
            "CREATE TABLE OGH_JOIN (ID INTEGER PRIMARY KEY, NAME TEXT NOT NULL UNIQUE)",
        ]
        for table in tables {
            for (i, column) in table.columns.enumerated() {
                sql.append("INSERT INTO OGH_COLUMN (TBL, POSITION, NAME) VALUES ('\(table.name)', \(i + 1), '\(column.name)')")
            }
        }
        for join in joins { sql.append("INSERT INTO OGH_JOIN (ID, NAME) VALUES (\(join.id), '\(join.name)')") }
        return sql
    }

    /// Gives every existing row a global identifier (history switched on for
    /// a store with data: nothing is recorded for the past).
    func assignExistingIdentifiersStatements() -> [String] {
        tables.map { "INSERT OR IGNORE INTO OGH_GLOBALID (TBL, PK, GID) SELECT \($0.number), Z_PK, \(Self.newUUIDExpression) FROM \($0.name)" }
    }

    /// Every trigger, by name and SQL.
    func triggers() -> [(name: String, sql: String)] {
        var out: [(String, String)] = []
        let state = "(SELECT CURRENTTX FROM OGH_STATE WHERE ID = 1)"
        let header = "TX, TIMESTAMP, KIND, ENT, PK, GID"
        func stamp(_ kind: Kind, ent: String, pk: String, gid: String) -> String {
            "\(state), CASE WHEN \(state) IS NULL THEN \(Self.nowExpression) END, \(kind.rawValue), \(ent), \(pk), \(gid)"
        }
        for table in tables {
            let gid = { (record: String) in "(SELECT GID FROM OGH_GLOBALID WHERE TBL = \(table.number) AND PK = \(record).Z_PK)" }
            func value(_ column: TrackedColumn, _ record: String) -> String {
                guard let target = column.referencedTable else { return "\(record).\(column.name)" }
                return "coalesce((SELECT GID FROM OGH_GLOBALID WHERE TBL = \(target) AND PK = \(record).\(column.name)), \(record).\(column.name))"
            }
            // A row whose identifier the save assigned beforehand (a copy from
            // another store, `assignGlobalIdentifier`) already has a live one: the
            // conflict below keeps it, so a new identifier is made only when none
            // is there. SQLite evaluates VALUES before the conflict check, and the
            // fifteen function calls of a new identifier were about a fifth of the
            // SQLite time of inserting a copied row (measured on a copy of this
            // layout; docs/benchmarks/sync.md, issue 15).
            // The '' never lands: with a live row at (TBL, PK) the conflict's
            // update does nothing. A plain `INSERT … SELECT … WHERE NOT EXISTS`
            // would do the same but reads the table it writes, which SQLite
            // answers by buffering the row in a temporary table (slower for
            // every insert).
            let n = table.columns.indices.map { "N\($0 + 1)" }
            let o = table.columns.indices.map { "O\($0 + 1)" }
            let insert = """
                CREATE TRIGGER OGH_\(table.name)_INSERT AFTER INSERT ON \(table.name) BEGIN \
                INSERT INTO OGH_GLOBALID (TBL, PK, GID, DEAD) VALUES (\(table.number), NEW.Z_PK, \
                CASE WHEN EXISTS (SELECT 1 FROM OGH_GLOBALID WHERE TBL = \(table.number) AND PK = NEW.Z_PK AND DEAD = 0) THEN '' ELSE \(Self.newUUIDExpression) END, 0) \
                ON CONFLICT (TBL, PK) DO UPDATE SET GID = excluded.GID, DEAD = 0 WHERE DEAD = 1; \
                INSERT INTO OGH_CHANGE (\(([header] + n).joined(separator: ", "))) VALUES (\(([stamp(.insert, ent: "NEW.Z_ENT", pk: "NEW.Z_PK", gid: gid("NEW"))] + table.columns.map { value($0, "NEW") }).joined(separator: ", "))); \
                END
                """
            out.append(("OGH_\(table.name)_INSERT", insert))
            if !table.columns.isEmpty {
                let differs = table.columns.map { "OLD.\($0.name) IS NOT NEW.\($0.name)" }
                let mask = differs.map { "(CASE WHEN \($0) THEN '1' ELSE '0' END)" }.joined(separator: " || ")
                var values: [String] = []
                for (column, changed) in zip(table.columns, differs) {
                    values.append("CASE WHEN \(changed) THEN \(value(column, "OLD")) END")
                    values.append(column.recordsNewAlways ? value(column, "NEW") : "CASE WHEN \(changed) THEN \(value(column, "NEW")) END")
                }
                let pairs = zip(o, n).flatMap { [$0, $1] }
                let update = """
                    CREATE TRIGGER OGH_\(table.name)_UPDATE AFTER UPDATE ON \(table.name) WHEN \(differs.joined(separator: " OR ")) BEGIN \
                    INSERT INTO OGH_CHANGE (\(([header, "MASK"] + pairs).joined(separator: ", "))) VALUES (\(([stamp(.update, ent: "NEW.Z_ENT", pk: "NEW.Z_PK", gid: gid("NEW")), mask] + values).joined(separator: ", "))); \
                    END
                    """
                out.append(("OGH_\(table.name)_UPDATE", update))
            }
            let delete = """
                CREATE TRIGGER OGH_\(table.name)_DELETE AFTER DELETE ON \(table.name) BEGIN \
                INSERT INTO OGH_CHANGE (\(([header] + o).joined(separator: ", "))) VALUES (\(([stamp(.delete, ent: "OLD.Z_ENT", pk: "OLD.Z_PK", gid: gid("OLD"))] + table.columns.map { value($0, "OLD") }).joined(separator: ", "))); \
                UPDATE OGH_GLOBALID SET DEAD = 1 WHERE TBL = \(table.number) AND PK = OLD.Z_PK; \
                END
                """
            out.append(("OGH_\(table.name)_DELETE", delete))
        }
        for join in joins {
            for (kind, record, suffix) in [(Kind.joinInsert, "NEW", "INSERT"), (Kind.joinDelete, "OLD", "DELETE")] {
                let first = "(SELECT GID FROM OGH_GLOBALID WHERE TBL = \(join.firstTable) AND PK = \(record).\(join.firstColumn))"
                let second = "(SELECT GID FROM OGH_GLOBALID WHERE TBL = \(join.secondTable) AND PK = \(record).\(join.secondColumn))"
                let order = join.orderColumn.map { "\(record).\($0)" } ?? "NULL"
                let sql = """
                    CREATE TRIGGER OGH_\(join.name)_\(suffix) AFTER \(suffix) ON \(join.name) BEGIN \
                    INSERT INTO OGH_CHANGE (\(header), N1, N2, N3) VALUES (\(stamp(kind, ent: "\(join.id)", pk: "\(record).\(join.firstColumn)", gid: first)), \
                    \(record).\(join.secondColumn), \(second), \(order)); \
                    END
                    """
                out.append(("OGH_\(join.name)_\(suffix)", sql))
            }
        }
        return out
    }
}
