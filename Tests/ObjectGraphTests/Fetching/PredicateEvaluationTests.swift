import Foundation
import Testing
@testable import ObjectGraph

/// A KeyValueCoding type standing in for a managed object.
final class Employee: KeyValueCoding {
    let name: String
    let salary: Int
    var manager: Employee?
    var reports: Set<Employee> = []

    init(name: String, salary: Int, manager: Employee? = nil) {
        self.name = name
        self.salary = salary
        self.manager = manager
    }

    func value(forKey key: String) throws -> Any? {
        switch key {
        case "name": return name
        case "salary": return salary
        case "manager": return manager
        case "reports": return reports
        default: throw KeyValueCodingError.unknownKey(key, typeName: "Employee")
        }
    }
}

extension Employee: Hashable {
    static func == (a: Employee, b: Employee) -> Bool { a === b }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

@Suite struct PredicateEvaluationTests {
    func eval(_ format: String, _ object: Any?, _ args: Any?..., variables: [String: Any?] = [:],
              sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        try FetchPredicate(format: format, argumentArray: args).evaluate(with: object, substitutionVariables: variables)
    }

    let ann: [String: Any] = ["name": "Ann", "age": 41, "score": 2.5, "nick": NSNull(), "tags": ["a", "b"]]

    // MARK: Basic comparisons

    @Test func comparisonOperators() throws {
        #expect(try eval("age == 41", ann))
        #expect(try eval("age = 41", ann))
        #expect(try !eval("age != 41", ann))
        #expect(try eval("age <> 40", ann))
        #expect(try eval("age < 42", ann) && !eval("age < 41", ann))
        #expect(try eval("age <= 41", ann) && eval("age =< 41", ann))
        #expect(try eval("age > 40", ann) && !eval("age > 41", ann))
        #expect(try eval("age >= 41", ann) && eval("age => 41", ann))
        #expect(try eval("age BETWEEN {41, 50}", ann))
        #expect(try eval("age BETWEEN {1, 41}", ann))
        #expect(try !eval("age BETWEEN {42, 50}", ann))
        #expect(try eval("age BETWEEN %@", ann, [40, 42]))
        #expect(try eval("age IN {1, 41}", ann))
        #expect(try !eval("age IN {1, 2}", ann))
        #expect(try eval("'a' IN tags", ann))
        #expect(try eval("tags CONTAINS 'b'", ann))
        #expect(try !eval("tags CONTAINS 'c'", ann))
        #expect(try eval("TRUEPREDICATE", ann) && !eval("FALSEPREDICATE", ann))
    }

    @Test func compoundLogic() throws {
        #expect(try eval("age > 40 AND name == 'Ann'", ann))
        #expect(try !eval("age > 40 AND name == 'Bob'", ann))
        #expect(try eval("age > 50 OR name == 'Ann'", ann))
        #expect(try eval("NOT age > 50", ann))
        #expect(try eval("!(age > 50 || name == 'Bob')", ann))
        // Short-circuit: the unknown key on the right is never read.
        #expect(try eval("age > 50 AND nosuchkey == 1", ann) == false)
        #expect(try eval("age > 40 OR nosuchkey == 1", ann))
    }

    // MARK: Strings

