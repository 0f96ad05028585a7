import Foundation

/// How a model's entities map onto tables, columns and indexes in Core
/// Data's SQLite layout (see docs/SQLITE-LAYOUT.md for what was verified
/// against which Apple-written fixture).
///
/// - Entity numbers (`Z_ENT`): 1… in depth-first order, roots and siblings by
///   name, so a hierarchy's numbers are contiguous. Without inheritance this
///   is alphabetical order, as in Apple's XCServerCoreData stores.
/// - One table per root entity, `Z<ROOT>`, shared by its sub-entities.
/// - Columns: `Z_PK`, `Z_ENT`, `Z_OPT`, then `Z<PROPERTY>` columns grouped as
///   Apple orders them: INTEGER attributes, to-one foreign keys, DECIMAL,
///   FLOAT, TIMESTAMP, VARCHAR, BLOB; by name within a group.
///
/// ```swift
/// let schema = try SQLiteSchema(model: model, configurationName: nil)
/// schema.entity(named: "Bot")?.number          // 2
/// schema.createStatements()                     // CREATE TABLE ZBOT ( Z_PK INTEGER PRIMARY KEY, …
/// ```
public struct SQLiteSchema {
    /// What a column of an entity table holds.
    public enum ColumnRole {
        case primaryKey
        case entity
        case optimisticLock
        case attribute(AttributeDescription)
        /// A to-one's destination primary key.
        case foreignKey(RelationshipDescription)
        /// A to-one's destination entity number, when the destination has sub-entities.
        case foreignEntity(RelationshipDescription)
        /// The position of this row in an ordered to-many whose inverse is this to-one.
        case foreignOrder(RelationshipDescription)
        /// A to-many without inverse: the owning row's primary key, on the destination table.
        case hiddenOwner(RelationshipDescription)
    }

    public struct Column {
        public let name: String
        public let sqlType: String
        public let role: ColumnRole
    }

    public struct Table {
        public let name: String
        public var columns: [Column]
        public let rootEntityName: String

        public func column(named name: String) -> Column? { columns.first { $0.name == name } }
    }

    /// A many-to-many join table: `firstColumn` holds primary keys of
    /// `relationship`'s entity, `secondColumn` those of its destination
    /// (`REFLEXIVE` when the relationship is its own inverse).
    public struct JoinTable {
        public let name: String
        public let firstColumn: String
        public let secondColumn: String
        /// Present when the relationship (or its inverse) is ordered.
        public let orderColumn: String?
        /// The second order column, present only when both sides are ordered
        /// (`FOK_REFLEXIVE` for an ordered self-inverse relationship).
        public var inverseOrderColumn: String? = nil
        public let relationship: RelationshipDescription
    }

    /// How an indexed attribute's index is named. Apple changed it: the
    /// XCServerCoreData 1.2.0 stores (NSPersistenceFrameworkVersion 754) have
    /// `CREATE INDEX ZBOT_ZIDENTIFIER_INDEX ON ZBOT (ZIDENTIFIER)`, the 2.0.x
    /// ones (836, 851) `CREATE INDEX Z_Bot_identifier ON ZBOT (ZIDENTIFIER
    /// COLLATE BINARY ASC)`. New stores use the newer form.
    public enum AttributeIndexStyle: Sendable {
        case fetchIndex
        case legacyColumnIndex
    }

    public struct Index {
        public let name: String
        public let tableName: String
        public let sql: String
    }

    /// Where one entity's rows and properties live.
    public struct EntityMapping {
        public let entity: EntityDescription
        public let number: Int
        /// The superentity's number, 0 for a root (`Z_PRIMARYKEY.Z_SUPER`).
        public let superNumber: Int
        public let tableName: String
        /// Attribute and to-one names → column, inherited properties included.
        public var columnsByProperty: [String: String] = [:]
        /// To-one names → entity-number column (destinations with sub-entities).
        public var entityColumnsByRelationship: [String: String] = [:]
        /// This entity and its descendants' numbers (for sub-entity fetches).
        public var numbersIncludingSubentities: [Int] = []
    }

