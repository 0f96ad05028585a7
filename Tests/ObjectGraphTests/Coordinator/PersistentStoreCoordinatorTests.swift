import Foundation
import Testing
@testable import ObjectGraph

@Suite struct PersistentStoreCoordinatorTests {
    @Test func unknownStoreTypeIs134000() throws {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let error = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: "Nope") }
        #expect(error?.code == .persistentStoreInvalidType)
    }

    @Test func mismatchedVersionHashesAre134100() throws {
        // PC-03 (each coordinator its own model version), PC-28, MOM-VR-01
        let dir = try TestPaths.temporaryDirectory()
        let url = dir.appendingPathComponent("company.xml")
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: url)
        try context.performAndWait {
            _ = try Company.department(context, "Sales")
            try context.save()
        }
        let changed = ReferenceModel.make()
        changed.entitiesByName["Department"]!.properties += [AttributeDescription(name: "extra", type: .string)]
        let other = try PersistentStoreCoordinator(managedObjectModel: changed)
        let error = #expect(throws: CoreDataError.self) { try other.addPersistentStore(ofType: PersistentStoreCoordinator.xmlStoreType, at: url) }
        #expect(error?.code == .persistentStoreIncompatibleVersionHash)
    }

    @Test func metadataOfAnUnaddedStoreFile() throws {
        let dir = try TestPaths.temporaryDirectory()
        let url = dir.appendingPathComponent("company.bin")
        let model = ReferenceModel.make()
        let (coordinator, context) = try Company.stack(model: model, type: PersistentStoreCoordinator.binaryStoreType, url: url)
        let store = coordinator.persistentStores[0]
        coordinator.setMetadata(["app": "StoreSync"], for: store)
        try context.performAndWait {
            _ = try Company.department(context, "Sales")
            try context.save()
        }
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: PersistentStoreCoordinator.binaryStoreType, at: url)
        #expect(metadata[PersistentStore.storeTypeKey] as? String == "Binary")
        #expect(metadata[PersistentStore.storeUUIDKey] as? String == store.identifier)
        #expect(metadata["app"] as? String == "StoreSync")
        #expect(model.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        try PersistentStoreCoordinator.setMetadata(["app": "Changed"], forPersistentStoreOfType: "Binary", at: url)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(ofType: "Binary", at: url)["app"] as? String == "Changed")
    }

    @Test func storesDidChangeAndURIsStopResolvingAfterRemove() throws {
        // MOID-05 (b), PC-20, PC-44, PC-08
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        var events: [String] = []
        let token = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storesDidChangeNotification, object: coordinator, queue: nil) { note in
            events += note.userInfo?.keys.map { $0 as! String } ?? []
        }
        defer { NotificationCenter.default.removeObserver(token) }
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
        let context = ManagedObjectContext(coordinator: coordinator)
        Company.registerClasses()
        let uri = try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            return d.objectID.uriRepresentation
        }
        #expect(coordinator.managedObjectID(forURIRepresentation: uri) != nil)
        try coordinator.remove(store)
        #expect(coordinator.managedObjectID(forURIRepresentation: uri) == nil)
        #expect(events == ["added", "removed"])
    }

    @Test func objectsRouteByConfigurationAndAssignment() throws {
        // MOC-MO-07, OBJ-09, PC-01, PC-13, MOID-06 (cross-store relationship refused: 133010), fetches span stores
        let model = ReferenceModel.make()
        model.setEntities([model.entitiesByName["Department"]!], forConfiguration: "Departments")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        let a = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType, configurationName: "Directory")
        let b = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType, configurationName: "Departments")
        Company.registerClasses()
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let first = try Company.department(context, "First")
            let second = try Company.department(context, "Second")
            context.assign(second, to: b)
            try context.save()
            #expect(first.objectID.persistentStore === a)
            #expect(second.objectID.persistentStore === b)
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 2)
            // A relationship across stores fails at save (MOC-SV-06 step 6).
            _ = try Company.employee(context, "Ada", "Lovelace", in: second)
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .managedObjectContextExternalRelationship)
        }
    }

    @Test func migrateBetweenStoreTypes() throws {
        // PC-15
        let dir = try TestPaths.temporaryDirectory()
        let (coordinator, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            _ = try Company.employee(context, "Bob", "Smith", in: sales).manager = ada
            try context.save()
        }
        let url = dir.appendingPathComponent("migrated.xml")
        let target = try coordinator.migratePersistentStore(coordinator.persistentStores[0], to: url, type: PersistentStoreCoordinator.xmlStoreType)
        #expect(coordinator.persistentStores.count == 1 && coordinator.persistentStores[0] === target)
        let (_, reopened) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: url)
        try reopened.performAndWait {
            let dept = try #require(try reopened.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
            #expect(dept.employees.count == 2)
            let bob = try #require(dept.employees.first { $0.firstName == "Bob" })
            #expect(bob.manager?.firstName == "Ada")
        }
    }

    @Test func customStoreClassRegistration() throws {
        // PS-01, PS-02, PS-03, AS-01, PC-07
        final class NotesStore: AtomicStore {
            override class var storeType: String { "Notes" }
            var log: [String] = []
            override func load() throws { log.append("load") }
            override func save() throws { log.append("save") }
        }
        PersistentStoreCoordinator.registerStoreClass(NotesStore.self, forStoreType: "Notes")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let store = try #require(try coordinator.addPersistentStore(ofType: "Notes") as? NotesStore)
        #expect(store.metadata[PersistentStore.storeTypeKey] as? String == "Notes")
        #expect(store.log == ["load"])
    }

    @Test func lockIsRecursive() throws {
        // MOC-LK-01, MOC-LK-04, MOC-00g, PC-16, PC-18
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let context = ManagedObjectContext(coordinator: coordinator)
        context.lock(); context.lock()
        #expect(context.tryLock())
        context.unlock(); context.unlock(); context.unlock()
        coordinator.lock(); #expect(coordinator.tryLock()); coordinator.unlock(); coordinator.unlock()
    }
}
