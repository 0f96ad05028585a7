import Foundation

/// The SQL that migrates a SQLite store in place, when a mapping model only
/// changes the schema (docs/MIGRATION.md, "In place"): every entity mapping
/// copies, transforms, adds or removes an entity with the base policy and the
/// default source expression, every attribute mapping is `$source.<key>` or
/// empty, every relationship mapping the standard lookup of a source
/// relationship or empty, and each table's rows stay in one table.
///
/// The result has exactly the tables, columns, declared types, entity
/// numbers, join tables and indexes a new store of the destination model
/// would have (`SQLiteSchema(model:)`), except that columns added with
/// `ALTER TABLE ADD COLUMN` come last; primary keys do not change, so object
/// IDs survive (the store keeps its UUID).
///
/// Per table:
/// - columns only added (and renamed): `ALTER TABLE … ADD COLUMN` /
///   `RENAME COLUMN`, an `UPDATE` for default values;
/// - anything else (a column dropped, a type converted, entity numbers
///   remapped, values that depend on the row's entity): the table is rebuilt,
///   `CREATE TABLE` under a temporary name, `INSERT … SELECT` from the old
///   one, `DROP TABLE`, `ALTER TABLE … RENAME TO`.
///
/// Changes it cannot express (a relationship's storage changing kind, as
/// to-one to to-many does; rows moving between tables; ordered many-to-many
/// relationships; external binary storage switched) give a reason instead,
/// and the store is migrated by copying (`SQLiteStore.migrateStore`).
struct SQLiteMigrationPlan {
    /// Statements, in order, all run in one transaction.
    var statements: [String] = []
    /// What changes, one line each, for `storesyncctl migrate --dry-run`.
    var changes: [String] = []

    enum Outcome {
        case inPlace(SQLiteMigrationPlan)
        /// Why the store must be migrated by copying instead.
        case copy(reason: String)
    }

