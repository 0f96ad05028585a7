import Foundation
import Testing
@testable import ObjectGraph

/// Thousands of seeded random fetches (predicates, sorts, offsets, limits)
/// over a generated store with nil values, mixed case and accented strings,
/// a sub-entity, to-one and to-many relationships: what SQL returns (through
/// `finishedSnapshots`, exact when everything compiled) must be what the
/// in-memory evaluator returns from all rows, object for object, in order.
@Suite struct SQLiteFetchDifferentialTests {
    /// City(name, population); Person(name, age, score, born, active, nick,
    /// city ->, pets ->>) with sub-entity Employee(salary); Pet(kind, weight, owner ->).
    static func makeModel() -> ManagedObjectModel {
        let model = ManagedObjectModel()
        let city = EntityDescription(name: "City")
        let person = EntityDescription(name: "Person")
        let employee = EntityDescription(name: "Employee")
        let pet = EntityDescription(name: "Pet")
        let personCity = RelationshipDescription(name: "city", destination: city)
        let cityPeople = RelationshipDescription(name: "people", destination: person, toMany: true)
        personCity.inverseRelationship = cityPeople
        cityPeople.inverseRelationship = personCity
        let pets = RelationshipDescription(name: "pets", destination: pet, toMany: true)
        let owner = RelationshipDescription(name: "owner", destination: person)
        pets.inverseRelationship = owner
        owner.inverseRelationship = pets
        city.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "population", type: .integer64), cityPeople]
        person.properties = [
            AttributeDescription(name: "name", type: .string), AttributeDescription(name: "nick", type: .string),
            AttributeDescription(name: "age", type: .integer32), AttributeDescription(name: "score", type: .double),
            AttributeDescription(name: "born", type: .date), AttributeDescription(name: "active", type: .boolean),
            personCity, pets,
        ]
        employee.properties = [AttributeDescription(name: "salary", type: .integer64)]
        pet.properties = [AttributeDescription(name: "kind", type: .string), AttributeDescription(name: "weight", type: .double), owner]
        person.subentities = [employee]
        model.entities = [city, person, employee, pet]
        return model
    }

    static let words: [String?] = [
        nil, "", "Ann", "ann", "ANN", "Änne", "anne", "Zoë", "zoe", "Zoe\u{308}", "Émile", "emile", "bob", "Bob", "O'Brien",
        "straße", "STRASSE", "a%b", "x_y", "Ñandú", "ÅSA", "åsa", "résumé", "resume", "Resume", "item 2", "item 10", "İstanbul", "ß", "z",
    ]
    static let dates = (0..<6).map { Date(timeIntervalSinceReferenceDate: Double($0) * 86_400 * 97.25) }

    /// A store with 25 cities, 160 people (some employees) and 220 pets.
    static func makeStore(_ rng: inout SplitMix64) throws -> SQLiteStore {
        let model = makeModel()
        let e = model.entitiesByName
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Differential.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        let cities = try store.newObjectIDs(for: e["City"]!, count: 25)
        let people = try store.newObjectIDs(for: e["Person"]!, count: 120) + (try store.newObjectIDs(for: e["Employee"]!, count: 40))
        let pets = try store.newObjectIDs(for: e["Pet"]!, count: 220)
        var request = StoreSaveRequest()
        func maybe(_ value: Any?, _ p: Double = 0.15, _ rng: inout SplitMix64) -> Any? { rng.chance(p) ? nil : value }
        for id in cities {
            var values: [String: Any] = [:]
            values["name"] = maybe(rng.pick(words) as Any?, 0.1, &rng)
            values["population"] = maybe(Int64(rng.next() % 5) * 1_000, 0.2, &rng)
            request.inserted.append(StoreSnapshot(objectID: id, version: 1, values: values.compactMapValues { $0 }))
        }
        for id in people {
            var values: [String: Any?] = [:]
            values["name"] = rng.pick(words)
            values["nick"] = maybe(rng.pick(words) as Any?, 0.4, &rng)
            values["age"] = maybe(Int32(rng.next() % 8) * 10 - 10, 0.15, &rng)
            values["score"] = maybe(rng.pick([-1.5, 0.0, 0.25, 2.0, 2.5, 1e10, -0.0]), 0.15, &rng)
            values["born"] = maybe(rng.pick(dates), 0.2, &rng)
            values["active"] = maybe(rng.chance(0.5), 0.2, &rng)
            values["city"] = maybe(rng.pick(cities), 0.2, &rng)
            if id.entity.name == "Employee" { values["salary"] = maybe(Int64(rng.next() % 4) * 500, 0.2, &rng) }
            request.inserted.append(StoreSnapshot(objectID: id, version: 1, values: values.compactMapValues { $0 }))
        }
        for id in pets {
            var values: [String: Any?] = [:]
            values["kind"] = rng.pick(words)
            values["weight"] = maybe(Double(rng.next() % 20) / 4, 0.2, &rng)
            values["owner"] = maybe(rng.pick(people), 0.2, &rng)
            request.inserted.append(StoreSnapshot(objectID: id, version: 1, values: values.compactMapValues { $0 }))
        }
        try store.save(request)
        return store
    }

    // MARK: Random fetches

    /// The keys and constants random fetches are made of, per dataset.
    struct Vocabulary {
        var scalarKeys: [(key: String, kind: String)]
        var toMany: String
        var toManyKeys: [(key: String, kind: String)]
        var toOne: String
        var sortKeys: [String]
        var strings: [String]
        var ints: [Int]
        var dates: [Date]
    }

    static let generated = Vocabulary(
        scalarKeys: [("name", "string"), ("nick", "string"), ("age", "int"), ("score", "double"), ("born", "date"), ("active", "bool"),
                     ("city.name", "string"), ("city.population", "int")],
        toMany: "pets", toManyKeys: [("kind", "string"), ("weight", "double")], toOne: "city",
        sortKeys: ["name", "nick", "age", "score", "born", "active", "city.name", "city.population"],
        strings: words.compactMap { $0 }, ints: (0..<8).map { $0 * 10 - 15 }, dates: dates)

    struct Generator {
        var rng: SplitMix64
        var vocabulary: Vocabulary

        mutating func constant(for kind: String) -> String {
            if rng.chance(0.08) { return "nil" }
            if rng.chance(0.04) { return rng.pick(["'x'", "3", "TRUE"]) }  // another kind
            switch kind {
            case "string": return rng.pick(vocabulary.strings).replacingOccurrences(of: "'", with: "\\'").quoted
            case "int": return String(rng.pick(vocabulary.ints))
            case "double": return rng.pick(["-1.5", "0", "0.25", "2", "2.5", "1e10", "3"])
            case "date": return "CAST(\(rng.pick(vocabulary.dates).timeIntervalSinceReferenceDate + rng.pick([0.0, 1.0, -1.0])), 'NSDate')"
            default: return rng.chance(0.5) ? "TRUE" : "FALSE"
            }
        }

        mutating func options() -> String { rng.pick(["", "", "[c]", "[d]", "[cd]", "[n]"]) }

        mutating func comparison(_ key: String, _ kind: String) -> String {
            if kind == "string" {
                let op = rng.pick(["==", "!=", "<", ">=", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "IN", "BETWEEN"])
                switch op {
                case "IN": return "\(key) IN\(options()) {\(constant(for: kind)), \(constant(for: kind))}"
                case "BETWEEN": return "\(key) BETWEEN\(options()) {\(constant(for: kind)), \(constant(for: kind))}"
                case "LIKE": return "\(key) LIKE\(options()) \(rng.pick(["'*a*'", "'?nn'", "'a%b'", "'*e'", "'Z*'", "'*'", "'iP*'", "'*1?'"]))"
                default: return "\(key) \(op)\(options()) \(constant(for: kind))"
                }
            }
            let op = rng.pick(["==", "!=", "<", "<=", ">", ">=", "IN", "BETWEEN"])
            switch op {
            case "IN": return "\(key) IN {\(constant(for: kind)), \(constant(for: kind))}"
            case "BETWEEN": return "\(key) BETWEEN {\(constant(for: kind)), \(constant(for: kind))}"
            default: return "\(key) \(op) \(constant(for: kind))"
            }
        }

        mutating func predicate(depth: Int = 0) -> String {
            let roll = rng.next() % 100
            if depth < 2 && roll < 25 {
                let joiner = rng.chance(0.5) ? " AND " : " OR "
                return "(" + (0..<Int(2 + rng.next() % 2)).map { _ in predicate(depth: depth + 1) }.joined(separator: joiner) + ")"
            }
            if depth < 2 && roll < 32 { return "NOT (\(predicate(depth: depth + 1)))" }
            if roll < 42 {
                let (key, kind) = rng.pick(vocabulary.toManyKeys)
                return "\(rng.pick(["ANY", "ALL", "NONE", "ANY"])) \(vocabulary.toMany).\(comparison(key, kind))"
            }
            if roll < 47 { return "\(vocabulary.toMany).@count \(rng.pick(["==", ">", "<="])) \(rng.next() % 4)" }
            if roll < 52 { return "\(vocabulary.toOne) \(rng.pick(["==", "!="])) nil" }
            let (key, kind) = rng.pick(vocabulary.scalarKeys)
            return comparison(key, kind)
        }

        mutating func sorts() -> [FetchSortDescriptor] {
            (0..<Int(rng.next() % 4)).map { _ in
                let key = rng.pick(vocabulary.sortKeys)
                let isString = vocabulary.scalarKeys.first { $0.key == key }?.kind == "string"
                let method: FetchSortDescriptor.ComparisonMethod = isString ? rng.pick(FetchSortDescriptor.ComparisonMethod.allCases) : .compare
                return FetchSortDescriptor(key: key, ascending: rng.chance(0.5), comparison: method)
            }
        }
    }

    /// Runs `cases` random fetches of `entities` and compares the two paths;
    /// returns how many were exact in SQL.
    static func compare(store: SQLiteStore, entities: [String], vocabulary: Vocabulary, seed: UInt64, cases: Int) throws -> Int {
        let all = try store.fetchSnapshots(FetchRequest(entityName: entities[0])).snapshots
        let records = StoreRecord.records(for: all, in: store)
        var generator = Generator(rng: SplitMix64(seed: seed), vocabulary: vocabulary)
        var exact = 0, failures = 0
        for index in 0..<cases {
            let format = generator.predicate()
            let request = FetchRequest(entityName: entities.count > 1 && generator.rng.chance(0.2) ? entities[1] : entities[0])
            request.predicate = try FetchPredicate(format: format)
            request.sortDescriptors = generator.sorts()
            if generator.rng.chance(0.5) { request.fetchLimit = Int(1 + generator.rng.next() % 30) }
            if generator.rng.chance(0.3) { request.fetchOffset = Int(generator.rng.next() % 40) }
            let label = "case \(index): \(request.entityName!) where \(format) sorted by \(request.sortDescriptors) offset \(request.fetchOffset) limit \(request.fetchLimit)"

            let candidates = request.entityName == entities[0] ? records : records.filter { $0.objectID.entity.name == request.entityName }
            let expected = Result { try PersistentStore.finish(candidates, request).map(\.objectID) }
            let raw = Result { try store.fetchSnapshots(request) }
            let actual = Result { try store.finishedSnapshots(request).map(\.objectID) }
            if case .success(let r) = raw, r.isExact { exact += 1 }
            switch (expected, actual) {
            case let (.success(e), .success(a)):
                if e != a {
                    failures += 1
                    Issue.record("\(label)\n  memory: \(e.map { $0.primaryKey! })\n  sql:    \(a.map { $0.primaryKey! })")
                }
            case (.failure, .failure):
                break
            case let (.success(e), .failure(error)):
                failures += 1
                Issue.record("\(label)\n  memory: \(e.count) objects; sql threw \(error)")
            case let (.failure(error), .success(a)):
                failures += 1
                Issue.record("\(label)\n  memory threw \(error); sql: \(a.count) objects")
            }
            if failures > 20 { break }
        }
        return exact
    }

    @Test func sqlAndInMemoryFetchesAgree() throws {
        var rng = SplitMix64(seed: 0x5EED_0005)
        let store = try Self.makeStore(&rng)
        defer { store.close() }
        #expect(try store.fetchSnapshots(FetchRequest(entityName: "Person")).snapshots.count == 160)
        let cases = 1_500
        let exact = try Self.compare(store: store, entities: ["Person", "Employee"], vocabulary: Self.generated, seed: 0xD1FF_2026, cases: cases)
        // Most cases must run wholly in SQL, or the comparison proves little
        // (with these seeds 1,475 of 1,500 do).
        #expect(exact > cases * 9 / 10, "only \(exact) of \(cases) fetches were exact in SQL")
    }

    /// The same on Apple's 2.0.1 fixture: Integrations with their bot (to-one)
    /// and tested devices (a many-to-many join table), real values.
    @Test func sqlAndInMemoryAgreeOnTheAppleFixture() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let store = try SQLiteFixtures.openStore(try SQLiteFixtures.copy(fixture), model: try SQLiteFixtures.model(for: fixture),
                                                 options: [PersistentStore.readOnlyOption: true])
        defer { store.close() }
        let vocabulary = Vocabulary(
            scalarKeys: [("number", "int"), ("duration", "int"), ("result", "string"), ("currentStep", "string"), ("endedTime", "date"),
                         ("shouldClean", "bool"), ("bot.name", "string"), ("buildResultSummary.errorCount", "int")],
            toMany: "testedDevices", toManyKeys: [("name", "string"), ("osVersion", "string"), ("connected", "bool")], toOne: "bot",
            sortKeys: ["number", "duration", "result", "endedTime", "shouldClean", "bot.name", "buildResultSummary.errorCount"],
            strings: ["succeeded", "warnings", "build-errors", "canceled", "completed", "Pocket Bot iOS", "pocket bot ios", "iPhone 7",
                      "iPad Pro", "11.2", "10.3.1", "", "ipad", "Succeeded"],
            ints: [0, 3, 12, 50, 100, 105, 157, 2060],
            dates: [Date(timeIntervalSinceReferenceDate: 482_886_150.263_999_94), Date(timeIntervalSinceReferenceDate: 520_000_000),
                    Date(timeIntervalSinceReferenceDate: 544_141_609.134_000_1)])
        let cases = 400
        let exact = try Self.compare(store: store, entities: ["Integration"], vocabulary: vocabulary, seed: 0xA991_E201, cases: cases)
        #expect(exact > cases * 8 / 10, "only \(exact) of \(cases) fetches were exact in SQL")
    }
}

/// Picking helpers on the suite-wide `SplitMix64` (PredicateRoundTripPropertyTests.swift).
private extension SplitMix64 {
    mutating func pick<T>(_ items: [T]) -> T { items[Int(next() % UInt64(items.count))] }
    mutating func chance(_ p: Double) -> Bool { Double(next() % 10_000) < p * 10_000 }
}

private extension String {
    var quoted: String { "'\(self)'" }
}
