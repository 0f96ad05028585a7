import Foundation
import Testing
@testable import ObjectGraph

/// A loaded object keeps its to-one destinations as object IDs until a
/// to-one is read (see `ManagedObject.rawStorage`). What the application sees
/// must not change: the destination is the context's one instance for the
/// record (OBJ-18), committed and changed values hold objects (CHG-08,
/// FLT-10), saves and in-memory predicates see the destination.
@Suite struct ManagedObjectLazyToOneTests {
    /// A SQLite store with Sales (Ann, Bob) and Ops (Cid), and a second
    /// coordinator's context on it whose row cache is empty.
    static func savedCompany() throws -> (ManagedObjectContext, URL) {
        let directory = try TestPaths.temporaryDirectory()
        let url = directory.appendingPathComponent("Company.sqlite")
        let (_, writer) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try writer.performAndWait {
            let sales = try Company.department(writer, "Sales"), ops = try Company.department(writer, "Ops")
            _ = try Company.employee(writer, "Ann", "Able", in: sales, id: 1)
            _ = try Company.employee(writer, "Bob", "Baker", in: sales, id: 2)
            _ = try Company.employee(writer, "Cid", "Cole", in: ops, id: 3)
            try writer.save()
        }
        let (_, reader) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        return (reader, directory)
    }

    /// The employees, loaded (not faults), by ID.
    static func employees(_ context: ManagedObjectContext) throws -> [EmployeeMO] {
        let request = Company.request("Employee", sortedBy: "employeeID")
        request.returnsObjectsAsFaults = false
        return try context.fetch(request) as! [EmployeeMO]
    }

    @Test func readingAnAttributeLeavesTheToOneUnresolvedAndTheDestinationUnmade() throws {
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let ann = try #require(try Self.employees(context).first)
            #expect(try ann.value(forKey: "firstName") as? String == "Ann")
            #expect(ann.toOnesPending != 0)
            // No department object exists yet: loading Ann made none.
            #expect(context.registry.values.allSatisfy { $0.entity.name == "Employee" })
        }
    }

    @Test func theDestinationIsTheContextsOneInstanceForTheRecord() throws {
        // OBJ-18: both Sales employees reach the same department instance, which a fetch also returns
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let staff = try Self.employees(context)
            let annsDepartment = try #require(staff[0].department)
            #expect(staff[1].department === annsDepartment)
            #expect(staff[2].department !== annsDepartment)
            #expect(try staff[2].value(forKey: "department") as? DepartmentMO === staff[2].department)
            #expect(annsDepartment.name == "Sales")
            let fetched = try context.fetch(Company.request("Department", where: "name == %@", "Sales"))
            #expect(fetched.count == 1 && fetched[0] === annsDepartment)
            #expect(annsDepartment.employees == Set([staff[0], staff[1]]))
        }
    }

    @Test func committedAndChangedValuesHoldObjectsNotIDs() throws {
        // CHG-08: committed values are the fetched ones; FLT-10/CHG-06: an attribute edit reports only itself
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let bob = try #require(try Self.employees(context).dropFirst().first)
            bob.firstName = "Robert"   // written before any to-one is read
            #expect(bob.changedValues().keys.sorted() == ["firstName"])
            let committed = try bob.committedValues(forKeys: ["department", "firstName"])
            #expect((committed["department"] as? DepartmentMO)?.name == "Sales")
            #expect(committed["firstName"] as? String == "Bob")
            #expect(bob.department === committed["department"] as? DepartmentMO)
            #expect(bob.changedValues().keys.sorted() == ["firstName"])
        }
    }

    @Test func savingAnAttributeEditKeepsTheStoredToOne() throws {
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let cid = try #require(try Self.employees(context).last)
            cid.lastName = "Changed"
            try context.save()
        }
        let (_, check) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: directory.appendingPathComponent("Company.sqlite"))
        try check.performAndWait {
            let cid = try #require(try Self.employees(check).last)
            #expect(cid.lastName == "Changed")
            #expect(cid.department?.name == "Ops")
        }
    }

    @Test func anInMemoryPredicateThroughTheToOneSeesTheDestination() throws {
        // MOC-FE-05: with an unsaved insert the fetch is finished in memory over loaded objects
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let loaded = try Self.employees(context)
            #expect(loaded.allSatisfy { $0.toOnesPending != 0 })
            let ops = try #require(loaded[2].department)
            _ = try Company.employee(context, "Dee", "Dunn", in: ops, id: 4)
            let inSales = try context.fetch(Company.request("Employee", where: "department.name == %@", "Sales", sortedBy: "employeeID")) as! [EmployeeMO]
            #expect(inSales.map(\.firstName) == ["Ann", "Bob"])
            let inOps = try context.fetch(Company.request("Employee", where: "department == %@", ops, sortedBy: "employeeID")) as! [EmployeeMO]
            #expect(inOps.map(\.firstName) == ["Cid", "Dee"])
        }
    }

    @Test func aDestinationFreedByTheSweepIsMadeAgainWhenRead() throws {
        // MOC-RR-02: an unread to-one does not keep its destination alive
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let staff = try Self.employees(context)
            var salesID: ManagedObjectID?
            do {
                let sales = try #require(staff[0].department)
                salesID = sales.objectID
            }
            // Bob's to-one was never read, so only Ann held Sales; drop Ann's hold by refreshing her.
            context.refresh(staff[0], mergeChanges: false)
            context.sweepUnreferencedObjects(untilStable: true)
            #expect(context.registry[try #require(salesID)] == nil)
            let sales = try #require(staff[1].department)
            #expect(sales.objectID == salesID)
            #expect(sales.name == "Sales")
            #expect(context.registry[sales.objectID] === sales)
        }
    }

    @Test func anObjectLetGoOfByResetReadsAnUnreadToOneAsNil() throws {
        // MOC-RS-01: the objects are invalid after reset; an unread to-one cannot be looked up and reads as nil
        let (context, directory) = try Self.savedCompany()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let staff = try Self.employees(context)
            let read = staff[0].department
            context.reset()
            #expect(try staff[1].value(forKey: "department") == nil)
            #expect(staff[0].department === read)   // read before the reset: kept
            #expect(try staff[1].value(forKey: "firstName") as? String == "Bob")
        }
    }
}
