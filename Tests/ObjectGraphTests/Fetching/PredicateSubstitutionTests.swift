import Foundation
import Testing
@testable import ObjectGraph

/// Templates with `$VARIABLES` (MOM-FT-00, MOM-FT-03, FP-07).
@Suite struct PredicateSubstitutionTests {
    let people: [[String: Any]] = [
        ["name": "Ann", "salary": 5000, "nick": NSNull()],
        ["name": "Bob", "salary": 800, "nick": "B"],
        ["name": "Cy", "salary": 3, "nick": NSNull()],
    ]

    func matches(_ p: FetchPredicate) throws -> [String] {
        try people.filter { try p.evaluate(with: $0) }.compactMap { $0["name"] as? String }
    }

    @Test func substitutesConstants() throws {
        // MOM-FT-03 (a), (b)
        let template = try FetchPredicate(format: "salary > $MIN")
        let concrete = template.withSubstitutionVariables(["MIN": 1000])
        #expect(concrete.predicateFormat == "salary > 1000")
        #expect(try matches(concrete) == ["Ann"])
        #expect(template.predicateFormat == "salary > $MIN")
        #expect(try matches(template.withSubstitutionVariables(["MIN": 5])) == ["Ann", "Bob"])
    }

    @Test func nilSubstitutesNull() throws {
        // MOM-FT-03 (d)
        let template = try FetchPredicate(format: "nick == $N")
        #expect(template.withSubstitutionVariables(["N": nil]).predicateFormat == "nick == nil")
        #expect(template.withSubstitutionVariables(["N": NSNull()]).predicateFormat == "nick == nil")
        #expect(try matches(template.withSubstitutionVariables(["N": nil])) == ["Ann", "Cy"])
    }

    @Test func extraKeysAreIgnoredAndMissingOnesStay() throws {
        // MOM-FT-03 (e)
        let template = try FetchPredicate(format: "salary > $MIN AND name != $NAME")
        let partial = template.withSubstitutionVariables(["MIN": 1, "UNUSED": 3])
        #expect(partial.predicateFormat == "salary > 1 AND name != $NAME")
        #expect(partial.variableNames == ["NAME"])
        #expect(template.variableNames == ["MIN", "NAME"])
    }

    @Test func throwingVariantNamesEveryMissingVariable() throws {
        // MOM-FT-03 (c)
        let template = try FetchPredicate(format: "salary > $MIN AND (name == $NAME OR nick IN $NICKS) AND salary < $MIN")
        do {
            _ = try template.substitutingVariables(["NAME": "Ann"])
            Issue.record("expected missing variables")
        } catch let error as PredicateSubstitutionError {
            #expect(error.missingVariables == ["MIN", "NICKS"])
            #expect(error.description == "missing substitution variables $MIN, $NICKS for predicate: salary > $MIN AND (name == \"Ann\" OR nick IN $NICKS) AND salary < $MIN".replacingOccurrences(of: "\"Ann\"", with: "$NAME"))
        }
        let full = try template.substitutingVariables(["MIN": 1, "NAME": "Ann", "NICKS": ["B"]])
        #expect(full.predicateFormat == "salary > 1 AND (name == \"Ann\" OR nick IN {\"B\"}) AND salary < 1")
        #expect(full.variableNames.isEmpty)
        // A nil value counts as supplied.
        #expect(try FetchPredicate(format: "nick == $N").substitutingVariables(["N": nil]).predicateFormat == "nick == nil")
    }

    @Test func subqueryVariablesAreNotSubstitutedOrReported() throws {
        let template = try FetchPredicate(format: "SUBQUERY(employees, $e, $e.salary > $MIN).@count > 0")
        #expect(template.variableNames == ["MIN"])
        let concrete = try template.substitutingVariables(["MIN": 10, "e": 99])
        #expect(concrete.predicateFormat == "SUBQUERY(employees, $e, $e.salary > 10).@count > 0")
    }

    @Test func fetchSourceStyleObjectVariables() throws {
        // FP-07: `$FETCH_SOURCE` is the managed object that owns a fetched property.
        let boss = Employee(name: "Zoe", salary: 1)
        let ann = Employee(name: "Ann", salary: 2, manager: boss)
        let bob = Employee(name: "Bob", salary: 2)
        let template = try FetchPredicate(format: "manager == $FETCH_SOURCE")
        let bound = try template.substitutingVariables(["FETCH_SOURCE": boss])
        #expect(try bound.evaluate(with: ann))
        #expect(try !bound.evaluate(with: bob))
        #expect(try template.evaluate(with: ann, substitutionVariables: ["FETCH_SOURCE": boss]))
    }

    @Test func substitutedArraysBecomeAggregates() throws {
        let p = try FetchPredicate(format: "name IN $NAMES").substitutingVariables(["NAMES": ["Ann", "Cy"]])
        #expect(p.predicateFormat == "name IN {\"Ann\", \"Cy\"}")
        #expect(try FetchPredicate(format: p.predicateFormat) == p)
        #expect(try matches(p) == ["Ann", "Cy"])
    }

    @Test func expressionsSubstituteToo() throws {
        let e = try FetchExpression(format: "$A + $B")
        #expect(e.variableNames == ["A", "B"])
        #expect(try e.withSubstitutionVariables(["A": 1, "B": 2]).evaluate(with: nil) as? Int == 3)
    }
}