    public private(set) var tables: [Table] = []
    public private(set) var joinTables: [JoinTable] = []
    public private(set) var indexes: [Index] = []
    public private(set) var entitiesByName: [String: EntityMapping] = [:]
    /// Entity names in entity-number order.
    public private(set) var entityNames: [String] = []

    /// The mapping of the entity numbered `number`.
    public func entity(numbered number: Int) -> EntityMapping? {
        entitiesByName.values.first { $0.number == number }
    }
    /// To-many relationships without inverse: "Entity.relationship" → (table, column).
    public private(set) var hiddenOwnerColumns: [String: (table: String, column: String)] = [:]

    public static let primaryKeyTableSQL = "CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)"
    public static let metadataTableSQL = "CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)"
    public static let modelCacheTableSQL = "CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB)"

    public func entity(named name: String) -> EntityMapping? { entitiesByName[name] }
    public func table(named name: String) -> Table? { tables.first { $0.name == name } }

    /// The join table of a many-to-many relationship, from either side.
    public func joinTable(for relationship: RelationshipDescription) -> JoinTable? {
        joinTables.first { $0.relationship === relationship || $0.relationship === relationship.inverseRelationship }
    }

    /// The SQL type Core Data declares for an attribute type; nil when such an
    /// attribute is never stored.
    public static func sqlType(for type: AttributeType) -> String? {
        switch type {
        case .integer16, .integer32, .integer64, .boolean: return "INTEGER"
        case .decimal: return "DECIMAL"
        case .double, .float: return "FLOAT"
        case .string, .uri: return "VARCHAR"
        case .date: return "TIMESTAMP"
        case .binaryData, .transformable, .uuid: return "BLOB"
        case .undefined, .objectID: return nil
        }
    }

    /// Column group order (verified against XCServerCoreData 2.0.1: INTEGER
    /// attributes, then to-one keys, then FLOAT, TIMESTAMP, VARCHAR, BLOB).
    private static func rank(ofSQLType type: String, isRelationship: Bool) -> Int {
        if isRelationship { return 1 }
        switch type {
        case "INTEGER": return 0
        case "DECIMAL": return 2
        case "FLOAT": return 3
        case "TIMESTAMP": return 4
        case "VARCHAR": return 5
        default: return 6
        }
    }

