import Foundation

/// Compiles a `FetchPredicate` into a SQL condition over Core Data's layout,
/// with the in-memory evaluator's semantics: nil equals only nil, ordering
/// with nil is false, kinds that differ are unequal, and strings compare as
/// Swift compares them (a collation and functions registered on the store's
/// connection run the evaluator's own string code). Every condition it emits
/// is two-valued (0 or 1, never NULL), so NOT means what it means in memory.
///
/// Whatever it cannot translate exactly (functions, arithmetic, SUBQUERY,
/// variables, key-path-to-key-path comparisons, decimals, transformables,
/// comparisons the evaluator would reject) makes `compile` return nil, and
/// the store falls back to returning a superset for the coordinator to filter.
///
/// ```swift
/// var compiler = SQLitePredicateCompiler(schema: schema)
/// if let condition = compiler.compile(try FetchPredicate(format: "bot.name BEGINSWITH[c] %@", "crazy"), for: integration) {
///     condition.sql        // og_strop(?1, ?2, t1.ZNAME, ?3)
///     condition.joins      // ["LEFT JOIN ZBOT t1 ON t1.Z_PK = t0.ZBOT"]
/// }
/// ```
struct SQLitePredicateCompiler {
    struct Condition {
        var sql: String
        var joins: [String]
        var bindings: [SQLiteValue]
    }

    static let collation = "OGSTRING"
    static let foldFunction = "og_fold"
    static let stringOperatorFunction = "og_strop"

    let schema: SQLiteSchema
    /// The store's `NSStoreUUID`: `SELF` comparisons match only IDs of this
    /// store, and are not compiled without it.
    let storeIdentifier: String?
    private var bindings: [SQLiteValue] = []
    /// Joins per nesting level: the outer query, then each EXISTS subquery.
    private var joinFrames: [[String]] = [[]]
    private var joinAliases: [String: String] = [:]
    private var aliasCount = 0
    /// Set while compiling a `HAVING` condition: key paths name result columns.
    private var havingOutputs: [String: HavingOperand]?

    init(schema: SQLiteSchema, storeIdentifier: String? = nil) {
        self.schema = schema
        self.storeIdentifier = storeIdentifier
    }

    /// The condition for rows of `entity`'s table aliased `t0`, or nil when
    /// the predicate cannot be compiled exactly.
    mutating func compile(_ predicate: FetchPredicate, for entity: SQLiteSchema.EntityMapping) -> Condition? {
        bindings = []
        joinFrames = [[]]
        joinAliases = [:]
        aliasCount = 0
        guard let sql = self.predicate(predicate, Scope(alias: "t0", entity: entity.entity)) else { return nil }
        return Condition(sql: sql, joins: joinFrames[0], bindings: bindings)
    }

    /// `ORDER BY` terms for sort descriptors on rows of `entity`'s table
    /// aliased `t0`, continuing the joins of the last `compile` (call it
    /// first), or nil when a descriptor cannot be ordered in SQL exactly as
    /// `FetchSortDescriptor.compare` orders it. Ties are broken by `t0.Z_PK`,
    /// the order rows come in when a fetch is sorted in memory (a stable sort).
    ///
    /// Numbers and dates order as SQLite orders them; strings through a
    /// collation running the descriptor's own comparison method. NULL sorts
    /// first ascending and last descending in both. Only attribute key paths
    /// (possibly through to-one relationships) qualify: to-many paths,
    /// collection operators, relationships and other attribute types decline.
    mutating func orderBy(_ descriptors: [FetchSortDescriptor], for entity: SQLiteSchema.EntityMapping) -> [String]? {
        var terms: [String] = []
        for descriptor in descriptors {
            let path = descriptor.key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !path.contains(where: { $0.hasPrefix("@") || $0.isEmpty }),
                  case let .column(column, attribute)? = resolve(path, Scope(alias: "t0", entity: entity.entity)),
                  let kind = Self.kind(of: attribute) else { return nil }
            let direction = descriptor.ascending ? "ASC" : "DESC"
            switch kind {
            case .number, .date:
                terms.append("\(column) \(direction)")
            case .string:
                terms.append("\(column) COLLATE \(Self.sortCollations[descriptor.comparison]!) \(direction)")
            case .uuid, .data, .url:
                return nil
            }
        }
        terms.append("t0.Z_PK")
        return terms
    }