    // swiftlint:disable:next function_body_length cyclomatic_complexity
    static func make(source: ManagedObjectModel, destination: ManagedObjectModel, mapping: MappingModel, db: SQLiteConnection) throws -> Outcome {
        // 1. The mapping must be one SQL can carry out.
        var sourceOf: [String: EntityDescription] = [:]       // destination entity → source entity
        var mappingOf: [String: EntityMapping] = [:]          // destination entity → its mapping
        var destinationOf: [String: EntityDescription] = [:]  // source entity → destination entity
        for m in mapping.entityMappings {
            if let policy = m.entityMigrationPolicyClassName, EntityMigrationPolicy.policyType(named: policy) != EntityMigrationPolicy.self {
                return .copy(reason: "entity mapping \(m.name) uses the policy \(policy)")
            }
            if m.sourceExpression != nil { return .copy(reason: "entity mapping \(m.name) has its own source expression") }
            switch m.mappingType {
            case .remove, .add:
                continue
            case .copy, .transform:
                guard let s = m.sourceEntityName.flatMap({ source.entitiesByName[$0] }),
                      let d = m.destinationEntityName.flatMap({ destination.entitiesByName[$0] }) else { continue }
                if sourceOf[d.name] != nil || destinationOf[s.name] != nil {
                    return .copy(reason: "entity \(d.name) or \(s.name) is in several entity mappings")
                }
                for property in m.attributeMappings where property.valueExpression != nil {
                    guard let key = property.copiedSourceKey, s.attributesByName[key] != nil else {
                        return .copy(reason: "the value of \(m.name).\(property.name) is computed (\(property.valueExpression!.expressionFormat))")
                    }
                }
                for property in m.relationshipMappings where property.valueExpression != nil {
                    guard let key = property.lookedUpSourceRelationship, s.relationshipsByName[key] != nil else {
                        return .copy(reason: "the value of \(m.name).\(property.name) is computed (\(property.valueExpression!.expressionFormat))")
                    }
                }
                sourceOf[d.name] = s
                destinationOf[s.name] = d
                mappingOf[d.name] = m
            case .custom, .undefined:
                return .copy(reason: "entity mapping \(m.name) is \(m.mappingType)")
            }
        }

        // 2. The file as the source model lays it out, and the destination's layout.
        let fileTables = try SQLiteStore.readTables(db)
        var fileNumbers: [String: Int] = [:]
        var fileMax: [String: Int64] = [:]
        for row in try db.query("SELECT Z_ENT, Z_NAME, Z_MAX FROM Z_PRIMARYKEY") {
            if let n = row[0].int64Value, let name = row[1].stringValue {
                fileNumbers[name] = Int(n)
                fileMax[name] = row[2].int64Value ?? 0
            }
        }
        let old = try SQLiteSchema(model: source, configurationName: nil, entityNumbers: fileNumbers)
        let missing = old.differences(fromFileTables: fileTables)
        guard missing.isEmpty else {
            return .copy(reason: "the file's tables are not the source model's: " + missing.joined(separator: "; "))
        }
        let new = try SQLiteSchema(model: destination, configurationName: nil)
        func oldNumber(_ e: EntityDescription) -> Int { old.entity(named: e.name)!.number }
        func newNumber(_ e: EntityDescription) -> Int { new.entity(named: e.name)!.number }
        func oldMapping(_ e: EntityDescription) -> SQLiteSchema.EntityMapping { old.entity(named: e.name)! }
        var numberMap: [Int: Int] = [:]   // old Z_ENT → new Z_ENT
        for (d, s) in sourceOf { numberMap[oldNumber(s)] = newNumber(destination.entitiesByName[d]!) }
        func remapped(_ column: String) -> String {
            if numberMap.allSatisfy({ $0.key == $0.value }) { return column }
            let cases = numberMap.sorted { $0.key < $1.key }.map { "WHEN \($0.key) THEN \($0.value)" }.joined(separator: " ")
            return "CASE \(column) \(cases) ELSE NULL END"
        }

        // 3. Each destination table takes the rows of at most one old table, and the reverse.
        var oldTableOf: [String: SQLiteSchema.Table] = [:]   // new table name → old table
        var claimed: Set<String> = []
        for table in new.tables {
            let hierarchy = new.entity(named: table.rootEntityName)!.numbersIncludingSubentities
            let names = new.entitiesByName.values.filter { hierarchy.contains($0.number) }.map(\.entity.name)
            let olds = Set(names.compactMap { sourceOf[$0] }.map { oldMapping($0).tableName })
            guard olds.count <= 1 else {
                return .copy(reason: "table \(table.name) would take rows from \(olds.sorted().joined(separator: " and "))")
            }
            if let name = olds.first {
                guard claimed.insert(name).inserted else { return .copy(reason: "the rows of table \(name) would go to two tables") }
                oldTableOf[table.name] = old.table(named: name)!
            }
        }

        var plan = SQLiteMigrationPlan()
        var work: [String] = []          // table work, run after history is dropped
        var drops: [String] = []         // old tables and join tables dropped
        var renames: [(from: String, to: String)] = []
        var partlyEmptied: Set<String> = []   // new tables whose rows of removed entities were deleted

        // History triggers refer to the old columns; history is dropped (docs/MIGRATION.md).
        let historyObjects = try db.query("SELECT type, name FROM sqlite_master WHERE name LIKE 'OGH\\_%' ESCAPE '\\' AND type IN ('table', 'trigger') ORDER BY type DESC")
        for row in historyObjects {
            guard let type = row[0].stringValue, let name = row[1].stringValue else { continue }
            plan.statements.append("DROP \(type == "trigger" ? "TRIGGER" : "TABLE") IF EXISTS \(name)")
        }
        if !historyObjects.isEmpty { plan.changes.append("drop the persistent history (OGH_ tables and triggers); it starts again when the store is next opened with history tracking") }

        for table in new.tables {
            guard let oldTable = oldTableOf[table.name] else {
                let temporary = "_OG_MIGRATING_\(table.name)"
                work.append(SQLiteSchema.createTableSQL(SQLiteSchema.Table(name: temporary, columns: table.columns, rootEntityName: table.rootEntityName)))
                renames.append((temporary, table.name))
                plan.changes.append("create table \(table.name) (new entity \(table.rootEntityName))")
                continue
            }
            let newEntities = new.entitiesByName.values.filter { $0.tableName == table.name }.map(\.entity)
            let oldNumbers = old.entity(named: oldTable.rootEntityName)!.numbersIncludingSubentities
            let kept = oldNumbers.filter { numberMap[$0] != nil }
            let deletesRows = kept.count != oldNumbers.count
            if deletesRows { partlyEmptied.insert(table.name) }

            // The value of each new column, per old entity number.
            var expressions: [String] = []
            for column in table.columns {
                let byEntity: [(Int, String)]
                switch try columnValues(column, in: newEntities, sourceOf: sourceOf, mappingOf: mappingOf, old: old, oldTable: oldTable,
                                        new: new, numberMap: numberMap, oldTableOf: oldTableOf, remapped: remapped) {
                case .failure(let failure): return .copy(reason: failure.reason)
                case .success(let values): byEntity = values
                }
                let distinct = Set(byEntity.map(\.1))
                if distinct.count <= 1 {
                    expressions.append(distinct.first ?? "NULL")
                } else {
                    let cases = byEntity.sorted { $0.0 < $1.0 }.map { "WHEN \($0.0) THEN \($0.1)" }.joined(separator: " ")
                    expressions.append("CASE Z_ENT \(cases) ELSE NULL END")
                }
            }

            // ALTER TABLE when every column is kept by name, renamed, or new with a constant.
            let oldNames = Set(oldTable.columns.map(\.name))
            var consumed: Set<String> = []
            var renamedColumns: [(String, String)] = []
            var added: [(SQLiteSchema.Column, String)] = []
            var alterable = true
            for (column, expression) in zip(table.columns, expressions) {
                if oldNames.contains(column.name) {
                    if expression == column.name { consumed.insert(column.name) } else { alterable = false }
                } else if oldNames.contains(expression) && !table.columns.contains(where: { $0.name == expression }) && !consumed.contains(expression) {
                    consumed.insert(expression)
                    renamedColumns.append((expression, column.name))
                } else if expression == "NULL" || isLiteral(expression) {
                    added.append((column, expression))
                } else {
                    alterable = false
                }
            }
            if alterable && consumed == oldNames {
                let current = table.name == oldTable.name ? table.name : "_OG_MIGRATING_\(table.name)"
                if table.name != oldTable.name {
                    work.append("ALTER TABLE \(oldTable.name) RENAME TO \(current)")
                    renames.append((current, table.name))
                    plan.changes.append("rename table \(oldTable.name) to \(table.name)")
                }
                if deletesRows {
                    work.append("DELETE FROM \(current) WHERE Z_ENT NOT IN (\(kept.map(String.init).joined(separator: ", ")))")
                    plan.changes.append("\(table.name): delete the rows of removed entities")
                }
                for (from, to) in renamedColumns {
                    work.append("ALTER TABLE \(current) RENAME COLUMN \(from) TO \(to)")
                    plan.changes.append("\(table.name): rename column \(from) to \(to)")
                }
                for (column, value) in added {
                    work.append("ALTER TABLE \(current) ADD COLUMN \(column.name) \(column.sqlType)")
                    if value != "NULL" { work.append("UPDATE \(current) SET \(column.name) = \(value)") }
                    plan.changes.append("\(table.name): add column \(column.name) \(column.sqlType)\(value == "NULL" ? "" : " = \(value)")")
                }
                continue
            }
            let temporary = "_OG_MIGRATING_\(table.name)"
            work.append(SQLiteSchema.createTableSQL(SQLiteSchema.Table(name: temporary, columns: table.columns, rootEntityName: table.rootEntityName)))
            let filter = deletesRows ? " WHERE Z_ENT IN (\(kept.map(String.init).joined(separator: ", ")))" : ""
            work.append("INSERT INTO \(temporary) (\(table.columns.map(\.name).joined(separator: ", "))) SELECT \(expressions.joined(separator: ", ")) FROM \(oldTable.name)\(filter)")
            drops.append(oldTable.name)
            renames.append((temporary, table.name))
            let dropped = oldTable.columns.map(\.name).filter { name in !expressions.contains { $0.contains(name) } }
            plan.changes.append("rebuild table \(table.name) from \(oldTable.name)"
                                + (dropped.isEmpty ? "" : ", dropping \(dropped.joined(separator: ", "))")
                                + (deletesRows ? ", without the rows of removed entities" : ""))
        }
        for table in old.tables where !claimed.contains(table.name) {
            drops.append(table.name)
            plan.changes.append("drop table \(table.name) (removed entity \(table.rootEntityName))")
        }

        // 4. Join tables of many-to-many relationships.
        var keptJoins: Set<String> = []
        for join in new.joinTables {
            let relationship = join.relationship
            guard let owner = relationship.entity, let inverse = relationship.inverseRelationship else { continue }
            let rows: (select: String, from: String)?
            if let m = mappingOf[owner.name], let key = m.relationshipMappings.first(where: { $0.name == relationship.name })?.lookedUpSourceRelationship,
               let oldOwner = sourceOf[owner.name], let oldRelationship = oldOwner.relationshipsByName[key] {
                guard let oldJoin = old.joinTable(for: oldRelationship) else {
                    return .copy(reason: "\(owner.name).\(relationship.name) becomes many-to-many (its storage changes)")
                }
                if relationship.isOrdered || inverse.isOrdered || oldRelationship.isOrdered || (oldRelationship.inverseRelationship?.isOrdered ?? false) {
                    return .copy(reason: "\(owner.name).\(relationship.name) is an ordered many-to-many relationship")
                }
                let (oldMine, oldTheirs) = oldJoin.relationship === oldRelationship ? (oldJoin.firstColumn, oldJoin.secondColumn) : (oldJoin.secondColumn, oldJoin.firstColumn)
                let (newMine, newTheirs) = join.relationship === relationship ? (join.firstColumn, join.secondColumn) : (join.secondColumn, join.firstColumn)
                if oldJoin.name == join.name && oldMine == newMine && oldTheirs == newTheirs && oldJoin.orderColumn == nil {
                    keptJoins.insert(oldJoin.name)
                    continue
                }
                rows = ("\(oldMine), \(oldTheirs)", oldJoin.name)
                plan.changes.append("join table \(join.name) from \(oldJoin.name)")
                _ = newMine; _ = newTheirs
                let temporary = "_OG_MIGRATING_\(join.name)"
                work.append(SQLiteSchema.createTableSQL(SQLiteSchema.JoinTable(name: temporary, firstColumn: join.firstColumn, secondColumn: join.secondColumn,
                                                                               orderColumn: join.orderColumn, inverseOrderColumn: join.inverseOrderColumn,
                                                                               relationship: join.relationship)))
                work.append("INSERT INTO \(temporary) (\(newMine), \(newTheirs)) SELECT \(rows!.select) FROM \(rows!.from)")
                renames.append((temporary, join.name))
            } else {
                if relationship.isOrdered || inverse.isOrdered {
                    return .copy(reason: "\(owner.name).\(relationship.name) is an ordered many-to-many relationship")
                }
                // Only the other side may be mapped; look it up from there.
                if let m = mappingOf[inverse.entity?.name ?? ""], m.relationshipMappings.contains(where: { $0.name == inverse.name && $0.lookedUpSourceRelationship != nil }) {
                    return .copy(reason: "\(owner.name).\(relationship.name) is mapped from one side only")
                }
                let temporary = "_OG_MIGRATING_\(join.name)"
                work.append(SQLiteSchema.createTableSQL(SQLiteSchema.JoinTable(name: temporary, firstColumn: join.firstColumn, secondColumn: join.secondColumn,
                                                                               orderColumn: join.orderColumn, inverseOrderColumn: join.inverseOrderColumn,
                                                                               relationship: join.relationship)))
                renames.append((temporary, join.name))
                plan.changes.append("create join table \(join.name) (new relationship \(owner.name).\(relationship.name))")
            }
        }
        for join in old.joinTables where !keptJoins.contains(join.name) {
            drops.append(join.name)
        }

        plan.statements += work
        plan.statements += drops.map { "DROP TABLE \($0)" }
        plan.statements += renames.map { "ALTER TABLE \($0.from) RENAME TO \($0.to)" }

        // 5. References to rows of removed sub-entities become nil.
        for table in new.tables {
            for column in table.columns {
                guard case .foreignKey(let rel) = column.role, let target = rel.destinationEntity,
                      let targetTable = new.entity(named: target.name)?.tableName, partlyEmptied.contains(targetTable) else { continue }
                let related = table.columns.filter {
                    switch $0.role {
                    case .foreignEntity(let r), .foreignOrder(let r): return r === rel
                    default: return false
                    }
                }.map(\.name)
                let sets = ([column.name] + related).map { "\($0) = NULL" }.joined(separator: ", ")
                plan.statements.append("UPDATE \(table.name) SET \(sets) WHERE \(column.name) IS NOT NULL AND \(column.name) NOT IN (SELECT Z_PK FROM \(targetTable))")
            }
            for column in table.columns {
                guard case .hiddenOwner(let rel) = column.role, let owner = rel.entity,
                      let ownerTable = new.entity(named: owner.name)?.tableName, partlyEmptied.contains(ownerTable) else { continue }
                plan.statements.append("UPDATE \(table.name) SET \(column.name) = NULL WHERE \(column.name) NOT IN (SELECT Z_PK FROM \(ownerTable))")
            }
        }
        for join in new.joinTables {
            guard let owner = join.relationship.entity, let target = join.relationship.destinationEntity,
                  let ownerTable = new.entity(named: owner.name)?.tableName, let targetTable = new.entity(named: target.name)?.tableName,
                  partlyEmptied.contains(ownerTable) || partlyEmptied.contains(targetTable) else { continue }
            let (mine, theirs) = (join.firstColumn, join.secondColumn)
            plan.statements.append("DELETE FROM \(join.name) WHERE \(mine) NOT IN (SELECT Z_PK FROM \(ownerTable)) OR \(theirs) NOT IN (SELECT Z_PK FROM \(targetTable))")
        }

        // 6. Indexes: exactly the destination's.
        let wantedIndexes = Dictionary(new.indexes.map { ($0.name, $0.sql) }, uniquingKeysWith: { a, _ in a })
        plan.statements.append(contentsOf: [SQLiteMigrationPlan.dropIndexesMarker])
        for index in new.indexes { plan.statements.append(index.sql.replacingOccurrences(of: "CREATE INDEX ", with: "CREATE INDEX IF NOT EXISTS ")) }
        plan.wantedIndexes = wantedIndexes
        plan.modelTables = Set(new.tables.map(\.name) + new.joinTables.map(\.name))
        var existingIndexes: [String: String] = [:]
        for row in try db.query("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL") {
            if let name = row[0].stringValue, let sql = row[1].stringValue { existingIndexes[name] = sql }
        }
        for name in existingIndexes.keys.sorted() where wantedIndexes[name] == nil && (old.indexes.contains { $0.name == name }) {
            plan.changes.append("drop index \(name)")
        }
        for index in new.indexes where existingIndexes[index.name] == nil {
            plan.changes.append("create index \(index.name) ON \(index.tableName)")
        }

        // 7. Entity numbers and key counters, metadata, the cached model.
        plan.statements.append("DELETE FROM Z_PRIMARYKEY")
        for name in new.entityNames {
            let e = new.entity(named: name)!
            let carried = sourceOf[name].flatMap { fileMax[$0.name] } ?? 0
            plan.statements.append("INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (\(e.number), \(sqlLiteral(.text(name))), \(e.superNumber), \(carried))")
        }
        for table in new.tables {
            let root = new.entity(named: table.rootEntityName)!
            plan.statements.append("UPDATE Z_PRIMARYKEY SET Z_MAX = max(Z_MAX, (SELECT coalesce(max(Z_PK), 0) FROM \(table.name))) WHERE Z_ENT = \(root.number)")
        }
        let renumbered = numberMap.filter { $0.key != $0.value }
        if !renumbered.isEmpty {
            plan.changes.append("renumber entities: " + renumbered.sorted { $0.key < $1.key }.map { "\($0.key)→\($0.value)" }.joined(separator: ", "))
        }
        if plan.changes.isEmpty { plan.changes.append("no table changes; version hashes, metadata and the cached model are updated") }
        return .inPlace(plan)
    }

