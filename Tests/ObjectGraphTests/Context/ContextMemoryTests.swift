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