    /// Builds the mapping for the entities of `configurationName` (nil: all).
    /// `entityNumbers` gives the numbers an existing file uses (its
    /// `Z_PRIMARYKEY`, resolved by name): numbers depend on the model version
    /// that created the file, so they are never recomputed for an old file.
    /// - Throws: `CoreDataError` 134020 when an entity's stored attribute has
    ///   a type no column can hold, or `entityNumbers` lacks an entity.
    public init(model: ManagedObjectModel, configurationName: String?, entityNumbers: [String: Int]? = nil,
                attributeIndexStyle: AttributeIndexStyle = .fetchIndex) throws {
        let entities = model.entities(forConfiguration: configurationName) ?? []
        let included = Set(entities.map { ObjectIdentifier($0) })
        func isIncluded(_ e: EntityDescription?) -> Bool { e.map { included.contains(ObjectIdentifier($0)) } ?? false }
        func storedParent(_ e: EntityDescription) -> EntityDescription? { e.ancestors.first { isIncluded($0) } }

        // Number entities depth-first, roots then children by name.
        let roots = entities.filter { storedParent($0) == nil }.sorted { $0.name < $1.name }
        var ordered: [EntityDescription] = []
        func visit(_ e: EntityDescription) {
            ordered.append(e)
            let children = entities.filter { storedParent($0) === e }.sorted { $0.name < $1.name }
            children.forEach(visit)
        }
        roots.forEach(visit)
        var numbers: [ObjectIdentifier: Int] = [:]
        if let entityNumbers {
            for e in ordered {
                guard let n = entityNumbers[e.name] else {
                    throw CoreDataError(.persistentStoreIncompatibleSchema, "the store has no entity named \(e.name) in Z_PRIMARYKEY",
                                        userInfo: [CoreDataError.entityNameErrorKey: e.name])
                }
                numbers[ObjectIdentifier(e)] = n
            }
            ordered.sort { numbers[ObjectIdentifier($0)]! < numbers[ObjectIdentifier($1)]! }
        } else {
            for (i, e) in ordered.enumerated() { numbers[ObjectIdentifier(e)] = i + 1 }
        }
        entityNames = ordered.map(\.name)
        func number(_ e: EntityDescription) -> Int { numbers[ObjectIdentifier(e)] ?? 0 }
        func root(_ e: EntityDescription) -> EntityDescription {
            var r = e
            while let p = storedParent(r) { r = p }
            return r
        }
        func hierarchy(_ e: EntityDescription) -> [EntityDescription] {
            e.selfAndDescendants.filter { isIncluded($0) }
        }
        func tableName(_ e: EntityDescription) -> String { "Z" + root(e).name.uppercased() }

        for e in ordered {
            var mapping = EntityMapping(entity: e, number: number(e), superNumber: storedParent(e).map(number) ?? 0,
                                        tableName: tableName(e))
            mapping.numbersIncludingSubentities = hierarchy(e).map(number).sorted()
            entitiesByName[e.name] = mapping
        }

        // Columns per root table.
        struct Pending {
            let sortName: String
            let rank: Int
            let order: Int
            let columns: [Column]
        }
        var hiddenOwnerPending: [String: [(Pending, String, RelationshipDescription)]] = [:]
        // To-many relationships without inverse put a hidden owner column on the destination's table.
        for e in ordered {
            for case let rel as RelationshipDescription in e.directProperties
            where !rel.isTransient && rel.isToMany && rel.inverseRelationship == nil && isIncluded(rel.destinationEntity) {
                let destination = rel.destinationEntity!
                let column = "Z\(number(e))\(rel.name.uppercased())"
                let pending = Pending(sortName: column, rank: 1, order: 0,
                                      columns: [Column(name: column, sqlType: "INTEGER", role: .hiddenOwner(rel))])
                hiddenOwnerPending[tableName(destination), default: []].append((pending, column, rel))
                hiddenOwnerColumns["\(e.name).\(rel.name)"] = (tableName(destination), column)
            }
        }

        for rootEntity in roots {
            let name = tableName(rootEntity)
            var used: Set<String> = ["Z_PK", "Z_ENT", "Z_OPT"]
            var pending: [Pending] = []
            var order = 0
            func unique(_ base: String) -> String {
                if used.insert(base).inserted { return base }
                var n = 1
                while !used.insert("\(base)\(n)").inserted { n += 1 }
                return "\(base)\(n)"
            }
            for e in hierarchy(rootEntity) {
                for property in e.directProperties where !property.isTransient {
                    order += 1
                    if let attribute = property as? AttributeDescription {
                        guard let type = Self.sqlType(for: attribute.attributeType) else {
                            throw CoreDataError(.persistentStoreIncompatibleSchema,
                                                "attribute \(e.name).\(attribute.name) of type \(attribute.attributeType.xcodeName) cannot be stored in SQLite",
                                                userInfo: [CoreDataError.entityNameErrorKey: e.name, CoreDataError.propertyNameErrorKey: attribute.name])
                        }
                        let column = unique("Z" + attribute.name.uppercased())
                        pending.append(Pending(sortName: attribute.name.uppercased(), rank: Self.rank(ofSQLType: type, isRelationship: false),
                                               order: order, columns: [Column(name: column, sqlType: type, role: .attribute(attribute))]))
                        entitiesByName[e.name]!.columnsByProperty[attribute.name] = column
                    } else if let rel = property as? RelationshipDescription, !rel.isToMany, let destination = rel.destinationEntity, isIncluded(destination) {
                        var columns: [Column] = []
                        let column = unique("Z" + rel.name.uppercased())
                        if hierarchy(destination).count > 1 {
                            let entityColumn = unique("Z\(number(e))_\(rel.name.uppercased())")
                            columns.append(Column(name: entityColumn, sqlType: "INTEGER", role: .foreignEntity(rel)))
                            entitiesByName[e.name]!.entityColumnsByRelationship[rel.name] = entityColumn
                        }
                        columns.append(Column(name: column, sqlType: "INTEGER", role: .foreignKey(rel)))
                        if let inverse = rel.inverseRelationship, inverse.isToMany, inverse.isOrdered {
                            columns.append(Column(name: unique("Z_FOK_" + rel.name.uppercased()), sqlType: "INTEGER", role: .foreignOrder(rel)))
                        }
                        pending.append(Pending(sortName: rel.name.uppercased(), rank: 1, order: order, columns: columns))
                        entitiesByName[e.name]!.columnsByProperty[rel.name] = column
                    }
                }
            }
            for (p, column, _) in hiddenOwnerPending[name] ?? [] {
                _ = unique(column)
                pending.append(p)
            }
            pending.sort { ($0.rank, $0.sortName, $0.order) < ($1.rank, $1.sortName, $1.order) }
            let columns = [Column(name: "Z_PK", sqlType: "INTEGER PRIMARY KEY", role: .primaryKey),
                           Column(name: "Z_ENT", sqlType: "INTEGER", role: .entity),
                           Column(name: "Z_OPT", sqlType: "INTEGER", role: .optimisticLock)] + pending.flatMap(\.columns)
            tables.append(Table(name: name, columns: columns, rootEntityName: rootEntity.name))
        }

        // Inherited properties map to the column their declaring entity got.
        for e in ordered {
            for ancestor in e.ancestors where isIncluded(ancestor) {
                let inherited = entitiesByName[ancestor.name]!
                for (k, v) in inherited.columnsByProperty where entitiesByName[e.name]!.columnsByProperty[k] == nil {
                    entitiesByName[e.name]!.columnsByProperty[k] = v
                }
                for (k, v) in inherited.entityColumnsByRelationship where entitiesByName[e.name]!.entityColumnsByRelationship[k] == nil {
                    entitiesByName[e.name]!.entityColumnsByRelationship[k] = v
                }
            }
        }

        // Many-to-many join tables, named as Core Data's SQL model names them
        // (docs/SQLITE-LAYOUT.md, "Many-to-many join tables"). Core Data visits
        // the entities in name order, each with its inherited relationships,
        // and the first side of a pair it meets names the table after its
        // declaring entity: so an entity number does not decide (Photos'
        // Z_29ALBUMLISTS is named by GenericAlbum, met through its sub-entity
        // Album before AlbumList(2)), a sub-entity's name can.
        // Within one entity Core Data goes in the order of a private hash
        // table, which cannot be reproduced here; reverse name order stands
        // in for it, as it gives the reported Z_2BLOCKING for blockedBy/blocking.
        // Join column names are made unique across all join tables in the same
        // walk (Photos' Z_3KEYASSETS1), the inverse's column first.
        var joinColumns: Set<String> = []
        func uniqueJoinColumn(_ base: String) -> String {
            if joinColumns.insert(base).inserted { return base }
            var n = 1
            while !joinColumns.insert("\(base)\(n)").inserted { n += 1 }
            return "\(base)\(n)"
        }
        var paired: Set<ObjectIdentifier> = []
        for e in entities.sorted(by: { $0.name < $1.name }) {
            let manyToMany = e.properties.compactMap { $0 as? RelationshipDescription }.filter { rel in
                guard !rel.isTransient, rel.isToMany, let inverse = rel.inverseRelationship, inverse.isToMany,
                      isIncluded(rel.destinationEntity), isIncluded(inverse.entity), isIncluded(rel.entity) else { return false }
                return true
            }
            for rel in manyToMany.sorted(by: { $0.name > $1.name }) where !paired.contains(ObjectIdentifier(rel)) {
                let inverse = rel.inverseRelationship!
                paired.insert(ObjectIdentifier(rel))
                paired.insert(ObjectIdentifier(inverse))
                let owner = number(rel.entity!), inverseOwner = number(inverse.entity!)
                let table = "Z_\(owner)\(rel.name.uppercased())"
                if rel === inverse {
                    // A self-inverse relationship keeps one column per side,
                    // the destination's named REFLEXIVE (Photos' Z_45MERGECANDIDATES).
                    let column = uniqueJoinColumn(table)
                    let order = rel.isOrdered ? uniqueJoinColumn("Z_FOK_\(owner)\(rel.name.uppercased())") : nil
                    joinTables.append(JoinTable(name: table, firstColumn: column, secondColumn: "REFLEXIVE", orderColumn: order,
                                                inverseOrderColumn: rel.isOrdered ? "FOK_REFLEXIVE" : nil, relationship: rel))
                    continue
                }
                // Each side's column is named after the relationship that
                // reaches it, with its own entity's number.
                let second = uniqueJoinColumn("Z_\(inverseOwner)\(rel.name.uppercased())")
                let secondOrder = rel.isOrdered ? uniqueJoinColumn("Z_FOK_\(inverseOwner)\(rel.name.uppercased())") : nil
                let first = uniqueJoinColumn("Z_\(owner)\(inverse.name.uppercased())")
                let firstOrder = inverse.isOrdered ? uniqueJoinColumn("Z_FOK_\(owner)\(inverse.name.uppercased())") : nil
                joinTables.append(JoinTable(name: table, firstColumn: first, secondColumn: second, orderColumn: firstOrder ?? secondOrder,
                                            inverseOrderColumn: firstOrder == nil ? nil : secondOrder, relationship: rel))
            }
        }

        // Indexes: foreign keys, Z_ENT for shared tables, indexed attributes.
        for table in tables {
            if entitiesByName[table.rootEntityName].map({ $0.numbersIncludingSubentities.count > 1 }) == true {
                indexes.append(Index(name: "\(table.name)_Z_ENT_INDEX", tableName: table.name,
                                     sql: "CREATE INDEX \(table.name)_Z_ENT_INDEX ON \(table.name) (Z_ENT)"))
            }
            for column in table.columns {
                switch column.role {
                case .foreignKey, .hiddenOwner:
                    let index = "\(table.name)_\(column.name)_INDEX"
                    indexes.append(Index(name: index, tableName: table.name, sql: "CREATE INDEX \(index) ON \(table.name) (\(column.name))"))
                default: break
                }
            }
            for e in hierarchy(model.entitiesByName[table.rootEntityName]!) {
                for case let attribute as AttributeDescription in e.directProperties where attribute.isIndexed && !attribute.isTransient {
                    let column = entitiesByName[e.name]!.columnsByProperty[attribute.name]!
                    switch attributeIndexStyle {
                    case .fetchIndex:
                        let index = "Z_\(e.name)_\(attribute.name)"
                        indexes.append(Index(name: index, tableName: table.name,
                                             sql: "CREATE INDEX \(index) ON \(table.name) (\(column) COLLATE BINARY ASC)"))
                    case .legacyColumnIndex:
                        let index = "\(table.name)_\(column)_INDEX"
                        indexes.append(Index(name: index, tableName: table.name,
                                             sql: "CREATE INDEX \(index) ON \(table.name) (\(column))"))
                    }
                }
                // Fetch indexes (Xcode's <fetchIndex>). Apple names a one-element
                // index after its property, like an indexed attribute (seen in
                // the 2.0.0 fixture); a compound one after the index (unverified).
                // R-tree indexes need virtual tables and are not created.
                for fetchIndex in e.indexes where !fetchIndex.elements.contains(where: { $0.collationType == .rTree }) {
                    let columns = fetchIndex.elements.compactMap { element -> String? in
                        guard let column = entitiesByName[e.name]?.columnsByProperty[element.propertyName] else { return nil }
                        return "\(column) COLLATE BINARY \(element.isAscending ? "ASC" : "DESC")"
                    }
                    guard !columns.isEmpty, columns.count == fetchIndex.elements.count else { continue }
                    let suffix = fetchIndex.elements.count == 1 ? fetchIndex.elements[0].propertyName : fetchIndex.name
                    let index = "Z_\(e.name)_\(suffix)"
                    guard !indexes.contains(where: { $0.name == index }) else { continue }
                    indexes.append(Index(name: index, tableName: table.name,
                                         sql: "CREATE INDEX \(index) ON \(table.name) (\(columns.joined(separator: ", ")))"))
                }
            }
        }
        for join in joinTables {
            let index = "\(join.name)_\(join.secondColumn)_INDEX"
            indexes.append(Index(name: index, tableName: join.name,
                                 sql: "CREATE INDEX \(index) ON \(join.name) (\(join.secondColumn), \(join.firstColumn))"))
        }
    }

