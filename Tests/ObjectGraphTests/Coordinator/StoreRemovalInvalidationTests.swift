import Foundation
import Testing
@testable import ObjectGraph

@Suite struct StoreRemovalInvalidationTests {
    @Test func objectsOfARemovedStoreAreInvalidated() throws {
        // MOC-UK-05
        let (coordinator, context) = try Company.stack()
        let recorder = NotificationRecorder(context)
        let dept = try context.performAndWait { () throws -> DepartmentMO in
            let d = try Company.department(context, "Sales")
            try context.save()
            return d
        }
        try coordinator.remove(coordinator.persistentStores[0])
        context.performAndWait {}
        let invalidated = recorder.notes.last?.userInfo?[ManagedObjectContext.invalidatedObjectsKey] as? Set<ManagedObject>
        #expect(invalidated == [dept])
        #expect(dept.managedObjectContext == nil)
        #expect(context.performAndWait { context.registeredObjects.isEmpty })
    }
}
