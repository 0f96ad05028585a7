import Foundation
import Testing
@testable import ObjectGraph

/// The object graph on the SQLite store, through the same row contract.
@Suite struct SQLiteObjectGraphTests {
    @Test func companyFlowConflictsAndMergePolicyOnSQLite() throws {
        // PC-31 (SQLite type registered), MOC-MP-04 and MOC-CR-* on SQLite
        #expect(PersistentStoreCoordinator.registeredStoreTypes["SQLite"] == SQLiteStore.self)
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("company.sqlite")
        do {
            let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
            try context.performAndWait {
                let sales = try Company.department(context, "Sales")
                let boss = try Company.employee(context, "Grace", "Hopper", in: sales, salary: 900)
                for n in ["Alan", "Barb"] { try Company.employee(context, n, "Turing", in: sales).manager = boss }
                try context.save()
                boss.salary = 950
                try context.save()
            }
        }
        let (coordinator, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let other = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let staff = try context.fetch(Company.request("Employee", where: "salary < 500", sortedBy: "firstName"), as: EmployeeMO.self)
            #expect(staff.map(\.firstName) == ["Alan", "Barb"])
            #expect(staff[0].manager?.salary == 950)
            let sales = try #require(staff[0].department)
            #expect(sales.employees.count == 3)
            try other.performAndWait {
                try other.existingObject(with: sales.objectID).setValue("Renamed", forKey: "name")
                try other.save()
            }
            sales.budget = 7
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .managedObjectContextMerge)
            context.mergePolicy = .mergeByPropertyStoreTrump
            try context.save()
            #expect(sales.name == "Renamed" && sales.budget == 7)
            context.delete(staff[1])
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Employee")) == 2)
        }
    }
}
