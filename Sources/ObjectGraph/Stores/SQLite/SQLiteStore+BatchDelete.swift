import Foundation

/// `BatchDeleteRequest` in SQL: the rows to delete are gathered in a
/// temporary table, the delete rules are applied to them in SQL (cascade
/// adds rows, deny refuses, references to deleted rows are cleared), then
/// every table's rows are deleted with one statement each, inside one
/// transaction recorded in persistent history as one save (BD-01…04).
/// No managed object is made; contexts learn of the deletes only when
/// told (`mergeChanges(fromRemoteContextSave:into:)`).
extension SQLiteStore {
    /// What a batch delete did: the objects the request matched, and every
    /// object deleted (those plus what cascading deletes reached); nil when
    /// one statement deleted them without listing them.
    struct BatchDeleteOutcome {
        var matched: Int
        var deleted: [ManagedObjectID]?
    }

    func executeBatchDelete(_ request: BatchDeleteRequest, author: String?, contextName: String?) throws -> BatchDeleteOutcome {
        lock.lock(); defer { lock.unlock() }
        try ensureWritable("batch delete")
        let (db, schema) = try openConnection()
        return try wrapSaveErrors {
            try db.transaction {
                try db.run("CREATE TEMP TABLE IF NOT EXISTS OG_BATCH (ENT INTEGER NOT NULL, PK INTEGER NOT NULL, PRIMARY KEY (ENT, PK)) WITHOUT ROWID")
                try db.run("DELETE FROM OG_BATCH")
                defer { try? db.run("DELETE FROM OG_BATCH") }
                var save = StoreSaveRequest()
                save.transactionAuthor = author
                save.contextName = contextName
                let historyTransaction = try beginHistoryTransaction(save, db: db)

                if let matched = try deleteDirectly(request, schema: schema, db: db) {
                    try endHistoryTransaction(historyTransaction, db: db)
                    return BatchDeleteOutcome(matched: matched, deleted: nil)
                }
                let matched = try gatherRows(request, schema: schema, db: db)
                try cascade(schema: schema, db: db)
                try checkDeny(schema: schema, db: db)
                let deleted = try deletedIDs(schema: schema, db: db)
                try clearReferences(schema: schema, db: db)
                try deleteRows(schema: schema, db: db)
                try endHistoryTransaction(historyTransaction, db: db)
                return BatchDeleteOutcome(matched: matched, deleted: deleted)
            }
        }
    }

    /// One DELETE of the matching rows, when nothing else needs their keys:
    /// no relationship leaves from or points to the entity, the predicate
    /// compiles to SQL without joins, no limit, and no IDs are asked for.
    /// Nil when the general path is needed.
    private func deleteDirectly(_ request: BatchDeleteRequest, schema: SQLiteSchema, db: SQLiteConnection) throws -> Int? {
        let fetch = request.fetchRequest
        guard request.objectIDs == nil, request.resultType != .objectIDs, fetch.fetchLimit == 0, fetch.fetchOffset == 0 else { return nil }
        let mapping = try fetchMapping(fetch, schema)
        let family = Set(mapping.numbersIncludingSubentities)
        for other in schema.entitiesByName.values {
            for rel in other.entity.relationshipsByName.values {
                if family.contains(other.number) { return nil }
                if let destination = rel.destinationEntity, let target = schema.entity(named: destination.name),
                   !family.isDisjoint(with: target.numbersIncludingSubentities) { return nil }
            }
        }
        var compiler = SQLitePredicateCompiler(schema: schema, storeIdentifier: identifier)
        guard let base = baseQuery(fetch, mapping, schema, &compiler), compiler.joins.isEmpty else { return nil }
        // The compiler names the table t0; a DELETE cannot alias it.
        try db.prepareUncached("DELETE FROM \(base.table) AS t0 WHERE \(base.filter)").forEachRow(compiler.allBindings) { _ in }
        return db.changes
    }

