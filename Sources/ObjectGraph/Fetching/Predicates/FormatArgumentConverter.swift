import Foundation

/// Turns `%@` arguments and substitution values into expressions.
enum FormatArgumentConverter {
    /// A constant for a scalar, an aggregate for an array or set (so it
    /// formats as `{...}` and re-parses to the same thing), or the expression
    /// itself when one is passed.
    static func expression(forObject value: Any?) -> FetchExpression {
        let value = unwrapOptional(value)
        if let e = value as? FetchExpression { return e }
        if let constant = FetchValue.from(value) { return .constant(constant) }
        if let value, let elements = Scalar.collectionElements(value) {
            return .aggregate(elements.map { expression(forObject: $0) })
        }
        return .constant(.null)
    }
}