    /// A value a dictionary fetch selects, continuing the joins of the last
    /// `compile` (call it first): an attribute's column, or a to-one's
    /// foreign key with the column naming the destination's entity (nil when
    /// the destination has no sub-entities). nil for transient properties or
    /// paths this layout cannot reach with to-one joins.
    enum Selected {
        case attribute(sql: String, AttributeDescription)
        case toOne(sql: String, entitySQL: String?, RelationshipDescription)
    }

    mutating func select(_ path: [String], for entity: SQLiteSchema.EntityMapping) -> Selected? {
        guard !path.isEmpty, !path.contains(where: { $0.hasPrefix("@") || $0.isEmpty }) else { return nil }
        switch resolve(path, Scope(alias: "t0", entity: entity.entity)) {
        case let .column(sql, attribute)?:
            return .attribute(sql: sql, attribute)
        case let .foreignKey(sql, rel, _)?:
            // The row holding the key is of the entity the path's last hop reaches.
            var owner = entity.entity
            for key in path.dropLast() {
                guard let hop = owner.propertiesByName[key] as? RelationshipDescription, let next = hop.destinationEntity else { return nil }
                owner = next
            }
            guard let ownerMapping = mapping(owner), let dot = sql.lastIndex(of: ".") else { return nil }
            let alias = sql[..<dot]
            return .toOne(sql: sql, entitySQL: ownerMapping.entityColumnsByRelationship[rel.name].map { "\(alias).\($0)" }, rel)
        default:
            return nil
        }
    }

    /// What a `HAVING` condition may name: a result column's SQL (a grouped
    /// column or an aggregate) with an attribute describing how the in-memory
    /// evaluator sees its values, or a to-one's foreign key.
    enum HavingOperand {
        case column(sql: String, AttributeDescription)
        case foreignKey(sql: String, RelationshipDescription)
    }

    /// A `HAVING` condition: `predicate` with single keys naming `outputs`,
    /// continuing the bindings of the last `compile`; nil when not exact.
    mutating func compileHaving(_ predicate: FetchPredicate, outputs: [String: HavingOperand], for entity: SQLiteSchema.EntityMapping) -> String? {
        havingOutputs = outputs
        defer { havingOutputs = nil }
        return self.predicate(predicate, Scope(alias: "t0", entity: entity.entity))
    }

    /// Every value bound so far (`compile`, then `compileHaving`), for `?N` in order.
    var allBindings: [SQLiteValue] { bindings }

    /// One collation per string comparison method a sort descriptor can name.
    static let sortCollations: [FetchSortDescriptor.ComparisonMethod: String] = [
        .compare: collation,
        .caseInsensitiveCompare: "OGSORT_CI",
        .localizedCompare: "OGSORT_LOC",
        .localizedCaseInsensitiveCompare: "OGSORT_LOCCI",
        .localizedStandardCompare: "OGSORT_LOCSTD",
    ]

    /// The outer query's joins so far: the last `compile`'s plus any `orderBy` added.
    var joins: [String] { joinFrames[0] }

    private struct Scope {
        let alias: String
        let entity: EntityDescription
    }

    private mutating func bind(_ value: SQLiteValue) -> String {
        bindings.append(value)
        return "?\(bindings.count)"
    }

    private mutating func newAlias() -> String {
        aliasCount += 1
        return "t\(aliasCount)"
    }

    // MARK: Predicates

