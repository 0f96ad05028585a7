import Foundation

/// Count and dictionary fetches in SQL (`SELECT COUNT(*)`, column lists,
/// aggregates, `GROUP BY`, `HAVING`, distinct rows, `ORDER BY`, `LIMIT`).
/// Each answers exactly what the context computes from objects
/// (`ManagedObjectContext.dictionaryRows`), or returns nil so it does:
///
/// - Values are decoded through `SQLiteValueCodec` to the attribute's Swift
///   type, aggregates coerced through `ExpressionResultType.coerce`.
/// - Strings group, compare distinct and take their min/max through the
///   `OGSTRING` collation (Swift's `==` and `<`: "Zoë" precomposed and
///   decomposed are one value), as hashing the Swift values does.
/// - Groups and distinct rows come in the order they first appear in the
///   sorted rows: `ROW_NUMBER() OVER (ORDER BY …)` in a subquery, then
///   `ORDER BY MIN(og_rn)`.
/// - `sum:` of no values is 0 (`coalesce`), `average:`/`min:`/`max:` nil,
///   `count:` counts non-nil values; `average:` of integers is a Double.
/// - Declined: predicates or sort descriptors the compiler cannot translate
///   exactly, decimal and transformable values in groups, distinct rows or
///   aggregates, min/max of booleans, sum/average of non-numbers (the
///   in-memory path throws), a `HAVING` naming a column whose coercion
///   changes its value, distinct rows with aggregates.
extension SQLiteStore {
    func sqlCount(_ request: AnyFetchRequest) throws -> Int? {
        lock.lock(); defer { lock.unlock() }
        let (db, schema) = try openConnection()
        let mapping = try fetchMapping(request, schema)
        var compiler = SQLitePredicateCompiler(schema: schema, storeIdentifier: identifier)
        guard let base = baseQuery(request, mapping, schema, &compiler) else { return nil }
        let sql = "SELECT COUNT(*) FROM \(base.table) t0\(compiler.joins.map { " " + $0 }.joined()) WHERE \(base.filter)"
        var total = 0
        try db.prepareUncached(sql).forEachRow(compiler.allBindings) { row in total = Int(row.column(0).int64Value ?? 0) }
        let remaining = max(0, total - max(0, request.fetchOffset))
        return request.fetchLimit > 0 ? min(remaining, request.fetchLimit) : remaining
    }

