import Foundation
import Testing
@testable import ObjectGraph

/// `SELF IN %@` / `SELF == %@` answered by SQL (`Z_ENT`/`Z_PK` conditions)
/// rather than by evaluating every row in memory, with the same answers the
/// in-memory evaluator gives on the store's rows.
@Suite struct SQLiteSelfPredicateTests {
    typealias Fixture = SelfPredicateFetchTests

    static func sqliteStore(_ stack: Fixture.Stack) throws -> SQLiteStore {
        try #require(stack.store as? SQLiteStore)
    }

    /// The store's answer, which must be exact (wholly in SQL), compared with
    /// the in-memory evaluator's over every row of the request's entity.
    static func exactAndAgreeing(_ store: SQLiteStore, _ request: AnyFetchRequest, sourceLocation: SourceLocation = #_sourceLocation) throws -> [ManagedObjectID] {
        let raw = try store.fetchSnapshots(request)
        #expect(raw.isExact, "\(request.predicate!) was not compiled to SQL", sourceLocation: sourceLocation)
        let all = FetchRequest(entityName: request.entityName!)
        all.includesSubentities = request.includesSubentities
        let records = StoreRecord.records(for: try store.fetchSnapshots(all).snapshots, in: store)
        let expected = try PersistentStore.finish(records, request).map(\.objectID)
        let actual = try store.finishedSnapshots(request).map(\.objectID)
        #expect(actual == expected, "\(request.predicate!): sql \(actual.count), memory \(expected.count)", sourceLocation: sourceLocation)
        return actual
    }

    @Test func selfComparisonsCompileAndAgreeWithTheEvaluator() throws {
        let stack = try Fixture.stack(.sqlite, people: 60)
        let other = try Fixture.stack(.sqlite, people: 10, name: "Other")
        let store = try Self.sqliteStore(stack)
        defer { store.close() }
        let ids = try Fixture.copies(stride(from: 0, to: 60, by: 7).map { stack.people[$0] }, stack.coordinator)
        let context = stack.freshContext()
        let objects = context.performAndWait { ids.map { context.object(with: $0) } }
        let cases: [(String, String, [Any?], Int)] = [
            ("Person", "SELF IN %@", [ids], 9),
            ("Person", "SELF IN %@", [objects], 9),
            ("Person", "NOT (SELF IN %@)", [ids], 51),
            ("Person", "SELF == %@", [ids[2]], 1),
            ("Person", "%@ == SELF", [objects[3]], 1),
            ("Person", "SELF != %@", [ids[2]], 59),
            ("Person", "SELF == nil", [], 0),
            ("Person", "SELF != nil", [], 60),
            ("Person", "SELF IN %@ AND rank > 20", [ids], 6),
            ("Person", "SELF IN %@ OR name == 'p1'", [ids], 10),
            ("Employee", "SELF IN %@", [ids], 2),          // ranks 14 and 49
            ("Person", "SELF IN %@", [stack.pets], 0),    // same keys, another table
            ("Pet", "SELF IN %@", [stack.people], 0),
            ("Person", "SELF IN %@", [other.people], 0),  // another store
            ("Person", "NOT (SELF IN %@)", [other.people + stack.pets], 60),
            ("Person", "SELF IN %@", [[]], 0),
            ("Person", "NOT (SELF IN %@)", [[]], 60),
            ("Person", "SELF IN %@", [["p1", 3, NSNull()]], 0),
            ("Person", "SELF IN %@", [[ids[0], NSNull(), "x", stack.pets[0], other.people[1], objects[1]]], 2),
        ]
        for (entity, format, args, count) in cases {
            let request = FetchRequest(entityName: entity)
            request.predicate = try FetchPredicate(format: format, argumentArray: args)
            #expect(try Self.exactAndAgreeing(store, request).count == count, "\(entity) where \(format)")
        }
        let onlyPersons = FetchRequest(entityName: "Person")
        onlyPersons.includesSubentities = false
        onlyPersons.predicate = try FetchPredicate(format: "SELF IN %@", ids)
        #expect(try Self.exactAndAgreeing(store, onlyPersons).count == 7)
        (other.store as? SQLiteStore)?.close()
    }

