import Foundation
import Testing
@testable import ObjectGraph

@Suite struct OrderedRelationshipTests {
    @Test func orderedToManyKeepsOrderThroughAStore() throws {
        // REL ordered relationships; mutableOrderedSetValue
        let model = ReferenceModel.make()
        model.entitiesByName["Employee"]!.relationshipsByName["directReports"]!.isOrdered = true
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("o.bin")
        let (_, context) = try Company.stack(model: model, type: "Binary", url: url)
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            let boss = try Company.employee(context, "Grace", "Hopper", in: dept)
            let names = ["Cy", "Al", "Bo"]
            let reports = try names.map { try Company.employee(context, $0, "Staff", in: dept) }
            let ordered = try boss.mutableOrderedSetValue(forKey: "directReports")
            for r in reports { try ordered.insert(r) }
            try ordered.insert(reports[2], at: 0)
            #expect(try ordered.allObjects().map { try $0.value(forKey: "firstName") as! String } == ["Bo", "Cy", "Al"])
            #expect(reports.allSatisfy { $0.manager === boss })
            try ordered.remove(at: 1)
            #expect(reports[0].manager == nil)
            #expect(throws: CoreDataError.self) { try boss.mutableOrderedSetValue(forKey: "employees") }
            try context.save()
        }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: { let m = ReferenceModel.make(); m.entitiesByName["Employee"]!.relationshipsByName["directReports"]!.isOrdered = true; return m }())
        try coordinator.addPersistentStore(ofType: "Binary", at: url)
        let check = ManagedObjectContext(coordinator: coordinator)
        try check.performAndWait {
            let boss = try #require(try check.fetch(Company.request("Employee", where: "firstName == %@", "Grace")).first)
            let reports = try #require(try boss.value(forKey: "directReports") as? [ManagedObject])
            #expect(try reports.map { try $0.value(forKey: "firstName") as! String } == ["Bo", "Al"])
            // A reorder alone is a change, and is saved.
            try boss.mutableOrderedSetValue(forKey: "directReports").insert(reports[1], at: 0)
            #expect(boss.changedValues()["directReports"] != nil)
            try check.save()
        }
        let again = try PersistentStoreCoordinator(managedObjectModel: coordinator.managedObjectModel)
        try again.addPersistentStore(ofType: "Binary", at: url)
        let last = ManagedObjectContext(coordinator: again)
        try last.performAndWait {
            let boss = try #require(try last.fetch(Company.request("Employee", where: "firstName == %@", "Grace")).first)
            let reports = try #require(try boss.value(forKey: "directReports") as? [ManagedObject])
            #expect(try reports.map { try $0.value(forKey: "firstName") as! String } == ["Al", "Bo"])
        }
    }
}
