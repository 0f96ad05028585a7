import ObjectGraph

/// Checks that the key paths of a predicate or sort key name properties of
/// an entity, so `query` can refuse a misspelt key before reading any row
/// (an empty store would otherwise accept anything).
enum ModelKeyPathChecker {
    /// Every problem with the key paths of `predicate` evaluated on `entity`.
    /// Paths inside SUBQUERY bodies and on variables are not checked: what
    /// they start from is only known while evaluating.
    static func problems(in predicate: FetchPredicate, entity: EntityDescription) -> [String] {
        var out: [String] = []
        visit(predicate, entity, &out)
        return out
    }

    private static func visit(_ predicate: FetchPredicate, _ entity: EntityDescription, _ out: inout [String]) {
        switch predicate {
        case .truePredicate, .falsePredicate: break
        case let .and(items), let .or(items): items.forEach { visit($0, entity, &out) }
        case let .not(inner): visit(inner, entity, &out)
        case let .comparison(c):
            visit(c.left, entity, &out)
            visit(c.right, entity, &out)
        }
    }

    private static func visit(_ expression: FetchExpression, _ entity: EntityDescription, _ out: inout [String]) {
        switch expression {
        case .constant, .evaluatedObject, .variable, .fetchRequest: break
        case let .keyPath(path):
            if let problem = problem(path, entity) { out.append(problem) }
        case let .aggregate(items), let .function(_, items): items.forEach { visit($0, entity, &out) }
        case let .member(base, _): visit(base, entity, &out)
        case let .subquery(collection, _, _): visit(collection, entity, &out)
        }
    }

    /// Why `path` does not fit `entity`, or nil when it does. Collection
    /// operators (`@count`, `@sum`, ...) end the check.
    static func problem(_ path: [String], _ entity: EntityDescription) -> String? {
        var current = entity
        for (index, key) in path.enumerated() {
            if key.hasPrefix("@") { return nil }
            let dotted = path.joined(separator: ".")
            guard let property = current.propertiesByName[key] else {
                return "key path '\(dotted)': entity \(current.name) has no property '\(key)'"
            }
            if property is AttributeDescription || property is FetchedPropertyDescription {
                if index < path.count - 1 && !path[index + 1].hasPrefix("@") {
                    return "key path '\(dotted)': \(current.name).\(key) is not a relationship, so '\(path[index + 1])' cannot follow it"
                }
                return nil
            }
            guard let rel = property as? RelationshipDescription, let destination = rel.destinationEntity else {
                return "key path '\(dotted)': \(current.name).\(key) has no destination entity"
            }
            current = destination
        }
        return nil
    }

    /// Why a sort key cannot order `entity`'s objects: it must reach an
    /// attribute through to-one relationships only.
    static func sortProblem(_ key: String, _ entity: EntityDescription) -> String? {
        let path = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var current = entity
        for (index, component) in path.enumerated() {
            guard let property = current.propertiesByName[component] else {
                return "sort key '\(key)': entity \(current.name) has no property '\(component)'"
            }
            let isLast = index == path.count - 1
            if property is AttributeDescription {
                return isLast ? nil : "sort key '\(key)': \(current.name).\(component) is not a relationship"
            }
            guard let rel = property as? RelationshipDescription, !rel.isToMany, let destination = rel.destinationEntity, !isLast else {
                return "sort key '\(key)': sort by an attribute, possibly through to-one relationships ('\(component)' is not one)"
            }
            current = destination
        }
        return nil
    }
}
