import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ManagedObjectLifecycleTests {
    final class Stamped: ManagedObject {
        var initName: Any?? = .none
        required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
            super.init(entity: entity, insertInto: context)
            initName = try? primitiveValue(forKey: "name")
        }
        override func awakeFromInsert() {
            super.awakeFromInsert()
            // LIFE-04: defaults are applied; LIFE-05: primitive sets are baseline values.
            try? setPrimitiveValue("untitled", forKey: "name")
        }
        override func didSave() {
            super.didSave()
            if managedObjectContext == nil { try? setValue("resurrect?", forKey: "name") }
        }
    }

    static func stack() throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.managedObjectClassName = "StampedLifecycle"
        ManagedObjectClassRegistry.shared.register(Stamped.self, forClassName: "StampedLifecycle")
        return try Company.stack(model: model)
    }

    @Test func initInsertsOnlyWithAContext() throws {
        // OBJ-04, OBJ-07, OBJ-08, LIFE-01, LIFE-04, LIFE-05, LIFE-12
        let (coordinator, context) = try Self.stack()
        try context.performAndWait {
            let entity = coordinator.managedObjectModel.entitiesByName["Department"]!
            let loose = Stamped(entity: entity, insertInto: nil)
            #expect(loose.managedObjectContext == nil && !loose.isInserted)
            #expect(try loose.primitiveValue(forKey: "name") == nil)
            context.insert(loose)
            #expect(loose.isInserted)
            #expect(try loose.value(forKey: "name") as? String == "untitled")
            #expect(try loose.value(forKey: "budget") as? Decimal == 0)
            #expect(context.undoManager == nil)
            let made = try #require(try context.insertNewObject(forEntityName: "Department") as? Stamped)
            #expect((loose.initName ?? nil) == nil)   // LIFE-12: nothing loaded in init
            try made.setValue("Made", forKey: "name")
            try loose.setValue("Loose", forKey: "name")
            try context.save()
            // A fetched copy elsewhere reads the stored name, not init's view.
            let other = ManagedObjectContext(coordinator: coordinator)
            let names = try other.performAndWait { try other.fetch(FetchRequest(entityName: "Department")).map { try $0.value(forKey: "name") as? String } }
            #expect(Set(names.compactMap { $0 }) == ["Made", "Loose"])
        }
    }

    @Test func deletedObjectCannotBeResurrectedInDidSave() throws {
        // LIFE-24, OBJ-16, MOC-MO-04, CHG-03
        let (_, context) = try Self.stack()
        try context.performAndWait {
            let d = try #require(try context.insertNewObject(forEntityName: "Department") as? Stamped)
            try d.setValue("Sales", forKey: "name")
            try context.save()
            let id = d.objectID
            context.delete(d)
            #expect(d.isDeleted)
            try context.save()
            #expect(!d.isDeleted)
            #expect(d.managedObjectContext == nil)
            #expect(context.registeredObject(for: id) == nil)
            #expect(!context.hasChanges)
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 0)
        }
    }

    @Test func willSaveNotificationPrecedesStoreWrites() throws {
        // LIFE-22, MOC-NT-03 (a)(b)
        let (coordinator, context) = try Company.stack()
        var storeCountAtWillSave: Int?
        var willSaves = 0
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.willSaveNotification, object: context, queue: nil) { _ in
            willSaves += 1
            storeCountAtWillSave = (try? coordinator.persistentStores[0].fetchSnapshots(FetchRequest(entityName: "Department")).snapshots.count)
        }
        defer { NotificationCenter.default.removeObserver(token) }
        context.performAndWait {
            _ = try? Company.department(context, "Sales")
            try? context.save()
            #expect(storeCountAtWillSave == 0)
            _ = try? context.insertNewObject(forEntityName: "Department")   // invalid: no name
            #expect((try? context.save()) == nil)
            #expect(willSaves == 2)
        }
    }

    @Test func saveInsideObjectsDidChangeHandlerFails() throws {
        // MOC-SV-05
        let (_, context) = try Company.stack()
        var inner: Error?
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil) { _ in
            do { try context.save() } catch { inner = error }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        try context.performAndWait {
            _ = try Company.department(context, "Sales")
            context.processPendingChanges()
        }
        #expect(inner != nil)
    }

    @Test func stateSetsAndRegistrationQueries() throws {
        // CHG-04, CHG-05, MOC-00c, MOC-FE-09, MOC-FE-10, MOC-FE-11, MOC-FE-12, MOC-PC-01, MOC-00d, MOID-00a, MOID-00c, MOID-01, MOC-RF-07
        let (coordinator, context) = try Company.stack()
        try context.performAndWait {
            #expect(context.persistentStoreCoordinator === coordinator)
            #expect(context.registeredObjects.isEmpty && !context.hasChanges)
            let d = try Company.department(context, "Sales")
            #expect(context.hasChanges)
            try context.save()
            #expect(d.objectID.entity === d.entity)
            let other = ManagedObjectContext(coordinator: coordinator)
            let registeredBefore = other.performAndWait { other.registeredObject(for: d.objectID) }
            let fromOther = other.performAndWait { other.object(with: d.objectID) }
            #expect(registeredBefore == nil)
            #expect(fromOther.objectID == d.objectID && fromOther.objectID.hashValue == d.objectID.hashValue)
            #expect(other.performAndWait { other.registeredObject(for: d.objectID) } === fromOther)
            // objectWithID assumes the row exists; firing fails with 133000.
            let ghost = ManagedObjectID(entity: d.entity, storeIdentifier: d.objectID.storeIdentifier!, primaryKey: 777)
            let fault = context.object(with: ghost)
            #expect(fault.isFault)
            #expect(throws: CoreDataError.self) { try fault.value(forKey: "name") }
            context.delete(d)
            #expect(context.deletedObjects == [d] && d.isDeleted && context.registeredObjects.contains(d))
            context.refresh(d, mergeChanges: false)       // discards the pending delete
            #expect(!d.isDeleted && !context.hasChanges)
            let fresh = try Company.department(context, "Fresh")
            context.refresh(fresh, mergeChanges: false)   // inserted: no-op
            #expect(!fresh.isFault && fresh.isInserted)
            #expect(context.registeredObjects.allSatisfy { context.registeredObject(for: $0.objectID) === $0 })
        }
    }

    @Test func stalenessControlsCachedSnapshots() throws {
        // MOC-ST-01, MOC-ST-02, MOC-ST-03, MOC-ST-04, MOC-RF-04
        let model = ReferenceModel.make()
        Company.registerClasses()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(ofType: "InMemory")
        var clock = Date(timeIntervalSince1970: 0)
        coordinator.now = { clock }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            #expect(context.stalenessInterval == -1)
            let d = try Company.department(context, "Sales")
            try context.save()
            // Another writer changes the row behind the coordinator's cache.
            var r = StoreSaveRequest()
            r.updated = [(StoreSnapshot(objectID: d.objectID, version: 2, values: ["name": "Remote", "budget": Decimal(1)]), 1)]
            try store.save(r)
            context.refresh(d, mergeChanges: false)
            #expect(d.name == "Sales")             // infinite staleness: cached snapshot
            context.stalenessInterval = 300
            clock = Date(timeIntervalSince1970: 100)
            context.refresh(d, mergeChanges: false)
            #expect(d.name == "Sales")             // younger than 300 s
            clock = Date(timeIntervalSince1970: 400)
            context.refresh(d, mergeChanges: false)
            #expect(d.name == "Remote")            // stale: refetched
            context.stalenessInterval = -5
            #expect(context.stalenessInterval == -5)
        }
    }

    @Test func lockingFromAnotherThread() throws {
        // MOC-LK-02, MOC-LK-03, PC-17
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let context = ManagedObjectContext(coordinator: coordinator)
        func tryOnOtherThread(_ lock: NSLocking & AnyObject) -> Bool {
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var got = false
            let thread = Thread {
                got = (lock as? ManagedObjectContext)?.tryLock() ?? (lock as! PersistentStoreCoordinator).tryLock()
                if got { lock.unlock() }
                done.signal()
            }
            thread.start()
            done.wait()
            return got
        }
        context.lock()
        #expect(!tryOnOtherThread(context))
        context.unlock()
        #expect(tryOnOtherThread(context))
        coordinator.lock()
        #expect(!tryOnOtherThread(coordinator))
        coordinator.unlock()
        #expect(tryOnOtherThread(coordinator))
    }
}
