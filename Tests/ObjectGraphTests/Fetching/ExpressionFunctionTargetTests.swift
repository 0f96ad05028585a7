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
}