    @Test func stringOperatorsWithOptionsOnAccentsAndCase() throws {
        let row: [String: Any] = ["name": "Ärger", "city": "São Paulo", "word": "Straße"]
        #expect(try eval("name LIKE[cd] 'arg*'", row))
        #expect(try !eval("name LIKE 'arg*'", row))
        #expect(try !eval("name LIKE[c] 'arg*'", row))
        #expect(try eval("name LIKE[c] 'ärg*'", row))
        #expect(try eval("name LIKE[d] 'Arg?r'", row))
        #expect(try eval("name ==[cd] 'ARGER'", row))
        #expect(try !eval("name == 'ARGER'", row))
        #expect(try eval("name ==[c] 'äRGER'", row))
        #expect(try eval("city BEGINSWITH[cd] 'sao'", row))
        #expect(try !eval("city BEGINSWITH 'sao'", row))
        #expect(try eval("city ENDSWITH[c] 'PAULO'", row))
        #expect(try eval("city CONTAINS[cd] 'O P'", row))
        #expect(try eval("city CONTAINS 'o P'", row))
        #expect(try !eval("city CONTAINS 'ao'", row))
        #expect(try eval("city CONTAINS[d] 'ao'", row))
        #expect(try eval("word ==[c] 'STRASSE'", row) || eval("word ==[c] 'straße'", row))
        #expect(try eval("'paulo' IN[c] city", row))
        #expect(try eval("name < 'B'", row) == false) // "Ä" sorts after "B" by code point
        #expect(try eval("name <[cd] 'B'", row))
    }

    @Test func likeWildcards() throws {
        let row: [String: Any] = ["s": "abcXdef", "star": "a*b"]
        #expect(try eval("s LIKE 'abc?def'", row))
        #expect(try eval("s LIKE '*X*'", row))
        #expect(try eval("s LIKE 'a*'", row))
        #expect(try eval("s LIKE '*'", row))
        #expect(try !eval("s LIKE 'abc?'", row))
        #expect(try !eval("s LIKE '?'", row))
        #expect(try eval("s LIKE 'a**f'", row))
        #expect(try eval("s LIKE '*c?d*'", row))
        // A backslash makes a wildcard literal.
        #expect(try eval(#"star LIKE 'a\\*b'"#, row))
        #expect(try !eval(#"s LIKE 'abc\\*'"#, row))
        #expect(try eval("s LIKE[c] 'ABCxDEF'", row))
    }

    /// The byte-level ASCII shortcut must agree with the Unicode path.
    @Test func asciiShortcutAgreesWithCharacterMatching() {
        var rng = SplitMix64(seed: 3)
        let alphabet = Array("aAbB*?\\x")
        func random(_ n: Int) -> String { String((0..<Int(rng.next() % UInt64(n))).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }) }
        var checked = 0
        for _ in 0..<6_000 {
            let subject = random(7), pattern = random(6)
            for options in [FetchComparison.Options(), [.caseInsensitive], [.caseInsensitive, .diacriticInsensitive]] {
                let foldedPattern = StringComparison.fold(pattern, options)
                let foldedSubject = StringComparison.fold(subject, options)
                let ci = options.contains(.caseInsensitive)
                #expect(StringComparison.asciiOperator(.like, subject, foldedPattern, caseInsensitive: ci) == LikePattern(foldedPattern).matches(foldedSubject), "\(subject) LIKE \(pattern)")
                #expect(StringComparison.asciiOperator(.beginsWith, subject, foldedPattern, caseInsensitive: ci) == foldedSubject.hasPrefix(foldedPattern))
                #expect(StringComparison.asciiOperator(.endsWith, subject, foldedPattern, caseInsensitive: ci) == foldedSubject.hasSuffix(foldedPattern))
                checked += 1
            }
        }
        #expect(checked == 18_000)
        #expect(StringComparison.asciiOperator(.like, "Ärger", "arg*", caseInsensitive: true) == nil)
    }

    @Test func matchesUsesAnchoredRegularExpressions() throws {
        let row: [String: Any] = ["code": "AB-1234", "name": "Émile"]
        #expect(try eval("code MATCHES '[A-Z]{2}-[0-9]{4}'", row))
        #expect(try !eval("code MATCHES '[0-9]{4}'", row)) // whole string, not a search
        #expect(try !eval("code MATCHES 'AB'", row))
        #expect(try eval("code MATCHES 'AB|AB-1234'", row)) // alternation still must cover all
        #expect(try eval("code MATCHES[c] 'ab-\\\\d+'", row))
        #expect(try !eval("code MATCHES 'ab-\\\\d+'", row))
        #expect(try eval("name MATCHES[cd] 'emile'", row))
        #expect(try !eval("name MATCHES 'emile'", row))
    }

