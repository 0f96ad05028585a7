import Foundation
import ObjectGraph

/// Where the PostgreSQL hub keeps a group's objects: the tables derived from
/// the model, and the DDL that makes them with the hub's bookkeeping.
///
/// - One schema per group, `storesync_<group>`.
/// - One table per root entity, `e_<Entity>`: `_gid` (primary key),
///   `_entity` (the concrete entity), `_version` (the hub position of the
///   row's last change), one typed column per stored attribute of the root
///   and all its subentities, one `uuid` column per to-one (the
///   destination's global identifier; no foreign key). The system columns
///   start with `_` so they cannot meet a property's name.
/// - A to-many whose inverse is a to-one is read from that to-one's column;
///   an ordered one keeps each member's position in `_order_<to-one>` on the
///   member's row.
/// - A many-to-many (or a to-many without inverse) is a join table
///   `j_<Entity>_<relationship>` of the side whose entity and name sort
///   first: `a` (owner on that side), `b` (member), `a_order`, `b_order`
///   (positions on the ordered sides).
///
/// ```swift
/// let schema = try PostgreSQLHubSchema(model: model, group: "notes")
/// try connection.executeScript(schema.creationScript())
/// ```
struct PostgreSQLHubSchema {
    static let version = 1

    enum ColumnKind {
        case attribute(AttributeDescription)
        case toOne(RelationshipDescription)
        /// A member's position in the ordered to-many (the relationship) kept by its inverse to-one.
        case order(RelationshipDescription)
    }

    struct Column {
        let name: String
        let sqlType: String
        let kind: ColumnKind
    }

    final class Table {
        let root: EntityDescription
        let name: String
        var columns: [Column] = []
        var columnIndex: [String: Int] = [:]
        init(root: EntityDescription, name: String) {
            self.root = root
            self.name = name
        }
    }

    final class JoinTable {
        let name: String
        /// The relationship of side `a` (its owner is column `a`, its members `b`).
        let first: RelationshipDescription
        /// The inverse (side `b`), nil for a to-many without inverse.
        let second: RelationshipDescription?
        init(name: String, first: RelationshipDescription, second: RelationshipDescription?) {
            self.name = name
            self.first = first
            self.second = second
        }
    }

    /// How one to-many is stored.
    enum ToMany {
        /// Members are the rows of `table` whose `column` names the owner (`orderColumn`: their positions).
        case derived(table: Table, column: String, orderColumn: String?)
        /// Members are join rows; `ownerIsA`: the owner is column `a`.
        case join(JoinTable, ownerIsA: Bool)
    }

    let group: String
    /// The schema's name, unquoted.
    let name: String
    let model: ManagedObjectModel
    var tables: [Table] = []
    private var tableByEntity: [String: Table] = [:]
    var joinTables: [JoinTable] = []
    private var toManyByKey: [String: ToMany] = [:]

    /// Group names become part of a schema name: letters, digits, `_`, `-`.
    static func validate(group: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
        guard !group.isEmpty, group.allSatisfy(allowed.contains), ("storesync_" + group).utf8.count <= 63 else {
            throw CoreDataError(.coreData, "sync group name '\(group)' cannot name a PostgreSQL hub: use 1 to 53 letters, digits, '_' or '-'")
        }
    }

