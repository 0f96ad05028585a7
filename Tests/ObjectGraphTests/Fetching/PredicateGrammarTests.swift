import Foundation
import Testing
@testable import ObjectGraph

/// Every construct of the format syntax: parsed, formatted, re-parsed and
/// compared (FR-04: the predicate language a fetch request carries).
@Suite struct PredicateGrammarTests {
    /// Parses, checks the canonical form, re-parses the canonical form and
    /// checks the ASTs are equal and the canonical form is a fixed point.
    @discardableResult
    func roundTrip(_ format: String, _ args: [Any?] = [], canonical: String? = nil,
                   sourceLocation: SourceLocation = #_sourceLocation) throws -> FetchPredicate {
        let parsed = try FetchPredicate(format: format, argumentArray: args)
        let text = parsed.predicateFormat
        if let canonical { #expect(text == canonical, sourceLocation: sourceLocation) }
        let reparsed = try FetchPredicate(format: text)
        #expect(reparsed == parsed, "\(format) -> \(text)", sourceLocation: sourceLocation)
        #expect(reparsed.predicateFormat == text, sourceLocation: sourceLocation)
        return parsed
    }

    @Test func comparisonOperatorsAndSpellings() throws {
        try roundTrip("age = 3", canonical: "age == 3")
        try roundTrip("age == 3", canonical: "age == 3")
        try roundTrip("age != 3", canonical: "age != 3")
        try roundTrip("age <> 3", canonical: "age != 3")
        try roundTrip("age < 3", canonical: "age < 3")
        try roundTrip("age <= 3", canonical: "age <= 3")
        try roundTrip("age =< 3", canonical: "age <= 3")
        try roundTrip("age > 3", canonical: "age > 3")
        try roundTrip("age >= 3", canonical: "age >= 3")
        try roundTrip("age => 3", canonical: "age >= 3")
        try roundTrip("age BETWEEN {1, 10}", canonical: "age BETWEEN {1, 10}")
        try roundTrip("age IN {1, 2, 3}", canonical: "age IN {1, 2, 3}")
        try roundTrip("'x' IN tags", canonical: "\"x\" IN tags")
        try roundTrip("tags CONTAINS 'x'", canonical: "tags CONTAINS \"x\"")
        let p = try roundTrip("age >= 3")
        guard case let .comparison(c) = p else { Issue.record("not a comparison"); return }
        #expect(c.left == .keyPath(["age"]))
        #expect(c.operatorType == .greaterThanOrEqualTo)
        #expect(c.right == .constant(.int(3)))
    }

    @Test func stringOperatorsAndOptions() throws {
        try roundTrip("name BEGINSWITH 'A'", canonical: "name BEGINSWITH \"A\"")
        try roundTrip("name ENDSWITH[c] 'a'", canonical: "name ENDSWITH[c] \"a\"")
        try roundTrip("name CONTAINS[d] 'e'", canonical: "name CONTAINS[d] \"e\"")
        try roundTrip("name LIKE[cd] 'a?b*'", canonical: "name LIKE[cd] \"a?b*\"")
        try roundTrip("name MATCHES '[a-z]+'", canonical: "name MATCHES \"[a-z]+\"")
        try roundTrip("name like[DC] 'x'", canonical: "name LIKE[cd] \"x\"")
        try roundTrip("name ==[n] 'x'", canonical: "name ==[n] \"x\"")
    }

    @Test func compoundPredicatesAndPrecedence() throws {
        try roundTrip("a == 1 AND b == 2", canonical: "a == 1 AND b == 2")
        try roundTrip("a == 1 && b == 2 && c == 3", canonical: "a == 1 AND b == 2 AND c == 3")
        try roundTrip("a == 1 OR b == 2 || c == 3", canonical: "a == 1 OR b == 2 OR c == 3")
        try roundTrip("a == 1 OR b == 2 AND c == 3", canonical: "a == 1 OR (b == 2 AND c == 3)")
        try roundTrip("(a == 1 OR b == 2) AND c == 3", canonical: "(a == 1 OR b == 2) AND c == 3")
        try roundTrip("NOT a == 1", canonical: "NOT a == 1")
        try roundTrip("! (a == 1 AND b == 2)", canonical: "NOT (a == 1 AND b == 2)")
        try roundTrip("NOT NOT a == 1", canonical: "NOT NOT a == 1")
        try roundTrip("((a == 1))", canonical: "a == 1")
        // Explicit grouping of like compounds is kept, not flattened.
        let grouped = try roundTrip("(a == 1 AND b == 2) AND c == 3", canonical: "(a == 1 AND b == 2) AND c == 3")
        #expect(grouped != (try FetchPredicate(format: "a == 1 AND b == 2 AND c == 3")))
    }

    @Test func trueAndFalsePredicates() throws {
        #expect(try roundTrip("TRUEPREDICATE") == .truePredicate)
        #expect(try roundTrip("falsepredicate", canonical: "FALSEPREDICATE") == .falsePredicate)
        #expect(FetchPredicate(value: true) == .truePredicate)
        // FR-05: an empty AND is the same as no constraint.
        #expect(FetchPredicate.and([]) == .truePredicate)
        #expect(FetchPredicate.and([]).predicateFormat == "TRUEPREDICATE")
        #expect(FetchPredicate.or([]).predicateFormat == "FALSEPREDICATE")
    }

    @Test func keywordsAreCaseInsensitiveAndEscapable() throws {
        try roundTrip("a == 1 and b == 2 or not c == 3", canonical: "(a == 1 AND b == 2) OR NOT c == 3")
        try roundTrip("name beginswith 'x'", canonical: "name BEGINSWITH \"x\"")
        let escaped = try roundTrip("#IN == 3", canonical: "#IN == 3")
        #expect(escaped == .compare(.keyPath(["IN"]), .equalTo, .constant(.int(3))))
        try roundTrip("order.#select == 1", canonical: "order.select == 1")
        try roundTrip("a.#Like == 1", canonical: "a.#Like == 1")
        // Built-in reserved words in the key set are escaped by the formatter.
        #expect(FetchPredicate.compare(.keyPath(["size"]), .equalTo, .constant(.int(1))).predicateFormat == "#size == 1")
    }

    @Test func aggregateModifiers() throws {
        try roundTrip("ANY friends.name == 'Ann'", canonical: "ANY friends.name == \"Ann\"")
        try roundTrip("SOME friends.age > 3", canonical: "ANY friends.age > 3")
        try roundTrip("ALL friends.age > 3", canonical: "ALL friends.age > 3")
        let none = try roundTrip("NONE friends.age > 3", canonical: "NOT ANY friends.age > 3")
        guard case let .not(.comparison(c)) = none else { Issue.record("NONE should be NOT ANY"); return }
        #expect(c.modifier == .any)
    }

    @Test func keyPathsSelfAndCollectionOperators() throws {
        try roundTrip("SELF == 'x'", canonical: "SELF == \"x\"")
        try roundTrip("self.name == 'x'", canonical: "SELF.name == \"x\"")
        try roundTrip("department.manager.name == 'x'")
        try roundTrip("friends.@count > 2", canonical: "friends.@count > 2")
        try roundTrip("employees.@sum.salary > 100")
        try roundTrip("employees.@avg.salary > 100")
        try roundTrip("employees.@min.salary > 100")
        try roundTrip("employees.@max.salary > 100")
        try roundTrip("employees.@distinctUnionOfObjects.name CONTAINS 'x'")
        try roundTrip("@count == 0", canonical: "@count == 0")
        try roundTrip("{1, 2}.@count == 2", canonical: "{1, 2}.@count == 2")
    }

    @Test func variablesAndSubqueries() throws {
        try roundTrip("salary > $MIN", canonical: "salary > $MIN")
        try roundTrip("SUBQUERY(employees, $e, $e.salary > 10 AND $e.name BEGINSWITH 'A').@count > 0",
                      canonical: "SUBQUERY(employees, $e, $e.salary > 10 AND $e.name BEGINSWITH \"A\").@count > 0")
        try roundTrip("SUBQUERY(employees, $e, ANY $e.tags == 'x').@count == 0")
        try roundTrip("subquery(a, $x, subquery($x.b, $y, $y == 1).@count > 0).@count > 0",
                      canonical: "SUBQUERY(a, $x, SUBQUERY($x.b, $y, $y == 1).@count > 0).@count > 0")
    }

    @Test func stringLiteralsAndEscapes() throws {
        let p = try roundTrip(#"name == "a\n\t\"\'\\\u00e9""#, canonical: #"name == "a\n\t\"'\\é""#)
        #expect(p == .compare(.keyPath(["name"]), .equalTo, .constant(.string("a\n\t\"'\\é"))))
        try roundTrip(#"name == 'single "quoted"'"#, canonical: #"name == "single \"quoted\"""#)
        try roundTrip(#"name == "\u0001""#, canonical: #"name == "\u0001""#)
        let pair = try roundTrip(#"name == "\uD83D\uDE00""#)
        #expect(pair == .compare(.keyPath(["name"]), .equalTo, .constant(.string("😀"))))
        try roundTrip("name == \"emoji 😀 and ß\"")
    }

    @Test func numberLiterals() throws {
        func constant(_ format: String) throws -> FetchValue? {
            guard case let .comparison(c) = try roundTrip(format), case let .constant(v) = c.right else { return nil }
            return v
        }
        #expect(try constant("n == 42") == .int(42))
        #expect(try constant("n == 0x1F") == .int(31))
        #expect(try constant("n == 0o17") == .int(15))
        #expect(try constant("n == 0b101") == .int(5))
        #expect(try constant("n == -7") == .int(-7))
        #expect(try constant("n == 1.5") == .double(1.5))
        #expect(try constant("n == 1e3") == .double(1000))
        #expect(try constant("n == 2.5E-3") == .double(0.0025))
        #expect(try constant("n == -9223372036854775808") == .int(.min))
        #expect(try constant("n == 9223372036854775807") == .int(.max))
        #expect(try constant("n == 18446744073709551615") == .double(18446744073709551615))
        try roundTrip("n == 0x1F", canonical: "n == 31")
        try roundTrip("n == 1.0", canonical: "n == 1.0")
    }

    @Test func booleanAndNullLiterals() throws {
        try roundTrip("a == TRUE", canonical: "a == TRUE")
        try roundTrip("a == YES", canonical: "a == TRUE")
        try roundTrip("a == false", canonical: "a == FALSE")
        try roundTrip("a == NO", canonical: "a == FALSE")
        try roundTrip("a == NULL", canonical: "a == nil")
        try roundTrip("a == nil", canonical: "a == nil")
    }

    @Test func castLiterals() throws {
        // Core Data's reference date is 2001-01-01 00:00:00 UTC.
        let date = try roundTrip("d > CAST(0, 'NSDate')", canonical: "d > CAST(0.0, \"NSDate\")")
        #expect(date == .compare(.keyPath(["d"]), .greaterThan, .constant(.date(Date(timeIntervalSinceReferenceDate: 0)))))
        try roundTrip("d > CAST(-86400.5, \"NSDate\")", canonical: "d > CAST(-86400.5, \"NSDate\")")
        let number = try roundTrip("n == CAST('42', 'NSNumber')", canonical: "n == 42")
        #expect(number == .compare(.keyPath(["n"]), .equalTo, .constant(.int(42))))
        try roundTrip("n == CAST('2.5', 'NSNumber')", canonical: "n == 2.5")
        try roundTrip("n == CAST('1.25', 'NSDecimalNumber')", canonical: "n == CAST(\"1.25\", \"NSDecimalNumber\")")
        try roundTrip("d == CAST(stamp, 'NSDate')", canonical: "d == CAST(stamp, \"NSDate\")")
    }

    @Test func formatArguments() throws {
        let ann = try roundTrip("name == %@ AND age > %d", ["Ann", 30], canonical: "name == \"Ann\" AND age > 30")
        #expect(ann == (try FetchPredicate(format: "name == %@ AND age > %d", "Ann", 30)))
        try roundTrip("%K == %@", ["department.name", "R&D"], canonical: "department.name == \"R&D\"")
        try roundTrip("%K == 1", ["in"], canonical: "#in == 1")
        try roundTrip("a == %i AND b == %ld AND c == %f AND d == %s", [1, Int64(2), 2.5, "s"],
                      canonical: "a == 1 AND b == 2 AND c == 2.5 AND d == \"s\"")
        try roundTrip("n IN %@", [[1, 2, 3]], canonical: "n IN {1, 2, 3}")
        try roundTrip("n == %@", [nil], canonical: "n == nil")
        try roundTrip("n == %@", [NSNull()], canonical: "n == nil")
        try roundTrip("n == %@", [true], canonical: "n == TRUE")
        try roundTrip("n == %@", [Decimal(string: "3.14")!], canonical: "n == CAST(\"3.14\", \"NSDecimalNumber\")")
        let date = Date(timeIntervalSinceReferenceDate: 123_456.75)
        try roundTrip("d == %@", [date], canonical: "d == CAST(123456.75, \"NSDate\")")
        let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        try roundTrip("u == %@", [uuid], canonical: "u == CAST(\"E621E1F8-C36C-495A-93FC-0C247A3E6E5F\", \"NSUUID\")")
        try roundTrip("u == %@", [URL(string: "https://example.com/a")!], canonical: "u == CAST(\"https://example.com/a\", \"NSURL\")")
        try roundTrip("u == %@", [Data([1, 2, 3])], canonical: "u == CAST(\"AQID\", \"NSData\")")
        // Quoted specifiers are literal text, as in Apple's parser.
        try roundTrip("name == '%@'", canonical: "name == \"%@\"")
    }

    @Test func objectArgumentsCompareByIdentity() throws {
        final class Thing {}
        let thing = Thing()
        let p = try FetchPredicate(format: "owner == %@", thing)
        #expect(p == .compare(.keyPath(["owner"]), .equalTo, .constant(.object(thing))))
        #expect(p != .compare(.keyPath(["owner"]), .equalTo, .constant(.object(Thing()))))
        #expect(try p.evaluate(with: ["owner": thing]))
        #expect(try !p.evaluate(with: ["owner": Thing()]))
        struct ObjectID: Hashable { let n: Int }
        let byID = try FetchPredicate(format: "SELF IN %@", [ObjectID(n: 1), ObjectID(n: 2)])
        #expect(try byID.evaluate(with: ObjectID(n: 2)))
        #expect(try !byID.evaluate(with: ObjectID(n: 3)))
    }

    @Test func functions() throws {
        try roundTrip("sum:(values) > 3", canonical: "sum:(values) > 3")
        for name in ["count", "min", "max", "average", "median", "mode", "stddev", "abs", "lowercase", "uppercase", "length"] {
            try roundTrip("\(name):(values) != nil", canonical: "\(name):(values) != nil")
        }
        try roundTrip("d < now()", canonical: "d < now()")
        try roundTrip("FUNCTION(values, 'sum:') > 3", canonical: "sum:(values) > 3")
        try roundTrip("d < FUNCTION(SELF, 'now')", canonical: "d < now()")
        try roundTrip("FUNCTION(a, 'add:to:', 2) == 3", canonical: "a + 2 == 3")
        try roundTrip("FUNCTION(name, \"uppercase:\") == 'A'", canonical: "uppercase:(name) == \"A\"")
        try roundTrip("average:({1, 2, 3}) == 2", canonical: "average:({1, 2, 3}) == 2")
        try roundTrip("add:to:(a, 2) == 3", canonical: "a + 2 == 3")
    }

    @Test func arithmetic() throws {
        try roundTrip("a + b * c == 7", canonical: "a + b * c == 7")
        try roundTrip("(a + b) * c == 7", canonical: "(a + b) * c == 7")
        try roundTrip("a - (b - c) == 7", canonical: "a - (b - c) == 7")
        try roundTrip("a - b - c == 7", canonical: "a - b - c == 7")
        try roundTrip("a / 2 ** 3 > -1", canonical: "a / 2 ** 3 > -1")
        try roundTrip("-a < 0", canonical: "0 - a < 0")
        try roundTrip("a * -2.5 < 0", canonical: "a * -2.5 < 0")
        try roundTrip("(a + 1).description == 'x'", canonical: "(a + 1).description == \"x\"")
        try roundTrip("now() - 86400 < d", canonical: "now() - 86400 < d")
    }

    @Test func fetchRequestExpressionsParseAndFormat() throws {
        // FE-01, FE-05
        let p = try roundTrip("FETCH($REQ, $CTX, YES) > 0", canonical: "FETCH($REQ, $CTX, YES) > 0")
        guard case let .comparison(c) = p, case let .fetchRequest(f) = c.left else { Issue.record("no FETCH"); return }
        #expect(f.isCountOnlyRequest)
        #expect(f.requestExpression == .variable("REQ"))
        #expect(f.contextExpression == .variable("CTX"))
        #expect(c.left.expressionType == 50)
    }

    @Test func expressionsParseOnTheirOwn() throws {
        let e = try FetchExpression(format: "sum:(employees.salary) * 2")
        #expect(e.expressionFormat == "sum:(employees.salary) * 2")
        #expect(try FetchExpression(format: e.expressionFormat) == e)
        #expect(try FetchExpression(format: "%K", "a.b") == .keyPath(["a", "b"]))
        #expect(FetchExpression.member(.keyPath(["a"]), ["b"]) == .keyPath(["a", "b"]))
    }

    @Test func builtInCodeFormsFormatAndParse() throws {
        let p = FetchPredicate.and([
            .compare(.key("name"), .like, .value("a*"), options: [.caseInsensitive]),
            .or([.compare(.key("age"), .lessThan, .value(3)), .not(.compare(.key("tags"), .contains, .value("x")))]),
            .compare(.key("scores"), .greaterThan, .value(2.5), modifier: .all),
        ])
        #expect(p.predicateFormat == "name LIKE[c] \"a*\" AND (age < 3 OR NOT tags CONTAINS \"x\") AND ALL scores > 2.5")
        #expect(try FetchPredicate(format: p.predicateFormat) == p)
    }
}