    @Test func compiledPatternsAreCachedInTheComparison() throws {
        let like = try FetchPredicate(format: "name LIKE[cd] 'arg*'")
        guard case let .comparison(c) = like else { Issue.record("not a comparison"); return }
        #expect(c.plan.likePattern != nil)
        #expect(c.plan.foldedRightString == "arg*")
        let matches = try FetchPredicate(format: "name MATCHES 'a+'")
        guard case let .comparison(m) = matches, case .success? = m.plan.regex else { Issue.record("regex not compiled"); return }
    }

    // MARK: nil

    @Test func nilComparesEqualOnlyToNil() throws {
        let row: [String: Any] = ["nick": NSNull(), "name": "Ann", "age": 3]
        #expect(try eval("nick == nil", row))
        #expect(try !eval("nick != nil", row))
        #expect(try !eval("name == nil", row))
        #expect(try eval("name != nil", row))
        #expect(try !eval("nick == 'Ann'", row))
        #expect(try eval("nick != 'Ann'", row))
        // Ordering with nil is false on both sides, never an error.
        #expect(try !eval("nick < 3", row))
        #expect(try !eval("nick > 3", row))
        #expect(try !eval("nick >= nil", row))
        #expect(try !eval("age < nil", row))
        #expect(try !eval("nick BETWEEN {1, 2}", row))
        #expect(try !eval("nick BEGINSWITH 'a'", row))
        #expect(try !eval("nick LIKE '*'", row))
        #expect(try !eval("nick MATCHES '.*'", row))
        #expect(try !eval("nick CONTAINS 'a'", row))
        #expect(try !eval("nick IN {1, 2}", row))
        #expect(try eval("nick IN {1, nil}", row))
        // [String: Any?] rows hold nil directly.
        let optionalRow: [String: Any?] = ["nick": nil, "age": 3]
        #expect(try eval("nick == nil AND age == 3", optionalRow))
        // A nil to-one relationship yields nil for the rest of the path.
        let withNilManager: [String: Any] = ["manager": NSNull()]
        #expect(try eval("manager.name == nil", withNilManager))
    }

    // MARK: Numbers

    @Test func numbersOfDifferentTypesCompareByValue() throws {
        let row: [String: Any] = [
            "i": 1, "d": 1.0, "i16": Int16(1), "i64": Int64(1), "f": Float(1), "u8": UInt8(1),
            "dec": Decimal(1), "ns": NSNumber(value: 1), "t": true, "half": 0.5, "big": Int64.max,
            "decHalf": Decimal(string: "0.1")!,
        ]
        for key in ["i", "d", "i16", "i64", "f", "u8", "dec", "ns", "t"] {
            for other in ["i", "d", "i16", "i64", "f", "u8", "dec", "ns", "t"] {
                #expect(try eval("\(key) == \(other)", row), "\(key) == \(other)")
            }
            #expect(try eval("\(key) == 1.0", row))
            #expect(try eval("\(key) == 1", row))
            #expect(try eval("\(key) > 0.5", row))
            #expect(try eval("\(key) < 1.5", row))
            #expect(try eval("\(key) > half", row))
        }
        #expect(try eval("i == %@", row, Decimal(string: "1.000")!))
        #expect(try eval("t == TRUE AND t == 1 AND i == TRUE", row))
        // Large integers are not rounded through Double.
        #expect(try !eval("big == 9223372036854775806", row))
        #expect(try eval("big > 9223372036854775806", row))
        #expect(try eval("big < 9.3e18", row))
        // Decimals compare exactly: 0.1 is not the binary double 0.1.
        #expect(try eval("decHalf == %@", row, Decimal(string: "0.1")!))
        #expect(try eval("decHalf * 3 == %@", row, Decimal(string: "0.3")!))
        #expect(try eval("i IN {1.0, 2}", row))
    }

