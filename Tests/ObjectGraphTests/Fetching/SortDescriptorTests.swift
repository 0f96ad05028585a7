import Foundation
import Testing
@testable import ObjectGraph

@Suite struct SortDescriptorTests {
    func names(_ rows: [[String: Any]]) -> [String] { rows.compactMap { $0["id"] as? String } }

    @Test func lastNameThenFirstName() throws {
        // FR-06: descriptors apply in array order; later ones break ties.
        let people: [[String: Any]] = [
            ["id": "1", "last": "Smith", "first": "Zed"],
            ["id": "2", "last": "Adams", "first": "Bea"],
            ["id": "3", "last": "Smith", "first": "Amy"],
            ["id": "4", "last": "Adams", "first": "Al"],
        ]
        let sorted = try FetchSortDescriptor.sort(people, using: [
            FetchSortDescriptor(key: "last"), FetchSortDescriptor(key: "first"),
        ])
        #expect(names(sorted) == ["4", "2", "3", "1"])
        let lastDescending = try FetchSortDescriptor.sort(people, using: [
            FetchSortDescriptor(key: "last", ascending: false), FetchSortDescriptor(key: "first"),
        ])
        #expect(names(lastDescending) == ["3", "1", "4", "2"])
    }

    @Test func nilSortsFirstAscendingAndLastDescending() throws {
        let rows: [[String: Any]] = [
            ["id": "a", "n": 2], ["id": "b", "n": NSNull()], ["id": "c", "n": 1], ["id": "d", "n": NSNull()],
        ]
        #expect(names(try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "n")])) == ["b", "d", "c", "a"])
        #expect(names(try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "n", ascending: false)])) == ["a", "c", "b", "d"])
        #expect(try FetchSortDescriptor(key: "n").compare(["n": NSNull()], ["n": -1_000]) == .orderedAscending)
        #expect(try FetchSortDescriptor(key: "n", ascending: false).compare(["n": NSNull()], ["n": 5]) == .orderedDescending)
    }

    @Test func sortIsStable() throws {
        var rows: [[String: Any]] = []
        for i in 0..<200 { rows.append(["id": String(i), "group": i % 3]) }
        let sorted = try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "group")])
        let ids = sorted.compactMap { Int($0["id"] as? String ?? "") }
        for g in 0..<3 {
            let inGroup = ids.filter { $0 % 3 == g }
            #expect(inGroup == inGroup.sorted())
        }
        #expect(ids.prefix(67).allSatisfy { $0 % 3 == 0 })
    }

    @Test func selectorsByName() throws {
        let rows: [[String: Any]] = [["id": "1", "s": "b"], ["id": "2", "s": "B"], ["id": "3", "s": "a"], ["id": "4", "s": "file10"], ["id": "5", "s": "file2"]]
        #expect(try FetchSortDescriptor(key: "s", selector: "compare:").comparison == .compare)
        let plain = try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "s", selector: "compare:")])
        #expect(names(plain) == ["2", "3", "1", "4", "5"]) // code point order: uppercase first, "file10" < "file2"
        let caseless = try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "s", selector: "caseInsensitiveCompare:")])
        #expect(names(caseless).prefix(3) == ["3", "1", "2"]) // b and B tie, stable
        let standard = try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "s", selector: "localizedStandardCompare:")])
        #expect(names(standard).suffix(2) == ["5", "4"]) // numeric-aware: file2 < file10
        let localized = try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "s", selector: "localizedCompare:")])
        #expect(names(localized).first == "3")
        #expect(throws: PredicateEvaluationError.self) { try FetchSortDescriptor(key: "s", selector: "frobnicate:") }
        #expect(FetchSortDescriptor(key: "s").selectorName == "compare:")
        #expect(FetchSortDescriptor(key: "s").reversed == FetchSortDescriptor(key: "s", ascending: false))
        #expect(FetchSortDescriptor(key: "s", ascending: false).description == "(s, descending, compare:)")
    }

    @Test func mixedNumbersDatesAndKeyPaths() throws {
        let rows: [[String: Any]] = [
            ["id": "a", "n": 2.5, "d": Date(timeIntervalSince1970: 10), "dept": ["rank": Int16(2)]],
            ["id": "b", "n": 1, "d": Date(timeIntervalSince1970: 5), "dept": ["rank": Decimal(3)]],
            ["id": "c", "n": Int64(3), "d": Date(timeIntervalSince1970: 7), "dept": ["rank": 1.5]],
        ]
        #expect(names(try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "n")])) == ["b", "a", "c"])
        #expect(names(try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "d")])) == ["b", "c", "a"])
        #expect(names(try FetchSortDescriptor.sort(rows, using: [FetchSortDescriptor(key: "dept.rank")])) == ["c", "a", "b"])
    }

    @Test func objectsSortThroughKeyValueCoding() throws {
        let staff = [Employee(name: "Cy", salary: 3), Employee(name: "Ann", salary: 9), Employee(name: "Bob", salary: 3)]
        let sorted = try FetchSortDescriptor.sort(staff, using: [FetchSortDescriptor(key: "salary", ascending: false), FetchSortDescriptor(key: "name")])
        #expect(sorted.map(\.name) == ["Ann", "Bob", "Cy"])
    }

    @Test func errorsNameTheKey() throws {
        let mixed: [[String: Any]] = [["v": "x"], ["v": 3]]
        do {
            _ = try FetchSortDescriptor.sort(mixed, using: [FetchSortDescriptor(key: "v")])
            Issue.record("expected a type mismatch")
        } catch let error as PredicateEvaluationError {
            #expect(error.kind == .typeMismatch)
            #expect(error.keyPath == "v")
        }
        #expect(throws: PredicateEvaluationError.self) {
            try FetchSortDescriptor.sort([["a": 1], ["a": 2]], using: [FetchSortDescriptor(key: "b")])
        }
        #expect(try FetchSortDescriptor.sort([[String: Any]](), using: [FetchSortDescriptor(key: "b")]).isEmpty)
    }
}