    private mutating func predicate(_ p: FetchPredicate, _ scope: Scope) -> String? {
        switch p {
        case .truePredicate: return "1"
        case .falsePredicate: return "0"
        case let .and(items):
            if items.isEmpty { return "1" }
            var parts: [String] = []
            for item in items {
                guard let part = predicate(item, scope) else { return nil }
                parts.append("(\(part))")
            }
            return parts.joined(separator: " AND ")
        case let .or(items):
            if items.isEmpty { return "0" }
            var parts: [String] = []
            for item in items {
                guard let part = predicate(item, scope) else { return nil }
                parts.append("(\(part))")
            }
            return parts.joined(separator: " OR ")
        case let .not(inner):
            guard let part = predicate(inner, scope) else { return nil }
            return "NOT (\(part))"
        case let .comparison(c):
            return comparison(c, scope)
        }
    }

    // MARK: Key paths

    private enum Operand {
        case column(String, AttributeDescription)
        /// `entitySQL`: the column naming the destination's entity, `.some(nil)`
        /// when the destination has no sub-entities, nil when unknown (HAVING).
        case foreignKey(String, RelationshipDescription, entitySQL: String??)
        case count(String)
        case toMany(Scope, RelationshipDescription, rest: [String])
    }

    private func mapping(_ entity: EntityDescription) -> SQLiteSchema.EntityMapping? { schema.entity(named: entity.name) }

    /// Resolves a key path from `scope`, adding LEFT JOINs for to-one hops to
    /// the current join frame.
    private mutating func resolve(_ path: [String], _ scope: Scope) -> Operand? {
        if let havingOutputs {
            guard path.count == 1, let output = havingOutputs[path[0]] else { return nil }
            switch output {
            case let .column(sql, attribute): return .column(sql, attribute)
            case let .foreignKey(sql, rel): return .foreignKey(sql, rel, entitySQL: nil)
            }
        }
        var scope = scope
        var index = 0
        while index < path.count {
            let key = path[index]
            let isLast = index == path.count - 1
            guard let mapping = mapping(scope.entity), let property = scope.entity.propertiesByName[key], !property.isTransient else { return nil }
            if let attribute = property as? AttributeDescription {
                guard isLast, let column = mapping.columnsByProperty[attribute.name] else { return nil }
                return .column("\(scope.alias).\(column)", attribute)
            }
            guard let rel = property as? RelationshipDescription, let destination = rel.destinationEntity,
                  let destMapping = self.mapping(destination) else { return nil }
            if rel.isToMany {
                let rest = Array(path[(index + 1)...])
                if rest == ["@count"] {
                    guard let source = toManySource(rel, owner: scope) else { return nil }
                    return .count("(SELECT COUNT(*) FROM \(source.from) WHERE \(source.correlation))")
                }
                return .toMany(scope, rel, rest: rest)
            }
            guard let column = mapping.columnsByProperty[rel.name] else { return nil }
            if isLast {
                let entitySQL = mapping.entityColumnsByRelationship[rel.name].map { "\(scope.alias).\($0)" }
                return .foreignKey("\(scope.alias).\(column)", rel, entitySQL: .some(entitySQL))
            }
            let joinKey = "\(scope.alias).\(column)"
            let alias: String
            if let existing = joinAliases[joinKey] {
                alias = existing
            } else {
                alias = newAlias()
                joinAliases[joinKey] = alias
                joinFrames[joinFrames.count - 1].append("LEFT JOIN \(destMapping.tableName) \(alias) ON \(alias).Z_PK = \(scope.alias).\(column)")
            }
            scope = Scope(alias: alias, entity: destination)
            index += 1
        }
        return nil
    }

