import Foundation

/// A template predicate used without values for all of its variables.
///
/// ```swift
/// let template = try FetchPredicate(format: "salary > $MIN AND dept == $DEPT")
/// try template.substitutingVariables(["MIN": 1000])
/// // throws: missing substitution variables $DEPT for predicate: salary > $MIN AND dept == $DEPT
/// ```
public struct PredicateSubstitutionError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Every variable that had no value, sorted, without the `$`.
    public let missingVariables: [String]
    public let predicateFormat: String

    public var description: String {
        let names = missingVariables.map { "$" + $0 }.joined(separator: ", ")
        return "missing substitution variable\(missingVariables.count == 1 ? "" : "s") \(names) for predicate: \(predicateFormat)"
    }
}
