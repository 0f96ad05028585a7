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

    @Test func resultTypesAreTheModelsAttributeTypes() throws {
        // XD-04: one set of type numbers for attributes and computed columns
        // (their raw values are pinned in AttributeTypeTests).
        #expect(ExpressionResultType.self == AttributeType.self)
        #expect(ExpressionResultType.integer64.rawValue == 300)
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