    @Test func datesCompareAsInstants() throws {
        let t0 = Date(timeIntervalSinceReferenceDate: 1000)
        let row: [String: Any] = ["d": t0]
        #expect(try eval("d == %@", row, Date(timeIntervalSinceReferenceDate: 1000)))
        #expect(try eval("d > CAST(999, 'NSDate')", row))
        #expect(try eval("d < CAST(1000.5, 'NSDate')", row))
        #expect(try eval("d BETWEEN {CAST(0, 'NSDate'), CAST(2000, 'NSDate')}", row))
        #expect(try eval("d < now()", row))
        #expect(try eval("d + 10 == CAST(1010, 'NSDate')", row))
    }

    @Test func uuidsAndURLsCompareByValue() throws {
        let id = UUID()
        #expect(try eval("id == %@", ["id": id], UUID(uuidString: id.uuidString)))
        #expect(try !eval("id == %@", ["id": id], UUID()))
        #expect(try eval("u == %@", ["u": URL(string: "file:///x")!], URL(string: "file:///x")))
    }

    // MARK: To-many

    let company: [String: Any] = [
        "name": "Acme",
        "employees": [
            ["name": "Ann", "salary": 50, "tags": ["lead"]],
            ["name": "Bob", "salary": 20, "tags": [String]()],
            ["name": "Cy", "salary": 30, "tags": ["new", "remote"]],
        ] as [[String: Any]],
        "nobody": [Any](),
    ]

    @Test func anyAllNoneOverToManyKeyPaths() throws {
        #expect(try eval("ANY employees.salary > 40", company))
        #expect(try !eval("ANY employees.salary > 60", company))
        #expect(try eval("SOME employees.name == 'Bob'", company))
        #expect(try eval("ALL employees.salary > 10", company))
        #expect(try !eval("ALL employees.salary > 20", company))
        #expect(try eval("NONE employees.salary > 60", company))
        #expect(try !eval("NONE employees.name BEGINSWITH 'A'", company))
        #expect(try eval("ANY employees.name LIKE[c] 'c*'", company))
        #expect(try eval("ANY employees.tags == 'remote'", company)) // nested to-many is flattened
        // Empty collections: ANY is false, ALL is true, NONE is true.
        #expect(try !eval("ANY nobody == 1", company))
        #expect(try eval("ALL nobody == 1", company))
        #expect(try eval("NONE nobody == 1", company))
        // Sets, NSArray and NSSet all count as to-many.
        #expect(try eval("ANY s == 2", ["s": Set([1, 2, 3])]))
        #expect(try eval("ANY s == 2", ["s": NSArray(array: [1, 2])]))
        #expect(try eval("ANY s == 'x'", ["s": NSSet(array: ["x"])]))
        #expect(try eval("s CONTAINS 2", ["s": NSOrderedSet(array: [2])]))
    }

    @Test func collectionOperators() throws {
        #expect(try eval("employees.@count == 3", company))
        #expect(try eval("employees.@sum.salary == 100", company))
        #expect(try eval("employees.@avg.salary > 33.3 AND employees.@avg.salary < 33.4", company))
        #expect(try eval("employees.@min.salary == 20", company))
        #expect(try eval("employees.@max.salary == 50", company))
        #expect(try eval("employees.@max.name == 'Cy'", company))
        #expect(try eval("nobody.@count == 0 AND nobody.@sum.x == 0", company))
        #expect(try eval("tags.@count == 2", ["tags": ["x", "x"]]))
        #expect(try eval("tags.@distinctUnionOfObjects.@count == 1", ["tags": ["x", "x"]]))
        let distinct = try FetchExpression(format: "employees.@distinctUnionOfObjects.salary").evaluate(with: ["employees": [["salary": 1], ["salary": 1], ["salary": 2]]])
        #expect((distinct as? [Any])?.count == 2)
    }

