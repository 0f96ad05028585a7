import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ManagedObjectObservationTests {
    @Test func observersGetOldAndNewValuesOncePerSet() throws {
        // KVO-01, KVO-07, ACC-11
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            var changes: [ObservedChange] = []
            let token = d.addObserver(forKey: "name") { changes.append($0) }
            d.name = "Marketing"
            try d.setPrimitiveValue("Quiet", forKey: "name")
            d.name = "Marketing 2"
            #expect(changes.count == 2)
            #expect(changes[0].oldValue as? String == "Sales" && changes[0].newValue as? String == "Marketing")
            #expect(changes[1].oldValue as? String == "Quiet")
            token.cancel()
            d.name = "After"
            #expect(changes.count == 2)
        }
    }

    @Test func toManyChangesCarryMutationKindAndObjects() throws {
        // TM-06, TM-08, KVO-01
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: nil)
            var changes: [ObservedChange] = []
            let token = d.addObserver(forKey: "employees") { changes.append($0) }
            try d.mutableSetValue(forKey: "employees").insert(ada)
            try d.mutableSetValue(forKey: "employees").remove(ada)
            #expect(changes.map(\.kind) == [.insertion, .removal])
            #expect(changes.allSatisfy { $0.objects == [ada] })
            _ = token
        }
    }

    @Test func dependentKeysNotifyDerivedKeyObservers() throws {
        // DEP-01, DEP-02, DEP-04
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let e = try Company.employee(context, "Ada", "Lovelace", in: nil)
            var count = 0
            let token = e.addObserver(forKey: "fullNameAndID") { _ in count += 1 }
            e.firstName = "Augusta"
            e.lastName = "King"
            e.employeeID = 9
            e.salary = 5
            #expect(count == 3)
            #expect(e.fullName == "Augusta King")
            _ = token
        }
    }

    @Test func customAccessorsWithWillDidChangeAreTracked() throws {
        // ACC-07, CHG-12, KVO-03
        final class Custom: ManagedObject {
            var name: String? {
                get { willAccessValue(forKey: "name"); defer { didAccessValue(forKey: "name") }; return try? primitiveValue(forKey: "name") as? String }
                set { willChangeValue(forKey: "name"); try? setPrimitiveValue(newValue, forKey: "name"); didChangeValue(forKey: "name") }
            }
            func setSilently(_ value: String) { try? setPrimitiveValue(value, forKey: "name") }
        }
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.managedObjectClassName = "CustomDepartment"
        ManagedObjectClassRegistry.shared.register(Custom.self, forClassName: "CustomDepartment")
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let d = try #require(try context.insertNewObject(forEntityName: "Department") as? Custom)
            d.name = "Sales"
            try context.save()
            d.setSilently("Untracked")
            #expect(!d.isUpdated)
            d.name = "Tracked"
            #expect(d.isUpdated)
            #expect(d.changedValues()["name"] as? String == "Tracked")
        }
    }

    @Test func changedAndCommittedValues() throws {
        // CHG-02, CHG-06, CHG-07, CHG-08, CHG-09, CHG-10, MOC-PP-05, PROP-03
        let model = ReferenceModel.make()
        let dept = model.entitiesByName["Department"]!
        let note = AttributeDescription(name: "note", type: .string)
        note.isTransient = true
        dept.properties = dept.directProperties + [note]
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            #expect(d.changedValues().isEmpty)
            d.name = "Sales"            // same value: not a change
            #expect(!d.isUpdated)
            d.name = "Marketing"
            try d.setValue("scratch", forKey: "note")
            #expect(Set(d.changedValues().keys) == ["name"])
            #expect(try d.committedValues(forKeys: ["name", "note"]).keys.sorted() == ["name"])
            #expect(try d.committedValues(forKeys: ["name"])["name"] as? String == "Sales")
            #expect(Set(try d.committedValues(forKeys: nil).keys) == ["name", "budget", "employees"])
            try context.save()
            #expect(d.changedValues().isEmpty)
            #expect(try d.committedValues(forKeys: ["name"])["name"] as? String == "Marketing")
        }
    }
}