    // MARK: - SQL

    public static func createTableSQL(_ table: Table) -> String {
        "CREATE TABLE \(table.name) ( " + table.columns.map { "\($0.name) \($0.sqlType)" }.joined(separator: ", ") + " )"
    }

    public static func createTableSQL(_ join: JoinTable) -> String {
        var columns = ["\(join.firstColumn) INTEGER", "\(join.secondColumn) INTEGER"]
        if let order = join.orderColumn { columns.append("\(order) INTEGER") }
        if let order = join.inverseOrderColumn { columns.append("\(order) INTEGER") }
        return "CREATE TABLE \(join.name) ( " + columns.joined(separator: ", ")
            + ", PRIMARY KEY (\(join.firstColumn), \(join.secondColumn)) )"
    }

    /// Every statement that creates the schema in an empty file, in the
    /// order Apple's files list them in `sqlite_master`: entity tables (each
    /// followed by the join tables its entities name), indexes, bookkeeping.
    public func createStatements() -> [String] {
        var out: [String] = []
        for table in tables {
            out.append(Self.createTableSQL(table))
            let numbers = Set(entitiesByName[table.rootEntityName]?.numbersIncludingSubentities ?? [])
            for join in joinTables where join.relationship.entity.map({ numbers.contains(entitiesByName[$0.name]?.number ?? -1) }) == true {
                out.append(Self.createTableSQL(join))
            }
        }
        out += indexes.map(\.sql)
        out += [Self.primaryKeyTableSQL, Self.metadataTableSQL, Self.modelCacheTableSQL]
        return out
    }