    @Test func subqueryWithCount() throws {
        #expect(try eval("SUBQUERY(employees, $e, $e.salary >= 30).@count == 2", company))
        #expect(try eval("SUBQUERY(employees, $e, $e.salary >= 30 AND $e.name BEGINSWITH 'C').@count == 1", company))
        #expect(try eval("SUBQUERY(employees, $e, ANY $e.tags == 'lead').@count == 1", company))
        #expect(try eval("SUBQUERY(employees, $e, $e.tags.@count > 0).@count == 2", company))
        #expect(try eval("SUBQUERY(nobody, $e, $e == 1).@count == 0", company))
        // The outer object stays reachable through a variable, and substitution
        // variables still resolve inside.
        #expect(try eval("SUBQUERY(employees, $e, $e.salary > $MIN).@count == 1", company, variables: ["MIN": 40]))
        // Nested subqueries shadow correctly.
        let nested: [String: Any] = ["groups": [["items": [1, 2, 3]], ["items": [4]]]]
        #expect(try eval("SUBQUERY(groups, $g, SUBQUERY($g.items, $i, $i > 1).@count >= 2).@count == 1", nested))
    }

    @Test func functionsEvaluate() throws {
        let row: [String: Any] = ["v": [1, 2, 3, 4, 4], "name": "Ann", "neg": -3]
        #expect(try eval("sum:(v) == 14", row))
        #expect(try eval("count:(v) == 5", row))
        #expect(try eval("min:(v) == 1 AND max:(v) == 4", row))
        #expect(try eval("average:(v) == 2.8", row))
        #expect(try eval("median:(v) == 3", row))
        #expect(try eval("mode:(v) == {4}", row))
        #expect(try eval("stddev:({2, 4, 4, 4, 5, 5, 7, 9}) == 2", row))
        #expect(try eval("abs:(neg) == 3", row))
        #expect(try eval("lowercase:(name) == 'ann' AND uppercase:(name) == 'ANN'", row))
        #expect(try eval("length:(name) == 3", row))
        #expect(try eval("FUNCTION(name, 'uppercase:') == 'ANN'", row))
        #expect(try eval("FUNCTION(v, 'sum:') == 14", row))
        #expect(try eval("2 + 3 * 4 == 14 AND (2 + 3) * 4 == 20 AND 7 / 2 == 3.5 AND 2 ** 10 == 1024", row))
        #expect(try eval("neg - 1 == -4 AND -neg == 3", row))
    }

    // MARK: Objects

    @Test func keyValueCodingObjectsAndRelationships() throws {
        let boss = Employee(name: "Zoe", salary: 90)
        let ann = Employee(name: "Ann", salary: 50, manager: boss)
        let bob = Employee(name: "Bob", salary: 20, manager: boss)
        boss.reports = [ann, bob]
        #expect(try eval("name == 'Ann' AND manager.name == 'Zoe'", ann))
        #expect(try eval("manager == nil", boss))
        #expect(try eval("manager.name == nil", boss))
        #expect(try eval("ANY reports.salary < 30", boss))
        #expect(try eval("reports.@count == 2 AND reports.@sum.salary == 70", boss))
        #expect(try eval("SUBQUERY(reports, $r, $r.manager == %@).@count == 2", boss, boss))
        #expect(try eval("SELF IN %@", ann, [bob, ann]))
        #expect(try eval("manager == %@", ann, boss))
        #expect(try ann.value(forKeyPath: "manager.name") as? String == "Zoe")
        // Dictionaries holding objects, and objects reached through dictionaries.
        #expect(try eval("owner.manager.salary > 80", ["owner": ann]))
    }

    @Test func selfComparisons() throws {
        #expect(try eval("SELF == 3", 3))
        #expect(try eval("SELF BEGINSWITH 'ab'", "abc"))
        #expect(try eval("SELF IN {1, 2}", 2))
        #expect(try eval("SELF == nil", nil))
        #expect(try eval("SELF.@count == 2", [1, 2]))
        #expect(try eval("ANY SELF > 1", [1, 2]))
    }

