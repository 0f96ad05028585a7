import Foundation
import Testing
@testable import ObjectGraph

/// Main-queue contexts (Apple: `NSManagedObjectContextConcurrencyType
/// .mainQueueConcurrencyType`, "the context is associated with the main
/// queue"; THR-01: confinement is per context). Swift Testing calls
/// `dispatchMain()`, so the main queue's blocks run on pool threads here,
/// as in any Linux program that does: `Thread.isMainThread` is false there.
@Suite struct ContextMainQueueTests {
    @Test func twoMainQueueContextsBothRunOnTheMainQueue() async throws {
        // Issue 28 item 4: the second context's queue mark replaced the first's,
        // and the first trapped inside its own performAndWait.
        let (coordinator, _) = try Company.stack()
        let first = ManagedObjectContext(coordinator: coordinator, concurrencyType: .mainQueue)
        let second = ManagedObjectContext(coordinator: coordinator, concurrencyType: .mainQueue)
        try first.performAndWait {
            _ = try Company.department(first, "Sales")
            try first.save()
        }
        let count = try second.performAndWait { try second.count(for: FetchRequest(entityName: "Department")) }
        #expect(count == 1)
        // perform's end of event processes pending changes on the main queue too.
        let inserted: Int = await withCheckedContinuation { continuation in
            first.perform {
                _ = try? Company.department(first, "Operations")
                continuation.resume(returning: first.insertedObjects.count)
            }
        }
        #expect(inserted == 1)
        // Each may use the other inside its block: both are on the main queue.
        let seen = try second.performAndWait { try first.performAndWait { first.insertedObjects.count } }
        #expect(seen == 1)
    }

    @Test func aPrivateContextIsNotOnTheMainQueue() throws {
        let (coordinator, privateContext) = try Company.stack()
        let main = ManagedObjectContext(coordinator: coordinator, concurrencyType: .mainQueue)
        main.performAndWait { #expect(main.isOnQueue && !privateContext.isOnQueue) }
        privateContext.performAndWait { #expect(privateContext.isOnQueue && !main.isOnQueue) }
    }
}