    /// FROM and correlation for the rows of a to-many relationship of the
    /// row aliased `owner.alias`; the destination rows are aliased `alias`.
    private mutating func toManySource(_ rel: RelationshipDescription, owner: Scope) -> (from: String, correlation: String, alias: String)? {
        guard let destination = rel.destinationEntity, let destMapping = mapping(destination), let ownerEntity = rel.entity else { return nil }
        let alias = newAlias()
        let entityFilter = destMapping.numbersIncludingSubentities.count == 1
            ? "\(alias).Z_ENT = \(destMapping.number)"
            : "\(alias).Z_ENT IN (\(destMapping.numbersIncludingSubentities.map(String.init).joined(separator: ", ")))"
        if let join = schema.joinTable(for: rel) {
            let (mine, theirs) = join.relationship === rel ? (join.firstColumn, join.secondColumn) : (join.secondColumn, join.firstColumn)
            let j = newAlias()
            return ("\(join.name) \(j) JOIN \(destMapping.tableName) \(alias) ON \(alias).Z_PK = \(j).\(theirs)",
                    "\(j).\(mine) = \(owner.alias).Z_PK AND \(entityFilter)", alias)
        }
        if let inverse = rel.inverseRelationship, !inverse.isToMany, let column = destMapping.columnsByProperty[inverse.name] {
            var correlation = "\(alias).\(column) = \(owner.alias).Z_PK AND \(entityFilter)"
            if let entityColumn = destMapping.entityColumnsByRelationship[inverse.name], let ownerMapping = mapping(owner.entity) {
                // The owner row may be of a sub-entity; match any entity of its hierarchy below the declaring one.
                let numbers = mapping(ownerEntity)?.numbersIncludingSubentities ?? [ownerMapping.number]
                correlation += " AND \(alias).\(entityColumn) IN (\(numbers.map(String.init).joined(separator: ", ")))"
            }
            return ("\(destMapping.tableName) \(alias)", correlation, alias)
        }
        if let hidden = schema.hiddenOwnerColumns["\(ownerEntity.name).\(rel.name)"] {
            return ("\(hidden.table) \(alias)", "\(alias).\(hidden.column) = \(owner.alias).Z_PK AND \(entityFilter)", alias)
        }
        return nil
    }

    // MARK: Comparisons

    private static func flipped(_ op: FetchComparison.Operator) -> FetchComparison.Operator? {
        switch op {
        case .equalTo, .notEqualTo: return op
        case .lessThan: return .greaterThan
        case .lessThanOrEqualTo: return .greaterThanOrEqualTo
        case .greaterThan: return .lessThan
        case .greaterThanOrEqualTo: return .lessThanOrEqualTo
        default: return nil
        }
    }

    private static func keyPath(_ e: FetchExpression) -> [String]? {
        switch e.normalized {
        case let .keyPath(path): return path
        default: return nil
        }
    }

    private static func constant(_ e: FetchExpression) -> FetchValue? {
        if case let .constant(v) = e { return v }
        return nil
    }

    private mutating func comparison(_ c: FetchComparison, _ scope: Scope) -> String? {
        if c.modifier == .direct, havingOutputs == nil {
            if case .evaluatedObject = c.left.normalized { return selfComparison(c.operatorType, c.right, scope) }
            if case .evaluatedObject = c.right.normalized, c.operatorType == .equalTo || c.operatorType == .notEqualTo {
                return selfComparison(c.operatorType, c.left, scope)
            }
        }
        var op = c.operatorType
        var path = Self.keyPath(c.left)
        var right = c.right
        if path == nil, c.modifier == .direct, let flippedOp = Self.flipped(op), let p = Self.keyPath(c.right), Self.constant(c.left) != nil {
            path = p
            right = c.left
            op = flippedOp
        }
        guard let path, let operand = resolve(path, scope) else { return nil }
        switch c.modifier {
        case .direct:
            return direct(operand, op, right, c.options)
        case .any, .all:
            guard case let .toMany(owner, rel, rest) = operand, !rest.isEmpty else { return nil }
            guard let source = toManySource(rel, owner: owner), let destination = rel.destinationEntity else { return nil }
            joinFrames.append([])
            let inner = resolve(rest, Scope(alias: source.alias, entity: destination))
            let condition = inner.flatMap { direct($0, op, right, c.options) }
            let joins = joinFrames.removeLast()
            guard let condition else { return nil }
            let from = ([source.from] + joins).joined(separator: " ")
            if c.modifier == .any {
                return "EXISTS (SELECT 1 FROM \(from) WHERE \(source.correlation) AND (\(condition)))"
            }
            return "NOT EXISTS (SELECT 1 FROM \(from) WHERE \(source.correlation) AND NOT (\(condition)))"
        }
    }