    /// The rows the request names, into OG_BATCH; how many.
    private func gatherRows(_ request: BatchDeleteRequest, schema: SQLiteSchema, db: SQLiteConnection) throws -> Int {
        if let ids = request.objectIDs {
            let entities = Set(ids.map(\.entity.name))
            guard entities.count <= 1 else {
                throw CoreDataError(.persistentStoreOperation, "a batch delete by object IDs needs IDs of one entity, not of \(entities.sorted().joined(separator: ", "))")
            }
            try insertKeys(of: ids.filter { $0.persistentStore === self || $0.storeIdentifier == identifier }, schema: schema, db: db)
            return try count(db)
        }
        let fetch = request.fetchRequest
        let mapping = try fetchMapping(fetch, schema)
        var compiler = SQLitePredicateCompiler(schema: schema, storeIdentifier: identifier)
        if fetch.fetchLimit == 0 && fetch.fetchOffset == 0, let base = baseQuery(fetch, mapping, schema, &compiler) {
            try db.prepareUncached("INSERT INTO OG_BATCH (ENT, PK) SELECT t0.Z_ENT, t0.Z_PK FROM \(base.table) t0\(compiler.joins.map { " " + $0 }.joined()) WHERE \(base.filter)")
                .forEachRow(compiler.allBindings) { _ in }
        } else {
            // A predicate SQL cannot express exactly, or a limit: the rows
            // are read as snapshots (never as objects) and filtered here.
            try insertKeys(of: try finishedSnapshots(fetch).map(\.objectID), schema: schema, db: db)
        }
        return try count(db)
    }

    private func insertKeys(of ids: [ManagedObjectID], schema: SQLiteSchema, db: SQLiteConnection) throws {
        let insert = try db.prepare("INSERT OR IGNORE INTO OG_BATCH (ENT, PK) VALUES (?, ?)")
        for id in ids {
            guard let pk = id.primaryKey, let mapping = schema.entity(named: id.entity.name) else { continue }
            insert.reset()
            try insert.bind(.integer(Int64(mapping.number)), at: 1)
            try insert.bind(.integer(pk), at: 2)
            _ = try insert.step()
        }
    }

    private func count(_ db: SQLiteConnection) throws -> Int {
        Int(try db.query("SELECT count(*) FROM OG_BATCH").first?.first?.int64Value ?? 0)
    }

    private func entityNumbersInBatch(_ db: SQLiteConnection) throws -> [Int] {
        try db.query("SELECT DISTINCT ENT FROM OG_BATCH").compactMap { $0.first?.int64Value.map(Int.init) }
    }

    private func list(_ numbers: [Int]) -> String { numbers.map(String.init).joined(separator: ", ") }

    /// SQL selecting `(ENT, PK)` of the destinations through `rel` of the
    /// batch's rows of entity number `source`; nil when the relationship is
    /// not stored in a way this store knows.
    private func destinationsSQL(_ rel: RelationshipDescription, source: SQLiteSchema.EntityMapping, schema: SQLiteSchema) -> String? {
        guard let destination = rel.destinationEntity, let target = schema.entity(named: destination.name) else { return nil }
        let targets = list(target.numbersIncludingSubentities)
        let sources = "SELECT PK FROM OG_BATCH WHERE ENT = \(source.number)"
        if !rel.isToMany {
            guard let column = source.columnsByProperty[rel.name] else { return nil }
            let ent = source.entityColumnsByRelationship[rel.name].map { "t.\($0)" } ?? "\(target.number)"
            return "SELECT \(ent) AS ENT, t.\(column) AS PK FROM \(source.tableName) t WHERE t.Z_ENT = \(source.number) AND t.Z_PK IN (\(sources)) AND t.\(column) IS NOT NULL"
        }
        if let inverse = rel.inverseRelationship, !inverse.isToMany {
            guard let column = target.columnsByProperty[inverse.name] else { return nil }
            return "SELECT d.Z_ENT AS ENT, d.Z_PK AS PK FROM \(target.tableName) d WHERE d.Z_ENT IN (\(targets)) AND d.\(column) IN (\(sources))"
        }
        if let join = schema.joinTable(for: rel) {
            let (ours, theirs) = join.relationship === rel ? (join.firstColumn, join.secondColumn) : (join.secondColumn, join.firstColumn)
            return "SELECT d.Z_ENT AS ENT, d.Z_PK AS PK FROM \(target.tableName) d WHERE d.Z_ENT IN (\(targets)) AND d.Z_PK IN (SELECT j.\(theirs) FROM \(join.name) j WHERE j.\(ours) IN (\(sources)))"
        }
        if let hidden = hiddenOwnerColumn(rel, source: source, schema: schema) {
            return "SELECT d.Z_ENT AS ENT, d.Z_PK AS PK FROM \(hidden.table) d WHERE d.Z_ENT IN (\(targets)) AND d.\(hidden.column) IN (\(sources))"
        }
        return nil
    }

