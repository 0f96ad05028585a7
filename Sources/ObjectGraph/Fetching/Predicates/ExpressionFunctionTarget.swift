import Foundation

/// An object that `FUNCTION(receiver, 'selector:', args…)` can call methods
/// on: the Linux stand-in for Objective-C's dynamic dispatch, which
/// `NSExpression` uses to call any method of the receiver.
///
/// The parser accepts a selector that is not one of ``FetchFunction``'s
/// built-ins only when the receiver is a `$variable`; when the expression is
/// evaluated, the variable's value must conform to this protocol. Migration
/// uses it for `$manager` (``MigrationManager``) and `$entityPolicy`
/// (``EntityMigrationPolicy``) in property-mapping value expressions.
///
/// ```swift
/// final class Greeter: ExpressionFunctionTarget {
///     func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
///         guard selector == "greet:" else { throw ExpressionFunctionError.unknownSelector(selector, receiver: "Greeter") }
///         return "hello \(arguments[0] ?? "nobody")"
///     }
/// }
/// let e = try FetchExpression(format: "FUNCTION($greeter, 'greet:', name)")
/// try e.evaluate(with: ["name": "Ann"], substitutionVariables: ["greeter": Greeter()])   // "hello Ann"
/// ```
public protocol ExpressionFunctionTarget: AnyObject {
    /// Runs the method named by `selector` (Objective-C spelling, one colon
    /// per argument) with the evaluated arguments.
    /// - Throws: ``ExpressionFunctionError/unknownSelector(_:receiver:)`` for
    ///   a selector the receiver does not implement, or the method's own error.
    func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any?
}

/// Why a `FUNCTION` call on an ``ExpressionFunctionTarget`` failed.
///
/// ```swift
/// func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
///     guard selector == "double:" else { throw ExpressionFunctionError.unknownSelector(selector, receiver: "Doubler") }
///     guard let n = arguments.first as? Int else { throw ExpressionFunctionError.badArguments(selector, reason: "expects an Int") }
///     return 2 * n
/// }
/// ```
public enum ExpressionFunctionError: Error, CustomStringConvertible {
    /// The receiver has no method of that name.
    case unknownSelector(String, receiver: String)
    /// The method was called with the wrong number or kind of arguments.
    case badArguments(String, reason: String)

    public var description: String {
        switch self {
        case let .unknownSelector(selector, receiver): return "\(receiver) does not respond to \(selector)"
        case let .badArguments(selector, reason): return "\(selector): \(reason)"
        }
    }
}

extension FetchFunction {
    /// True when `name` is one of the built-in functions.
    static func isBuiltIn(_ name: String) -> Bool { arities[name] != nil }

    /// True when `FUNCTION(receiver, 'name', …)` with `argumentCount`
    /// arguments (the receiver included) must be a method call: the name is
    /// not built in, or the receiver is a `$variable` and the built-in of
    /// that name takes another number of arguments (a migration policy's
    /// `log:with:`-style method may share a built-in's name).
    static func isMethodCall(_ name: String, receiver: FetchExpression, argumentCount: Int) -> Bool {
        guard let arity = arities[name] else { return true }
        guard case .variable = receiver else { return false }
        return arity.map { $0 != argumentCount } ?? false
    }

    /// A method call on the first argument: for a name that is not built in,
    /// and for any name when the first argument is an
    /// ``ExpressionFunctionTarget`` (its methods shadow the built-ins, as an
    /// Objective-C receiver's own methods would).
    static func callTarget(_ name: String, _ args: [Any?]) throws -> Any? {
        guard let receiver = args.first.flatMap({ $0 }) else {
            // Messaging nil gives nil, as in Objective-C.
            return nil
        }
        guard let target = receiver as? ExpressionFunctionTarget else {
            throw PredicateEvaluationError(.invalidOperand, operatorName: name,
                                           reason: "FUNCTION receiver \(KeyPathResolver.typeName(of: receiver)) cannot run '\(name)' (it is not an ExpressionFunctionTarget)")
        }
        return try target.evaluateFunction(name, arguments: Array(args.dropFirst()))
    }
}