    /// `SELF ==/!=/IN` constants, as the evaluator decides them: a row is
    /// the object its ID names, so it equals an object ID (or a managed
    /// object, or a store record, by its ID) of this store, of its own
    /// entity, with its primary key; nil and every other value are unequal.
    /// The keys are written into the SQL as integer literals, grouped by
    /// entity (`t0.Z_ENT = 3 AND t0.Z_PK IN (…)`): a list of any length
    /// binds no host parameter (SQLite allows 32,766) and SQLite looks each
    /// key up in the primary key rather than testing every row against
    /// every ID.
    private mutating func selfComparison(_ op: FetchComparison.Operator, _ right: FetchExpression, _ scope: Scope) -> String? {
        guard let storeIdentifier, let table = mapping(scope.entity)?.tableName,
              let keys = objectKeys(op, right) else { return nil }
        var keysByEntity: [Int: Set<Int64>] = [:]
        for id in keys.ids {
            // A temporary ID (an unsaved object) or another store's names no row here.
            guard id.storeIdentifier == storeIdentifier, let key = id.primaryKey,
                  let owner = schema.entity(named: id.entity.name), owner.tableName == table else { continue }
            keysByEntity[owner.number, default: []].insert(key)
        }
        let groups = keysByEntity.keys.sorted().map { number -> String in
            "(\(scope.alias).Z_ENT = \(number) AND \(scope.alias).Z_PK \(Self.keyMatch(keysByEntity[number]!)))"
        }
        let equal = groups.isEmpty ? "0" : groups.joined(separator: " OR ")
        return op == .notEqualTo ? "NOT (\(equal))" : equal
    }

    /// `rel ==/!=/IN` object IDs or managed objects on a to-one's foreign
    /// key: the related object equals an ID of this store with its key and
    /// its entity (the entity column's value, or the destination itself
    /// when it has no sub-entities); a nil in an IN list matches no object.
    private mutating func relatedObjectComparison(_ column: String, _ rel: RelationshipDescription, _ entitySQL: String?,
                                                  _ op: FetchComparison.Operator, _ right: FetchExpression) -> String? {
        guard let storeIdentifier, let destination = rel.destinationEntity, let destMapping = mapping(destination),
              let keys = objectKeys(op, right) else { return nil }
        guard !keys.constants.isEmpty || op == .in else { return nil }
        // An equality with something other than an ID or object is left to
        // the evaluator (it may compare the related object as a value).
        guard keys.others == 0 else { return nil }
        var keysByEntity: [Int: Set<Int64>] = [:]
        for id in keys.ids {
            guard id.storeIdentifier == storeIdentifier, let key = id.primaryKey, let owner = schema.entity(named: id.entity.name),
                  destMapping.numbersIncludingSubentities.contains(owner.number) else { continue }
            // Without an entity column every related row is read as the destination itself.
            if entitySQL == nil && owner.number != destMapping.number { continue }
            keysByEntity[owner.number, default: []].insert(key)
        }
        var parts = keysByEntity.keys.sorted().map { number -> String in
            let entityMatch = entitySQL.map { "\($0) = \(number) AND " } ?? ""
            return "coalesce(\(entityMatch)\(column) \(Self.keyMatch(keysByEntity[number]!)), 0)"
        }
        if keys.nulls > 0 { parts.append("\(column) IS NULL") }
        let equal = parts.isEmpty ? "0" : parts.map { "(\($0))" }.joined(separator: " OR ")
        return op == .notEqualTo ? "NOT (\(equal))" : equal
    }

    /// `= k` or `IN (k1, …)` for primary keys, written as integer literals
    /// in order: a list of any length binds no host parameter.
    private static func keyMatch(_ keys: Set<Int64>) -> String {
        let list = keys.sorted()
        return list.count == 1 ? "= \(list[0])" : "IN (\(list.map(String.init).joined(separator: ", ")))"
    }

