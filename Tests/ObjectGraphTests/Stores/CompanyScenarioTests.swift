import Foundation
import Testing
@testable import ObjectGraph

/// The reference's Employee/Department scenario end to end on an XML store
/// (managed-objects.md §17, framework-classes-2a.md §E).
@Suite struct CompanyScenarioTests {
    @Test func departmentLifecycleThroughAnXMLStore() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Company.xml")
        // 1. Insert a department with employees and save.
        do {
            let (_, context) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: url)
            try context.performAndWait {
                let sales = try Company.department(context, "Sales", budget: 50_000)
                let boss = try Company.employee(context, "Grace", "Hopper", in: sales, salary: 900, id: 1)
                for (i, name) in ["Alan", "Barbara", "Claude"].enumerated() {
                    try Company.employee(context, name, "Turing", in: sales, salary: Decimal(100 + i), id: Int32(i + 2)).manager = boss
                }
                try context.save()
            }
        }
        // 2. Reopen in a new coordinator; fetch with a filter and a sort; change a manager.
        do {
            let (_, context) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: url)
            try context.performAndWait {
                let request = Company.request("Employee", where: "salary < %@ AND department.name == %@", Decimal(500), "Sales", sortedBy: "firstName")
                let staff = try context.fetch(request, as: EmployeeMO.self)
                #expect(staff.map(\.firstName) == ["Alan", "Barbara", "Claude"])
                #expect(staff.allSatisfy { $0.manager?.firstName == "Grace" })
                let alan = staff[0]
                staff[1].manager = alan
                #expect(alan.directReports.map(\.firstName) == ["Barbara"])
                try context.save()
            }
        }
        // 3. Delete the department: Department.employees is Deny.
        do {
            let (_, context) = try Company.stack(type: PersistentStoreCoordinator.xmlStoreType, url: url)
            try context.performAndWait {
                let sales = try #require(try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
                context.delete(sales)
                let error = #expect(throws: CoreDataError.self) { try context.save() }
                #expect(error?.code == .validationRelationshipDeniedDelete)
            }
        }
        // 4. With a copy of the model whose rule is Cascade: delete, undo the delete, save.
        let cascade = DeleteRuleTests.model(employees: .cascade)
        do {
            let (_, context) = try Company.stack(model: cascade, type: PersistentStoreCoordinator.xmlStoreType, url: url)
            try context.performAndWait {
                context.undoManager = ContextUndoManager()
                let sales = try #require(try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
                context.delete(sales)
                context.processPendingChanges()
                #expect(context.deletedObjects.count == 5)
                context.undo()
                #expect(context.deletedObjects.isEmpty)
                #expect(sales.employees.count == 4)
                sales.name = "Sales & Marketing"
                try context.save()
            }
        }
        // 5. Reopen and check; then a real cascade delete reaches the file.
        do {
            let (_, context) = try Company.stack(model: cascade, type: PersistentStoreCoordinator.xmlStoreType, url: url)
            try context.performAndWait {
                let sales = try #require(try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
                #expect(sales.name == "Sales & Marketing")
                #expect(sales.employees.count == 4)
                let barbara = try #require(sales.employees.first { $0.firstName == "Barbara" })
                #expect(barbara.manager?.firstName == "Alan")
                context.delete(sales)
                try context.save()
            }
            let (_, check) = try Company.stack(model: cascade, type: PersistentStoreCoordinator.xmlStoreType, url: url)
            let counts = try check.performAndWait {
                (try check.count(for: FetchRequest(entityName: "Employee")), try check.count(for: FetchRequest(entityName: "Department")))
            }
            #expect(counts == (0, 0))
        }
    }
}
