import Foundation
import Testing
@testable import ObjectGraph

/// SplitMix64: a tiny deterministic PRNG, so every run generates the same
/// predicates and a failure reproduces from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random predicates over a fixed key set, in the forms the parser produces.
struct PredicateGenerator {
    var rng: SplitMix64

    static let scalarKeys = ["name", "age", "score", "birthday", "active", "nick", "size", "id"]
    static let toManyKeys = ["tags", "friends.name", "friends.age", "scores"]

    mutating func int(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(items.count)] }

    mutating func string() -> String {
        let alphabet: [Unicode.Scalar] = [
            "a", "b", "Z", " ", "*", "?", "\"", "'", "\\", "\n", "\t", "%", "@", "$", "#", "(", ")",
            "\u{01}", "\u{7F}", "é", "Ä", "ß", "\u{301}", "😀", "中", "0", "{", "}",
        ]
        var s = ""
        for _ in 0..<int(8) { s.unicodeScalars.append(pick(alphabet)) }
        return s
    }

    mutating func double() -> Double {
        switch int(6) {
        case 0: return Double(int(1000)) / 8
        case 1: return -Double(int(100_000)) / 3
        case 2: return Double(bitPattern: rng.next() & 0x7FEF_FFFF_FFFF_FFFF) // any finite positive
        case 3: return 0.0
        case 4: return 1e-300 * Double(int(10))
        default: return Double(Int64(bitPattern: rng.next())) / 7
        }
    }

    mutating func constant() -> FetchValue {
        switch int(11) {
        case 0: return .null
        case 1: return .bool(chance(50))
        case 2: return .int(Int64(int(200)) - 100)
        case 3: return .int(Int64(bitPattern: rng.next()))
        case 4: return .double(double())
        case 5, 6: return .string(string())
        case 7: return .date(Date(timeIntervalSinceReferenceDate: double()))
        case 8: return .decimal(Decimal(int(100_000)) / 100)
        case 9: return .uuid(UUID(uuid: (UInt8(int(256)), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, UInt8(int(256)))))
        default: return .int(Int64(int(50)))
        }
    }

    mutating func keyPath(toMany: Bool = false) -> FetchExpression {
        .key(pick(toMany ? PredicateGenerator.toManyKeys : PredicateGenerator.scalarKeys))
    }

    mutating func expression(depth: Int) -> FetchExpression {
        if depth <= 0 { return chance(50) ? keyPath() : .constant(constant()) }
        switch int(14) {
        case 0, 1, 2: return keyPath()
        case 3, 4: return .constant(constant())
        case 5: return .variable(pick(["MIN", "NAME", "X"]))
        case 6: return .aggregate((0..<int(4)).map { _ in .constant(constant()) })
        case 7: return .function(pick(["add:to:", "from:subtract:", "multiply:by:", "divide:by:", "raise:toPower:"]),
                                 [expression(depth: depth - 1), expression(depth: depth - 1)])
        case 8: return .function(pick(["sum:", "count:", "min:", "max:", "average:", "abs:", "lowercase:", "length:"]),
                                 [keyPath(toMany: chance(50))])
        case 9: return .keyPath(["tags", "@count"])
        case 10: return .keyPath(["friends", pick(["@sum", "@avg", "@min", "@max"]), "age"])
        case 11: return .function("now", [])
        case 12: return .evaluatedObject
        default:
            // BETWEEN takes a two-element range: a lone constant is a syntax error.
            let op = pick(FetchComparison.Operator.allCases)
            let bound: FetchExpression = op == .between ? .aggregate([.constant(constant()), .constant(constant())]) : .constant(constant())
            return .member(.subquery(collection: .key("friends"), variable: "f",
                                     predicate: .compare(.member(.variable("f"), [pick(["name", "age"])]), op, bound)),
                           ["@count"])
        }
    }

    mutating func comparison(depth: Int) -> FetchPredicate {
        let op = pick(FetchComparison.Operator.allCases)
        var modifier = FetchComparison.Modifier.direct
        var left = expression(depth: depth)
        if chance(20) {
            modifier = chance(50) ? .any : .all
            left = keyPath(toMany: true)
        }
        var right = expression(depth: depth)
        if op == .between || (op == .in && chance(70)) {
            right = .aggregate((0..<(op == .between ? 2 : int(4))).map { _ in .constant(constant()) })
        }
        var options: FetchComparison.Options = []
        if chance(30) { options.insert(.caseInsensitive) }
        if chance(30) { options.insert(.diacriticInsensitive) }
        let c = FetchPredicate.compare(left, op, right, modifier: modifier, options: options)
        return chance(10) ? .not(c) : c
    }

    mutating func predicate(depth: Int) -> FetchPredicate {
        if depth <= 0 || chance(35) { return comparison(depth: 2) }
        switch int(8) {
        case 0, 1, 2: return .and((0..<(2 + int(3))).map { _ in predicate(depth: depth - 1) })
        case 3, 4: return .or((0..<(2 + int(3))).map { _ in predicate(depth: depth - 1) })
        case 5, 6: return .not(predicate(depth: depth - 1))
        default: return chance(50) ? .truePredicate : .falsePredicate
        }
    }
}

