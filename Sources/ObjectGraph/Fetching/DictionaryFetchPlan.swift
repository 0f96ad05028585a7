import Foundation

/// A dictionary-result request's `propertiesToFetch`, `propertiesToGroupBy`,
/// `havingPredicate` and `returnsDistinctResults`, checked against the entity
/// and resolved to key paths once, so the in-memory path (the context) and
/// the SQL path (`SQLiteStore.fetchDictionaries`) read the same columns with
/// the same rules.
///
/// ```swift
/// let plan = try DictionaryFetchPlan(request, entity: employee)
/// plan.columns.map(\.name)  // ["department", "total"]
/// plan.isGrouped            // true: one row per department
/// ```
struct DictionaryFetchPlan {
    /// The aggregate functions a column may apply (Core Data's selector names).
    enum Aggregate: String {
        case sum = "sum:", average = "average:", min = "min:", max = "max:", count = "count:"
    }

    /// One value read per object: a key path through to-one relationships
    /// ending at an attribute or a to-one relationship.
    struct Path {
        let keys: [String]
        /// The property the path ends at.
        let target: PropertyDescription
        var keyPath: String { keys.joined(separator: ".") }
        var throughRelationships: Bool { keys.count > 1 }
        var attribute: AttributeDescription? { target as? AttributeDescription }
    }

    struct Column {
        /// The key of the value in each result dictionary.
        let name: String
        let path: Path
        let aggregate: Aggregate?
        /// Set for expression descriptions: values go through `coerce` (XD-04).
        let resultType: ExpressionResultType?

        /// Converts a value read for this column (a `ManagedObjectID` for a
        /// to-one, the aggregate's raw result) to what the dictionary holds.
        func finish(_ value: Any?) throws -> Any? {
            guard let resultType else { return value }
            do {
                return try resultType.coerce(value)
            } catch var error as PredicateEvaluationError {
                error.keyPath = name
                throw error
            }
        }
    }

    let entity: EntityDescription
    let columns: [Column]
    let groupBy: [Path]
    /// Applied to each group's row; nil without `propertiesToGroupBy`.
    let having: FetchPredicate?
    /// FR-18: only with `propertiesToFetch` set.
    let distinct: Bool

    var hasAggregates: Bool { columns.contains { $0.aggregate != nil } }
    /// Rows are groups (aggregates or `propertiesToGroupBy`), not objects.
    var isGrouped: Bool { hasAggregates || !groupBy.isEmpty }
    /// Every key path the plan reads, for the pending-changes check.
    var paths: [Path] { columns.map(\.path) + groupBy }

    /// Checks the request's columns; every refusal is Core Data's 134060
    /// naming the property, raised when the request runs.
    init(_ request: AnyFetchRequest, entity: EntityDescription) throws {
        self.entity = entity
        var columns: [Column] = []
        if let elements = request.propertiesToFetch {
            for element in elements { columns.append(try Self.column(element, entity: entity)) }
        } else {
            columns = EntityLayout.of(entity).attributes.map {
                Column(name: $0.name, path: Path(keys: [$0.name], target: $0), aggregate: nil, resultType: nil)
            }
        }
        var seen = Set<String>()
        for column in columns where !seen.insert(column.name).inserted {
            throw Self.error("propertiesToFetch names \(column.name) twice", property: column.name, entity: entity)
        }
        var groupBy: [Path] = []
        for element in request.propertiesToGroupBy ?? [] {
            let column = try Self.column(element, entity: entity)
            if column.aggregate != nil {
                throw Self.error("propertiesToGroupBy cannot hold the aggregate \(column.name)", property: column.name, entity: entity)
            }
            groupBy.append(column.path)
        }
        self.columns = columns
        self.groupBy = groupBy
        self.having = groupBy.isEmpty ? nil : request.havingPredicate
        self.distinct = request.returnsDistinctResults && request.propertiesToFetch != nil

        if hasAggregates || !groupBy.isEmpty {
            let grouped = Set(groupBy.map(\.keyPath))
            for column in columns where column.aggregate == nil && !grouped.contains(column.path.keyPath) {
                throw Self.error("\(column.name) is neither an aggregate nor in propertiesToGroupBy; with aggregates or grouping every other fetched property must be grouped by",
                                 property: column.name, entity: entity)
            }
        }
    }

    /// Refuses columns a result type other than dictionaries cannot return
    /// (aggregates, grouping), as Core Data does.
    static func checkNotGrouped(_ request: AnyFetchRequest, entity: EntityDescription) throws {
        if let groupBy = request.propertiesToGroupBy, let first = groupBy.first {
            let name = Self.label(first)
            throw error("propertiesToGroupBy (\(name)) needs the dictionary result type, not \(request.resultType)", property: name, entity: entity)
        }
        for case let description as ExpressionDescription in request.propertiesToFetch ?? [] {
            if let expression = description.expression, case .function = expression {
                throw error("the aggregate \(description.name) needs the dictionary result type, not \(request.resultType)",
                            property: description.name, entity: entity)
            }
        }
    }