    // MARK: - Checking an existing file

    /// Differences between this mapping and the tables a file holds (empty
    /// when every table and column the model needs exists with its type).
    /// Extra tables and columns in the file are allowed, as Core Data allows them.
    public func differences(fromFileTables fileTables: [String: [(name: String, type: String)]]) -> [String] {
        var out: [String] = []
        func check(_ name: String, _ wanted: [(String, String)]) {
            guard let have = fileTables[name] else { out.append("missing table \(name)"); return }
            let byName = Dictionary(have.map { ($0.name.uppercased(), $0.type.uppercased()) }, uniquingKeysWith: { a, _ in a })
            for (column, type) in wanted {
                guard let haveType = byName[column.uppercased()] else { out.append("missing column \(name).\(column)"); continue }
                let wantType = type.replacingOccurrences(of: " PRIMARY KEY", with: "")
                if haveType != wantType { out.append("column \(name).\(column) is \(haveType), expected \(wantType)") }
            }
        }
        for table in tables { check(table.name, table.columns.map { ($0.name, $0.sqlType) }) }
        for join in joinTables {
            check(join.name, [(join.firstColumn, "INTEGER"), (join.secondColumn, "INTEGER")]
                  + [join.orderColumn, join.inverseOrderColumn].compactMap { $0.map { ($0, "INTEGER") } })
        }
        for bookkeeping in ["Z_PRIMARYKEY", "Z_METADATA"] where fileTables[bookkeeping] == nil {
            out.append("missing table \(bookkeeping)")
        }
        return out
    }
}
