import Foundation
import Testing
@testable import ObjectGraph

/// Bad input of every kind gets an error that says where and why; nothing traps.
@Suite struct PredicateErrorTests {
    func syntaxError(_ format: String, _ args: [Any?] = [], sourceLocation: SourceLocation = #_sourceLocation) -> PredicateSyntaxError? {
        do {
            let p = try FetchPredicate(format: format, argumentArray: args)
            Issue.record("expected a syntax error, parsed \(p)", sourceLocation: sourceLocation)
            return nil
        } catch let error as PredicateSyntaxError {
            #expect(error.format == format, sourceLocation: sourceLocation)
            #expect(error.column == error.position + 1, sourceLocation: sourceLocation)
            #expect(error.description.hasPrefix("predicate syntax error at column \(error.column): "), sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("wrong error type \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    func evaluationError(_ format: String, _ object: Any?, sourceLocation: SourceLocation = #_sourceLocation) -> PredicateEvaluationError? {
        do {
            let result = try FetchPredicate(format: format).evaluate(with: object)
            Issue.record("expected an evaluation error, got \(result)", sourceLocation: sourceLocation)
            return nil
        } catch let error as PredicateEvaluationError {
            return error
        } catch {
            Issue.record("wrong error type \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// BETWEEN takes a two-element range; anything else that can be judged
    /// while parsing is refused there, at the range's column.
    @Test func betweenNeedsTwoBounds() throws {
        let scalar = try #require(syntaxError("age BETWEEN 3"))
        #expect(scalar.position == 12)
        #expect(scalar.reason == "BETWEEN needs a range of two values such as {1, 10}; got '3'")
        #expect(try #require(syntaxError("age BETWEEN {1, 2, 3}")).reason.hasSuffix("got 3 values"))
        #expect(try #require(syntaxError("x == 1 AND age BETWEEN {1}")).position == 23)
        #expect(try #require(syntaxError("age BETWEEN %@", [[1]])).reason.hasSuffix("got 1 value"))
        #expect(try #require(syntaxError("age BETWEEN %@", [5])).reason.contains("got '5'"))
        // Well-formed ranges, and ranges known only when evaluated, parse.
        #expect(try FetchPredicate(format: "age BETWEEN {1, 2}").evaluate(with: ["age": 2]))
        #expect(try FetchPredicate(format: "age BETWEEN %@", argumentArray: [[1, 5]]).evaluate(with: ["age": 2]))
        #expect(try FetchPredicate(format: "age BETWEEN $range").withSubstitutionVariables(["range": [1, 5]]).evaluate(with: ["age": 2]))
    }

    @Test func unbalancedParentheses() throws {
        let open = try #require(syntaxError("(a == 1 AND (b == 2)"))
        #expect(open.position == 20)
        #expect(open.reason == "expected ')' to close '(' opened at column 1, found end of input")
        #expect(open.description == "predicate syntax error at column 21: expected ')' to close '(' opened at column 1, found end of input")
        let inner = try #require(syntaxError("a == 1 AND (b == 2 OR c == 3"))
        #expect(inner.reason.contains("to close '(' opened at column 12"))
        let close = try #require(syntaxError("a == 1)"))
        #expect(close.position == 6)
        #expect(close.reason.contains("')' has no matching '('"))
        let brace = try #require(syntaxError("a IN {1, 2"))
        #expect(brace.reason.contains("to close the aggregate '{' opened at column 6"))
        #expect(brace.caretDiagram == "a IN {1, 2\n          ^")
    }

    @Test func unknownOperator() throws {
        let word = try #require(syntaxError("name EQUALS 'x'"))
        #expect(word.position == 5)
        #expect(word.reason.hasPrefix("unknown operator 'EQUALS'; expected one of =="))
        let symbol = try #require(syntaxError("name ~= 'x'"))
        #expect(symbol.position == 5)
        #expect(symbol.reason == "unexpected character '~'")
        let missing = try #require(syntaxError("name"))
        #expect(missing.reason.contains("expected a comparison operator"))
        #expect(missing.reason.contains("found end of input"))
        let option = try #require(syntaxError("name LIKE[x] 'a'"))
        #expect(option.reason.contains("unknown comparison option 'x'"))
    }

    @Test func unterminatedString() throws {
        let error = try #require(syntaxError("name == 'Ann"))
        #expect(error.position == 8)
        #expect(error.reason.hasPrefix("unterminated string literal"))
        let escaped = try #require(syntaxError(#"name == "Ann\""#))
        #expect(escaped.reason.hasPrefix("unterminated string literal"))
        let badEscape = try #require(syntaxError(#"name == "a\qb""#))
        #expect(badEscape.reason.contains("unknown escape sequence '\\q'"))
        let badUnicode = try #require(syntaxError(#"name == "\u12""#))
        #expect(badUnicode.reason.contains("\\u escape"))
    }

    @Test func formatArgumentMismatches() throws {
        let missing = try #require(syntaxError("name == %@"))
        #expect(missing.position == 8)
        #expect(missing.reason == "format specifier %@ has no argument: only 0 arguments were given")
        let secondMissing = try #require(syntaxError("a == %@ AND b == %d", ["x"]))
        #expect(secondMissing.position == 17)
        #expect(secondMissing.reason.contains("%d has no argument: only 1 argument was given"))
        let extra = try #require(syntaxError("a == %@", ["x", "y"]))
        #expect(extra.reason.contains("too many format arguments"))
        let kind = try #require(syntaxError("age > %d", ["thirty"]))
        #expect(kind.reason.hasPrefix("%d needs an integer argument, got String"))
        let key = try #require(syntaxError("%K == 1", [3]))
        #expect(key.reason.hasPrefix("%K needs a key path string argument"))
        let float = try #require(syntaxError("a == %f", ["x"]))
        #expect(float.reason.hasPrefix("%f needs a floating-point argument"))
        let string = try #require(syntaxError("a == %s", [3]))
        #expect(string.reason.hasPrefix("%s needs a string argument"))
        let unknownSpec = try #require(syntaxError("a == %y"))
        #expect(unknownSpec.reason.hasPrefix("unknown format specifier"))
    }

    @Test func otherSyntaxErrors() throws {
        #expect(syntaxError("")?.reason == "empty predicate format string")
        #expect(syntaxError("a == ")?.reason == "expected an expression, found end of input")
        #expect(syntaxError("a == 1 AND")?.reason == "expected an expression, found end of input")
        #expect(syntaxError("IN == 3")?.reason.contains("write #IN to use it as a key") == true)
        #expect(syntaxError("a.in == 3")?.reason.contains("write #in to use it as a key") == true)
        #expect(syntaxError("a == 0x")?.reason.contains("invalid base-16 integer literal") == true)
        #expect(syntaxError("a == 12abc")?.reason.contains("invalid number literal") == true)
        #expect(syntaxError("foo:(a) == 1")?.reason.hasPrefix("unknown function 'foo:'") == true)
        #expect(syntaxError("abs:(a, b) == 1")?.reason == "function 'abs:' takes 1 argument, got 2")
        #expect(syntaxError("d == CAST(1, 'NSWidget')")?.reason.hasPrefix("unknown CAST type \"NSWidget\"") == true)
        #expect(syntaxError("d == CAST('abc', 'NSNumber')")?.reason.contains("cannot cast String") == true)
        #expect(syntaxError("SUBQUERY(a, x, x == 1).@count > 0")?.reason.contains("expected a $variable") == true)
        #expect(syntaxError("a == $")?.reason == "expected a variable name after '$'")
        #expect(syntaxError("a == 1 b == 2")?.reason.hasPrefix("unexpected 'b' after a complete predicate") == true)
        #expect(syntaxError("FETCH($a, $b, 3) == 1")?.reason.contains("YES or NO") == true)
    }

    @Test func unknownKeyAtEvaluation() throws {
        let error = try #require(evaluationError("nmae == 'Ann'", ["name": "Ann"]))
        #expect(error.kind == .unknownKey)
        #expect(error.keyPath == "nmae")
        #expect(error.reason.contains("unknown key 'nmae'"))
        #expect(error.description.contains("in key path 'nmae'"))
        #expect(error.predicateFormat == "nmae == \"Ann\"")
        let deep = try #require(evaluationError("department.nmae == 'R&D'", ["department": ["name": "R&D"]]))
        #expect(deep.keyPath == "department.nmae")
        #expect(deep.reason.contains("unknown key 'nmae'"))
        let kvc = try #require(evaluationError("salry > 3", Employee(name: "A", salary: 1)))
        #expect(kvc.kind == .unknownKey)
        #expect(kvc.reason == "unknown key 'salry': Employee has no key 'salry'")
        let scalar = try #require(evaluationError("name.given == 'x'", ["name": "Ann"]))
        #expect(scalar.reason.contains("String has no key 'given'"))
    }

    @Test func typeMismatchAtEvaluation() throws {
        let error = try #require(evaluationError("name > 3", ["name": "Ann"]))
        #expect(error.kind == .typeMismatch)
        #expect(error.operatorName == ">")
        #expect(error.reason == "cannot compare String \"Ann\" with Int 3")
        #expect(error.description == "predicate evaluation error for operator '>': cannot compare String \"Ann\" with Int 3 (in: name > 3)")
        #expect(evaluationError("age BEGINSWITH 'x'", ["age": 3])?.operatorName == "BEGINSWITH")
        #expect(evaluationError("age LIKE 'x'", ["age": 3])?.operatorName == "LIKE")
        #expect(evaluationError("d < 3", ["d": Date()])?.operatorName == "<")
        #expect(evaluationError("ANY age == 3", ["age": 3])?.operatorName == "ANY")
        #expect(evaluationError("age BETWEEN limit", ["age": 3, "limit": 3])?.operatorName == "BETWEEN")
        #expect(evaluationError("age IN 3", ["age": 3])?.operatorName == "IN")
        #expect(evaluationError("age CONTAINS 3", ["age": 3])?.operatorName == "CONTAINS")
        #expect(evaluationError("name + 1 == 2", ["name": "x"])?.operatorName == "+")
        #expect(evaluationError("sum:(names) == 2", ["names": ["x"]])?.operatorName == "sum:")
        #expect(evaluationError("name.@count == 2", ["name": "x"])?.operatorName == "@count")
        #expect(evaluationError("a / 0 == 2", ["a": 1])?.kind == .arithmetic)
        // Equality across kinds is simply false, as in Core Data.
        #expect(try FetchPredicate(format: "name == 3").evaluate(with: ["name": "Ann"]) == false)
    }

    @Test func otherEvaluationErrors() throws {
        let unbound = try #require(evaluationError("age > $MIN", ["age": 3]))
        #expect(unbound.kind == .unboundVariable)
        #expect(unbound.reason == "no value for variable $MIN")
        let regex = try #require(evaluationError("name MATCHES '(['", ["name": "x"]))
        #expect(regex.operatorName == "MATCHES")
        #expect(regex.reason.contains("not a valid regular expression"))
        let sub = try #require(evaluationError("SUBQUERY(name, $x, $x == 1).@count == 0", ["name": "x"]))
        #expect(sub.operatorName == "SUBQUERY")
    }

    @Test func deepNestingIsAnErrorNotACrash() throws {
        let deep = String(repeating: "(", count: 20_000) + "a == 1" + String(repeating: ")", count: 20_000)
        let error = try #require(syntaxError(deep))
        #expect(error.reason.hasPrefix("nesting is too deep"))
        #expect(syntaxError(String(repeating: "NOT ", count: 5000) + "a == 1")?.reason.hasPrefix("nesting is too deep") == true)
        #expect(syntaxError("a == " + String(repeating: "-", count: 5000) + "b")?.reason.hasPrefix("nesting is too deep") == true)
        let unclosed = try #require(syntaxError(String(repeating: "(", count: 40) + "a"))
        #expect(unclosed.position == 41)
        // Fifty levels are fine.
        let fine = String(repeating: "(", count: 50) + "a == 1" + String(repeating: ")", count: 50)
        #expect(try FetchPredicate(format: fine) == .compare(.key("a"), .equalTo, .value(1)))
    }

    @Test func nanDatesDoNotTrapInErrorMessages() throws {
        // Found by the row-evaluator property test: Foundation traps describing a NaN Date.
        let error = try #require(evaluationError("CAST(1, 'NSDate') - score < ''", ["score": Double.nan]))
        #expect(error.kind == .typeMismatch)
        #expect(error.reason.contains("Date invalid date (NaN) with String"))
    }

    @Test func arithmeticOverflowDoesNotTrap() throws {
        let big: [String: Any] = ["a": Int64.max, "v": [Int64.max, Int64.max, true]]
        #expect(try FetchPredicate(format: "a + 1 > a").evaluate(with: big))
        #expect(try FetchPredicate(format: "a * a > a").evaluate(with: big))
        #expect(try FetchPredicate(format: "sum:(v) > a").evaluate(with: big))
        #expect(try FetchPredicate(format: "abs:(-9223372036854775808) > 0").evaluate(with: nil))
        #expect(try FetchPredicate(format: "-9223372036854775808 - 1 < 0").evaluate(with: nil))
        #expect(try FetchPredicate(format: "modulus:by:(-9223372036854775808, -1) == 0").evaluate(with: nil))
    }

    /// Hostile strings: every prefix of a set of valid predicates, plus noise,
    /// must parse or throw, never trap.
    @Test func prefixesAndNoiseNeverCrash() {
        let samples = [
            "SUBQUERY(employees, $e, $e.salary > %@ AND ANY $e.tags LIKE[cd] 'x*').@count > 0",
            "name MATCHES[c] '\\u00e9+' OR (age BETWEEN {1, 2} AND NOT d < CAST(3, 'NSDate'))",
            "#IN == 0x1F || sum:(v) * -2 ** 3 >= FUNCTION(a, 'abs:') && FETCH($r, $c, NO) == nil",
        ]
        var outcomes = 0
        for sample in samples {
            let chars = Array(sample)
            for end in 0...chars.count {
                let prefix = String(chars[0..<end])
                for candidate in [prefix, prefix + ")", prefix + "'", "(" + prefix, prefix + "]"] {
                    do {
                        let p = try FetchPredicate(format: candidate, argumentArray: [1])
                        _ = try? p.evaluate(with: ["employees": [["salary": 1]]])
                        outcomes += 1
                    } catch is PredicateSyntaxError {
                        outcomes += 1
                    } catch {
                        outcomes += 1
                    }
                }
            }
        }
        #expect(outcomes > 500)
    }
}
