import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextMergeTests {
    @Test func mergeDidSaveKeepsLocalUnsavedEdits() throws {
        // MOC-MG-01, MOC-MG-02, MOC-MG-03, MOC-MG-04, MOC-MG-05, MOC-MG-06, MOC-MG-07 (B merges on its own queue), MOC-PC-02, MOC-UK-04
        let (coordinator, a) = try Company.stack()
        let b = ManagedObjectContext(coordinator: coordinator)
        let (sales, doomed) = try a.performAndWait {
            let s = try Company.department(a, "Sales", budget: 1)
            let d = try Company.department(a, "Doomed")
            try a.save()
            return (s.objectID, d.objectID)
        }
        let (salesB, doomedB) = try b.performAndWait {
            let s = try #require(try b.existingObject(with: sales) as? DepartmentMO)
            _ = try b.existingObject(with: doomed)
            s.name = "Local name"       // unsaved edit in B
            return (s, try b.existingObject(with: doomed))
        }
        var saved: Notification?
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: a, queue: nil) { saved = $0 }
        defer { NotificationCenter.default.removeObserver(token) }
        let newID = try a.performAndWait {
            let s = try a.existingObject(with: sales) as! DepartmentMO
            s.budget = 99
            a.delete(try a.existingObject(with: doomed))
            let n = try Company.department(a, "New")
            try a.save()
            return n.objectID
        }
        let note = try #require(saved)
        let recorder = NotificationRecorder(b)
        b.performAndWait {
            b.mergeChanges(fromContextDidSave: note)
            #expect(salesB.name == "Local name")
            #expect(salesB.budget == 99)
            #expect(b.updatedObjects.contains(salesB))
            #expect(b.registeredObject(for: newID) != nil)
            #expect(!b.insertedObjects.contains { $0.objectID == newID })
            #expect(b.registeredObject(for: doomed) == nil)
            #expect(!b.deletedObjects.contains(doomedB))
            #expect(recorder.count(ManagedObjectContext.objectsDidChangeNotification) == 1)
        }
        try b.performAndWait { try b.save() }   // B's own edit saves without conflict
        try a.performAndWait {
            a.refresh(try a.existingObject(with: sales), mergeChanges: false)
            #expect((try a.existingObject(with: sales) as! DepartmentMO).name == "Local name")
        }
    }

    /// MOC-MP-09: O has a=name, b=budget, c=employees-free attribute… we use
    /// Department.name (a), budget (b) and Employee-free third attribute via a
    /// copy of the model with an extra optional attribute `code` (c).
    static func model() -> ManagedObjectModel {
        let model = ReferenceModel.make()
        let code = AttributeDescription(name: "code", type: .string)
        let dept = model.entitiesByName["Department"]!
        dept.properties = dept.directProperties + [code]
        return model
    }

    /// Sets up the truth-table state and returns the conflicting object.
    func conflict(_ policy: MergePolicy) throws -> (ManagedObjectContext, ManagedObject, () throws -> [String: Any], Result<Void, Error>) {
        let (coordinator, context) = try Company.stack(model: Self.model())
        let other = ManagedObjectContext(coordinator: coordinator)
        let o = try context.performAndWait {
            let o = try context.insertNewObject(forEntityName: "Department")
            try o.setValuesForKeys(["name": "a1", "budget": Decimal(1), "code": "c1"])
            try context.save()
            return o
        }
        try other.performAndWait {
            let copy = try other.existingObject(with: o.objectID)
            try copy.setValue("a3", forKey: "name")
            try copy.setValue("c3", forKey: "code")
            try other.save()
        }
        let result: Result<Void, Error> = context.performAndWait {
            context.mergePolicy = policy
            try! o.setValue("a2", forKey: "name")
            try! o.setValue(Decimal(2), forKey: "budget")
            return Result { try context.save() }
        }
        let stored: () throws -> [String: Any] = {
            let fresh = try PersistentStoreCoordinator(managedObjectModel: coordinator.managedObjectModel)
            _ = fresh
            let store = coordinator.persistentStores[0]
            return try store.snapshots(for: [o.objectID])[o.objectID]!.values
        }
        return (context, o, stored, result)
    }

    func values(_ context: ManagedObjectContext, _ o: ManagedObject) -> [String] {
        context.performAndWait { ["name", "budget", "code"].map { "\((try? o.value(forKey: $0)).flatMap { $0 }.map { "\($0)" } ?? "nil")" } }
    }

    func stored(_ row: [String: Any]) -> [String] { ["name", "budget", "code"].map { "\(row[$0].map { "\($0)" } ?? "nil")" } }

    @Test func errorPolicyFailsWithConflictList() throws {
        // MOC-MP-01, MOC-MP-02, MOC-MP-03, MOC-MP-09 (Error row), MOC-CR-01, MOC-CR-02, MOC-CR-03, MOC-CR-04, MOC-CR-05, MOC-CR-07, MOC-CR-08, MOC-CR-11
        let (context, o, row, result) = try conflict(.error)
        let error = try #require(result.failureError as? CoreDataError)
        #expect(error.code == .managedObjectContextMerge)
        let list = try #require(error.userInfo[MergeConflict.conflictListKey] as? [MergeConflict])
        #expect(list.count == 1 && list[0].object === o)
        #expect(list[0].snapshot != nil && list[0].cachedRow != nil && list[0].databaseRow == nil)
        #expect(list[0].newVersion == list[0].oldVersion + 1)
        #expect(stored(try row()) == ["a3", "1", "c3"])
        #expect(values(context, o) == ["a2", "2", "c1"])
        #expect(context.performAndWait { context.hasChanges })
    }

    @Test func storeTrump() throws {
        // MOC-MP-04, MOC-MP-09, MOC-MP-11, MOC-MP-08
        let (context, o, row, result) = try conflict(.mergeByPropertyStoreTrump)
        #expect(result.failureError == nil)
        #expect(stored(try row()) == ["a3", "2", "c3"])
        #expect(values(context, o) == ["a3", "2", "c3"])
        try context.performAndWait { try context.save() }   // MOC-MP-11: no second conflict
    }

    @Test func objectTrump() throws {
        // MOC-MP-05, MOC-MP-09
        let (context, o, row, result) = try conflict(.mergeByPropertyObjectTrump)
        #expect(result.failureError == nil)
        #expect(stored(try row()) == ["a2", "2", "c3"])
        #expect(values(context, o) == ["a2", "2", "c3"])
    }

    @Test func overwrite() throws {
        // MOC-MP-06, MOC-MP-09
        let (context, o, row, result) = try conflict(.overwrite)
        #expect(result.failureError == nil)
        #expect(stored(try row()) == ["a2", "2", "c1"])
        #expect(values(context, o) == ["a2", "2", "c1"])
    }

    @Test func rollbackPolicy() throws {
        // MOC-MP-07, MOC-MP-09
        let (context, o, row, result) = try conflict(.rollback)
        #expect(result.failureError == nil)
        #expect(stored(try row()) == ["a3", "1", "c3"])
        #expect(values(context, o) == ["a3", "1", "c3"])
        #expect(context.performAndWait { !context.hasChanges })
    }

    @Test func detectConflictsOnUnchangedObject() throws {
        // MOC-MO-13
        let (coordinator, a) = try Company.stack()
        let b = ManagedObjectContext(coordinator: coordinator)
        let (p, q) = try a.performAndWait {
            let p = try Company.department(a, "PP")
            let q = try Company.department(a, "QQ")
            try a.save()
            a.detectConflicts(for: p)
            return (p, q)
        }
        try b.performAndWait {
            try b.existingObject(with: p.objectID).setValue("P2", forKey: "name")
            try b.save()
        }
        try a.performAndWait {
            q.name = "Q2"
            let error = #expect(throws: CoreDataError.self) { try a.save() }
            let list = error?.userInfo[MergeConflict.conflictListKey] as? [MergeConflict]
            #expect(list?.contains { $0.object === p } == true)
        }
    }
}

extension Result {
    var failureError: Error? { if case .failure(let e) = self { return e }; return nil }
}
