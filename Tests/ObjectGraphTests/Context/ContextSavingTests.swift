import Foundation
import Testing
@testable import ObjectGraph

/// Records context notifications in order.
final class NotificationRecorder {
    var names: [String] = []
    var notes: [Notification] = []
    private var tokens: [NSObjectProtocol] = []
    init(_ context: ManagedObjectContext) {
        for name in [ManagedObjectContext.objectsDidChangeNotification, ManagedObjectContext.willSaveNotification, ManagedObjectContext.didSaveNotification] {
            tokens.append(NotificationCenter.default.addObserver(forName: name, object: context, queue: nil) { [unowned self] note in
                self.names.append(note.name.rawValue)
                self.notes.append(note)
            })
        }
    }
    func last(_ name: Notification.Name) -> Notification? { notes.last { $0.name == name } }
    func count(_ name: Notification.Name) -> Int { notes.filter { $0.name == name }.count }
    deinit { tokens.forEach(NotificationCenter.default.removeObserver) }
}

@Suite struct ContextSavingTests {
    @Test func insertGetsTemporaryIDThenPermanentAtSave() throws {
        // MOC-MO-01, OBJ-14, MOID-02, MOID-03, MOID-04, CHG-01
        let (coordinator, context) = try Company.stack()
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            let tempID = dept.objectID
            #expect(tempID.isTemporaryID)
            #expect(tempID.persistentStore == nil)
            #expect(dept.isInserted)
            #expect(context.insertedObjects.contains(dept))
            try context.save()
            #expect(!dept.objectID.isTemporaryID)
            #expect(dept.objectID != tempID)
            #expect(dept.objectID.persistentStore === coordinator.persistentStores[0])
            #expect(context.registeredObject(for: dept.objectID) === dept)
            #expect(context.registeredObject(for: tempID) == nil)
            #expect(!dept.isInserted && !dept.hasChanges && !context.hasChanges)
            #expect(dept.objectID.uriRepresentation != tempID.uriRepresentation)
        }
    }

    @Test func keysFollowInsertionOrderAcrossDeletesAndReinserts() throws {
        // Apple leaves the order of new primary keys unspecified; here a save
        // hands them out in the order of first insertion since the last save,
        // whatever was removed meanwhile.
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType,
                                             url: try TestPaths.temporaryDirectory().appendingPathComponent("Order.sqlite"))
        try context.performAndWait {
            let names = (0..<40).map { "D\($0)" }
            var made: [String: DepartmentMO] = [:]
            for name in names { made[name] = try Company.department(context, name) }
            context.delete(made["D3"]!)        // an inserted object deleted leaves the context (MOC-MO-05)
            context.delete(made["D7"]!)
            context.processPendingChanges()
            #expect(made["D7"]!.managedObjectContext == nil)
            context.insert(made["D7"]!)         // and may be inserted again
            #expect(context.insertedObjects.count == 39)
            let extra = try Company.department(context, "D40")
            try context.save()
            let kept = names.filter { $0 != "D3" } + ["D40"]
            let keys = kept.map { made[$0]?.objectID.primaryKey ?? extra.objectID.primaryKey! }
            #expect(keys.allSatisfy { $0 != nil })
            let byKey = kept.sorted { (made[$0] ?? extra).objectID.primaryKey! < (made[$1] ?? extra).objectID.primaryKey! }
            // D7 went out and came back: it keeps the place of its first insertion since the last save.
            #expect(byKey == names.filter { $0 != "D3" } + ["D40"])
        }
    }

    @Test func obtainPermanentIDsKeepsObjectInserted() throws {
        // MOC-MO-08, MOC-MO-09, MOC-MO-10
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            try context.obtainPermanentIDs(for: [dept])
            let early = dept.objectID
            #expect(!early.isTemporaryID)
            #expect(dept.isInserted)
            try context.obtainPermanentIDs(for: [dept])
            #expect(dept.objectID == early)
            try context.save()
            #expect(dept.objectID == early)
        }
    }

    @Test func validationFailuresAreReportedAllAtOnce() throws {
        // MOC-SV-02, VAL-15, VAL-17, MOC-SV-04, PROP-04, MOC-CR-09; bad input: saving with validation failures
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d1 = try context.insertNewObject(forEntityName: "Department")
            let d2 = try context.insertNewObject(forEntityName: "Department")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationMultipleErrors)
            #expect(error?.detailedErrors.count == 2)
            #expect(error?.detailedErrors.allSatisfy { $0.code == .validationMissingMandatoryProperty } == true)
            let objects = Set(error?.detailedErrors.compactMap { $0.userInfo[CoreDataError.validationObjectErrorKey] as? ManagedObject } ?? [])
            #expect(objects == [d1, d2])
            // The failed save left everything as it was.
            #expect(context.insertedObjects == [d1, d2])
            #expect(d1.objectID.isTemporaryID)
        }
    }

    @Test func singleValidationFailureIsNotWrapped() throws {
        // MOC-SV-02 (one error is that error), VAL-18
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d = try Company.department(context, "S")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationStringTooShort)
            #expect(error?.userInfo[CoreDataError.validationKeyErrorKey] as? String == "name")
            #expect(error?.userInfo[CoreDataError.validationValueErrorKey] as? String == "S")
            #expect(error?.userInfo[CoreDataError.validationObjectErrorKey] as? ManagedObject === d)
        }
    }

    @Test func saveWithNothingToSavePostsNothing() throws {
        // MOC-SV-03
        let (_, context) = try Company.stack()
        let recorder = NotificationRecorder(context)
        try context.performAndWait { try context.save() }
        #expect(recorder.names.isEmpty)
    }

    @Test func notificationOrderAndDidSaveContents() throws {
        // MOC-NT-01, MOC-NT-02, MOC-NT-03, MOC-NT-04, MOC-SV-07, MOC-NT-05, MOC-UK-01, MOC-MG-06, MOID-07 (URIs in change sets)
        let (_, context) = try Company.stack()
        let recorder = NotificationRecorder(context)
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            try context.save()
            #expect(recorder.names == ["NSManagedObjectContextObjectsDidChangeNotification", "NSManagedObjectContextWillSaveNotification", "NSManagedObjectContextDidSaveNotification"])
            let didSave = try #require(recorder.last(ManagedObjectContext.didSaveNotification))
            #expect(didSave.object as? ManagedObjectContext === context)
            let inserted = try #require(didSave.userInfo?[ManagedObjectContext.insertedObjectsKey] as? Set<ManagedObject>)
            #expect(inserted == [dept])
            #expect(inserted.allSatisfy { !$0.objectID.isTemporaryID })
            let changes = try #require(didSave.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet)
            #expect(changes.inserted.first?.objectID == dept.objectID)
            #expect(changes.inserted.first?.changes["name"]?.newValue as? String == "Sales")

            dept.name = "Marketing"
            try context.save()
            let update = try #require((recorder.last(ManagedObjectContext.didSaveNotification)?.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet)?.updated.first)
            #expect(update.changes["name"]?.oldValue as? String == "Sales")
            #expect(update.changes["name"]?.newValue as? String == "Marketing")
        }
    }

    @Test func objectsDidChangeIsPostedOncePerEventAndNotForFetches() throws {
        // MOC-PP-01, MOC-PP-03, MOC-PP-04, MOC-NT-01 (a)(b)(c), MOC-PP-07, MOC-UK-02, MOC-NT-06 (synchronous delivery)
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let hr = try Company.department(context, "Human Resources")
            try context.save()
            let recorder = NotificationRecorder(context)
            _ = try context.fetch(FetchRequest(entityName: "Department"))
            #expect(recorder.names.isEmpty)
            sales.name = "Sales 2"
            context.delete(hr)
            let fresh = try Company.department(context, "New")
            fresh.name = "Newer"
            context.processPendingChanges()
            context.processPendingChanges()
            #expect(recorder.count(ManagedObjectContext.objectsDidChangeNotification) == 1)
            let info = try #require(recorder.notes.first?.userInfo)
            #expect(info[ManagedObjectContext.insertedObjectsKey] as? Set<ManagedObject> == [fresh])
            #expect(info[ManagedObjectContext.updatedObjectsKey] as? Set<ManagedObject> == [sales])
            #expect(info[ManagedObjectContext.deletedObjectsKey] as? Set<ManagedObject> == [hr])
            #expect(context.insertedObjects == [fresh] && context.updatedObjects == [sales] && context.deletedObjects == [hr])
        }
    }

    @Test func insertThenDeleteLeavesNoTrace() throws {
        // MOC-MO-05, MOC-PP-06, MOC-HC-01, MOC-UK-03, MOC-UK-07 (empty keys left out)
        let (_, context) = try Company.stack()
        let recorder = NotificationRecorder(context)
        try context.performAndWait {
            let keep = try Company.department(context, "Keep")
            let gone = try Company.department(context, "Gone")
            context.delete(gone)
            #expect(!context.insertedObjects.contains(gone))
            #expect(!context.deletedObjects.contains(gone))
            try context.save()
            let info = try #require(recorder.last(ManagedObjectContext.didSaveNotification)?.userInfo)
            #expect(info[ManagedObjectContext.insertedObjectsKey] as? Set<ManagedObject> == [keep])
            #expect(info[ManagedObjectContext.deletedObjectsKey] == nil)
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 1)
        }
    }

    @Test func lifecycleHooksRunInOrder() throws {
        // LIFE-01, LIFE-02, LIFE-18, LIFE-23, LIFE-25, DEL-04, MOC-SV-06 (5, 10), MOC-SV-01
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            try context.save()
            #expect(dept.events == ["awakeFromInsert", "willSave", "didSave"])
            context.delete(dept)
            try context.save()
            #expect(dept.events == ["awakeFromInsert", "willSave", "didSave", "prepareForDeletion", "willSave", "didSave"])
            #expect(dept.managedObjectContext == nil) // OBJ-16
        }
    }

    @Test func willSaveChangesAreSavedAndEndlessRedirtyingFails() throws {
        // LIFE-19, LIFE-20
        final class Stamped: ManagedObject {
            var rounds = 0
            var alwaysChange = false
            override func willSave() {
                rounds += 1
                let current = (try? value(forKey: "name")) as? String
                if alwaysChange { try? setValue("n\(rounds)", forKey: "name") }
                else if current != "stamped" { try? setValue("stamped", forKey: "name") }
            }
        }
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.managedObjectClassName = "StampedDepartment"
        ManagedObjectClassRegistry.shared.register(Stamped.self, forClassName: "StampedDepartment")
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let d = try #require(try context.insertNewObject(forEntityName: "Department") as? Stamped)
            try d.setValue("Sales", forKey: "name")
            try context.save()
            #expect(d.rounds == 2)
            #expect(try d.value(forKey: "name") as? String == "stamped")
            #expect(!context.hasChanges)
            d.alwaysChange = true
            try d.setValue("Other", forKey: "name")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.message.contains("willSave") == true)
        }
    }
}
