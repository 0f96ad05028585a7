import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ExpressionDescriptionTests {
    let employees: [[String: Any]] = [
        ["name": "Ann", "salary": 50, "city": "Oslo"],
        ["name": "Bob", "salary": 70, "city": "Rome"],
        ["name": "Cy", "salary": 20, "city": "Oslo"],
    ]

    @Test func maxSalaryDictionaryResult() throws {
        // XD-01, XD-05: one dictionary holding the maximum, under the name.
        let top = ExpressionDescription(name: "maxSalary", expression: try FetchExpression(format: "max:(salary)"), expressionResultType: .integer64)
        let row = try ExpressionDescription.dictionaryResult(for: [top], over: employees)
        #expect(row.keys.sorted() == ["maxSalary"])
        // XD-04: an Integer64 result comes back as a 64-bit integer.
        #expect(row["maxSalary"] as? Int64 == 70)
    }

    @Test func severalAggregates() throws {
        let descriptions = [
            ExpressionDescription(name: "count", expression: try FetchExpression(format: "count:(name)"), expressionResultType: .integer32),
            ExpressionDescription(name: "total", expression: try FetchExpression(format: "sum:(salary)"), expressionResultType: .integer16),
            ExpressionDescription(name: "mean", expression: try FetchExpression(format: "average:(salary)"), expressionResultType: .double),
            ExpressionDescription(name: "cities", expression: try FetchExpression(format: "@distinctUnionOfObjects.city")),
            ExpressionDescription(name: "upper", expression: try FetchExpression(format: "uppercase:('x')"), expressionResultType: .string),
            ExpressionDescription(name: "nothing", expression: nil),
        ]
        let row = try ExpressionDescription.dictionaryResult(for: descriptions, over: employees)
        #expect(row["count"] as? Int32 == 3)
        #expect(row["total"] as? Int16 == 140)
        #expect(row["mean"] as? Double == 140.0 / 3)
        #expect((row["cities"] as? [Any])?.count == 2)
        #expect(row["upper"] as? String == "X")
        #expect(row["nothing"] == nil)
    }

    @Test func expressionAndResultTypeProperties() throws {
        // XD-03, XD-04
        let d = ExpressionDescription(name: "x")
        #expect(d.expression == nil)
        #expect(d.expressionResultType == .undefined)
        d.expression = .keyPath(["salary"])
        d.expressionResultType = .decimal
        #expect(try d.evaluate(with: ["salary": 2.5]) as? Decimal == Decimal(string: "2.5"))
        let copy = d.copy()
        #expect(copy == d)
        copy.name = "y"
        #expect(copy != d && d.name == "x")
    }

    @Test func resultTypeNumbersMatchCoreData() throws {
        let expected: [ExpressionResultType: Int] = [
            .undefined: 0, .integer16: 100, .integer32: 200, .integer64: 300, .decimal: 400, .double: 500,
            .float: 600, .string: 700, .boolean: 800, .date: 900, .binaryData: 1000, .uuid: 1100, .uri: 1200,
            .transformable: 1800, .objectID: 2000,
        ]
        for (type, raw) in expected { #expect(type.rawValue == raw) }
        #expect(ExpressionResultType.allCases.count == expected.count)
    }

    @Test func coercionFailuresThrowNamingTheDescription() throws {
        let tooBig = ExpressionDescription(name: "big", expression: .constant(.int(40_000)), expressionResultType: .integer16)
        do {
            _ = try tooBig.evaluate(with: nil)
            Issue.record("expected an overflow error")
        } catch let error as PredicateEvaluationError {
            #expect(error.keyPath == "big")
            #expect(error.kind == .typeMismatch)
        }
        #expect(throws: PredicateEvaluationError.self) { try ExpressionResultType.date.coerce("x") }
        #expect(try ExpressionResultType.boolean.coerce(1) as? Bool == true)
        #expect(try ExpressionResultType.float.coerce(1) as? Float == 1)
        #expect(try ExpressionResultType.string.coerce(nil) == nil)
    }
}

/// A context stand-in that runs "requests" that are predicates over a list.
struct ListContext: FetchRequestExecuting {
    let rows: [[String: Any]]
    func execute(_ request: Any) throws -> [Any] {
        guard let predicate = request as? FetchPredicate else {
            throw PredicateEvaluationError(.typeMismatch, operatorName: "FETCH", reason: "not a request: \(type(of: request))")
        }
        return try rows.filter { try predicate.evaluate(with: $0) }
    }
    func count(for request: Any) throws -> Int { try execute(request).count }
}

@Suite struct FetchRequestExpressionTests {
    let context = ListContext(rows: [["n": 1], ["n": 2], ["n": 3]])

    @Test func countOnlyAndExecute() throws {
        // FE-01, FE-02, FE-03, FE-04
        let request = try FetchPredicate(format: "n >= 2")
        let count = FetchRequestExpression.expression(forFetch: .variable("REQ"), context: .variable("CTX"), countOnly: true)
        let result = try count.evaluate(with: nil, substitutionVariables: ["REQ": request, "CTX": context])
        #expect(result as? Int == 2)
        let fetch = FetchRequestExpression(requestExpression: .variable("REQ"), contextExpression: .variable("CTX"), isCountOnlyRequest: false)
        let rows = try FetchExpression.fetchRequest(fetch).evaluate(with: nil, substitutionVariables: ["REQ": request, "CTX": context])
        #expect((rows as? [Any])?.count == 2)
        #expect(fetch.requestExpression == .variable("REQ"))
        #expect(fetch.contextExpression == .variable("CTX"))
        #expect(!fetch.isCountOnlyRequest)
        #expect(FetchRequestExpression.expressionType == 50) // FE-05
    }

    @Test func wrongArgumentTypesThrow() throws {
        // FE-06
        let e = FetchRequestExpression.expression(forFetch: .constant(.int(1)), context: .constant(.string("nope")), countOnly: true)
        do {
            _ = try e.evaluate(with: nil)
            Issue.record("expected an error")
        } catch let error as PredicateEvaluationError {
            #expect(error.operatorName == "FETCH")
            #expect(error.reason.contains("FetchRequestExecuting"))
        }
        let badRequest = FetchRequestExpression.expression(forFetch: .constant(.int(1)), context: .variable("CTX"), countOnly: false)
        #expect(throws: PredicateEvaluationError.self) { try badRequest.evaluate(with: nil, substitutionVariables: ["CTX": context]) }
    }

    @Test func usableInsideAPredicate() throws {
        let p = try FetchPredicate(format: "FETCH($REQ, $CTX, YES) == 2")
        #expect(try p.evaluate(with: nil, substitutionVariables: ["REQ": try FetchPredicate(format: "n < 3"), "CTX": context]))
    }
}