    @Test func toOneComparedWithIDsCompilesAndAgrees() throws {
        // `owner == %@` / `owner IN %@` with IDs: Pet.owner reaches Person and
        // its sub-entity Employee (an entity column), Person.city a City (none).
        var rng = SplitMix64(seed: 0x0BE1_D5E1)
        let store = try SQLiteFetchDifferentialTests.makeStore(&rng)
        defer { store.close() }
        let people = try store.fetchSnapshots(FetchRequest(entityName: "Person")).snapshots.map(\.objectID)
        let cities = try store.fetchSnapshots(FetchRequest(entityName: "City")).snapshots.map(\.objectID)
        let employees = people.filter { $0.entity.name == "Employee" }
        let plainPeople = people.filter { $0.entity.name == "Person" }
        let person = people[0].entity, employee = employees[0].entity
        // The same key under the other entity of the hierarchy names no row.
        let misnamed = ManagedObjectID(entity: employee, storeIdentifier: store.identifier, primaryKey: plainPeople[0].primaryKey!)
        let foreign = ManagedObjectID(entity: person, storeIdentifier: "another-store", primaryKey: plainPeople[1].primaryKey!)
        let cases: [(String, String, [Any?])] = [
            ("Pet", "owner == %@", [plainPeople[0]]),
            ("Pet", "owner == %@", [employees[0]]),
            ("Pet", "owner != %@", [employees[1]]),
            ("Pet", "owner == %@", [misnamed]),
            ("Pet", "owner == %@", [foreign]),
            ("Pet", "owner IN %@", [Array(people.prefix(40))]),
            ("Pet", "NOT (owner IN %@)", [Array(people.prefix(40))]),
            ("Pet", "owner IN %@", [[NSNull(), plainPeople[2], employees[2]]]),
            ("Pet", "owner IN %@ OR kind == 'Ann'", [Array(employees.prefix(10))]),
            ("Pet", "owner.city IN %@", [Array(cities.prefix(5))]),
            ("Person", "city == %@", [cities[3]]),
            ("Person", "city != %@", [cities[3]]),
            ("Person", "city IN %@", [Array(cities.prefix(12)) + [misnamed]]),
            ("Person", "ANY pets.owner == %@", [plainPeople[3]]),
        ]
        for (entity, format, args) in cases {
            let request = FetchRequest(entityName: entity)
            request.predicate = try FetchPredicate(format: format, argumentArray: args)
            _ = try Self.exactAndAgreeing(store, request)
        }
        // Something other than an object is left to the evaluator.
        let other = FetchRequest(entityName: "Pet")
        other.predicate = try FetchPredicate(format: "owner == %@", "p1")
        #expect(try !store.fetchSnapshots(other).isExact)
    }

    @Test func selfInMoreIDsThanSQLiteHasHostParameters() throws {
        // SQLite's default limit is 32,766 host parameters: the list must not
        // be bound one parameter per ID.
        let stack = try Fixture.stack(.sqlite, people: 300)
        let store = try Self.sqliteStore(stack)
        defer { store.close() }
        let person = stack.coordinator.managedObjectModel.entitiesByName["Person"]!
        // 40,000 IDs, of which the stored keys are a few; the rest name no row.
        let stored = Set(stack.people.map { $0.primaryKey! })
        var ids = (1...40_000).map { ManagedObjectID(entity: person, storeIdentifier: store.identifier, primaryKey: Int64(1_000 + $0)) }
        ids += stack.people.enumerated().filter { $0.offset % 2 == 0 && $0.element.entity.name == "Person" }.map(\.element)
        #expect(!stored.contains(1_001))
        let request = FetchRequest(entityName: "Person")
        request.predicate = try FetchPredicate(format: "SELF IN %@", ids)
        let found = try Self.exactAndAgreeing(store, request)
        #expect(found.count == stack.people.enumerated().filter { $0.offset % 2 == 0 && $0.element.entity.name == "Person" }.count)
        request.predicate = try FetchPredicate(format: "NOT (SELF IN %@)", ids)
        #expect(try store.fetchSnapshots(request).isExact)
        #expect(try store.finishedSnapshots(request).count == 300 - found.count)
    }

    @Test func twoThousandIDsTakeOneQuery() throws {
        // The reported case ran 8.6 s evaluating each row against each ID:
        // it is one SQL statement now, and the context makes each object once.
        let stack = try Fixture.stack(.sqlite, people: 2_500)
        let store = try Self.sqliteStore(stack)
        defer { store.close() }
        let ids = try Fixture.copies(Array(stack.people.suffix(2_000)), stack.coordinator)
        let context = stack.freshContext()
        try context.performAndWait {
            let request = try Fixture.request("Person", "SELF IN %@", ids)
            let before = store.executedStatementCount
            let found = try context.fetch(request)
            #expect(store.executedStatementCount - before == 1)
            #expect(Set(found.map(\.objectID)) == Set(ids))
            #expect(try Fixture.ranks(found) == Array(500..<2_500).map(Int64.init))
        }
    }
}
