import Foundation

/// Evaluates a fetch predicate on stored rows instead of managed objects,
/// so a selective fetch neither creates nor fires a fault per record. Only
/// predicates that read plain attributes of the fetched entity qualify:
/// single-key paths naming attributes, constants that are values (not
/// objects), functions of those, no `SELF`, variables, subqueries, nested
/// fetches or relationship paths. Everything else is evaluated on objects.
/// Rows leave nil attributes out; the filter supplies `NSNull` for the keys
/// it reads, so both paths see the same values.
struct RowPredicateFilter {
    let predicate: FetchPredicate
    let keys: [String]

    init?(_ predicate: FetchPredicate, entity: EntityDescription) {
        let attributes = EntityLayout.of(entity).attributesByName
        var keys = Set<String>()
        guard Self.collect(predicate, attributes: attributes, into: &keys) else { return nil }
        self.predicate = predicate
        self.keys = keys.sorted()
    }

    func matches(_ values: [String: Any]) throws -> Bool {
        if keys.allSatisfy({ values[$0] != nil }) { return try predicate.evaluate(with: values) }
        var row = values
        for key in keys where row[key] == nil { row[key] = NSNull() }
        return try predicate.evaluate(with: row)
    }

    private static func collect(_ predicate: FetchPredicate, attributes: [String: AttributeDescription], into keys: inout Set<String>) -> Bool {
        switch predicate {
        case .truePredicate, .falsePredicate: return true
        case .and(let parts), .or(let parts): return parts.allSatisfy { collect($0, attributes: attributes, into: &keys) }
        case .not(let inner): return collect(inner, attributes: attributes, into: &keys)
        case .comparison(let c):
            return collect(c.left, attributes: attributes, into: &keys) && collect(c.right, attributes: attributes, into: &keys)
        }
    }

    private static func collect(_ expression: FetchExpression, attributes: [String: AttributeDescription], into keys: inout Set<String>) -> Bool {
        switch expression {
        case .constant(let value):
            if case .object = value { return false }
            return true
        case .keyPath(let path):
            guard path.count == 1, let attribute = attributes[path[0]], !attribute.isTransient else { return false }
            keys.insert(path[0])
            return true
        case .aggregate(let items): return items.allSatisfy { collect($0, attributes: attributes, into: &keys) }
        case .function(_, let arguments): return arguments.allSatisfy { collect($0, attributes: attributes, into: &keys) }
        default: return false
        }
    }
}
