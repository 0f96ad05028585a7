import Foundation

/// An expression whose value is the result of running a fetch request in a
/// context: `NSFetchRequestExpression` (FE-01…FE-07).
///
/// The request expression must evaluate to whatever request type the context
/// understands, and the context expression to a ``FetchRequestExecuting``
/// value; anything else is a ``PredicateEvaluationError`` (FE-06).
///
/// ```swift
/// let count = FetchRequestExpression.expression(
///     forFetch: .variable("REQUEST"), context: .variable("CONTEXT"), countOnly: true)
/// count.expressionFormat // FETCH($REQUEST, $CONTEXT, YES)
/// let n = try count.evaluate(with: nil, substitutionVariables: ["REQUEST": request, "CONTEXT": context])
/// ```
public struct FetchRequestExpression: Equatable, CustomStringConvertible, @unchecked Sendable {
    /// `NSFetchRequestExpressionType` (FE-05).
    public static let expressionType = 50

    /// Evaluates to the fetch request (FE-02).
    public var requestExpression: FetchExpression
    /// Evaluates to the context that runs it (FE-03).
    public var contextExpression: FetchExpression
    /// True: evaluation counts the matches; false: it returns them (FE-04).
    public var isCountOnlyRequest: Bool

    public init(requestExpression: FetchExpression, contextExpression: FetchExpression, isCountOnlyRequest: Bool) {
        self.requestExpression = requestExpression
        self.contextExpression = contextExpression
        self.isCountOnlyRequest = isCountOnlyRequest
    }

    /// `expressionForFetch:context:countOnly:` (FE-01).
    public static func expression(forFetch request: FetchExpression, context: FetchExpression, countOnly: Bool) -> FetchExpression {
        .fetchRequest(FetchRequestExpression(requestExpression: request, contextExpression: context, isCountOnlyRequest: countOnly))
    }

    public var description: String { PredicateFormatter.format(FetchExpression.fetchRequest(self)) }

    func evaluate(with object: Any?, scope: inout EvaluationScope) throws -> Any? {
        let request = try PredicateEvaluator.evaluate(requestExpression, object: object, scope: &scope)
        let contextValue = try PredicateEvaluator.evaluate(contextExpression, object: object, scope: &scope)
        guard let request = unwrapOptional(request) else {
            throw PredicateEvaluationError(.typeMismatch, operatorName: "FETCH", reason: "the request expression evaluated to nil")
        }
        guard let context = unwrapOptional(contextValue) as? FetchRequestExecuting else {
            let typeName = unwrapOptional(contextValue).map { String(describing: type(of: $0)) } ?? "nil"
            throw PredicateEvaluationError(
                .typeMismatch, operatorName: "FETCH",
                reason: "the context expression must evaluate to a FetchRequestExecuting context, not \(typeName)")
        }
        if isCountOnlyRequest { return try context.count(for: request) }
        return try context.execute(request)
    }
}
