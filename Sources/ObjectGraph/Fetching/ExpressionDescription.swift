import Foundation

/// A computed column for dictionary-result fetches, such as `max:(salary)`:
/// the Linux counterpart of `NSExpressionDescription` (XD-01…XD-05).
///
/// ```swift
/// let top = ExpressionDescription(
///     name: "maxSalary",
///     expression: try FetchExpression(format: "max:(salary)"),
///     expressionResultType: .integer64)
/// let row = try ExpressionDescription.dictionaryResult(for: [top], over: employees)
/// row["maxSalary"] as? Int64 // the largest salary
/// ```
///
/// It is a property description only for `propertiesToFetch`; an entity must
/// refuse it as a property (XD-02, enforced by the model).
public final class ExpressionDescription: Equatable, CustomStringConvertible {
    /// The key of the result in each result dictionary (XD-05).
    public var name: String
    /// What to compute (XD-03). nil computes nothing: the result is nil.
    public var expression: FetchExpression?
    /// The type of the result (XD-04). Core Data does not document a default;
    /// ours is `.undefined`, which returns values as evaluated.
    public var expressionResultType: ExpressionResultType

    public init(name: String, expression: FetchExpression? = nil, expressionResultType: ExpressionResultType = .undefined) {
        self.name = name
        self.expression = expression
        self.expressionResultType = expressionResultType
    }

    /// An independent copy (X-05).
    public func copy() -> ExpressionDescription {
        ExpressionDescription(name: name, expression: expression, expressionResultType: expressionResultType)
    }

    public var description: String {
        "ExpressionDescription(name: \(name), expression: \(expression?.expressionFormat ?? "nil"), resultType: \(expressionResultType))"
    }

    public static func == (a: ExpressionDescription, b: ExpressionDescription) -> Bool {
        a.name == b.name && a.expression == b.expression && a.expressionResultType == b.expressionResultType
    }

    /// Evaluates the expression with `SELF` bound to `object` and converts
    /// the result to ``expressionResultType``. For an aggregate over fetched
    /// rows, pass the array of rows: `max:(salary)` reads `salary` from each.
    public func evaluate(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Any? {
        guard let expression else { return nil }
        let value = try expression.evaluate(with: object, substitutionVariables: substitutionVariables)
        do {
            return try expressionResultType.coerce(value)
        } catch var error as PredicateEvaluationError {
            error.keyPath = name
            throw error
        }
    }

    /// One dictionary result row for aggregate descriptions over `objects`,
    /// keyed by each description's name (XD-01, XD-05). A nil result leaves
    /// its key out, as Core Data's dictionary results do.
    public static func dictionaryResult(for descriptions: [ExpressionDescription], over objects: [Any]) throws -> [String: Any] {
        var row: [String: Any] = [:]
        for description in descriptions {
            if let value = try description.evaluate(with: objects) { row[description.name] = value }
        }
        return row
    }
}
