import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextFetchingTests {
    /// Saves three employees in "Sales" and returns them by first name.
    func seed(_ context: ManagedObjectContext) throws -> [String: EmployeeMO] {
        let sales = try Company.department(context, "Sales")
        var out: [String: EmployeeMO] = [:]
        for (i, name) in ["Cleo", "Ada", "Bob"].enumerated() {
            out[name] = try Company.employee(context, name, "Smith", in: sales, salary: Decimal(100 * (i + 1)), id: Int32(i))
        }
        try context.save()
        return out
    }

    @Test func fetchUniquesAndSortsLimitsOffsets() throws {
        // MOC-FE-01, MOC-FE-02, MOC-FE-03, OBJ-18, MOC-00a
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let people = try seed(context)
            let all = try context.fetch(Company.request("Employee", sortedBy: "firstName"), as: EmployeeMO.self)
            #expect(all.map(\.firstName) == ["Ada", "Bob", "Cleo"])
            #expect(all[0] === people["Ada"])
            #expect(all.allSatisfy { context.registeredObjects.contains($0) })
            let page = Company.request("Employee", sortedBy: "firstName")
            page.fetchOffset = 1
            page.fetchLimit = 1
            #expect(try context.fetch(page, as: EmployeeMO.self).map(\.firstName) == ["Bob"])
            #expect(try context.fetch(Company.request("Employee", where: "FALSEPREDICATE")).isEmpty)
        }
    }

    @Test func pendingChangesAreVisibleOnlyInTheirContext() throws {
        // MOC-FE-04, MOC-FE-05, MOC-FE-06, MOC-FE-08
        let (coordinator, context) = try Company.stack()
        let other = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let people = try seed(context)
            let zed = try Company.employee(context, "Zed", "Q", in: people["Ada"]!.department)
            let named: (String) -> AnyFetchRequest = { n in Company.request("Employee", where: "firstName == %@", n) }
            #expect(try context.fetch(named("Zed")) == [zed])
            let seenElsewhere = try other.performAndWait { try other.fetch(named("Zed")) }
            #expect(seenElsewhere.isEmpty)
            // Updated in memory: evaluated on the new values.
            people["Bob"]!.salary = 5000
            let rich = Company.request("Employee", where: "salary > 1000")
            #expect(try context.fetch(rich) == [people["Bob"]!])
            context.delete(people["Cleo"]!)
            let everyone = FetchRequest(entityName: "Employee")
            #expect(!(try context.fetch(everyone)).contains(people["Cleo"]!))
            #expect(try context.count(for: everyone) == context.fetch(everyone).count)
            everyone.includesPendingChanges = false
            #expect(!(try context.fetch(everyone)).contains(zed))
        }
    }

    @Test func fetchDoesNotOverwriteInMemoryState() throws {
        // MOC-FE-07
        let (coordinator, context) = try Company.stack()
        let writer = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let people = try seed(context)
            let ada = people["Ada"]!
            #expect(ada.firstName == "Ada")
            try writer.performAndWait {
                let copy = try writer.existingObject(with: ada.objectID)
                try copy.setValue("Adelaide", forKey: "firstName")
                try writer.save()
            }
            let again = try context.fetch(Company.request("Employee", where: "lastName == %@", "Smith"))
            #expect(again.contains { $0 === ada })
            #expect(ada.firstName == "Ada")
        }
    }

    @Test func resultTypes() throws {
        // FR result types: object IDs, dictionaries, count; distinct results
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let people = try seed(context)
            let ids = FetchRequest(entityName: "Employee")
            ids.resultType = .managedObjectID
            #expect(Set(try context.execute(ids) as! [ManagedObjectID]) == Set(people.values.map(\.objectID)))
            let dicts = FetchRequest(entityName: "Employee")
            dicts.resultType = .dictionary
            dicts.propertiesToFetch = ["lastName", "department"]
            let rows = try context.execute(dicts) as! [[String: Any]]
            #expect(rows.count == 3)
            #expect(rows[0]["department"] as? ManagedObjectID == people["Ada"]!.department!.objectID)
            dicts.propertiesToFetch = ["lastName"]
            dicts.returnsDistinctResults = true
            #expect((try context.execute(dicts)).count == 1)
            let count = FetchRequest(entityName: "Employee")
            count.resultType = .count
            #expect(try context.execute(count) as? [Int] == [3])
            #expect(throws: CoreDataError.self) { try context.fetch(count) }
        }
    }

    @Test func objectWithIDAndExistingObject() throws {
        // MOC-00a, MOC-00d, OBJ-15, MOID-05
        let (coordinator, context) = try Company.stack()
        let other = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let ada = try seed(context)["Ada"]!
            #expect(context.object(with: ada.objectID) === ada)
            let uri = ada.objectID.uriRepresentation
            let id = try #require(coordinator.managedObjectID(forURIRepresentation: uri))
            #expect(id == ada.objectID && id.hashValue == ada.objectID.hashValue)
            #expect(context.object(with: id) === ada)
            try other.performAndWait {
                let copy = other.object(with: id)
                #expect(copy !== ada)
                #expect(copy.objectID == ada.objectID)
            }
            let missing = ManagedObjectID(entity: ada.entity, storeIdentifier: ada.objectID.storeIdentifier!, primaryKey: 9999)
            let error = #expect(throws: CoreDataError.self) { try context.existingObject(with: missing) }
            #expect(error?.code == .managedObjectContextReferentialIntegrity)
            #expect(coordinator.managedObjectID(forURIRepresentation: EmployeeMO.makeTemporaryURI()) == nil)
        }
    }
}