    init(model: ManagedObjectModel, group: String) throws {
        try Self.validate(group: group)
        self.group = group
        self.model = model
        name = "storesync_" + group
        for root in model.entities where root.superentity == nil {
            let table = Table(root: root, name: try Self.identifier("e_" + root.name, what: "table of entity \(root.name)"))
            tables.append(table)
            for entity in root.selfAndDescendants { tableByEntity[entity.name] = table }
        }
        // Columns: attributes and to-ones of every entity under the root.
        for table in tables {
            for entity in table.root.selfAndDescendants {
                for property in entity.properties where !property.isTransient {
                    switch property {
                    case let attribute as AttributeDescription:
                        try add(Column(name: attribute.name, sqlType: try PostgreSQLValueCodec.columnType(attribute, entity: entity.name),
                                       kind: .attribute(attribute)), to: table, entity: entity)
                    case let rel as RelationshipDescription where !rel.isToMany:
                        try add(Column(name: rel.name, sqlType: "uuid", kind: .toOne(rel)), to: table, entity: entity)
                        if let inverse = rel.inverseRelationship, inverse.isToMany, inverse.isOrdered {
                            try add(Column(name: "_order_" + rel.name, sqlType: "integer", kind: .order(inverse)), to: table, entity: entity)
                        }
                    default: continue
                    }
                }
            }
        }
        // To-manys: derived from the inverse column, or a join table.
        var joinByName: [String: JoinTable] = [:]
        for entity in model.entities {
            for case let rel as RelationshipDescription in entity.directProperties where rel.isToMany && !rel.isTransient {
                let key = Self.key(rel)
                guard rel.destinationEntity != nil else {
                    throw CoreDataError(.coreData, "\(entity.name).\(rel.name) has no destination entity")
                }
                if let inverse = rel.inverseRelationship, !inverse.isToMany {
                    guard let inverseEntity = inverse.entity, let table = tableByEntity[inverseEntity.name] else {
                        throw CoreDataError(.coreData, "\(entity.name).\(rel.name): inverse \(inverse.name) has no entity in the model")
                    }
                    toManyByKey[key] = .derived(table: table, column: inverse.name, orderColumn: rel.isOrdered ? "_order_" + inverse.name : nil)
                    continue
                }
                // The side whose entity and name sort first owns the table's name.
                var first = rel
                var second = rel.inverseRelationship
                if let other = second, Self.key(other) < key { first = other; second = rel }
                let tableName = try Self.identifier("j_" + Self.key(first).replacingOccurrences(of: ".", with: "_"), what: "join table of \(Self.key(first))")
                let join: JoinTable
                if let existing = joinByName[tableName] {
                    join = existing
                } else {
                    join = JoinTable(name: tableName, first: first, second: second)
                    joinByName[tableName] = join
                    joinTables.append(join)
                }
                guard join.first === first else {
                    throw CoreDataError(.coreData, "two to-many relationships of the model need the join table \(tableName)")
                }
                toManyByKey[key] = .join(join, ownerIsA: first === rel)
            }
        }
    }

    private func add(_ column: Column, to table: Table, entity: EntityDescription) throws {
        _ = try Self.identifier(column.name, what: "column of \(entity.name).\(column.name)")
        if let existing = table.columnIndex[column.name] {
            let old = table.columns[existing]
            func same(_ a: ColumnKind, _ b: ColumnKind) -> Bool {
                switch (a, b) {
                case let (.attribute(x), .attribute(y)): return x === y || x.attributeType == y.attributeType
                case let (.toOne(x), .toOne(y)): return x === y
                case let (.order(x), .order(y)): return x === y
                default: return false
                }
            }
            guard old.sqlType == column.sqlType, same(old.kind, column.kind) else {
                throw CoreDataError(.coreData, "entities under \(table.root.name) store '\(column.name)' as two different properties; the PostgreSQL hub keeps one column per name in table \(table.name)")
            }
            return
        }
        table.columnIndex[column.name] = table.columns.count
        table.columns.append(column)
    }

    /// PostgreSQL truncates longer identifiers silently (two could become one).
    private static func identifier(_ name: String, what: String) throws -> String {
        guard name.utf8.count <= 63 else {
            throw CoreDataError(.coreData, "the \(what) would be named '\(name)', longer than PostgreSQL's 63 bytes")
        }
        return name
    }

    static func key(_ rel: RelationshipDescription) -> String { "\(rel.entity?.name ?? "?").\(rel.name)" }

    func table(of entity: EntityDescription) -> Table? { tableByEntity[entity.name] }
    func table(ofEntityNamed name: String) -> Table? { tableByEntity[name] }