    /// The constants of `== c`, `!= c` or `IN {…}` sorted into object IDs
    /// (of IDs, managed objects and store records), nils and other values;
    /// nil when the right-hand side is not constant, or IN's is not a list
    /// (`SELF IN 'string'` throws in memory: left to the evaluator).
    private func objectKeys(_ op: FetchComparison.Operator, _ right: FetchExpression) -> (constants: [FetchValue], ids: [ManagedObjectID], nulls: Int, others: Int)? {
        var constants: [FetchValue] = []
        switch op {
        case .equalTo, .notEqualTo:
            guard let value = Self.constant(right) else { return nil }
            constants = [value]
        case .in:
            guard case let .aggregate(items) = right else { return nil }
            constants.reserveCapacity(items.count)
            for item in items {
                guard let value = Self.constant(item) else { return nil }
                constants.append(value)
            }
        default:
            return nil
        }
        var ids: [ManagedObjectID] = [], nulls = 0, others = 0
        for value in constants {
            switch value {
            case .null: nulls += 1
            case let .object(object):
                if let id = PredicateEvaluator.objectID(of: object) { ids.append(id) } else { others += 1 }
            case let .other(hashable):
                if let id = hashable.base as? ManagedObjectID { ids.append(id) } else { others += 1 }
            default: others += 1
            }
        }
        return (constants, ids, nulls, others)
    }

    /// How the evaluator sees a column's values.
    private enum Kind {
        case number, string, date, uuid, data, url
    }

    private static func kind(of attribute: AttributeDescription) -> Kind? {
        switch attribute.attributeType {
        case .integer16, .integer32, .integer64, .boolean, .float, .double: return .number
        case .string: return .string
        case .date: return .date
        case .uuid: return .uuid
        // A column that may hold Apple's external-storage framing (a marker
        // byte, maybe a file reference) does not hold the value itself.
        case .binaryData: return attribute.allowsExternalBinaryDataStorage ? nil : .data
        case .uri: return .url
        case .decimal, .transformable, .undefined, .objectID: return nil
        }
    }

    /// The bound value for a constant compared with a column of kind `kind`.
    private enum Bound {
        case value(SQLiteValue)
        /// The evaluator finds the kinds unequal (and rejects ordering them).
        case unequal
        /// The evaluator's answer depends on number semantics SQL cannot
        /// reproduce exactly (decimals, NaN): do not compile.
        case unknown
    }

    private static func bound(_ value: FetchValue, as kind: Kind) -> Bound {
        switch (kind, value) {
        case (.number, .int(let v)): return .value(.integer(v))
        case (.number, .bool(let v)): return .value(.integer(v ? 1 : 0))
        case (.number, .double(let v)): return v.isNaN ? .unknown : .value(.real(v))
        case (.number, .decimal): return .unknown
        case (.string, .string(let v)): return .value(.text(v))
        case (.date, .date(let v)): return .value(.real(v.timeIntervalSinceReferenceDate))
        case (.uuid, .uuid(let v)): return .value(.blob(withUnsafeBytes(of: v.uuid) { Data($0) }))
        case (.data, .data(let v)): return .value(.blob(v))
        case (.url, .url(let v)): return .value(.text(v.absoluteString))
        case (_, .object), (_, .other): return .unknown
        default: return .unequal
        }
    }

    private static func sqlValue(_ value: FetchValue, as kind: Kind) -> SQLiteValue? {
        if case let .value(v) = bound(value, as: kind) { return v }
        return nil
    }

    private static func isNull(_ value: FetchValue) -> Bool {
        if case .null = value { return true }
        return false
    }

