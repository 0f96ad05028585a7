import Foundation
import Testing
@testable import ObjectGraph

/// `perform(schedule:_:) async` (MOC-AS-01, MOC-AS-02) and the rule for
/// crossing tasks: object IDs are `Sendable` and cross, objects stay on
/// their context's queue (THR-01).
@Suite struct ContextConcurrencyTests {
    /// Written on one context's queue at a time, read after the awaits.
    final class Log: @unchecked Sendable {
        private let lock = NSLock()
        private var entries: [String] = []
        func append(_ entry: String) { lock.lock(); entries.append(entry); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return entries }
    }

    static func requireSendable<T: Sendable>(_: T.Type) {}

    /// The closure `perform(_:)`, which in an async function the async one
    /// would shadow (as with Core Data's two overloads).
    static func enqueue(_ context: ManagedObjectContext, _ block: @escaping () -> Void) {
        context.perform(block)
    }

    // MOC-AS-01, MOC-PP-02: the value comes back, pending changes are
    // processed at the block's end, and an error is rethrown.
    @Test func performReturnsTheBlocksValueAndRethrows() async throws {
        let (_, context) = try Company.stack()
        let changes = Log()
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil) { _ in changes.append("changed") }
        defer { NotificationCenter.default.removeObserver(token) }
        let name = try await context.perform {
            let department = try Company.department(context, "Sales")
            return department.name
        }
        #expect(name == "Sales")
        #expect(changes.all.count == 1)
        struct Refused: Error {}
        await #expect(throws: Refused.self) { try await context.perform { throw Refused() } }
        // A block that cannot throw needs no `try`.
        let count = await context.perform(schedule: .enqueued) { context.insertedObjects.count }
        #expect(count == 1)
    }

    // MOC-AS-02: from outside the queue both kinds run after what is queued.
    @Test func fromAnotherTaskBothSchedulesRunAfterTheQueuedBlocks() async throws {
        let (_, context) = try Company.stack()
        let log = Log()
        Self.enqueue(context) { Thread.sleep(forTimeInterval: 0.02); log.append("queued") }
        await context.perform(schedule: .immediate) { log.append("immediate") }
        Self.enqueue(context) { log.append("queued again") }
        await context.perform(schedule: .enqueued) { log.append("enqueued") }
        #expect(log.all == ["queued", "immediate", "queued again", "enqueued"])
    }

    // MOC-AS-02: on the main actor a main-queue context's `.immediate`
    // block runs at once, ahead of a block already queued; `.enqueued` waits
    // its turn.
    @MainActor @Test func onItsQueueImmediateRunsAtOnceAndEnqueuedWaits() async throws {
        let (coordinator, _) = try Company.stack()
        let main = ManagedObjectContext(coordinator: coordinator, concurrencyType: .mainQueue)
        try #require(main.isOnQueue, "the main actor runs on the main queue")
        let log = Log()
        Self.enqueue(main) { log.append("queued") }
        await main.perform(schedule: .immediate) { log.append("immediate") }
        #expect(log.all.first == "immediate")
        await main.perform(schedule: .enqueued) { log.append("enqueued") }
        #expect(log.all == ["immediate", "queued", "enqueued"])
    }

    // THR-01: an object ID made on one context's queue is handed to another
    // task and resolved there in another context.
    @Test func objectIDsCrossTasksAndObjectsAreLookedUpAgain() async throws {
        Self.requireSendable(ManagedObjectID.self)
        Self.requireSendable(ManagedObjectContext.ScheduledTaskType.self)
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Store.sqlite")
        let (coordinator, writer) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let id: ManagedObjectID = try await writer.perform {
            let department = try Company.department(writer, "Research")
            try writer.save()
            return department.objectID
        }
        #expect(!id.isTemporaryID)
        let reader = ManagedObjectContext(coordinator: coordinator)
        let name = try await Task.detached {
            try await reader.perform { (try reader.existingObject(with: id) as? DepartmentMO)?.name }
        }.value
        #expect(name == "Research")
    }
}