    @Test func objectIDsCompareByValueNotInstance() throws {
        // Core Data's SELF IN %@ / relationship == %@ take object IDs: two
        // instances naming the same store, entity and key are the same ID.
        let item = EntityDescription(name: "Item")
        let a = ManagedObjectID(entity: item, storeIdentifier: "S", primaryKey: 1)
        let sameAsA = ManagedObjectID(entity: item, storeIdentifier: "S", primaryKey: 1)
        let otherStore = ManagedObjectID(entity: item, storeIdentifier: "T", primaryKey: 1)
        let otherEntity = ManagedObjectID(entity: EntityDescription(name: "Other"), storeIdentifier: "S", primaryKey: 1)
        let temporary = ManagedObjectID(temporaryFor: item)
        #expect(try FetchPredicate(format: "SELF == %@", a).evaluate(with: sameAsA))
        #expect(try FetchPredicate(format: "SELF IN %@", [otherStore, a]).evaluate(with: sameAsA))
        #expect(try !FetchPredicate(format: "SELF IN %@", [otherStore, otherEntity, temporary]).evaluate(with: sameAsA))
        #expect(try FetchPredicate(format: "NOT (SELF IN %@)", [otherStore, otherEntity]).evaluate(with: a))
        #expect(try FetchPredicate(format: "SELF IN %@", Set([temporary, a])).evaluate(with: temporary))
        #expect(try FetchPredicate(format: "owner == %@", a).evaluate(with: ["owner": sameAsA]))
        #expect(try !FetchPredicate(format: "owner != %@", a).evaluate(with: ["owner": sameAsA]))
        #expect(try !FetchPredicate(format: "owner == %@", a).evaluate(with: ["owner": NSNull()]))
        #expect(try !FetchPredicate(format: "SELF IN %@", [a]).evaluate(with: "x-coredata://S/Item/p1"))
    }

    @Test func substitutionVariablesAtEvaluation() throws {
        #expect(try eval("age > $MIN", ann, variables: ["MIN": 40]))
        #expect(try !eval("age > $MIN", ann, variables: ["MIN": 41]))
        #expect(try eval("nick == $N", ann, variables: ["N": nil]))
    }

    /// The row fast path reads heap-allocated strings out of the row without
    /// a dynamic cast; the reference counts must stay balanced.
    @Test func fastPathKeepsLongStringsAlive() throws {
        let long = String(repeating: "héllo wörld ", count: 20)
        var row: [String: Any] = ["s": long + "!", "n": 5]
        let equal = try FetchPredicate(format: "s == %@", long + "!")
        let less = try FetchPredicate(format: "s < %@", long)
        var results = 0
        for _ in 0..<1_000 {
            if try equal.evaluate(with: row) { results += 1 }
            if try !less.evaluate(with: row) { results += 1 }
        }
        #expect(results == 2_000)
        #expect(row["s"] as? String == long + "!")
        row["s"] = nil
        #expect(row.count == 1)
    }

    /// A parsed predicate (with its compiled regex and LIKE pattern) is
    /// immutable and can be evaluated from many threads at once.
    @Test func concurrentEvaluationOfOnePredicate() throws {
        let p = try FetchPredicate(format: "name MATCHES '[a-z]+[0-9]' AND name LIKE[c] 'U*' AND age >= 0")
        let rows: [[String: Any]] = (0..<200).map { ["name": "user\($0 % 10)", "age": $0] }
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: 8)
        defer { counts.deallocate() }
        counts.initialize(repeating: -1)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var matched = 0
            for row in rows where (try? p.evaluate(with: row)) == true { matched += 1 }
            counts[worker] = matched
        }
        #expect(Array(counts) == Array(repeating: 200, count: 8))
    }

    @Test func jsonRowsEvaluate() throws {
        let json = #"[{"name": "Ann", "age": 41, "active": true, "nick": null, "score": 2.5}]"#
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [Any])
        let row = rows[0]
        #expect(try eval("name == 'Ann' AND age == 41 AND active == YES AND nick == nil AND score > 2", row))
        #expect(try eval("age == 41.0 AND active == 1", row))
    }
}
