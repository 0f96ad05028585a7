import Foundation
import Testing
@testable import ObjectGraph

/// The README's examples, run as written (against a temporary store file).
@Suite struct ReadmeExampleTests {
    final class ReadmeDepartment: ManagedObject {
        @Managed var name: String?
    }

    final class ReadmeEmployee: ManagedObject {
        @Managed var firstName: String?
        @Managed var salary: Decimal
        @Managed var department: ReadmeDepartment?
    }

    @Test func objectsContextsAndStoresExample() throws {
        let directory = try TestPaths.temporaryDirectory()
        let model = try ManagedObjectModel(contentsOf: TestPaths.companyModel)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                           at: directory.appendingPathComponent("Company.sqlite"))
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let sales = try context.insertNewObject(forEntityName: "Department")
            try sales.setValue("Sales", forKey: "name")
            let ada = try context.insertNewObject(forEntityName: "Employee")
            try ada.setValue("Ada", forKey: "firstName")
            try ada.setValue("Lovelace", forKey: "lastName")
            try ada.setValue(Decimal(1200), forKey: "salary")
            try ada.setValue(sales, forKey: "department")
            #expect((try sales.value(forKey: "employees") as? Set<ManagedObject>)?.contains(ada) == true)
            try context.save()

            let request = FetchRequest(entityName: "Employee")
            request.predicate = try FetchPredicate(format: "department.name == %@ AND salary > %@", "Sales", 1000)
            request.sortDescriptors = [FetchSortDescriptor(key: "lastName")]
            let earners = try context.fetch(request)
            #expect(earners.count == 1)
            #expect(try earners.first?.value(forKey: "firstName") as? String == "Ada")
        }
    }
}