    private mutating func direct(_ operand: Operand, _ op: FetchComparison.Operator, _ right: FetchExpression,
                                 _ options: FetchComparison.Options) -> String? {
        switch operand {
        case .toMany:
            return nil
        case let .foreignKey(column, rel, entitySQL):
            if op == .equalTo || op == .notEqualTo, let value = Self.constant(right), Self.isNull(value) {
                return op == .equalTo ? "\(column) IS NULL" : "\(column) IS NOT NULL"
            }
            guard let entitySQL else { return nil }
            return relatedObjectComparison(column, rel, entitySQL, op, right)
        case let .count(sql):
            guard let value = Self.constant(right) else { return nil }
            switch op {
            case .equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
                guard let bound = Self.sqlValue(value, as: .number) else {
                    if Self.isNull(value) { return op == .notEqualTo ? "1" : "0" }
                    return nil
                }
                return "coalesce(\(sql) \(Self.sqlOperator(op)) \(bind(bound)), 0)"
            default: return nil
            }
        case let .column(column, attribute):
            guard let kind = Self.kind(of: attribute) else { return nil }
            return columnComparison(column, kind, op, right, options)
        }
    }

    private static func sqlOperator(_ op: FetchComparison.Operator) -> String {
        switch op {
        case .lessThan: return "<"
        case .lessThanOrEqualTo: return "<="
        case .greaterThan: return ">"
        case .greaterThanOrEqualTo: return ">="
        case .notEqualTo: return "!="
        default: return "="
        }
    }

    /// The column as compared: folded for [c]/[d] strings.
    private mutating func subject(_ column: String, _ kind: Kind, _ options: FetchComparison.Options) -> String {
        guard kind == .string, options.contains(.caseInsensitive) || options.contains(.diacriticInsensitive) else { return column }
        return "\(Self.foldFunction)(\(bind(.integer(Int64(options.rawValue)))), \(column))"
    }

    private mutating func boundConstant(_ value: SQLiteValue, _ kind: Kind, _ options: FetchComparison.Options) -> String {
        if kind == .string, case .text(let s) = value {
            return "\(bind(.text(StringComparison.fold(s, options)))) COLLATE \(Self.collation)"
        }
        return bind(value)
    }

    private mutating func equality(_ column: String, _ kind: Kind, _ value: FetchValue, _ options: FetchComparison.Options) -> String? {
        if Self.isNull(value) { return "\(column) IS NULL" }
        switch Self.bound(value, as: kind) {
        case .unequal: return "0"
        case .unknown: return nil
        case let .value(bound):
            let lhs = subject(column, kind, options)
            return "coalesce(\(lhs) = \(boundConstant(bound, kind, options)), 0)"
        }
    }

    private mutating func columnComparison(_ column: String, _ kind: Kind, _ op: FetchComparison.Operator,
                                           _ right: FetchExpression, _ options: FetchComparison.Options) -> String? {
        switch op {
        case .equalTo, .notEqualTo:
            guard let value = Self.constant(right) else { return nil }
            // Strings with options other than [n] fold; other kinds ignore options.
            guard let eq = equality(column, kind, value, options) else { return nil }
            return op == .equalTo ? eq : "NOT (\(eq))"
        case .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            guard let value = Self.constant(right) else { return nil }
            if Self.isNull(value) { return "0" }
            guard kind == .number || kind == .string || kind == .date, let bound = Self.sqlValue(value, as: kind) else { return nil }
            let lhs = subject(column, kind, options)
            return "coalesce(\(lhs) \(Self.sqlOperator(op)) \(boundConstant(bound, kind, options)), 0)"
        case .between:
            guard case let .aggregate(items) = right, items.count == 2,
                  let low = Self.constant(items[0]), let high = Self.constant(items[1]),
                  kind == .number || kind == .string || kind == .date else { return nil }
            // A bound of another kind makes the evaluator throw for every
            // non-nil row, even when the other bound is nil: leave it to it.
            for bound in [low, high] where !Self.isNull(bound) {
                guard Self.sqlValue(bound, as: kind) != nil else { return nil }
            }
            if Self.isNull(low) || Self.isNull(high) { return "0" }
            guard let lowValue = Self.sqlValue(low, as: kind), let highValue = Self.sqlValue(high, as: kind) else { return nil }
            let lhs = subject(column, kind, options)
            let lhs2 = subject(column, kind, options)
            return "coalesce(\(lhs) >= \(boundConstant(lowValue, kind, options)) AND \(lhs2) <= \(boundConstant(highValue, kind, options)), 0)"
        case .in:
            guard case let .aggregate(items) = right else { return nil }
            var parts: [String] = []
            for item in items {
                guard let value = Self.constant(item) else { return nil }
                guard let part = equality(column, kind, value, options) else { return nil }
                if part != "0" { parts.append(part) }
            }
            return parts.isEmpty ? "0" : parts.map { "(\($0))" }.joined(separator: " OR ")
        case .beginsWith, .endsWith, .like, .matches, .contains:
            guard kind == .string, let value = Self.constant(right) else { return nil }
            if Self.isNull(value) { return "0" }
            guard case let .string(pattern) = value else { return nil }
            if op == .matches, case .failure = StringComparison.compileRegex(pattern, options: options) { return nil }
            return "\(Self.stringOperatorFunction)(\(bind(.integer(Int64(op.rawValue)))), \(bind(.integer(Int64(options.rawValue)))), \(column), \(bind(.text(pattern))))"
        }
    }

