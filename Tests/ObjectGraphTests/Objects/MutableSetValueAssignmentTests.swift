import Foundation
import Testing
@testable import ObjectGraph

/// `setValue(_:forKey:)` with a to-many's own mutable set proxy as the value
/// (KVC-02, TM-01): Core Data accepts any set-like value there, and ported
/// code passes `mutableSetValue(forKey:)` back in (issue 28 item 6: refused
/// with 1550).
@Suite struct MutableSetValueAssignmentTests {
    @Test(arguments: TestStores.sqliteAndInMemory)
    func aMutableSetProxyIsASetValue(_ type: String) throws {
        Company.registerClasses()
        let coordinator = try TestStores.coordinator(ReferenceModel.make(), type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        let (salesID, opsID) = try context.performAndWait { () throws -> (ManagedObjectID, ManagedObjectID) in
            let sales = try Company.department(context, "Sales")
            let ops = try Company.department(context, "Operations")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            let bob = try Company.employee(context, "Bob", "Best", in: sales)
            // Its own proxy: the membership is unchanged, and nothing breaks.
            try sales.setValue(sales.mutableSetValue(forKey: "employees"), forKey: "employees")
            #expect(sales.employees == [ada, bob])
            // Another object's proxy: the members move, inverses follow (to-one department).
            try ops.setValue(sales.mutableSetValue(forKey: "employees"), forKey: "employees")
            #expect(ops.employees == [ada, bob])
            #expect(sales.employees.isEmpty)
            #expect(ada.department === ops && bob.department === ops)
            try context.save()
            return (sales.objectID, ops.objectID)
        }
        let check = ManagedObjectContext(coordinator: coordinator)
        let (opsCount, salesCount) = try check.performAndWait { () throws -> (Int?, Int?) in
            ((try check.existingObject(with: opsID).value(forKey: "employees") as? Set<ManagedObject>)?.count,
             (try check.existingObject(with: salesID).value(forKey: "employees") as? Set<ManagedObject>)?.count)
        }
        #expect(opsCount == 2 && salesCount == 0)
    }
}
