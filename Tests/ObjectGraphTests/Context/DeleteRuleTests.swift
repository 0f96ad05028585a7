import Foundation
import Testing
@testable import ObjectGraph

@Suite struct DeleteRuleTests {
    static func model(employees rule: DeleteRule) -> ManagedObjectModel {
        let model = ReferenceModel.make()
        (model.entitiesByName["Department"]!.relationshipsByName["employees"]!).deleteRule = rule
        return model
    }

    @Test func denyFailsTheSaveWith1600() throws {
        // MOC-MO-06, VAL-13, DEL-02, CONST-VC-06, MOC-CR-09
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            _ = try Company.employee(context, "Ada", "Lovelace", in: sales)
            try context.save()
            context.delete(sales)
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationRelationshipDeniedDelete)
            #expect(error?.userInfo[CoreDataError.validationKeyErrorKey] as? String == "employees")
            #expect(context.deletedObjects == [sales])
        }
    }

    @Test func cascadeDeletesDestinationsAtEndOfEvent() throws {
        // MOC-DP-01, MOC-DP-02, DEL (cascade)
        let (_, context) = try Company.stack(model: Self.model(employees: .cascade))
        try context.performAndWait {
            #expect(context.propagatesDeletesAtEndOfEvent)
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            let bob = try Company.employee(context, "Bob", "Smith", in: sales)
            try context.save()
            context.delete(sales)
            context.processPendingChanges()
            #expect(ada.isDeleted && bob.isDeleted)
            #expect(context.deletedObjects == [sales, ada, bob])
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Employee")) == 0)
        }
    }

    @Test func nullifyClearsTheInverse() throws {
        // DEL-01, MOC-DP-02, MOC-NT-05
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            let bob = try Company.employee(context, "Bob", "Smith", in: sales)
            bob.manager = ada
            try context.save()
            context.delete(bob)       // Employee.department and .manager are Nullify
            context.processPendingChanges()
            #expect(sales.employees == [ada])
            #expect(ada.directReports.isEmpty)
            try context.save()
            #expect(sales.employees == [ada])
        }
    }

    @Test func propagationAtSaveWhenNotAtEndOfEvent() throws {
        // MOC-DP-03, MOC-DP-04
        let (_, context) = try Company.stack(model: Self.model(employees: .cascade))
        try context.performAndWait {
            context.propagatesDeletesAtEndOfEvent = false
            #expect(!context.propagatesDeletesAtEndOfEvent)
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            try context.save()
            context.delete(sales)
            context.processPendingChanges()
            #expect(!ada.isDeleted)
            #expect(ada.department === sales)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Employee")) == 0)
        }
    }

    @Test func noActionLeavesDestinations() throws {
        // DEL (no action)
        let (_, context) = try Company.stack(model: Self.model(employees: .noAction))
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            try context.save()
            context.delete(sales)
            context.processPendingChanges()
            #expect(!ada.isDeleted)
            #expect(ada.department === sales)
        }
    }
}