    // MARK: SQL functions

    /// Registers the collation and functions compiled conditions use.
    static func register(on connection: SQLiteConnection) throws {
        try connection.createCollation(collation, bytewiseWhenASCII: true) { a, b in
            a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending)
        }
        for method in FetchSortDescriptor.ComparisonMethod.allCases where method != .compare {
            let descriptor = FetchSortDescriptor(key: "", comparison: method)
            try connection.createCollation(sortCollations[method]!) { a, b in
                // The descriptor's own comparison; strings never throw.
                (try? descriptor.compareValues(.string(a), .string(b))) ?? .orderedSame
            }
        }
        try connection.createFunction(foldFunction, argumentCount: 2) { args in
            guard case let .text(s) = args[1] else { return args[1] }
            let options = FetchComparison.Options(rawValue: Int(args[0].int64Value ?? 0))
            return .text(StringComparison.fold(s, options))
        }
        let cache = MatcherCache()
        try connection.createFunction(stringOperatorFunction, argumentCount: 4) { args in
            guard case let .text(subject) = args[2], case let .text(pattern) = args[3],
                  let raw = args[0].int64Value, let op = FetchComparison.Operator(rawValue: Int(raw)) else { return .integer(0) }
            let options = FetchComparison.Options(rawValue: Int(args[1].int64Value ?? 0))
            return .integer(try cache.matches(op, options, subject, pattern) ? 1 : 0)
        }
    }

    /// Compiled LIKE patterns and regular expressions, per pattern, so a
    /// fetch compiles each once rather than once per row.
    private final class MatcherCache {
        private var likes: [String: LikePattern] = [:]
        private var regexes: [String: NSRegularExpression] = [:]

        func matches(_ op: FetchComparison.Operator, _ options: FetchComparison.Options, _ subject: String, _ pattern: String) throws -> Bool {
            let folded = StringComparison.fold(subject, options)
            let foldedPattern = StringComparison.fold(pattern, options)
            switch op {
            case .beginsWith: return folded.hasPrefix(foldedPattern)
            case .endsWith: return folded.hasSuffix(foldedPattern)
            case .contains: return PredicateEvaluator.substring(pattern, in: subject, options)
            case .like:
                let key = "\(options.rawValue)|\(foldedPattern)"
                if let like = likes[key] { return like.matches(folded) }
                let like = LikePattern(foldedPattern)
                likes[key] = like
                return like.matches(folded)
            case .matches:
                let key = "\(options.rawValue)|\(pattern)"
                if let regex = regexes[key] { return StringComparison.matches(subject, regex: regex, options: options) }
                switch StringComparison.compileRegex(pattern, options: options) {
                case let .success(regex):
                    regexes[key] = regex
                    return StringComparison.matches(subject, regex: regex, options: options)
                case let .failure(error):
                    throw error
                }
            default:
                return false
            }
        }
    }
}