    func sqlDictionaries(_ request: AnyFetchRequest) throws -> [[String: Any]]? {
        lock.lock(); defer { lock.unlock() }
        let (db, schema) = try openConnection()
        let mapping = try fetchMapping(request, schema)
        let plan = try DictionaryFetchPlan(request, entity: mapping.entity)
        if plan.distinct && (plan.hasAggregates || plan.columns.isEmpty) { return nil }
        let collapses = plan.isGrouped || plan.distinct

        var compiler = SQLitePredicateCompiler(schema: schema, storeIdentifier: identifier)
        guard let base = baseQuery(request, mapping, schema, &compiler) else { return nil }
        var order = ["t0.Z_PK"]
        if !request.sortDescriptors.isEmpty {
            guard let terms = compiler.orderBy(request.sortDescriptors, for: mapping) else { return nil }
            order = terms
        }

        // One selected value per distinct key path: v0, v1, … (e0 … for to-one entity numbers).
        var values: [String: (index: Int, selected: SQLitePredicateCompiler.Selected)] = [:]
        var select: [String] = []
        func value(_ path: DictionaryFetchPlan.Path) -> (index: Int, selected: SQLitePredicateCompiler.Selected)? {
            if let known = values[path.keyPath] { return known }
            guard !path.target.isTransient, let selected = compiler.select(path.keys, for: mapping) else { return nil }
            let index = values.count
            switch selected {
            case let .attribute(sql, _): select.append("\(sql) AS v\(index)")
            case let .toOne(sql, entitySQL, _): select.append("\(sql) AS v\(index), \(entitySQL ?? "NULL") AS e\(index)")
            }
            values[path.keyPath] = (index, selected)
            return (index, selected)
        }

        var outputs: [String] = []
        var decoders: [(DictionaryFetchPlan.Column, Decoder)] = []
        var havingOutputs: [String: SQLitePredicateCompiler.HavingOperand] = [:]
        for column in plan.columns {
            guard let (index, selected) = value(column.path) else { return nil }
            if let aggregate = column.aggregate {
                guard let (sql, decoder, natural) = Self.aggregateSQL(aggregate, "v\(index)", selected) else { return nil }
                decoders.append((column, decoder))
                outputs.append(sql)
                if let natural, column.resultType == .undefined || column.resultType == natural.attributeType {
                    havingOutputs[column.name] = .column(sql: sql, natural)
                }
                continue
            }
            // Grouping and distinct compare stored values: only where that is the Swift values' equality.
            if collapses {
                if case let .attribute(_, attribute) = selected, !Self.comparesExactly(attribute.attributeType) { return nil }
                if let type = column.resultType, !Self.keepsValues(type, selected) { return nil }
            }
            switch selected {
            case let .attribute(_, attribute):
                outputs.append("v\(index)")
                decoders.append((column, .attribute(attribute)))
                if column.resultType == nil || Self.keepsValues(column.resultType!, selected) {
                    havingOutputs[column.name] = .column(sql: "v\(index)", attribute)
                }
            case let .toOne(_, _, rel):
                outputs.append("v\(index)")
                outputs.append("e\(index)")
                decoders.append((column, .toOne(rel)))
                havingOutputs[column.name] = .foreignKey(sql: "v\(index)", rel)
            }
        }
        var groupTerms: [String] = []
        if plan.distinct || !plan.groupBy.isEmpty {
            let keys = plan.distinct ? plan.columns.map(\.path) : plan.groupBy
            for path in keys {
                guard let (index, selected) = value(path) else { return nil }
                switch selected {
                case let .attribute(_, attribute):
                    guard Self.comparesExactly(attribute.attributeType) else { return nil }
                    groupTerms.append(attribute.attributeType == .string ? "v\(index) COLLATE \(SQLitePredicateCompiler.collation)" : "v\(index)")
                case .toOne:
                    groupTerms.append("v\(index)")
                }
            }
        }
        var having = ""
        if let predicate = plan.having {
            guard let condition = compiler.compileHaving(predicate, outputs: havingOutputs, for: mapping) else { return nil }
            having = " HAVING \(condition)"
        }

        let from = "\(base.table) t0\(compiler.joins.map { " " + $0 }.joined()) WHERE \(base.filter)"
        var sql: String
        if collapses {
            let inner = "SELECT \((select + ["ROW_NUMBER() OVER (ORDER BY \(order.joined(separator: ", "))) AS og_rn"]).joined(separator: ", ")) FROM \(from)"
            let groupBy = groupTerms.isEmpty ? "" : " GROUP BY \(groupTerms.joined(separator: ", "))"
            sql = "SELECT \(outputs.isEmpty ? "1" : outputs.joined(separator: ", ")) FROM (\(inner))\(groupBy)\(having) ORDER BY MIN(og_rn)"
        } else {
            // One row per object: each column's own expression, in column order.
            var plain: [String] = []
            for column in plan.columns {
                switch values[column.path.keyPath]!.selected {
                case let .attribute(sql, _): plain.append(sql)
                case let .toOne(sql, entitySQL, _): plain += [sql, entitySQL ?? "NULL"]
                }
            }
            sql = "SELECT \(plain.isEmpty ? "1" : plain.joined(separator: ", ")) FROM \(from) ORDER BY \(order.joined(separator: ", "))"
        }
        var bindings = compiler.allBindings
        if request.fetchLimit > 0 || request.fetchOffset > 0 {
            sql += " LIMIT ?\(bindings.count + 1) OFFSET ?\(bindings.count + 2)"
            bindings += [.integer(request.fetchLimit > 0 ? Int64(request.fetchLimit) : -1), .integer(Int64(max(0, request.fetchOffset)))]
        }
        return try readRows(db, sql, bindings, decoders)
    }

    /// How one result column is read back.
    enum Decoder {
        case attribute(AttributeDescription)
        case toOne(RelationshipDescription)
        /// An aggregate's raw value: integers as `Int`, reals as `Double`,
        /// or min/max of an attribute decoded then normalised as
        /// `FetchFunction.extreme` returns values.
        case aggregate(AttributeDescription?)
    }

    /// Decodes rows whose columns are the decoders' in order (a to-one
    /// takes two: key and entity number).
    private func readRows(_ db: SQLiteConnection, _ sql: String, _ bindings: [SQLiteValue],
                          _ decoders: [(DictionaryFetchPlan.Column, Decoder)]) throws -> [[String: Any]] {
        var rows: [[String: Any]] = []
        let storeID = identifier
        try db.prepareUncached(sql).forEachRow(bindings) { row in
            var result: [String: Any] = [:]
            var position = 0
            for (column, decoder) in decoders {
                let raw: Any?
                switch decoder {
                case let .attribute(attribute):
                    raw = try SQLiteValueCodec.decode(row.column(position), for: attribute)
                    position += 1
                case let .toOne(rel):
                    raw = toOneID(row.column(position), row.column(position + 1), rel, storeID)
                    position += 2
                case let .aggregate(attribute):
                    let stored = row.column(position)
                    position += 1
                    if let attribute {
                        raw = Scalar(any: try SQLiteValueCodec.decode(stored, for: attribute)).anyValue
                    } else {
                        switch stored {
                        case let .integer(n): raw = Int(exactly: n) ?? n
                        case let .real(d): raw = d
                        default: raw = nil
                        }
                    }
                }
                if let value = try column.finish(raw) { result[column.name] = value }
            }
            rows.append(result)
        }
        return rows
    }