@Suite struct PredicateRoundTripPropertyTests {
    static let dataset: [Any] = [
        ["name": "Ärger", "age": 41, "score": 2.5, "birthday": Date(timeIntervalSinceReferenceDate: 0), "active": true,
         "nick": NSNull(), "size": Int16(3), "id": UUID(), "tags": ["a", "B"], "scores": [1, 2.5, Decimal(3)],
         "friends": [["name": "Bob", "age": 3], ["name": NSNull(), "age": NSNull()]]] as [String: Any],
        ["name": NSNull(), "age": Int64.max, "score": -0.0, "birthday": NSNull(), "active": NSNumber(value: false),
         "nick": "x", "size": Decimal(string: "1.5") as Any, "id": NSNull(), "tags": Set(["z"]), "scores": [Int](),
         "friends": [[String: Any]]()] as [String: Any],
        ["name": "", "age": "not a number", "score": Double.nan, "birthday": 12, "active": "yes", "nick": [1],
         "size": NSNull(), "id": "u", "tags": NSNull(), "scores": NSNull(), "friends": NSNull()] as [String: Any?],
        ["name": "only a name"] as [String: Any],
        NSNull(),
        42,
    ]

    @Test func parseOfFormatIsIdentityAndEvaluationNeverCrashes() throws {
        var generator = PredicateGenerator(rng: SplitMix64(seed: 0x5EED_2026))
        var checked = 0, evaluated = 0, evaluationErrors = 0
        let variables: [String: Any?] = ["MIN": 3, "NAME": "Bob", "X": nil]
        for iteration in 0..<2000 {
            let p = generator.predicate(depth: 3)
            let text = p.predicateFormat
            let reparsed: FetchPredicate
            do {
                reparsed = try FetchPredicate(format: text)
            } catch {
                Issue.record("iteration \(iteration): \(text) does not parse: \(error)")
                continue
            }
            #expect(reparsed == p, "iteration \(iteration): \(text) reparsed as \(reparsed.predicateFormat)")
            #expect(reparsed.predicateFormat == text, "iteration \(iteration)")
            checked += 1
            for row in PredicateRoundTripPropertyTests.dataset {
                do {
                    _ = try reparsed.evaluate(with: row, substitutionVariables: variables)
                    evaluated += 1
                } catch is PredicateEvaluationError {
                    evaluationErrors += 1
                }
            }
            // Substitution keeps the result parseable and free of the variables.
            if iteration % 3 != 0 { continue }
            let substituted = p.withSubstitutionVariables(variables)
            #expect(substituted.variableNames.isEmpty)
            #expect(try FetchPredicate(format: substituted.predicateFormat) == substituted)
        }
        #expect(checked == 2000)
        // Both outcomes occur, so the generator exercises real evaluation.
        #expect(evaluated > 1000)
        #expect(evaluationErrors > 100)
    }

    /// The row evaluator's shortcuts for `[String: Any]` must agree with the
    /// general evaluator on every generated predicate and row.
    @Test func rowFastPathAgreesWithGeneralEvaluator() throws {
        var generator = PredicateGenerator(rng: SplitMix64(seed: 99))
        let rows = PredicateRoundTripPropertyTests.dataset.compactMap { $0 as? [String: Any] }
            + [["age": 30, "score": 30.0, "name": "b", "nick": NSNull()], ["age": Int64(5), "score": Float(1), "name": "B", "nick": 1]]
        var compared = 0
        for _ in 0..<1500 {
            let p = generator.chance(50) ? generator.comparison(depth: 0) : generator.predicate(depth: 2)
            for row in rows {
                var scope = EvaluationScope(variables: ["MIN": 3, "NAME": "Bob", "X": nil])
                let general = Result { try PredicateEvaluator.evaluate(p, object: row, dictionary: nil, scope: &scope) }
                let fast = Result { try p.evaluate(with: row, substitutionVariables: ["MIN": 3, "NAME": "Bob", "X": nil]) }
                switch (general, fast) {
                case let (.success(a), .success(b)): #expect(a == b, "\(p.predicateFormat) on \(row)")
                case (.failure, .failure): break
                default: Issue.record("\(p.predicateFormat) on \(row): general \(general), fast \(fast)")
                }
                compared += 1
            }
        }
        #expect(compared == 1500 * rows.count)
    }

    @Test func randomTextNeverCrashesTheParser() {
        var rng = SplitMix64(seed: 7)
        let pieces = ["a", "==", "(", ")", "'x'", "\"", "{", "}", ",", "AND", "OR", "NOT", "ANY", "%@", "%K", "$v",
                      "SUBQUERY", "FUNCTION", "CAST", "@count", ".", "[cd]", "LIKE", "1", "-", "0x", "1e", "\\", "#", "*", "nil"]
        var outcomes = 0
        for _ in 0..<3000 {
            var text = ""
            for _ in 0..<Int(rng.next() % 12) { text += pieces[Int(rng.next() % UInt64(pieces.count))] + " " }
            do {
                let p = try FetchPredicate(format: text, argumentArray: ["k", "v"])
                _ = try? p.evaluate(with: ["a": 1, "k": "x"])
                #expect(try FetchPredicate(format: p.predicateFormat) == p)
            } catch {
                #expect(error is PredicateSyntaxError)
            }
            outcomes += 1
        }
        #expect(outcomes == 3000)
    }
}
