import Foundation
import Testing
@testable import ObjectGraph

/// Fetches the SQLite store answers exactly: with nothing unsaved to overlay
/// (or `includesPendingChanges` off) the store's rows are the result, which
/// is Core Data's SQL semantics for unchanged objects; changed objects are
/// still judged on their in-memory values.
@Suite struct ContextExactFetchTests {
    /// Two contexts on two coordinators over one file holding items "a", "b", "c".
    static func twoCoordinators() throws -> (ManagedObjectContext, ManagedObjectContext, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("exact-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func context() throws -> ManagedObjectContext {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: ContextFaultGroupTests.model())
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("E.sqlite"))
            return ManagedObjectContext(coordinator: coordinator)
        }
        let first = try context()
        try first.performAndWait {
            for name in ["a", "b", "c"] { try first.insertNewObject(forEntityName: "Item").setValue(name, forKey: "name") }
            try first.save()
        }
        return (first, try context(), directory)
    }

    static func items(named name: String) throws -> AnyFetchRequest {
        let request = FetchRequest(entityName: "Item")
        request.predicate = try FetchPredicate(format: "name == %@", name)
        return request
    }

    @Test func aFetchRenewsCachedRowsAndReplacesChangedOnes() throws {
        // MOC-ST-02: a row read again by a fetch is fresh again, also for
        // objects already loaded; a row another writer changed replaces the
        // cached one (MOC-FE-07: realized objects keep their values until refreshed).
        let (context, other, directory) = try Self.twoCoordinators()
        defer { try? FileManager.default.removeItem(at: directory) }
        let coordinator = context.persistentStoreCoordinator
        let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        var clock = Date(timeIntervalSince1970: 0)
        coordinator.now = { clock }
        let all = FetchRequest(entityName: "Item")
        all.returnsObjectsAsFaults = false
        all.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: true)]
        try context.performAndWait {
            context.reset()
            let items = try context.fetch(all)          // cached at time 0
            clock = Date(timeIntervalSince1970: 100)
            #expect(try context.fetch(all) == items)   // loaded already; the rows are cached again, dated 100
            clock = Date(timeIntervalSince1970: 150)
            context.stalenessInterval = 60
            context.refresh(items[0], mergeChanges: false)
            let before = store.executedStatementCount
            #expect(try items[0].value(forKey: "name") as? String == "a")
            #expect(store.executedStatementCount == before, "a row fetched 50 s ago is fresh under 60 s staleness")
        }
        try other.performAndWait {
            let a = try #require(try other.fetch(Self.items(named: "a")).first)
            try a.setValue("a2", forKey: "name")
            try other.save()
        }
        try context.performAndWait {
            context.stalenessInterval = -1
            let items = try context.fetch(all)          // "a2" is a new version of the first row
            #expect(try items.map { try $0.value(forKey: "name") as? String } == ["a", "b", "c"])   // MOC-FE-07: realized objects keep their values
            context.refresh(items[0], mergeChanges: false)
            #expect(try items[0].value(forKey: "name") as? String == "a2")   // from the replaced cached row
        }
    }

    @Test func pendingChangesOffMatchesTheStoredValues() throws {
        // FR-13 (NO: only objects that match in the persistent store), MOC-FE-05 (YES: in-memory values)
        let (context, _, directory) = try Self.twoCoordinators()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let a = try #require(try context.fetch(Self.items(named: "a")).first)
            try a.setValue("z", forKey: "name")   // unsaved
            let byNewName = try Self.items(named: "z"), byOldName = try Self.items(named: "a")
            #expect(try context.fetch(byNewName) == [a])
            #expect(try context.fetch(byOldName).isEmpty)
            byNewName.includesPendingChanges = false
            byOldName.includesPendingChanges = false
            #expect(try context.fetch(byNewName).isEmpty)
            #expect(try context.fetch(byOldName) == [a])
            #expect(try a.value(forKey: "name") as? String == "z")   // the fetch changed nothing in memory
            // A batched fetch overlays the change the same way.
            let batched = try Self.items(named: "z")
            batched.fetchBatchSize = 2
            #expect(Array(try context.fetchBatched(batched)) == [a])
        }
    }

    @Test func anUnchangedStaleObjectIsMatchedByItsStoredRow() throws {
        // MOC-FE-07: the same instance, its in-memory values untouched; membership by the store's row
        let (context, other, directory) = try Self.twoCoordinators()
        defer { try? FileManager.default.removeItem(at: directory) }
        let b = try context.performAndWait {
            let b = try #require(try context.fetch(Self.items(named: "b")).first)
            #expect(try b.value(forKey: "name") as? String == "b")
            return b
        }
        try other.performAndWait {
            let copy = try #require(try other.fetch(Self.items(named: "b")).first)
            try copy.setValue("y", forKey: "name")
            try other.save()
        }
        try context.performAndWait {
            #expect(!context.hasChanges)
            let found = try context.fetch(Self.items(named: "y"))
            #expect(found.count == 1 && found.first === b)
            #expect(try b.value(forKey: "name") as? String == "b")   // not refreshed by the fetch
            #expect(try context.fetch(Self.items(named: "b")).isEmpty)
        }
    }
}
