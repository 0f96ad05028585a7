import Foundation
import Testing
@testable import ObjectGraph

/// `existingObject(with:)` fetches an unregistered object and fires it
/// (MOC-FE-11); firing follows the context's staleness (MOC-ST-02): with
/// the default infinite staleness the coordinator's cached row is used,
/// with 0 the store is read again, so a row another coordinator changed
/// comes back with its new values (the sync engine relies on this).
@Suite struct ContextExistingObjectStalenessTests {
    @Test func existingObjectHonoursTheContextsStaleness() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Staleness.sqlite")
        let (coordinator, writer) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let id = try writer.performAndWait {
            let department = try Company.department(writer, "Before")
            try writer.save()
            return department.objectID
        }
        // Another coordinator (another connection) changes the row.
        let (_, other) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try other.performAndWait {
            let department = try other.existingObject(with: ManagedObjectID(entity: id.entity, storeIdentifier: id.storeIdentifier ?? "", primaryKey: id.primaryKey ?? 0))
            try department.setValue("After", forKey: "name")
            try other.save()
        }
        let cached = ManagedObjectContext(coordinator: coordinator)
        #expect(try cached.performAndWait { try cached.existingObject(with: id).value(forKey: "name") as? String } == "Before")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        fresh.stalenessInterval = 0
        let object = try fresh.performAndWait { try fresh.existingObject(with: id) }
        #expect(!object.isFault)
        #expect(try fresh.performAndWait { try object.value(forKey: "name") as? String } == "After")
    }
}
