import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextMemoryTests {
    @Test func droppedFetchResultsLeaveNoRegisteredObjects() throws {
        // MOC-RR-01, MOC-RR-02: 100,000 objects fetched and dropped are freed
        let (coordinator, context) = try Company.stack()
        let store = coordinator.persistentStores[0]
        let entity = coordinator.managedObjectModel.entitiesByName["Department"]!
        var request = StoreSaveRequest()
        for id in try store.newObjectIDs(for: entity, count: 100_000) {
            request.inserted.append(StoreSnapshot(objectID: id, version: 1, values: ["name": "D\(id.primaryKey!)", "budget": Decimal(1)]))
        }
        try store.save(request)
        try context.performAndWait {
            #expect(!context.retainsRegisteredObjects)
            do {
                let all = try context.fetch(FetchRequest(entityName: "Department"))
                #expect(all.count == 100_000)
                #expect(context.registeredObjects.count == 100_000)
            }
            #expect(context.registeredObjects.isEmpty)
            #expect(context.registry.isEmpty)
        }
    }

    @Test func changedAndRetainedObjectsStayRegistered() throws {
        // MOC-RR-02 (edited object stays), MOC-RR-03
        let (_, context) = try Company.stack()
        try context.performAndWait {
            do {
                let d = try Company.department(context, "Sales")
                try context.save()
                d.name = "Edited"
            }
            #expect(context.registeredObjects.count == 1)
            try context.save()
            #expect(context.registeredObjects.isEmpty)
            context.retainsRegisteredObjects = true
            _ = try context.fetch(FetchRequest(entityName: "Department"))
            #expect(context.registeredObjects.count == 1)
        }
    }
}

/// MOC-RR-02 with the strong uniquing table: pages of objects fetched from
/// SQLite (the store answers exactly, so the context takes its rows as the
/// result) and dropped one after another never pile up in the table.
@Suite struct ContextRegistrySweepTests {
    @Test func droppedPagesAreSweptWhileFetching() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sweep-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ContextFaultGroupTests.model())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("S.sqlite"))
        let entity = coordinator.managedObjectModel.entitiesByName["Item"]!
        let total = 30_000, page = 1_000
        var request = StoreSaveRequest()
        for id in try store.newObjectIDs(for: entity, count: total) {
            request.inserted.append(StoreSnapshot(objectID: id, version: 1, values: ["name": "i\(id.primaryKey!)"]))
        }
        try store.save(request)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            var largest = 0, seen = 0
            for offset in stride(from: 0, to: total, by: page) {
                let fetch = FetchRequest(entityName: "Item")
                fetch.sortDescriptors = [FetchSortDescriptor(key: "name")]
                fetch.fetchOffset = offset
                fetch.fetchLimit = page
                fetch.returnsObjectsAsFaults = false
                let objects = try context.fetch(fetch)
                seen += objects.count
                largest = max(largest, context.registry.count)
            }
            #expect(seen == total)
            // A sweep runs once the table doubles past 4,096 entries, so it
            // never holds much more than twice that; without sweeping it
            // would hold all 30,000.
            #expect(largest <= 2 * ManagedObjectContext.minimumSweepThreshold + page, "the uniquing table grew to \(largest)")
            #expect(context.registeredObjects.isEmpty)
        }
    }
}
