import Foundation
import Testing
@testable import ObjectGraph

@Suite struct AtomicStoreTests {
    @Test(arguments: [PersistentStoreCoordinator.xmlStoreType, PersistentStoreCoordinator.binaryStoreType])
    func roundTripKeepsValuesRelationshipsAndIDs(type: String) throws {
        // AS-04, AS-11, AS-16, AS-28, MOID-04 (a), MOID-05 (c), ATTR-03, PC-20, MOC-ST-05 (atomic stores keep all values in memory)
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("store.\(type)")
        let (coordinator, context) = try Company.stack(type: type, url: url)
        let (deptURI, storeID) = try context.performAndWait {
            let sales = try Company.department(context, "Sales", budget: Decimal(string: "1234.5")!)
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales, salary: 10, id: 7)
            _ = try Company.employee(context, "Bob", "Smith", in: sales).manager = ada
            try context.save()
            return (sales.objectID.uriRepresentation, coordinator.persistentStores[0].identifier)
        }
        let (second, reopened) = try Company.stack(type: type, url: url)
        #expect(second.persistentStores[0].identifier == storeID)
        try reopened.performAndWait {
            let id = try #require(second.managedObjectID(forURIRepresentation: deptURI))
            let sales = try #require(try reopened.existingObject(with: id) as? DepartmentMO)
            #expect(sales.budget == Decimal(string: "1234.5")!)
            #expect(sales.employees.count == 2)
            let ada = try #require(sales.employees.first { $0.firstName == "Ada" })
            #expect(ada.employeeID == 7 && ada.salary == 10)
            #expect(ada.directReports.map(\.firstName) == ["Bob"])
        }
    }

    @Test(arguments: [PersistentStoreCoordinator.xmlStoreType, PersistentStoreCoordinator.binaryStoreType])
    func corruptFileGivesClearErrorAndIsUntouched(type: String) throws {
        // AS-13; bad input: corrupt store file
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("bad.store")
        let garbage = Data("this is not a store {{{".utf8)
        try garbage.write(to: url)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let error = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: type, at: url) }
        #expect(error?.code == .fileReadCorruptFile)
        #expect(error?.message.contains(url.path) == true)
        #expect(try Data(contentsOf: url) == garbage)
        #expect(coordinator.persistentStores.isEmpty)
    }

    @Test func wrongStoreTypeIs134010() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("company.xml")
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: url)
        try context.performAndWait { _ = try Company.department(context, "Sales"); try context.save() }
        let before = try Data(contentsOf: url)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let error = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.binaryStoreType, at: url) }
        #expect(error?.code == .persistentStoreTypeMismatch)
        #expect(try Data(contentsOf: url) == before)
    }

    @Test func missingAndZeroLengthFilesAreNewStores() throws {
        // AS-08, AS-09, AS-10, AS-15
        let dir = try TestPaths.temporaryDirectory()
        let empty = dir.appendingPathComponent("empty.xml")
        FileManager.default.createFile(atPath: empty.path, contents: Data())
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: empty)
        try context.performAndWait {
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 0)
            _ = try Company.department(context, "Sales")
            try context.save()
        }
        #expect(try Data(contentsOf: empty).count > 0)
        let missing = dir.appendingPathComponent("missing.xml")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.xmlStoreType, at: missing)
        try coordinator.remove(store)
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        // Saving leaves no temporary file behind (atomic replace).
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["empty.xml"])
    }

    @Test func cacheNodeAPI() throws {
        // CN-02, CN-03, CN-04, CN-05, CN-06, CN-07, AS-16, AS-17, AS-18, AS-19, AS-20
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let store = try #require(try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType) as? AtomicStore)
        let entity = coordinator.managedObjectModel.entitiesByName["Department"]!
        let id = store.objectID(for: entity, referenceObject: 42)
        #expect(id == store.objectID(for: entity, referenceObject: 42))
        #expect(store.referenceObject(for: id) == 42)
        let node = AtomicStoreCacheNode(objectID: id)
        #expect(node.objectID == id)
        #expect(node.propertyCache == nil)
        try node.setValue("Sales", forKey: "name")
        #expect(node.propertyCache?["name"] as? String == "Sales")
        #expect(try node.value(forKey: "name") as? String == "Sales")
        #expect(throws: CoreDataError.self) { try node.setValue(1, forKey: "nope") }
        store.addCacheNodes([node])
        #expect(store.cacheNodes() == [node])
        #expect(store.cacheNode(for: id) === node)
        #expect(store.cacheNode(for: store.objectID(for: entity, referenceObject: 1)) == nil)
        Company.registerClasses()
        let context = ManagedObjectContext(coordinator: coordinator)
        context.performAndWait {
            #expect((try? context.existingObject(with: id) as? DepartmentMO)??.name == "Sales")
        }
    }

    @Test func saveHookOrderAndRemovedNodes() throws {
        // AS-21, AS-23, AS-24, AS-25, AS-27
        final class LoggingStore: AtomicStore {
            override class var storeType: String { "Logging" }
            var log: [String] = []
            var removed: Set<AtomicStoreCacheNode> = []
            override func load() throws {}
            override func newReferenceObject(for entity: EntityDescription) -> Int64 { log.append("newReferenceObject"); return super.newReferenceObject(for: entity) }
            override func newCacheNode(for snapshot: StoreSnapshot) -> AtomicStoreCacheNode { log.append("newCacheNode"); return super.newCacheNode(for: snapshot) }
            override func updateCacheNode(_ node: AtomicStoreCacheNode, from snapshot: StoreSnapshot) { log.append("updateCacheNode"); super.updateCacheNode(node, from: snapshot) }
            override func willRemoveCacheNodes(_ nodes: Set<AtomicStoreCacheNode>) { log.append("willRemoveCacheNodes"); removed = nodes }
            override func save() throws { log.append("save") }
        }
        PersistentStoreCoordinator.registerStoreClass(LoggingStore.self, forStoreType: "Logging")
        let (coordinator, context) = try Company.stack(type: "Logging")
        let store = coordinator.persistentStores[0] as! LoggingStore
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            #expect(store.log == ["newReferenceObject", "newCacheNode", "updateCacheNode", "save"])
            #expect(store.cacheNodes().count == 1)
            store.log = []
            let node = store.cacheNode(for: d.objectID)!
            context.delete(d)
            try context.save()
            #expect(store.log == ["willRemoveCacheNodes", "save"])
            #expect(store.removed == [node])
            #expect(store.cacheNodes().isEmpty)
        }
    }
}