    /// The destination table's column that keeps a to-many relationship
    /// without an inverse, by the entity that declares it.
    private func hiddenOwnerColumn(_ rel: RelationshipDescription, source: SQLiteSchema.EntityMapping, schema: SQLiteSchema) -> (table: String, column: String)? {
        var entity: EntityDescription? = source.entity
        while let current = entity {
            if let hidden = schema.hiddenOwnerColumns["\(current.name).\(rel.name)"] { return hidden }
            entity = current.superentity
        }
        return nil
    }

    /// Adds what cascade rules reach, until nothing new is added.
    private func cascade(schema: SQLiteSchema, db: SQLiteConnection) throws {
        while true {
            var added = 0
            for number in try entityNumbersInBatch(db) {
                guard let mapping = schema.entity(numbered: number) else { continue }
                for rel in mapping.entity.relationshipsByName.values.sorted(by: { $0.name < $1.name }) where rel.deleteRule == .cascade {
                    guard let select = destinationsSQL(rel, source: mapping, schema: schema) else { continue }
                    try db.run("INSERT OR IGNORE INTO OG_BATCH (ENT, PK) \(select)")
                    added += db.changes
                }
            }
            if added == 0 { return }
        }
    }

    /// A deny rule with a destination that is not deleted too refuses the
    /// whole batch (1600, as a context's save would).
    private func checkDeny(schema: SQLiteSchema, db: SQLiteConnection) throws {
        for number in try entityNumbersInBatch(db) {
            guard let mapping = schema.entity(numbered: number) else { continue }
            for rel in mapping.entity.relationshipsByName.values.sorted(by: { $0.name < $1.name }) where rel.deleteRule == .deny {
                guard let select = destinationsSQL(rel, source: mapping, schema: schema) else { continue }
                let left = try db.query("SELECT 1 FROM (\(select)) x WHERE NOT EXISTS (SELECT 1 FROM OG_BATCH b WHERE b.ENT = x.ENT AND b.PK = x.PK) LIMIT 1")
                if !left.isEmpty {
                    throw CoreDataError(.validationRelationshipDeniedDelete,
                                        "Cannot batch delete \(mapping.entity.name) objects: the Deny relationship '\(rel.name)' still has destinations that are not deleted",
                                        userInfo: [CoreDataError.validationKeyErrorKey: rel.name])
                }
            }
        }
    }

    private func deletedIDs(schema: SQLiteSchema, db: SQLiteConnection) throws -> [ManagedObjectID] {
        var ids: [ManagedObjectID] = []
        try db.prepare("SELECT ENT, PK FROM OG_BATCH ORDER BY ENT, PK").forEachRow([]) { row in
            guard let number = row.column(0).int64Value, let pk = row.column(1).int64Value,
                  let mapping = schema.entity(numbered: Int(number)) else { return }
            let id = ManagedObjectID(entity: mapping.entity, storeIdentifier: identifier, primaryKey: pk)
            id.persistentStore = self
            ids.append(id)
        }
        return ids
    }

