import Foundation
import Testing
@testable import ObjectGraph

@Suite struct FaultingTests {
    @Test func fetchedObjectIsAFaultUntilAPropertyIsRead() throws {
        // FLT-01, FLT-02, LIFE-07, OBJ-12, OBJ-13, OBJ-17, OBJ-19
        let (coordinator, writer) = try Company.stack()
        try writer.performAndWait {
            _ = try Company.department(writer, "Sales")
            try writer.save()
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let dept = try #require(try context.fetch(FetchRequest(entityName: "Department")).first as? DepartmentMO)
            #expect(dept.isFault)
            _ = dept.entity; _ = dept.objectID; _ = dept.isInserted; _ = dept.isUpdated; _ = dept.isDeleted
            _ = dept.description; _ = dept.hashValue; _ = dept == dept; _ = dept.managedObjectContext
            #expect(dept.hasFaultForRelationshipNamed("employees"))
            #expect(dept.faultingState == 0)
            #expect(dept.isFault)
            #expect(dept.events.isEmpty)
            #expect(dept.name == "Sales")
            #expect(!dept.isFault)
            #expect(dept.events == ["awakeFromFetch"])
            #expect(dept.hasFaultForRelationshipNamed("employees")) // FLT-08: still not loaded
            _ = dept.employees
            #expect(!dept.hasFaultForRelationshipNamed("employees"))
        }
    }

    @Test func refreshTurnsBackIntoFaultAndFiresHooks() throws {
        // FLT-11, LIFE-26, LIFE-27, MOC-RF-01, LIFE-07 (again after refresh)
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            try context.save()
            dept.name = "Unsaved"
            context.refresh(dept, mergeChanges: false)
            #expect(dept.isFault)
            #expect(!context.updatedObjects.contains(dept))
            #expect(dept.events.suffix(2) == ["willTurnIntoFault(name=Optional(\"Unsaved\"))", "didTurnIntoFault"])
            #expect(dept.name == "Sales")
            #expect(dept.events.last == "awakeFromFetch")
        }
    }

    @Test func willAccessValueWithNilKeyFiresFault() throws {
        // FLT-06
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            try context.save()
            context.refresh(dept, mergeChanges: false)
            #expect(dept.isFault)
            dept.willAccessValue(forKey: nil)
            #expect(!dept.isFault)
        }
    }

    @Test func awakeFromFetchChangesAreNotTracked() throws {
        // LIFE-09
        final class Touchy: ManagedObject {
            override func awakeFromFetch() { super.awakeFromFetch(); try? setValue("touched", forKey: "name") }
        }
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.managedObjectClassName = "TouchyDepartment"
        ManagedObjectClassRegistry.shared.register(Touchy.self, forClassName: "TouchyDepartment")
        let (coordinator, writer) = try Company.stack(model: model)
        try writer.performAndWait {
            let d = try writer.insertNewObject(forEntityName: "Department")
            try d.setValue("Sales", forKey: "name")
            try writer.save()
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let d = try #require(try context.fetch(FetchRequest(entityName: "Department")).first)
            #expect(try d.value(forKey: "name") as? String == "touched")
            #expect(!d.isUpdated)
            #expect(!context.hasChanges)
        }
    }

    @Test func refreshWithMergeKeepsLocalChanges() throws {
        // MOC-RF-03
        let (coordinator, context) = try Company.stack()
        let writer = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let dept = try Company.department(context, "Sales", budget: 1)
            try context.save()
            dept.name = "Local"
            try writer.performAndWait {
                let d = try writer.existingObject(with: dept.objectID)
                try d.setValue("Remote", forKey: "name")
                try d.setValue(Decimal(3), forKey: "budget")
                try writer.save()
            }
            context.stalenessInterval = 0
            context.refresh(dept, mergeChanges: true)
            #expect(dept.name == "Local")
            #expect(dept.budget == 3)
            #expect(context.updatedObjects.contains(dept))
            #expect(dept.snapshotEvents.contains(.refresh)) // MOC-RF-06
        }
    }
}
