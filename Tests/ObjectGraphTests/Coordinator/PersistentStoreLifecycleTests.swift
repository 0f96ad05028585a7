import Foundation
import Testing
@testable import ObjectGraph

@Suite struct PersistentStoreLifecycleTests {
    final class Recording: AtomicStore {
        override class var storeType: String { "Recording" }
        var log: [String] = []
        override func didAdd(to coordinator: PersistentStoreCoordinator) { log.append("didAdd") }
        override func load() throws { log.append("load") }
        override func save() throws { log.append("save") }
        override func willRemoveFromPersistentStoreCoordinator() { log.append("willRemove") }
    }

    @Test func hooksRunInOrderAndStoreKnowsItsCoordinator() throws {
        // PS-05, PS-16, PS-17, PC-09, PC-45, PC-07, PC-06
        PersistentStoreCoordinator.registerStoreClass(Recording.self, forStoreType: "Recording")
        #expect(PersistentStoreCoordinator.registeredStoreTypes["Recording"] == Recording.self)
        #expect(Set(["InMemory", "XML", "Binary"]).isSubset(of: PersistentStoreCoordinator.registeredStoreTypes.keys))
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let store = try #require(try coordinator.addPersistentStore(ofType: "Recording") as? Recording)
        #expect(store.persistentStoreCoordinator === coordinator)
        var willRemove = 0
        let token = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.willRemoveStoreNotification, object: store, queue: nil) { _ in willRemove += 1 }
        defer { NotificationCenter.default.removeObserver(token) }
        try coordinator.remove(store)
        #expect(store.log == ["didAdd", "load", "willRemove"])
        #expect(willRemove == 1)
        #expect(store.persistentStoreCoordinator == nil)
        PersistentStoreCoordinator.registerStoreClass(nil, forStoreType: "Recording")
        #expect(PersistentStoreCoordinator.registeredStoreTypes["Recording"] == nil)
    }

    @Test func storeStateAndMetadataKeys() throws {
        // PS-04, PS-06, PS-07, PS-09, PS-11, PC-05, PC-10, PC-11, PC-12, PC-26, PC-27, PC-28, PC-31, PC-35h
        let dir = try TestPaths.temporaryDirectory()
        let model = ReferenceModel.make()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        #expect(coordinator.managedObjectModel === model)
        let url = dir.appendingPathComponent("a.bin")
        let options: [String: Any] = ["NSSQLitePragmasOption": ["journal_mode": "WAL"]]
        let bin = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.binaryStoreType, configurationName: "Directory", at: url, options: options)
        let mem = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
        #expect(coordinator.persistentStores.map { type(of: $0).storeType } == ["Binary", "InMemory"])
        #expect(bin.configurationName == "Directory" && mem.configurationName == nil)
        #expect((bin.options["NSSQLitePragmasOption"] as? [String: String]) == ["journal_mode": "WAL"])
        #expect(bin.identifier != mem.identifier && UUID(uuidString: bin.identifier) != nil)
        #expect(bin.metadata[PersistentStore.storeTypeKey] as? String == "Binary")
        #expect(bin.metadata[ManagedObjectModel.storeModelVersionHashesKey] as? [String: Data] == model.entityVersionHashesByName)
        #expect(coordinator.persistentStore(for: dir.appendingPathComponent("x/../a.bin")) === bin)
        #expect(coordinator.url(for: bin) == url)
        #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: "Binary", at: url) }
    }

    @Test func readOnlyStoreRefusesSaves() throws {
        // PS-10, PC-32
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("ro.xml")
        let (_, writer) = try Company.stack(type: "XML", url: url)
        try writer.performAndWait { _ = try Company.department(writer, "Sales"); try writer.save() }
        let before = try Data(contentsOf: url)
        Company.registerClasses()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let store = try coordinator.addPersistentStore(ofType: "XML", at: url, options: [PersistentStore.readOnlyOption: true])
        #expect(store.isReadOnly)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let dept = try #require(try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
            dept.name = "Changed"
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect((error?.userInfo[CoreDataError.affectedStoresErrorKey] as? [PersistentStore])?.first === store) // MOC-CR-10
        }
        #expect(try Data(contentsOf: url) == before)
    }

    @Test func metadataSetOnAnAddedStoreIsVisibleAndSavedLater() throws {
        // PS-12, PC-21, PC-22, PS-14, PS-15, PC-23, PC-24
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("m.xml")
        let (coordinator, context) = try Company.stack(type: "XML", url: url)
        try context.performAndWait { _ = try Company.department(context, "Sales"); try context.save() }
        let store = coordinator.persistentStores[0]
        coordinator.setMetadata(["k": "v"], for: store)
        #expect(coordinator.metadata(for: store)["k"] as? String == "v")
        #expect(coordinator.metadata(for: store)[PersistentStore.storeUUIDKey] as? String == store.identifier)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(ofType: "XML", at: url)["k"] == nil)
        try context.performAndWait { try (try context.fetch(FetchRequest(entityName: "Department")).first!).setValue("Marketing", forKey: "name"); try context.save() }
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(ofType: "XML", at: url)["k"] as? String == "v")
        let missing = url.deletingLastPathComponent().appendingPathComponent("none.xml")
        #expect(throws: CoreDataError.self) { try PersistentStoreCoordinator.metadataForPersistentStore(ofType: "XML", at: missing) }
    }
}
