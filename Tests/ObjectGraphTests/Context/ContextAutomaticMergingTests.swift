import Foundation
import Testing
@testable import ObjectGraph

/// `automaticallyMergesChangesFromParent` for contexts on one coordinator
/// (MOC-AM-01): off by default; on, another context's save is merged on
/// this context's queue and announced by objects-did-change.
@Suite struct ContextAutomaticMergingTests {
    /// Two contexts on one SQLite store; `viewer` has fetched both
    /// departments and fired them, and the caller keeps them (`kept`): a
    /// context holds its objects weakly, as Core Data's does.
    static func pair() throws -> (kept: [ManagedObject], writer: ManagedObjectContext, viewer: ManagedObjectContext, sales: ManagedObjectID) {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Store.sqlite")
        let (coordinator, writer) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let sales = try writer.performAndWait {
            let sales = try Company.department(writer, "Sales")
            _ = try Company.department(writer, "Research")
            try writer.save()
            return sales.objectID
        }
        let viewer = ManagedObjectContext(coordinator: coordinator)
        let kept = try viewer.performAndWait {
            let all = try viewer.fetch(FetchRequest(entityName: "Department"))
            #expect(Set(all.compactMap { ($0 as? DepartmentMO)?.name }) == ["Sales", "Research"])
            return all
        }
        _ = coordinator
        return (kept, writer, viewer, sales)
    }

    /// The writer renames Sales, deletes Research and inserts Support.
    static func edit(_ writer: ManagedObjectContext) throws {
        try writer.performAndWait {
            let all = try writer.fetch(FetchRequest(entityName: "Department")) as! [DepartmentMO]
            all.first { $0.name == "Sales" }?.name = "Sales EMEA"
            if let research = all.first(where: { $0.name == "Research" }) { writer.delete(research) }
            _ = try Company.department(writer, "Support")
            try writer.save()
        }
    }

    /// Waits for `context`'s next objects-did-change, which `change` causes.
    static func nextChange(of context: ManagedObjectContext, after change: () throws -> Void) async throws -> [AnyHashable: Any] {
        final class Waiter: @unchecked Sendable {
            var token: NSObjectProtocol?
            var continuation: CheckedContinuation<[AnyHashable: Any], Never>?
            var early: [AnyHashable: Any]?
        }
        let waiter = Waiter()
        let lock = NSLock()
        waiter.token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil) { note in
            lock.lock(); defer { lock.unlock() }
            guard waiter.early == nil else { return }
            waiter.early = note.userInfo ?? [:]
            waiter.continuation?.resume(returning: waiter.early!)
            waiter.continuation = nil
        }
        defer { NotificationCenter.default.removeObserver(waiter.token!) }
        try change()
        return await withCheckedContinuation { continuation in
            lock.lock(); defer { lock.unlock() }
            if let early = waiter.early { continuation.resume(returning: early) } else { waiter.continuation = continuation }
        }
    }

    // MOC-AM-01: on, the viewer sees the rename, the insert and the delete.
    @Test func anotherContextsSaveIsMergedOnTheContextsQueue() async throws {
        let (kept, writer, viewer, sales) = try Self.pair()
        defer { withExtendedLifetime(kept) {} }
        #expect(!viewer.automaticallyMergesChangesFromParent)
        viewer.automaticallyMergesChangesFromParent = true
        let info = try await Self.nextChange(of: viewer) { try Self.edit(writer) }
        #expect((info[ManagedObjectContext.deletedObjectsKey] as? Set<ManagedObject>)?.count == 1)
        try viewer.performAndWait {
            #expect((viewer.object(with: sales) as? DepartmentMO)?.name == "Sales EMEA")
            #expect(!viewer.registeredObjects.contains { ($0 as? DepartmentMO)?.name == "Research" })
            let names = try viewer.fetch(FetchRequest(entityName: "Department")).compactMap { ($0 as? DepartmentMO)?.name }
            #expect(Set(names) == ["Sales EMEA", "Support"])
            #expect(!viewer.hasChanges)
        }
    }

    // MOC-AM-01: off (the default, and after turning it off again) a
    // registered object keeps the values it was fetched with.
    @Test func offTheContextKeepsItsObjectsAsFetched() throws {
        let (kept, writer, viewer, sales) = try Self.pair()
        defer { withExtendedLifetime(kept) {} }
        viewer.automaticallyMergesChangesFromParent = true
        viewer.automaticallyMergesChangesFromParent = false
        try Self.edit(writer)
        // A block queued after the save: a merge, had one been queued, ran before it.
        viewer.performAndWait {}
        viewer.performAndWait {
            #expect((viewer.object(with: sales) as? DepartmentMO)?.name == "Sales")
        }
    }

    // MOC-AM-01: a save to another coordinator is not this context's parent's.
    @Test func aSaveOnAnotherCoordinatorIsNotMerged() throws {
        let (kept, _, viewer, sales) = try Self.pair()
        defer { withExtendedLifetime(kept) {} }
        viewer.automaticallyMergesChangesFromParent = true
        let (_, stranger) = try Company.stack()
        var changes = 0
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification, object: viewer, queue: nil) { _ in changes += 1 }
        defer { NotificationCenter.default.removeObserver(token) }
        try stranger.performAndWait {
            _ = try Company.department(stranger, "Elsewhere")
            try stranger.save()
        }
        viewer.performAndWait {}
        #expect(changes == 0)
        viewer.performAndWait { #expect((viewer.object(with: sales) as? DepartmentMO)?.name == "Sales") }
    }
}