    /// No row that stays keeps a reference to a deleted one: to-one keys are
    /// cleared (and the row's version moved, so a context holding it sees a
    /// conflict rather than overwriting), join rows and hidden owner keys go.
    private func clearReferences(schema: SQLiteSchema, db: SQLiteConnection) throws {
        let batchNumbers = Set(try entityNumbersInBatch(db))
        func deletedKeys(_ numbers: [Int]) -> String { "SELECT PK FROM OG_BATCH WHERE ENT IN (\(list(numbers)))" }
        for mapping in schema.entitiesByName.values.sorted(by: { $0.number < $1.number }) {
            for rel in mapping.entity.relationshipsByName.values.sorted(by: { $0.name < $1.name }) {
                guard rel.entity === mapping.entity, let destination = rel.destinationEntity,
                      let target = schema.entity(named: destination.name) else { continue }
                let targets = target.numbersIncludingSubentities.filter(batchNumbers.contains)
                if !rel.isToMany {
                    guard !targets.isEmpty, let column = mapping.columnsByProperty[rel.name] else { continue }
                    let entityColumn = mapping.entityColumnsByRelationship[rel.name].map { ", \($0) = NULL" } ?? ""
                    try db.run("""
                        UPDATE \(mapping.tableName) SET \(column) = NULL\(entityColumn), Z_OPT = Z_OPT + 1
                        WHERE Z_ENT IN (\(list(mapping.numbersIncludingSubentities))) AND \(column) IN (\(deletedKeys(targets)))
                        AND NOT EXISTS (SELECT 1 FROM OG_BATCH b WHERE b.ENT = \(mapping.tableName).Z_ENT AND b.PK = \(mapping.tableName).Z_PK)
                        """)
                } else if rel.inverseRelationship == nil, let hidden = hiddenOwnerColumn(rel, source: mapping, schema: schema) {
                    let owners = mapping.numbersIncludingSubentities.filter(batchNumbers.contains)
                    guard !owners.isEmpty else { continue }
                    try db.run("UPDATE \(hidden.table) SET \(hidden.column) = NULL WHERE \(hidden.column) IN (\(deletedKeys(owners)))")
                }
            }
        }
        for join in schema.joinTables {
            let rel = join.relationship
            guard let source = rel.entity.flatMap({ schema.entity(named: $0.name) }),
                  let target = rel.destinationEntity.flatMap({ schema.entity(named: $0.name) }) else { continue }
            let sources = source.numbersIncludingSubentities.filter(batchNumbers.contains)
            let targets = target.numbersIncludingSubentities.filter(batchNumbers.contains)
            if !sources.isEmpty { try db.run("DELETE FROM \(join.name) WHERE \(join.firstColumn) IN (\(deletedKeys(sources)))") }
            if !targets.isEmpty { try db.run("DELETE FROM \(join.name) WHERE \(join.secondColumn) IN (\(deletedKeys(targets)))") }
        }
    }

    /// One DELETE per table that has rows in the batch.
    private func deleteRows(schema: SQLiteSchema, db: SQLiteConnection) throws {
        let batchNumbers = Set(try entityNumbersInBatch(db))
        var byTable: [String: [Int]] = [:]
        for mapping in schema.entitiesByName.values where batchNumbers.contains(mapping.number) {
            byTable[mapping.tableName, default: []].append(mapping.number)
        }
        for (table, numbers) in byTable.sorted(by: { $0.key < $1.key }) {
            try db.run("DELETE FROM \(table) WHERE Z_ENT IN (\(list(numbers))) AND Z_PK IN (SELECT PK FROM OG_BATCH WHERE ENT IN (\(list(numbers))))")
        }
    }
}