    /// The name an element of `propertiesToFetch`/`propertiesToGroupBy` goes by in messages.
    private static func label(_ element: Any) -> String {
        switch element {
        case let name as String: return name
        case let description as ExpressionDescription: return description.name
        case let property as PropertyDescription: return property.name
        default: return String(describing: element)
        }
    }

    private static func error(_ message: String, property: String?, entity: EntityDescription) -> CoreDataError {
        var info: [String: Any] = [CoreDataError.entityNameErrorKey: entity.name]
        if let property { info[CoreDataError.propertyNameErrorKey] = property }
        return CoreDataError(.coreData, "Invalid fetch request on \(entity.name): \(message)", userInfo: info)
    }

    private static func column(_ element: Any, entity: EntityDescription) throws -> Column {
        switch element {
        case let name as String:
            return Column(name: name, path: try path(name.split(separator: ".", omittingEmptySubsequences: false).map(String.init), entity: entity),
                          aggregate: nil, resultType: nil)
        case let description as ExpressionDescription:
            return try expressionColumn(description, entity: entity)
        case let property as PropertyDescription:
            guard let own = entity.propertiesByName[property.name], type(of: own) == type(of: property) else {
                throw error("\(property.name) is not a property of \(entity.name)", property: property.name, entity: entity)
            }
            return Column(name: property.name, path: try path([property.name], entity: entity), aggregate: nil, resultType: nil)
        default:
            throw error("\(element) (a \(type(of: element))) cannot be fetched or grouped by: elements must be a String, PropertyDescription or ExpressionDescription",
                        property: String(describing: element), entity: entity)
        }
    }

    private static func expressionColumn(_ description: ExpressionDescription, entity: EntityDescription) throws -> Column {
        let name = description.name
        guard let expression = description.expression else {
            throw error("the expression description \(name) has no expression", property: name, entity: entity)
        }
        switch expression.normalized {
        case let .keyPath(keys):
            return Column(name: name, path: try path(keys, entity: entity, column: name), aggregate: nil, resultType: description.expressionResultType)
        case let .function(function, arguments):
            guard let aggregate = Aggregate(rawValue: function) else {
                throw error("\(name) uses \(function), which dictionary fetches do not support (sum:, average:, min:, max:, count: of a key path)",
                            property: name, entity: entity)
            }
            guard arguments.count == 1, case let .keyPath(keys) = arguments[0].normalized else {
                throw error("\(name): \(function) takes one key path", property: name, entity: entity)
            }
            let resolved = try path(keys, entity: entity, column: name)
            if aggregate != .count && resolved.attribute == nil {
                throw error("\(name): \(function) needs an attribute, \(resolved.keyPath) is a relationship", property: name, entity: entity)
            }
            return Column(name: name, path: resolved, aggregate: aggregate, resultType: description.expressionResultType)
        default:
            throw error("\(name): only key paths and sum:, average:, min:, max:, count: of a key path are supported, not \(expression.expressionFormat)",
                        property: name, entity: entity)
        }
    }

    /// Resolves a key path: to-one relationships, then an attribute or a to-one.
    private static func path(_ keys: [String], entity: EntityDescription, column: String? = nil) throws -> Path {
        let label = column ?? keys.joined(separator: ".")
        var current = entity
        for (index, key) in keys.enumerated() {
            guard let property = current.propertiesByName[key] else {
                throw error("\(key) is not a property of \(current.name) (in \(label))", property: label, entity: entity)
            }
            if let relationship = property as? RelationshipDescription {
                if relationship.isToMany {
                    throw error("\(keys.joined(separator: ".")) goes through the to-many relationship \(key); only attributes and to-one relationships can be fetched",
                                property: label, entity: entity)
                }
                if index == keys.count - 1 { return Path(keys: keys, target: relationship) }
                guard let destination = relationship.destinationEntity else {
                    throw error("\(key) has no destination entity", property: label, entity: entity)
                }
                current = destination
            } else if property is AttributeDescription, index == keys.count - 1 {
                return Path(keys: keys, target: property)
            } else {
                throw error("\(keys.joined(separator: ".")): \(key) is not an attribute or to-one relationship that ends the path",
                            property: label, entity: entity)
            }
        }
        throw error("an empty key path", property: label, entity: entity)
    }
}

/// Rows made hashable for `returnsDistinctResults` and grouping: values
/// compare as `ModelValue.equal` compares them (through `AnyHashable`), so
/// a value that is not `Hashable` equals nothing but itself, as there.
struct DictionaryRowKey: Hashable {
    private let values: [AnyHashable?]
    private static let counter = UniqueCounter()

    init(_ values: [Any?]) {
        self.values = values.map { value in
            guard let value else { return nil }
            if let hashable = value as? AnyHashable { return hashable }
            return AnyHashable(DictionaryRowKey.counter.next())
        }
    }

    private final class UniqueCounter: @unchecked Sendable {
        private var value = 0
        private let lock = NSLock()
        func next() -> Unique { lock.lock(); defer { lock.unlock() }; value += 1; return Unique(id: value) }
    }
    private struct Unique: Hashable { let id: Int }
}
