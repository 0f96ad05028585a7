import Foundation

/// Why evaluating a predicate or expression against an object failed.
///
/// ```swift
/// do { _ = try FetchPredicate(format: "name > 3").evaluate(with: ["name": "Ann"]) }
/// catch let error as PredicateEvaluationError {
///     error.kind         // .typeMismatch
///     error.operatorName // ">"
/// }
/// ```
public struct PredicateEvaluationError: Error, Equatable, CustomStringConvertible, Sendable {
    public enum Kind: String, Equatable, Sendable {
        /// A key in a key path does not exist on the object it is read from.
        case unknownKey
        /// An operator or function got operands of types it cannot handle.
        case typeMismatch
        /// A `$VARIABLE` has no value.
        case unboundVariable
        /// An operand is unusable for another reason (bad regex, wrong count).
        case invalidOperand
        /// Arithmetic failed (division by zero, overflow).
        case arithmetic
    }

    public let kind: Kind
    /// The key path being read, for ``Kind/unknownKey``.
    public var keyPath: String?
    /// The operator or function involved, e.g. `">"`, `"LIKE"`, `"sum:"`.
    public var operatorName: String?
    /// What is wrong, in words.
    public let reason: String
    /// The comparison being evaluated, in canonical format, when known.
    public var predicateFormat: String?

    public init(_ kind: Kind, keyPath: String? = nil, operatorName: String? = nil, reason: String, predicateFormat: String? = nil) {
        self.kind = kind
        self.keyPath = keyPath
        self.operatorName = operatorName
        self.reason = reason
        self.predicateFormat = predicateFormat
    }

    public var description: String {
        var text = "predicate evaluation error"
        if let keyPath { text += " in key path '\(keyPath)'" }
        if let operatorName { text += " for operator '\(operatorName)'" }
        text += ": \(reason)"
        if let predicateFormat { text += " (in: \(predicateFormat))" }
        return text
    }
}
