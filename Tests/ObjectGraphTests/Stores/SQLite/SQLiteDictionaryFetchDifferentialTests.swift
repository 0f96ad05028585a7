import Foundation
import Testing
@testable import ObjectGraph

/// Two hundred seeded random predicates (the generator and dataset of
/// `SQLiteFetchDifferentialTests`) × count, dictionary, distinct dictionary,
/// aggregate and grouped results: what the SQLite store computes in SQL
/// (`countObjects`, `fetchDictionaries`) must equal what the context computes
/// from objects with the pushdown turned off, row for row, in order.
/// FR-11c, FR-17, FR-18, MOC-FE-08, XD-01, XD-04, XD-05.
@Suite struct SQLiteDictionaryFetchDifferentialTests {
    enum Mode: CaseIterable { case count, dictionary, distinct, aggregates, grouped }

    static func sum(_ key: String, _ name: String, _ type: ExpressionResultType = .undefined, _ function: String = "sum") throws -> ExpressionDescription {
        ExpressionDescription(name: name, expression: try FetchExpression(format: "\(function):(\(key))"), expressionResultType: type)
    }

    /// A request of `mode` for a random predicate, sort, offset and limit.
    static func request(_ mode: Mode, _ generator: inout SQLiteFetchDifferentialTests.Generator, entity: String) throws -> AnyFetchRequest {
        let request = FetchRequest(entityName: entity)
        request.predicate = try FetchPredicate(format: generator.predicate())
        func roll(_ n: UInt64) -> Int { Int(generator.rng.next() % n) }
        switch mode {
        case .count:
            request.resultType = .count
        case .dictionary, .distinct:
            request.resultType = .dictionary
            let choices: [[Any]] = [["name", "age"], ["city.name", "active"], ["city", "score"], ["born", "nick", "city.population"],
                                    ["active"], [ExpressionDescription(name: "where", expression: .keyPath(["city", "name"]))]]
            request.propertiesToFetch = choices[roll(UInt64(choices.count))]
            request.returnsDistinctResults = mode == .distinct
            request.sortDescriptors = generator.sorts()
        case .aggregates:
            request.resultType = .dictionary
            request.propertiesToFetch = [try sum("age", "ages"), try sum("score", "scores", .double), try sum("age", "meanAge", .undefined, "average"),
                                         try sum("name", "first", .string, "min"), try sum("born", "last", .date, "max"),
                                         try sum("nick", "nicks", .integer64, "count"), try sum("city.population", "people", .integer64),
                                         try sum("score", "low", .undefined, "min")]
        case .grouped:
            request.resultType = .dictionary
            let key = ["city", "active", "city.name", "age"][roll(4)]
            request.propertiesToFetch = [key, try sum("age", "n", .integer64, "count"), try sum("score", "total"), try sum("age", "top", .integer64, "max")]
            request.propertiesToGroupBy = [key]
            if roll(2) == 0 {
                request.havingPredicate = try FetchPredicate(format: ["n > 2", "total >= 0", "top < 40 OR n == 1", "n BETWEEN {1, 4}"][roll(4)])
            }
            if roll(2) == 0 { request.sortDescriptors = [FetchSortDescriptor(key: key == "city" ? "city.name" : key, ascending: roll(2) == 0)] }
        }
        if roll(3) == 0 { request.fetchLimit = 1 + roll(12) }
        if roll(4) == 0 { request.fetchOffset = roll(6) }
        return request
    }

    static func same(_ a: [Any], _ b: [Any]) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) {
            if let x = x as? Int, let y = y as? Int { if x != y { return false }; continue }
            guard let x = x as? [String: Any], let y = y as? [String: Any], Set(x.keys) == Set(y.keys) else { return false }
            for (key, value) in x where !ModelValue.equal(value, y[key]) || type(of: value) != type(of: y[key]!) { return false }
        }
        return true
    }

    @Test func sqlPushdownAndInMemoryResultsAgree() throws {
        var rng = SplitMix64(seed: 0x5EED_0005)
        let made = try SQLiteFetchDifferentialTests.makeStore(&rng)
        let url = made.url!
        made.close()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: SQLiteFetchDifferentialTests.makeModel())
        let store = try coordinator.addPersistentStore(ofType: SQLiteStore.storeType, at: url)
        let pushed = ManagedObjectContext(coordinator: coordinator)
        let inMemory = ManagedObjectContext(coordinator: coordinator)
        inMemory.allowsFetchPushdown = false

        var generator = SQLiteFetchDifferentialTests.Generator(rng: SplitMix64(seed: 0xD1C7_2026), vocabulary: SQLiteFetchDifferentialTests.generated)
        let cases = 200
        var answeredBySQL = 0, failures = 0, total = 0
        for index in 0..<cases {
            for mode in Mode.allCases {
                total += 1
                let request = try Self.request(mode, &generator, entity: generator.rng.next() % 5 == 0 ? "Employee" : "Person")
                let label = "case \(index) \(mode): \(request.predicate!.predicateFormat) columns \(request.propertiesToFetch ?? []) having \(request.havingPredicate?.predicateFormat ?? "-") sorted \(request.sortDescriptors) offset \(request.fetchOffset) limit \(request.fetchLimit)"
                let sqlAnswer: [Any]? = mode == .count ? try store.countObjects(request).map { [$0] } : try store.fetchDictionaries(request)
                if sqlAnswer != nil { answeredBySQL += 1 }
                let viaContext = Result { try pushed.performAndWait { try pushed.execute(request) } }
                let expected = Result { try inMemory.performAndWait { try inMemory.execute(request) } }
                switch (viaContext, expected) {
                case let (.success(a), .success(e)):
                    if !Self.same(a, e) {
                        failures += 1
                        Issue.record("\(label)\n  sql:    \(a)\n  memory: \(e)")
                    }
                    if let sqlAnswer, !Self.same(sqlAnswer, a) {
                        failures += 1
                        Issue.record("\(label): the store's answer is not what the context returned")
                    }
                case (.failure, .failure):
                    break
                case let (.success(a), .failure(error)):
                    failures += 1
                    Issue.record("\(label)\n  sql: \(a.count) rows; memory threw \(error)")
                case let (.failure(error), .success(e)):
                    failures += 1
                    Issue.record("\(label)\n  sql threw \(error); memory: \(e.count) rows")
                }
            }
            if failures > 10 { break }
        }
        // Most cases must run in SQL, or the comparison proves little
        // (with these seeds 98% do).
        #expect(answeredBySQL > total * 3 / 4, "only \(answeredBySQL) of \(total) requests were answered in SQL")
    }
}