    private func toOneID(_ key: SQLiteValue, _ entityNumber: SQLiteValue, _ rel: RelationshipDescription, _ storeID: String) -> ManagedObjectID? {
        guard let pk = key.int64Value else { return nil }
        var destination = rel.destinationEntity
        if let n = entityNumber.int64Value, let plan = rowPlan(n) { destination = plan.entity }
        guard let destination else { return nil }
        let id = ManagedObjectID(entity: destination, storeIdentifier: storeID, primaryKey: pk)
        id.persistentStore = self
        return id
    }

    func fetchMapping(_ request: AnyFetchRequest, _ schema: SQLiteSchema) throws -> SQLiteSchema.EntityMapping {
        guard let name = request.entityName, let mapping = schema.entity(named: name) else {
            throw CoreDataError(.persistentStoreOperation, "fetch request entity \(request.entityName ?? "nil") is not in this store",
                                userInfo: [CoreDataError.entityNameErrorKey: request.entityName ?? ""])
        }
        return mapping
    }

    /// The table and WHERE condition of the request's rows (entity filter
    /// and compiled predicate), or nil when the predicate does not compile exactly.
    func baseQuery(_ request: AnyFetchRequest, _ mapping: SQLiteSchema.EntityMapping, _ schema: SQLiteSchema,
                           _ compiler: inout SQLitePredicateCompiler) -> (table: String, filter: String)? {
        let numbers = request.includesSubentities ? mapping.numbersIncludingSubentities : [mapping.number]
        let wholeTable = Set(numbers) == Set(schema.table(named: mapping.tableName).flatMap { schema.entity(named: $0.rootEntityName) }?.numbersIncludingSubentities ?? [])
        var filter = wholeTable ? "1" : "t0." + entityNumbersSQL(numbers)
        if let predicate = request.predicate, predicate != .truePredicate {
            guard let compiled = compiler.compile(predicate, for: mapping) else { return nil }
            filter += " AND (\(compiled.sql))"
        } else {
            _ = compiler.compile(.truePredicate, for: mapping)
        }
        return (mapping.tableName, filter)
    }

    /// Types whose stored values are equal exactly when the Swift values are
    /// (decimals are text that may spell one number two ways; transformables
    /// are archives).
    static func comparesExactly(_ type: AttributeType) -> Bool {
        switch type {
        case .integer16, .integer32, .integer64, .boolean, .double, .float, .string, .date, .uuid, .binaryData, .uri: return true
        case .decimal, .transformable, .undefined, .objectID: return false
        }
    }

    /// Whether coercing a selected value to `type` keeps it as it is, so
    /// comparing stored values compares coerced ones.
    static func keepsValues(_ type: ExpressionResultType, _ selected: SQLitePredicateCompiler.Selected) -> Bool {
        switch selected {
        case let .attribute(_, attribute): return type == .undefined || type == attribute.attributeType
        case .toOne: return type == .undefined || type == .objectID
        }
    }

    /// The SQL of an aggregate over `value`, how to read it, and the
    /// attribute describing its values for `HAVING` when they are what the
    /// in-memory evaluator sees (nil: not usable there). nil when SQL
    /// cannot compute it as `FetchFunction` does.
    static func aggregateSQL(_ aggregate: DictionaryFetchPlan.Aggregate, _ value: String,
                             _ selected: SQLitePredicateCompiler.Selected) -> (String, Decoder, AttributeDescription?)? {
        if aggregate == .count { return ("COUNT(\(value))", .aggregate(nil), AttributeDescription(name: "count", type: .integer64)) }
        guard case let .attribute(_, attribute) = selected else { return nil }
        let type = attribute.attributeType
        let integral: Set<AttributeType> = [.integer16, .integer32, .integer64, .boolean]
        let numeric = integral.union([.double, .float])
        switch aggregate {
        case .sum:
            guard numeric.contains(type) else { return nil }
            return ("coalesce(SUM(\(value)), 0)", .aggregate(nil),
                    AttributeDescription(name: "sum", type: integral.contains(type) ? .integer64 : .double))
        case .average:
            guard numeric.contains(type) else { return nil }
            return ("AVG(\(value))", .aggregate(nil), AttributeDescription(name: "average", type: .double))
        case .min, .max:
            let function = aggregate == .min ? "MIN" : "MAX"
            switch type {
            case .integer16, .integer32, .integer64:
                return ("\(function)(\(value))", .aggregate(attribute), AttributeDescription(name: "extreme", type: .integer64))
            case .double, .float, .date:
                return ("\(function)(\(value))", .aggregate(attribute), AttributeDescription(name: "extreme", type: type == .date ? .date : .double))
            case .string:
                return ("\(function)(\(value) COLLATE \(SQLitePredicateCompiler.collation))", .aggregate(attribute),
                        AttributeDescription(name: "extreme", type: .string))
            default:
                return nil
            }
        case .count:
            return nil
        }
    }
}
