import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The MOC-MP-09 truth table played across two stores through the hub:
/// a = b = c = 1 everywhere; store s1 saves a = 2, b = 2; store s2 saves
/// a = 3, c = 3 before either is synced. The hub pulls s1 first, so s2's
/// change meets the hub's (s2 plays the in-memory object, the hub the
/// persistent store) and s2's policy decides; every store ends with the
/// values the table names. Every case runs over the embedded hub and a
/// PostgreSQL one (`HubKind`).
@Suite struct SyncPolicyTests {
    struct Setup {
        let directory: URL
        let group: SyncGroup
        let apps: [ManagedObjectContext]
        let record: UUID
    }

    func setUp(_ policy: SyncPolicy, hub: HubKind) throws -> Setup {
        try setUp(policy, hub: hub) { apps, edit in
            try edit(apps[0], ["a": 2, "b": 2])
            try edit(apps[1], ["a": 3, "c": 3])
        }
    }

    /// Deletes the record in one application's store.
    func delete(_ app: ManagedObjectContext) throws {
        try app.performAndWait {
            app.reset()
            app.delete(try #require(try app.fetch(FetchRequest(entityName: "Record")).first))
            try app.save()
        }
    }

    func setUp(_ policy: SyncPolicy, hub: HubKind, edits: ([ManagedObjectContext], (ManagedObjectContext, [String: Int32]) throws -> Void) throws -> Void) throws -> Setup {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.objectTrump, policy], hub: hub, in: directory)
        let apps = try (1...2).map { try SyncFixtures.app(directory.appendingPathComponent("s\($0).sqlite"), author: "app\($0)") }
        try apps[0].performAndWait {
            let record = try apps[0].insertNewObject(forEntityName: "Record")
            for key in ["a", "b", "c"] { try record.setValue(Int32(1), forKey: key) }
            try apps[0].save()
        }
        try group.runUntilIdle()
        let gid = try #require(try SyncFixtures.contents(directory.appendingPathComponent("s2.sqlite")).keys.first)
        func edit(_ app: ManagedObjectContext, _ values: [String: Int32]) throws {
            try app.performAndWait {
                app.reset()
                let record = try #require(try app.fetch(FetchRequest(entityName: "Record")).first)
                for (key, value) in values { try record.setValue(value, forKey: key) }
                try app.save()
            }
        }
        try edits(apps, edit)
        return Setup(directory: directory, group: group, apps: apps, record: gid)
    }

    /// a, b, c of the record in the hub and both stores.
    func values(_ setup: Setup) throws -> [[String]] {
        let hub = try #require(try SyncFixtures.hubContents(setup.group.hub, setup.record), "record missing in the hub")
        let stores = try ["s1.sqlite", "s2.sqlite"].map { file in
            try #require(try SyncFixtures.contents(setup.directory.appendingPathComponent(file))[setup.record], "record missing in \(file)")
        }
        return ([hub] + stores).map { fields in ["a", "b", "c"].map { fields[$0] ?? "?" } }
    }

    func expect(_ setup: Setup, _ a: Int32, _ b: Int32, _ c: Int32, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = [a, b, c].map { ObjectState.canonical($0) }
        for (place, found) in zip(["hub", "s1", "s2"], try values(setup)) {
            #expect(found == expected, "\(place): \(found)", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: HubKind.available, [
        // MOC-MP-09 per policy of the store whose change meets the hub's.
        (SyncPolicy.storeTrump, Int32(2), Int32(2), Int32(3)),   // conflicting a keeps the hub's, c applies
        (.objectTrump, 3, 2, 3),                                  // conflicting a takes the store's
        (.overwrite, 3, 1, 3),                                    // the store's object whole
        (.rollback, 2, 2, 1),                                     // the store's change dropped
    ])
    func mergePolicyTruthTable(_ hub: HubKind, _ row: (SyncPolicy, Int32, Int32, Int32)) throws {
        let (policy, a, b, c) = row
        let setup = try setUp(policy, hub: hub)
        try setup.group.runUntilIdle()
        for status in try setup.group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        #expect(try setup.group.conflicts().isEmpty)
        try expect(setup, a, b, c)
    }

    @Test(arguments: HubKind.available, [(ConflictResolution.incoming, Int32(3), Int32(1), Int32(3)), (.hub, 2, 2, 1)])
    func errorPolicyListsOneConflictAndEitherResolutionFinishes(_ hub: HubKind, _ row: (ConflictResolution, Int32, Int32, Int32)) throws {
        let (resolution, a, b, c) = row
        let setup = try setUp(.error, hub: hub)
        try setup.group.runUntilIdle()
        let conflicts = try setup.group.conflicts()
        try #require(conflicts.count == 1)
        let conflict = conflicts[0]
        #expect(conflict.store == "s2" && conflict.globalIdentifier == setup.record && conflict.kind == .update)
        #expect(conflict.incoming["a"] == ObjectState.canonical(Int32(3)) && conflict.incoming["c"] == ObjectState.canonical(Int32(3)))
        #expect(conflict.hub["a"] == ObjectState.canonical(Int32(2)) && conflict.base["a"] == ObjectState.canonical(Int32(1)))
        // Held: s2 keeps its values, the others have s1's.
        #expect(try values(setup)[2] == [3, 1, 3].map { ObjectState.canonical(Int32($0)) })
        try setup.group.resolve(conflict.id, taking: resolution)
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        try expect(setup, a, b, c)
    }

    /// The record's presence in hub, s1 and s2 and, where present, its `a`.
    func outcome(_ setup: Setup) throws -> [String] {
        let hub = try SyncFixtures.hubContents(setup.group.hub, setup.record)?["a"] ?? "gone"
        return try [hub] + ["s1.sqlite", "s2.sqlite"].map { file in
            try SyncFixtures.contents(setup.directory.appendingPathComponent(file))[setup.record]?["a"] ?? "gone"
        }
    }

    // MOC-MP-10, extended to the hub (docs/SYNC.md, policy table): s2's
    // policy decides; s1 (object-trump) changed the record first.
    static let a2 = ObjectState.canonical(Int32(2)), a3 = ObjectState.canonical(Int32(3))

    /// (i) Deleted in the store, updated at the hub: store-trump and
    /// rollback cancel the delete; object-trump and overwrite delete.
    @Test(arguments: HubKind.available, [(SyncPolicy.storeTrump, false), (.rollback, false), (.objectTrump, true), (.overwrite, true)])
    func deletedInTheStoreUpdatedAtTheHub(_ hub: HubKind, _ row: (SyncPolicy, Bool)) throws {
        let (policy, deleted) = row
        let setup = try setUp(policy, hub: hub) { apps, edit in
            try edit(apps[0], ["a": 2])
            try self.delete(apps[1])
        }
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        #expect(try outcome(setup) == Array(repeating: deleted ? "gone" : Self.a2, count: 3))
    }

    /// (ii) Updated in the store, deleted at the hub: store-trump and
    /// rollback delete it everywhere; object-trump and overwrite re-insert it
    /// with the store's values (where a context fails with 133000).
    @Test(arguments: HubKind.available, [(SyncPolicy.storeTrump, false), (.rollback, false), (.objectTrump, true), (.overwrite, true)])
    func updatedInTheStoreDeletedAtTheHub(_ hub: HubKind, _ row: (SyncPolicy, Bool)) throws {
        let (policy, kept) = row
        let setup = try setUp(policy, hub: hub) { apps, edit in
            try self.delete(apps[0])
            try edit(apps[1], ["a": 3])
        }
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        #expect(try outcome(setup) == Array(repeating: kept ? Self.a3 : "gone", count: 3))
    }

    /// Both cases under `error`: one conflict of the right kind; each
    /// resolution finishes the sync.
    @Test(arguments: HubKind.available, [(true, ConflictResolution.incoming), (true, .hub), (false, .incoming), (false, .hub)])
    func deleteAgainstUpdateUnderErrorIsAConflict(_ hub: HubKind, _ row: (Bool, ConflictResolution)) throws {
        let (storeDeletes, resolution) = row
        let setup = try setUp(.error, hub: hub) { apps, edit in
            if storeDeletes {
                try edit(apps[0], ["a": 2])
                try self.delete(apps[1])
            } else {
                try self.delete(apps[0])
                try edit(apps[1], ["a": 3])
            }
        }
        try setup.group.runUntilIdle()
        let conflicts = try setup.group.conflicts()
        try #require(conflicts.count == 1)
        #expect(conflicts[0].kind == (storeDeletes ? .deleteVersusUpdate : .updateVersusDelete))
        try setup.group.resolve(conflicts[0].id, taking: resolution)
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        // incoming: the store's side (deleted / a = 3); hub: the hub's (a = 2 / deleted).
        let expected: String
        switch (storeDeletes, resolution) {
        case (true, .incoming): expected = "gone"
        case (true, .hub): expected = Self.a2
        case (false, .incoming): expected = Self.a3
        case (false, .hub): expected = "gone"
        }
        #expect(try outcome(setup) == Array(repeating: expected, count: 3))
    }
}
