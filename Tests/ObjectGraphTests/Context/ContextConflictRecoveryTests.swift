import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextConflictRecoveryTests {
    @Test func coordinatorVersusStoreConflictHasDatabaseRow() throws {
        // MOC-CR-02 (second case), MOC-CR-05, MOC-CR-06
        let (coordinator, context) = try Company.stack()
        let store = coordinator.persistentStores[0]
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            // Another writer changes the row behind this coordinator's cache.
            var r = StoreSaveRequest()
            r.updated = [(StoreSnapshot(objectID: d.objectID, version: 2, values: ["name": "Elsewhere", "budget": Decimal(5)]), 1)]
            try store.save(r)
            d.name = "Here"
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            let conflict = try #require((error?.userInfo[MergeConflict.conflictListKey] as? [MergeConflict])?.first)
            #expect(conflict.snapshot == nil)
            #expect(conflict.cachedRow?["name"] as? String == "Sales")
            #expect(conflict.databaseRow?["name"] as? String == "Elsewhere")
        }
    }

    @Test func refreshAfterConflictThenSaveSucceeds() throws {
        // MOC-RF-05
        let (coordinator, context) = try Company.stack()
        let other = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let d = try Company.department(context, "Sales", budget: 1)
            try context.save()
            try other.performAndWait {
                try other.existingObject(with: d.objectID).setValue(Decimal(7), forKey: "budget")
                try other.save()
            }
            d.name = "Renamed"
            #expect(throws: CoreDataError.self) { try context.save() }
            context.refresh(d, mergeChanges: true)
            try context.save()
            #expect(d.name == "Renamed" && d.budget == 7)
        }
    }

    @Test func lockedObjectsAreHeldUntilSave() throws {
        // MOC-MO-14, MOC-RR-02
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let id = try { () throws -> ManagedObjectID in
                let d = try Company.department(context, "Sales")
                try context.save()
                context.detectConflicts(for: d)
                return d.objectID
            }()
            #expect(context.registeredObject(for: id) != nil)
            try context.save()
            #expect(context.registeredObject(for: id) == nil)
        }
    }

    @Test func requiredToOneLeftNilFailsAtSave() throws {
        // REL-04
        let (_, context) = try Company.stack()
        try context.performAndWait {
            _ = try Company.employee(context, "Ada", "Lovelace", in: nil)
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationMissingMandatoryProperty)
            #expect(error?.userInfo[CoreDataError.validationKeyErrorKey] as? String == "department")
        }
    }

    @Test func automaticProcessPendingChangesPoints() throws {
        // MOC-PP-02: explicit call, start of save, before undo/redo, before a fetch with pending changes
        let (_, context) = try Company.stack()
        let d = try context.performAndWait { () throws -> DepartmentMO in
            let d = try Company.department(context, "Sales")
            try context.save()
            return d
        }
        let recorder = NotificationRecorder(context)
        try context.performAndWait {
            d.budget = 5
            _ = try context.fetch(FetchRequest(entityName: "Department"))
            #expect(recorder.count(ManagedObjectContext.objectsDidChangeNotification) == 1)
            d.name = "Marketing"
            try context.save()
            #expect(recorder.count(ManagedObjectContext.objectsDidChangeNotification) == 2)
            context.undoManager = ContextUndoManager()
            d.name = "Research"
            context.undo()
            #expect(d.name == "Marketing")
        }
        // The end of a perform block is an event too.
        let before = recorder.count(ManagedObjectContext.objectsDidChangeNotification)
        let done = DispatchSemaphore(value: 0)
        context.perform {
            d.budget = 42
            done.signal()
        }
        done.wait()
        context.performAndWait {}
        #expect(recorder.count(ManagedObjectContext.objectsDidChangeNotification) == before + 1)
    }
}