    /// How a to-many is stored (declared on the entity or an ancestor).
    func toMany(_ rel: RelationshipDescription) -> ToMany? { toManyByKey[Self.key(rel)] }

    // MARK: - SQL

    static func quote(_ identifier: String) -> String { "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
    static func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// `"schema"."table"`.
    func qualified(_ table: String) -> String { Self.quote(name) + "." + Self.quote(table) }

    /// The model's identity: each entity's version hash, so a hub made for
    /// another model is refused rather than misread.
    var fingerprint: String {
        model.entityVersionHashesByName.sorted { $0.key < $1.key }
            .map { "\($0.key):" + $0.value.map { String(format: "%02x", $0) }.joined() }.joined(separator: ",")
    }

    /// The DDL of a new hub (run once, under the creation lock).
    func creationScript() -> String {
        var sql = "CREATE SCHEMA \(Self.quote(name));\n"
        sql += """
            CREATE TABLE \(qualified("meta")) (key text PRIMARY KEY, value text NOT NULL);
            INSERT INTO \(qualified("meta")) VALUES ('schema_version', '\(Self.version)'), ('model', \(Self.literal(fingerprint))), ('purged_through', '0');
            CREATE TABLE \(qualified("state")) (position bigint NOT NULL);
            INSERT INTO \(qualified("state")) VALUES (0);
            CREATE TABLE \(qualified("transactions")) (position bigint PRIMARY KEY, origin_host text, origin_store text,
                change_count integer NOT NULL, committed timestamptz NOT NULL DEFAULT now());
            CREATE TABLE \(qualified("changes")) (position bigint NOT NULL, seq integer NOT NULL, gid uuid NOT NULL, entity text NOT NULL,
                kind "char" NOT NULL, changed json NOT NULL, PRIMARY KEY (position, seq));
            CREATE TABLE \(qualified("cursors")) (host text NOT NULL, store text NOT NULL, pulled_through bigint NOT NULL, base bigint NOT NULL,
                pushed_through bigint NOT NULL, needs_full_push boolean NOT NULL, last_seen timestamptz NOT NULL, PRIMARY KEY (host, store));
            CREATE TABLE \(qualified("pending")) (host text NOT NULL, store text NOT NULL, gid uuid NOT NULL, PRIMARY KEY (host, store, gid));
            CREATE SEQUENCE \(qualified("conflict_number"));
            CREATE TABLE \(qualified("conflicts")) (number bigint PRIMARY KEY DEFAULT nextval('\(Self.quote(name)).conflict_number'),
                host text NOT NULL, store text NOT NULL, gid uuid NOT NULL, entity text NOT NULL, kind text NOT NULL,
                base_position bigint NOT NULL, hub_position bigint NOT NULL, base json NOT NULL, incoming json NOT NULL, hub json NOT NULL,
                created timestamptz NOT NULL, created_seconds double precision NOT NULL, resolution text);
            COMMENT ON COLUMN \(qualified("conflicts")).created_seconds IS 'created, exact: seconds since 2001-01-01 UTC';
            CREATE INDEX ON \(qualified("conflicts")) (host, store) WHERE resolution IS NULL;

            """
        for table in tables {
            let columns = ["\"_gid\" uuid PRIMARY KEY", "\"_entity\" text NOT NULL", "\"_version\" bigint NOT NULL"]
                + table.columns.map { "\(Self.quote($0.name)) \($0.sqlType)" }
            sql += "CREATE TABLE \(qualified(table.name)) (\(columns.joined(separator: ", ")));\n"
            for column in table.columns { if case .toOne = column.kind { sql += "CREATE INDEX ON \(qualified(table.name)) (\(Self.quote(column.name)));\n" } }
        }
        for join in joinTables {
            sql += "CREATE TABLE \(qualified(join.name)) (a uuid NOT NULL, b uuid NOT NULL, a_order integer, b_order integer, PRIMARY KEY (a, b));\n"
            sql += "CREATE INDEX ON \(qualified(join.name)) (b);\n"
        }
        return sql
    }
}