extension EmployeeMO {
    static func makeTemporaryURI() -> URL { URL(string: "x-coredata:///Employee/t\(UUID().uuidString)")! }
}

/// An object whose `awakeFromFetch` fetches and fires a to-one fault. On
/// SQLite, rows become objects while the store's statement steps; the hook
/// runs once per object loaded, with its values in place, after the store
/// is done, so it sees a settled context and may read relationships
/// (LIFE-07, LIFE-08, LIFE-10).
final class AwakeProbeMO: ManagedObject {
    nonisolated(unsafe) static var seen: [String] = []
    override func awakeFromFetch() {
        super.awakeFromFetch()
        guard let context = managedObjectContext else { return }
        let count = (try? context.count(for: FetchRequest(entityName: "AwakeProbe"))) ?? -1
        let partner = (try? value(forKey: "partner")) as? ManagedObject
        let partnerName = (try? partner?.value(forKey: "name")) as? String
        Self.seen.append("\((try? value(forKey: "name")) as? String ?? "?")/\(count)/\(partnerName ?? "-")")
    }
}

@Suite(.serialized) struct ContextAwakeFromFetchTests {
    @Test func awakeFromFetchRunsOnceEachAfterTheRowsAreReadAndMayFetch() throws {
        let probe = EntityDescription(name: "AwakeProbe")
        probe.managedObjectClassName = "AwakeProbe"
        let partner = RelationshipDescription(name: "partner", destination: probe)
        probe.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "nick", type: .string), partner]
        let model = ManagedObjectModel()
        model.entities = [probe]
        ManagedObjectClassRegistry.shared.register(AwakeProbeMO.self, forClassName: "AwakeProbe")
        defer { ManagedObjectClassRegistry.shared.unregister(className: "AwakeProbe") }
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("Probe.sqlite")
        let writer = try PersistentStoreCoordinator(managedObjectModel: model)
        try writer.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: writer)
        try context.performAndWait {
            var previous: ManagedObject?
            for name in ["a", "b", "c"] {
                let object = try context.insertNewObject(forEntityName: "AwakeProbe")
                try object.setValue(name, forKey: "name")
                try object.setValue(name == "b" ? "b" : "x", forKey: "nick")
                try object.setValue(previous, forKey: "partner")
                previous = object
            }
            try context.save()
        }
        /// A context on a coordinator of its own (an empty row cache), and a
        /// request for loaded probes.
        func reader() throws -> (ManagedObjectContext, AnyFetchRequest) {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
            let request = FetchRequest(entityName: "AwakeProbe")
            request.returnsObjectsAsFaults = false
            AwakeProbeMO.seen = []
            return (ManagedObjectContext(coordinator: coordinator), request)
        }
        let (fresh, request) = try reader()
        try fresh.performAndWait {
            request.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: true)]
            let objects = try fresh.fetch(request)
            #expect(objects.count == 3)
            #expect(objects.allSatisfy { $0 is AwakeProbeMO && !$0.isFault })
        }
        // Each fetched object woke once, after the fetch, and saw the whole
        // store; firing b's partner (a, already loaded) woke no one again.
        #expect(AwakeProbeMO.seen == ["a/3/-", "b/3/a", "c/3/b"])

        // A predicate SQL does not express (attribute against attribute) is
        // filtered on rows: objects are made, loaded and woken for matches only.
        let (filtering, filtered) = try reader()
        try filtering.performAndWait {
            filtered.predicate = try FetchPredicate(format: "name == nick")
            let matches = try filtering.fetch(filtered)
            #expect(try matches.map { try $0.value(forKey: "name") as? String } == ["b"])
            #expect(filtering.registry.count == 2, "b, and a, which b's awakeFromFetch fired as its partner")
        }
        // c never became an object; a woke when b's hook fired it.
        #expect(AwakeProbeMO.seen == ["a/3/-", "b/3/a"])
    }
}
