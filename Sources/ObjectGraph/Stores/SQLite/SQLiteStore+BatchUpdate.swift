import Foundation

/// `BatchUpdateRequest` in SQL: one UPDATE of the matching rows' columns
/// and versions, recorded in history as one save (BU-01, BU-02).
extension SQLiteStore {
    func executeBatchUpdate(_ request: BatchUpdateRequest, author: String?, contextName: String?) throws -> (count: Int, ids: [ManagedObjectID]) {
        lock.lock(); defer { lock.unlock() }
        try ensureWritable("batch update")
        let (db, schema) = try openConnection()
        let fetch = AnyFetchRequest(entityName: request.entityName)
        fetch.predicate = request.predicate
        fetch.includesSubentities = request.includesSubentities
        let mapping = try fetchMapping(fetch, schema)
        var assignments: [String] = [], values: [SQLiteValue] = []
        for (name, value) in request.propertiesToUpdate.sorted(by: { $0.key < $1.key }) {
            guard let attribute = mapping.entity.attributesByName[name], !attribute.isTransient, let column = mapping.columnsByProperty[name] else {
                throw CoreDataError(.persistentStoreOperation, "a batch update can set stored attributes of \(mapping.entity.name) only, not '\(name)'",
                                    userInfo: [CoreDataError.entityNameErrorKey: mapping.entity.name])
            }
            assignments.append(column)
            values.append(try SQLiteValueCodec.encode(value.flatMap { $0 is NSNull ? nil : $0 }, for: attribute))
        }
        guard !assignments.isEmpty else {
            throw CoreDataError(.persistentStoreOperation, "a batch update of \(mapping.entity.name) names no attribute to set (propertiesToUpdate is empty)")
        }
        var compiler = SQLitePredicateCompiler(schema: schema, storeIdentifier: identifier)
        guard let base = baseQuery(fetch, mapping, schema, &compiler) else {
            throw CoreDataError(.persistentStoreOperation, "a batch update's predicate must be one SQL can evaluate exactly: \(request.predicate?.predicateFormat ?? "")")
        }
        let keys = "SELECT t0.Z_PK FROM \(base.table) t0\(compiler.joins.map { " " + $0 }.joined()) WHERE \(base.filter)"
        return try wrapSaveErrors {
            try db.transaction {
                var save = StoreSaveRequest()
                save.transactionAuthor = author
                save.contextName = contextName
                let historyTransaction = try beginHistoryTransaction(save, db: db)
                var ids: [ManagedObjectID] = []
                if request.resultType == .updatedObjectIDs {
                    try db.prepareUncached("SELECT t0.Z_ENT, t0.Z_PK FROM \(base.table) t0\(compiler.joins.map { " " + $0 }.joined()) WHERE \(base.filter)")
                        .forEachRow(compiler.allBindings) { row in
                            guard let number = row.column(0).int64Value, let pk = row.column(1).int64Value,
                                  let entity = schema.entity(numbered: Int(number))?.entity else { return }
                            let id = ManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: pk)
                            id.persistentStore = self
                            ids.append(id)
                        }
                }
                // The compiler numbers its parameters (?1, ?2, …); the new
                // values are numbered after them.
                let first = compiler.allBindings.count + 1
                let sets = assignments.enumerated().map { "\($0.element) = ?\(first + $0.offset)" }
                try db.prepareUncached("UPDATE \(base.table) SET \(sets.joined(separator: ", ")), Z_OPT = Z_OPT + 1 WHERE Z_PK IN (\(keys))")
                    .forEachRow(compiler.allBindings + values) { _ in }
                let count = db.changes
                try endHistoryTransaction(historyTransaction, db: db)
                return (count, ids)
            }
        }
    }
}
