import Foundation
import Testing
@testable import ObjectGraph

/// `SELF IN %@` / `SELF == %@` in context fetches, on the in-memory and the
/// SQLite store: Core Data accepts managed objects and object IDs alike on
/// the right-hand side, and an ID matches only the object it names (same
/// store, same entity, same primary key), whatever instance carries it.
@Suite struct SelfPredicateFetchTests {
    enum Kind: String, CaseIterable, CustomStringConvertible {
        case inMemory, sqlite
        var description: String { rawValue }
    }

    /// Person(name, rank) with sub-entity Employee(salary); Pet(name), in its own table.
    static func makeModel() -> ManagedObjectModel {
        let model = ManagedObjectModel()
        let person = EntityDescription(name: "Person")
        let employee = EntityDescription(name: "Employee")
        let pet = EntityDescription(name: "Pet")
        person.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "rank", type: .integer64)]
        employee.properties = [AttributeDescription(name: "salary", type: .integer64)]
        pet.properties = [AttributeDescription(name: "name", type: .string)]
        person.subentities = [employee]
        model.entities = [person, employee, pet]
        return model
    }

    struct Stack {
        let coordinator: PersistentStoreCoordinator
        let store: PersistentStore
        /// Saved IDs, in insertion order.
        let people: [ManagedObjectID]
        let employees: [ManagedObjectID]
        let pets: [ManagedObjectID]

        /// A context that has not seen any of the objects yet.
        func freshContext() -> ManagedObjectContext { ManagedObjectContext(coordinator: coordinator) }
    }

    /// `people` Persons (rank = index) of which every fifth is an Employee, and 20 Pets.
    static func stack(_ kind: Kind, people count: Int, name: String = "Self") throws -> Stack {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: makeModel())
        let store = kind == .inMemory
            ? try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
            : try coordinator.addPersistentStore(ofType: SQLiteStore.storeType, at: try TestPaths.temporaryDirectory().appendingPathComponent("\(name).sqlite"))
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            var people: [ManagedObject] = [], employees: [ManagedObject] = [], pets: [ManagedObject] = []
            for i in 0..<count {
                let isEmployee = i % 5 == 4
                let p = try context.insertNewObject(forEntityName: isEmployee ? "Employee" : "Person")
                try p.setValue("p\(i)", forKey: "name")
                try p.setValue(Int64(i), forKey: "rank")
                if isEmployee { try p.setValue(Int64(i * 10), forKey: "salary"); employees.append(p) }
                people.append(p)
            }
            for i in 0..<20 {
                let pet = try context.insertNewObject(forEntityName: "Pet")
                try pet.setValue("pet\(i)", forKey: "name")
                pets.append(pet)
            }
            try context.save()
            return Stack(coordinator: coordinator, store: store, people: people.map(\.objectID),
                         employees: employees.map(\.objectID), pets: pets.map(\.objectID))
        }
    }

    /// Distinct instances equal to `ids`, as another context or an archived
    /// URI hands them out.
    static func copies(_ ids: [ManagedObjectID], _ coordinator: PersistentStoreCoordinator) throws -> [ManagedObjectID] {
        try ids.map { try #require(coordinator.managedObjectID(forURIRepresentation: $0.uriRepresentation)) }
    }

    static func request(_ entity: String, _ format: String, _ args: Any?...) throws -> AnyFetchRequest {
        let request = FetchRequest(entityName: entity)
        request.predicate = try FetchPredicate(format: format, argumentArray: args)
        request.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: true)]
        return request
    }

    static func ranks(_ objects: [ManagedObject]) throws -> [Int64] {
        try objects.map { try #require($0.value(forKey: "rank") as? Int64) }
    }

    @Test(arguments: Kind.allCases)
    func selfInTwoThousandIDsFindsEachObject(_ kind: Kind) throws {
        // The reported case: 2,000 IDs (distinct instances, from URIs) in a
        // context that has none of the objects registered gave 0 objects.
        let stack = try Self.stack(kind, people: 2_500)
        let wanted = Array(stack.people.prefix(2_000))
        let ids = try Self.copies(wanted, stack.coordinator)
        let context = stack.freshContext()
        try context.performAndWait {
            let found = try context.fetch(try Self.request("Person", "SELF IN %@", ids))
            #expect(found.count == 2_000)
            #expect(Set(found.map(\.objectID)) == Set(wanted))
            #expect(try context.count(for: try Self.request("Person", "SELF IN %@", ids)) == 2_000)
            let idRequest = try Self.request("Person", "SELF IN %@", ids)
            idRequest.resultType = .managedObjectID
            #expect(Set(try context.execute(idRequest) as! [ManagedObjectID]) == Set(wanted))
        }
    }

    @Test(arguments: Kind.allCases)
    func selfEqualsOneObjectOrOneID(_ kind: Kind) throws {
        let stack = try Self.stack(kind, people: 30)
        let context = stack.freshContext()
        try context.performAndWait {
            let id = try Self.copies([stack.people[7]], stack.coordinator)[0]
            #expect(try Self.ranks(context.fetch(try Self.request("Person", "SELF == %@", id))) == [7])
            #expect(try Self.ranks(context.fetch(try Self.request("Person", "%@ == SELF", id))) == [7])
            let object = context.object(with: stack.people[12])
            #expect(try Self.ranks(context.fetch(try Self.request("Person", "SELF == %@", object))) == [12])
            #expect(try context.fetch(try Self.request("Person", "SELF != %@", id)).count == 29)
            #expect(try Self.ranks(context.fetch(try Self.request("Person", "SELF == %@ OR rank == 3", id))) == [3, 7])
            #expect(try context.fetch(try Self.request("Person", "SELF == nil")).isEmpty)
        }
    }

    @Test(arguments: Kind.allCases)
    func dictionaryFetchesFilterBySelf(_ kind: Kind) throws {
        // FR-11c dictionary results: the SQLite store answers these in one SQL query too.
        let stack = try Self.stack(kind, people: 20)
        let context = stack.freshContext()
        try context.performAndWait {
            let request = try Self.request("Person", "SELF IN %@", try Self.copies([stack.people[3], stack.people[11], stack.pets[0]], stack.coordinator))
            request.resultType = .dictionary
            request.propertiesToFetch = ["name"]
            let rows = try context.execute(request) as! [[String: Any]]
            #expect(rows.map { $0["name"] as? String } == ["p3", "p11"])
        }
    }

    @Test(arguments: Kind.allCases)
    func notSelfInIsTheComplement(_ kind: Kind) throws {
        let stack = try Self.stack(kind, people: 40)
        let context = stack.freshContext()
        try context.performAndWait {
            let ids = try Self.copies(stride(from: 0, to: 40, by: 3).map { stack.people[$0] }, stack.coordinator)
            let rest = try Self.ranks(context.fetch(try Self.request("Person", "NOT (SELF IN %@)", ids)))
            #expect(rest == (0..<40).filter { $0 % 3 != 0 }.map(Int64.init))
            let both = try Self.ranks(context.fetch(try Self.request("Person", "NOT (SELF IN %@) AND rank < 6", ids)))
            #expect(both == [1, 2, 4, 5])
        }
    }

    @Test(arguments: Kind.allCases)
    func objectsAndIDsSelectTheSameObjects(_ kind: Kind) throws {
        let stack = try Self.stack(kind, people: 50)
        let context = stack.freshContext()
        try context.performAndWait {
            let picked = [3, 4, 9, 19, 33, 49].map { stack.people[$0] }
            let objects = picked.map { context.object(with: $0) }
            let byObjects = try context.fetch(try Self.request("Person", "SELF IN %@", objects))
            let byIDs = try context.fetch(try Self.request("Person", "SELF IN %@", try Self.copies(picked, stack.coordinator)))
            let mixed: [Any] = [objects[0], picked[1], objects[2], picked[3], picked[4], objects[5]]
            let byMixed = try context.fetch(try Self.request("Person", "SELF IN %@", mixed))
            #expect(try Self.ranks(byObjects) == [3, 4, 9, 19, 33, 49])
            #expect(byIDs == byObjects)
            #expect(byMixed == byObjects)
            // A set works like an array.
            #expect(try context.fetch(try Self.request("Person", "SELF IN %@", Set(picked))) == byObjects)
        }
    }

    @Test(arguments: Kind.allCases)
    func idsOfAnotherEntityOrStoreMatchNothing(_ kind: Kind) throws {
        let stack = try Self.stack(kind, people: 30, name: "First")
        let other = try Self.stack(kind, people: 30, name: "Second")
        let context = stack.freshContext()
        try context.performAndWait { () throws -> Void in
            // The same primary keys, but Pets: another entity (another table in SQLite).
            #expect(try context.fetch(try Self.request("Person", "SELF IN %@", stack.pets)).isEmpty)
            // The same entity and primary keys in another store.
            #expect(other.store.identifier != stack.store.identifier)
            #expect(try context.fetch(try Self.request("Person", "SELF IN %@", other.people)).isEmpty)
            #expect(try context.fetch(try Self.request("Person", "SELF == %@", other.people[0])).isEmpty)
            // An ID naming a Person row as an Employee (same key, wrong entity) is not that row.
            let person = stack.people[0]
            let misnamed = ManagedObjectID(entity: stack.coordinator.managedObjectModel.entitiesByName["Employee"]!,
                                           storeIdentifier: stack.store.identifier, primaryKey: person.primaryKey!)
            #expect(try context.fetch(try Self.request("Person", "SELF == %@", misnamed)).isEmpty)
            // Values that are not objects never equal one.
            #expect(try context.fetch(try Self.request("Person", "SELF IN %@", ["p1", 1, NSNull()])).isEmpty)
            // A NOT over IDs that match nothing keeps every object.
            #expect(try context.fetch(try Self.request("Person", "NOT (SELF IN %@)", stack.pets + other.people)).count == 30)
        }
    }

    @Test(arguments: Kind.allCases)
    func subEntitiesMatchTheirOwnIDs(_ kind: Kind) throws {
        let stack = try Self.stack(kind, people: 30)
        let context = stack.freshContext()
        try context.performAndWait {
            let ids = try Self.copies([stack.people[0], stack.people[4], stack.people[9], stack.people[10]], stack.coordinator)
            // Persons 4 and 9 are Employees: a Person fetch (with sub-entities) finds all four.
            #expect(try Self.ranks(context.fetch(try Self.request("Person", "SELF IN %@", ids))) == [0, 4, 9, 10])
            #expect(try Self.ranks(context.fetch(try Self.request("Employee", "SELF IN %@", ids))) == [4, 9])
            let onlyPersons = try Self.request("Person", "SELF IN %@", ids)
            onlyPersons.includesSubentities = false
            #expect(try Self.ranks(context.fetch(onlyPersons)) == [0, 10])
        }
    }

    @Test(arguments: Kind.allCases)
    func unsavedObjectsAndChangesAreJudgedInMemory(_ kind: Kind) throws {
        // MOC-FE-05: inserted objects take part in the fetch; the stored rows
        // still come from the store's answer.
        let stack = try Self.stack(kind, people: 10)
        let context = stack.freshContext()
        try context.performAndWait {
            let inserted = try context.insertNewObject(forEntityName: "Person")
            try inserted.setValue(Int64(100), forKey: "rank")
            let stored = context.object(with: stack.people[2])
            try stored.setValue("changed", forKey: "name")
            let found = try context.fetch(try Self.request("Person", "SELF IN %@", [inserted, stack.people[2], stack.people[5]]))
            #expect(try Self.ranks(found) == [2, 5, 100])
            #expect(try context.fetch(try Self.request("Person", "SELF == %@", inserted.objectID)) == [inserted])
        }
    }
}