    /// Replaced, when the plan runs, by `DROP INDEX` for every index on the
    /// model's tables that the destination does not define the same way.
    static let dropIndexesMarker = "-- drop indexes the destination does not have"
    var wantedIndexes: [String: String] = [:]
    var modelTables: Set<String> = []

    /// The value a new table column takes for each old entity number.
    // swiftlint:disable:next function_parameter_count cyclomatic_complexity
    private static func columnValues(_ column: SQLiteSchema.Column, in entities: [EntityDescription], sourceOf: [String: EntityDescription],
                                     mappingOf: [String: EntityMapping], old: SQLiteSchema, oldTable: SQLiteSchema.Table,
                                     new: SQLiteSchema, numberMap: [Int: Int], oldTableOf: [String: SQLiteSchema.Table],
                                     remapped: (String) -> String) throws -> Result<[(Int, String)], Failure> {
        var out: [(Int, String)] = []
        func fail(_ reason: String) -> Result<[(Int, String)], Failure> { .failure(Failure(reason: reason)) }
        switch column.role {
        case .primaryKey: return .success([(0, "Z_PK")])
        case .optimisticLock: return .success([(0, "Z_OPT")])
        case .entity: return .success([(0, remapped("Z_ENT"))])
        default: break
        }
        for entity in entities {
            guard let source = sourceOf[entity.name], let m = mappingOf[entity.name] else { continue }
            let oldEntity = old.entity(named: source.name)!
            let number = oldEntity.number
            switch column.role {
            case .attribute(let attribute):
                guard entity.properties.contains(where: { $0 === attribute }) else { continue }
                guard let key = m.attributeMappings.first(where: { $0.name == attribute.name })?.copiedSourceKey else {
                    // New (or emptied) attribute: its default, as a new instance gets.
                    if attribute.defaultValue != nil && attribute.allowsExternalBinaryDataStorage {
                        return fail("\(entity.name).\(attribute.name) has a default value stored externally")
                    }
                    out.append((number, try attribute.defaultValue.map { sqlLiteral(try SQLiteValueCodec.encode($0, for: attribute)) } ?? "NULL"))
                    continue
                }
                let oldAttribute = source.attributesByName[key]!
                guard let oldColumn = oldEntity.columnsByProperty[key] else { return fail("\(source.name).\(key) has no column") }
                if oldAttribute.allowsExternalBinaryDataStorage != attribute.allowsExternalBinaryDataStorage {
                    return fail("\(entity.name).\(attribute.name) switches external binary storage")
                }
                if oldAttribute.attributeType == .transformable || attribute.attributeType == .transformable,
                   oldAttribute.attributeType != attribute.attributeType || oldAttribute.valueTransformerName != attribute.valueTransformerName {
                    return fail("\(entity.name).\(attribute.name) changes its value transformer")
                }
                if !attribute.isOptional, let value = attribute.defaultValue, oldAttribute.isOptional {
                    out.append((number, "coalesce(\(oldColumn), \(sqlLiteral(try SQLiteValueCodec.encode(value, for: attribute))))"))
                } else if SQLiteSchema.sqlType(for: oldAttribute.attributeType) != SQLiteSchema.sqlType(for: attribute.attributeType) {
                    out.append((number, "CAST(\(oldColumn) AS \(column.sqlType == "FLOAT" ? "REAL" : "NUMERIC"))"))
                } else {
                    out.append((number, oldColumn))
                }
            case .foreignKey(let relationship), .foreignEntity(let relationship), .foreignOrder(let relationship):
                guard entity.properties.contains(where: { $0 === relationship }) else { continue }
                guard let key = m.relationshipMappings.first(where: { $0.name == relationship.name })?.lookedUpSourceRelationship else {
                    out.append((number, "NULL"))
                    continue
                }
                let oldRelationship = source.relationshipsByName[key]!
                guard !oldRelationship.isToMany, let foreignKey = oldEntity.columnsByProperty[key] else {
                    return fail("\(entity.name).\(relationship.name) was to-many and is to-one now (its storage changes)")
                }
                guard let oldTarget = oldRelationship.destinationEntity, let newTarget = relationship.destinationEntity,
                      let newTargetTable = new.entity(named: newTarget.name)?.tableName,
                      oldTableOf[newTargetTable]?.name == old.entity(named: oldTarget.name)?.tableName else {
                    return fail("\(entity.name).\(relationship.name) points at rows that change tables")
                }
                switch column.role {
                case .foreignKey:
                    out.append((number, foreignKey))
                case .foreignEntity:
                    if let entityColumn = oldEntity.entityColumnsByRelationship[key] {
                        out.append((number, remapped(entityColumn)))
                    } else if let target = new.entity(named: newTarget.name), oldTarget.subentities.isEmpty {
                        // The old destination had no sub-entities, so every key names one of its rows.
                        let targetNumber = numberMap[old.entity(named: oldTarget.name)!.number] ?? target.number
                        out.append((number, "CASE WHEN \(foreignKey) IS NULL THEN NULL ELSE \(targetNumber) END"))
                    } else {
                        return fail("\(entity.name).\(relationship.name) needs the entity of each related row")
                    }
                default:
                    if let inverse = oldRelationship.inverseRelationship, inverse.isOrdered,
                       let order = oldTable.columns.first(where: { if case .foreignOrder(let r) = $0.role { return r === oldRelationship } else { return false } }) {
                        out.append((number, order.name))
                    } else {
                        out.append((number, "CASE WHEN \(foreignKey) IS NULL THEN NULL ELSE ROW_NUMBER() OVER (PARTITION BY \(foreignKey) ORDER BY Z_PK) END"))
                    }
                }
            default:
                break
            }
        }
        if case .hiddenOwner(let relationship) = column.role {
            guard let owner = relationship.entity, let source = sourceOf[owner.name], let m = mappingOf[owner.name],
                  let key = m.relationshipMappings.first(where: { $0.name == relationship.name })?.lookedUpSourceRelationship else {
                return .success([(0, "NULL")])
            }
            guard let hidden = old.hiddenOwnerColumns["\(source.name).\(key)"], hidden.table == oldTable.name else {
                return fail("\(owner.name).\(relationship.name) changes how it is stored")
            }
            return .success([(0, hidden.column)])
        }
        return .success(out)
    }

    struct Failure: Error { let reason: String }

    /// An SQL literal for a stored value.
    static func sqlLiteral(_ value: SQLiteValue) -> String {
        switch value {
        case .null: return "NULL"
        case .integer(let v): return String(v)
        case .real(let v): return v.isFinite ? "\(v)" : (v > 0 ? "9e999" : (v < 0 ? "-9e999" : "NULL"))
        case .text(let s): return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let d): return "X'" + d.map { String(format: "%02X", $0) }.joined() + "'"
        }
    }

    /// True for what `sqlLiteral` writes.
    static func isLiteral(_ sql: String) -> Bool {
        if sql == "NULL" || sql.hasPrefix("'") || sql.hasPrefix("X'") { return true }
        return Double(sql) != nil || sql == "9e999" || sql == "-9e999"
    }
}
