import Foundation
import Testing
@testable import ObjectGraph

/// The KeyValueCoding hook managed objects will conform to (KVC-01, KVC-03).
@Suite struct KeyValueCodingTests {
    struct Department: KeyValueCoding {
        var name: String
        var staff: [Employee]
        func value(forKey key: String) throws -> Any? {
            switch key {
            case "name": return name
            case "staff": return staff
            default: throw KeyValueCodingError.unknownKey(key, typeName: "Department")
            }
        }
    }

    @Test func defaultKeyPathWalksObjectsDictionariesAndToManys() throws {
        let boss = Employee(name: "Zoe", salary: 9)
        let dept = Department(name: "R&D", staff: [Employee(name: "Ann", salary: 1, manager: boss), Employee(name: "Bob", salary: 2)])
        #expect(try dept.value(forKeyPath: "name") as? String == "R&D")
        let names = try #require(try dept.value(forKeyPath: "staff.name") as? [Any?])
        #expect(names.compactMap { $0 as? String } == ["Ann", "Bob"])
        #expect(try dept.value(forKeyPath: "staff.@count") as? Int == 2)
        #expect(try dept.value(forKeyPath: "staff.@sum.salary") as? Int == 3)
        // A nil to-one relationship part-way gives nil for the rest.
        let managers = try #require(try dept.value(forKeyPath: "staff.manager.name") as? [Any?])
        #expect(managers.count == 2)
        #expect(managers[0] as? String == "Zoe")
        #expect(managers[1] == nil)
    }

    @Test func unknownKeysThrowNamingTheKeyAndPath() throws {
        let dept = Department(name: "R&D", staff: [])
        #expect(throws: KeyValueCodingError.unknownKey("budget", typeName: "Department")) { try dept.value(forKey: "budget") }
        do {
            _ = try dept.value(forKeyPath: "budget.total")
            Issue.record("expected an error")
        } catch let error as PredicateEvaluationError {
            #expect(error.kind == .unknownKey)
            #expect(error.keyPath == "budget.total")
            #expect(error.reason == "unknown key 'budget': Department has no key 'budget'")
        }
        #expect(KeyValueCodingError.unknownKey("x", typeName: "T").description == "T has no key 'x'")
    }

    @Test func predicatesEvaluateAgainstConformingValues() throws {
        let dept = Department(name: "R&D", staff: [Employee(name: "Ann", salary: 10), Employee(name: "Bob", salary: 20)])
        #expect(try FetchPredicate(format: "name == 'R&D' AND ANY staff.salary > 15 AND staff.@avg.salary == 15").evaluate(with: dept))
        #expect(try FetchPredicate(format: "SUBQUERY(staff, $s, $s.name BEGINSWITH 'A').@count == 1").evaluate(with: dept))
    }
}
