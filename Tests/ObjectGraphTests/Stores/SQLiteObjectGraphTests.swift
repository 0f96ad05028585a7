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

    @Test func classLevelMetadataAndRemovalOnSQLite() throws {
        // PC-23, PS-15 through the coordinator's class-level API for SQLite files
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("meta.sqlite")
        let (coordinator, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try context.performAndWait {
            _ = try Company.department(context, "Ops")
            try context.save()
        }
        let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        var metadata = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        #expect(metadata[PersistentStore.storeUUIDKey] as? String == store.identifier)
        #expect(metadata[PersistentStore.storeTypeKey] as? String == "SQLite")
        try coordinator.remove(store)
        #expect(throws: (any Error).self) { try store.dataVersion() }   // closed on removal
        metadata["StoreSyncTag"] = "blue"
        try PersistentStoreCoordinator.setMetadata(metadata, forPersistentStoreOfType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let reread = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        #expect(reread["StoreSyncTag"] as? String == "blue")
    }
}
