import Foundation
import Testing
@testable import ObjectGraph

/// `FUNCTION($variable, 'selector:', …)` calls a method of the object bound
/// to the variable (`ExpressionFunctionTarget`), the Linux stand-in for
/// NSExpression's dynamic dispatch that migration value expressions use.
@Suite struct ExpressionFunctionTargetTests {
    final class Greeter: ExpressionFunctionTarget {
        func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
            guard selector == "greet:with:" else { throw ExpressionFunctionError.unknownSelector(selector, receiver: "Greeter") }
            return "\(arguments[1] ?? "hello") \(arguments[0] ?? "nobody")"
        }
    }

    @Test func methodOfAVariableIsCalled() throws {
        let e = try FetchExpression(format: "FUNCTION($greeter, 'greet:with:', name, 'hi')")
        #expect(try e.evaluate(with: ["name": "Ann"], substitutionVariables: ["greeter": Greeter()]) as? String == "hi Ann")
        // It formats back to the FUNCTION form, which parses to the same expression.
        #expect(e.expressionFormat == "FUNCTION($greeter, \"greet:with:\", name, \"hi\")")
        #expect(try FetchExpression(format: e.expressionFormat) == e)
        // Built-in functions keep their own form.
        #expect(try FetchExpression(format: "FUNCTION(name, 'uppercase:')").expressionFormat == "uppercase:(name)")
    }

    @Test func errors() throws {
        // Unknown selectors on anything but a variable still fail to parse.
        #expect(throws: PredicateSyntaxError.self) { try FetchExpression(format: "FUNCTION(name, 'greet:')") }
        let e = try FetchExpression(format: "FUNCTION($greeter, 'shout:', name)")
        #expect(throws: ExpressionFunctionError.self) { try e.evaluate(with: ["name": "Ann"], substitutionVariables: ["greeter": Greeter()]) }
        #expect(throws: PredicateEvaluationError.self) { try e.evaluate(with: ["name": "Ann"], substitutionVariables: ["greeter": "a string"]) }
        // Messaging nil gives nil.
        #expect(try e.evaluate(with: ["name": "Ann"], substitutionVariables: ["greeter": nil]) == nil)
    }

    /// A receiver's method that shares a built-in's name (`log:`, `max:`)
    /// is the receiver's: a policy's `log:base:` taking two arguments, or
    /// `max:` called on the policy itself, never reach the built-in.
    final class Logger: ExpressionFunctionTarget {
        func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
            switch selector {
            case "log:": return "logged \(arguments.first.flatMap { $0 } ?? "nothing")"
            case "max:": return "policy max"
            default: throw ExpressionFunctionError.unknownSelector(selector, receiver: "Logger")
            }
        }
    }

    @Test func methodNamedLikeABuiltInIsTheReceivers() throws {
        let twoArguments = try FetchExpression(format: "FUNCTION($policy, 'log:', name)")
        #expect(try twoArguments.evaluate(with: ["name": "Ann"], substitutionVariables: ["policy": Logger()]) as? String == "logged Ann")
        #expect(twoArguments.expressionFormat == "FUNCTION($policy, \"log:\", name)")
        #expect(try FetchExpression(format: twoArguments.expressionFormat) == twoArguments)
        // Same count as the built-in: the receiver decides at evaluation.
        let oneArgument = try FetchExpression(format: "FUNCTION($policy, 'max:')")
        #expect(try oneArgument.evaluate(with: [:], substitutionVariables: ["policy": Logger()]) as? String == "policy max")
        // Bound to plain values, the built-in runs as before.
        #expect(try oneArgument.evaluate(with: [:], substitutionVariables: ["policy": [1, 5, 3]]) as? Int == 5)
        // A receiver that is not a variable keeps the built-in's arity check.
        #expect(throws: PredicateSyntaxError.self) { try FetchExpression(format: "FUNCTION(name, 'log:', name)") }
    }
}
