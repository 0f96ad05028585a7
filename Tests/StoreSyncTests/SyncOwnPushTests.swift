import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The engine's own pushes after a store's pull cursor (docs/SYNC.md, Pull,
/// item 1): a pull that finds only them keeps its advance (cursor and base,
/// as read from those pushes) in memory instead of committing it to the hub,
/// so the file event of a push costs no hub commit; the advance goes to the
/// hub with the next application change, or once it passes
/// `idleAdvanceStep`. And `hasUnpulledChanges`, the daemon's check after a
/// round started by events.
@Suite struct SyncOwnPushTests {
    struct Setup {
        let directory: URL
        let group: SyncGroup
        let apps: [ManagedObjectContext]
    }

    /// Two stores, policy `error` (every concurrent change is a conflict,
    /// so a base that lags shows), one record a = 1 synced to both.
    func setUp() throws -> Setup {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.error, .error], in: directory)
        let apps = try (1...2).map { try SyncFixtures.app(directory.appendingPathComponent("s\($0).sqlite"), author: "app\($0)") }
        try apps[0].performAndWait {
            let record = try apps[0].insertNewObject(forEntityName: "Record")
            try record.setValue(Int32(1), forKey: "a")
            try apps[0].save()
        }
        try group.runUntilIdle()
        return Setup(directory: directory, group: group, apps: apps)
    }

    func edit(_ app: ManagedObjectContext, a: Int32) throws {
        try app.performAndWait {
            app.reset()
            let record = try #require(try app.fetch(FetchRequest(entityName: "Record")).first)
            try record.setValue(a, forKey: "a")
            try app.save()
        }
    }

    func a(_ setup: Setup, _ file: String) throws -> String? {
        try SyncFixtures.contents(setup.directory.appendingPathComponent(file)).values.first?["a"]
    }

    @Test func thePullAfterTheEnginesOwnPushFindsNothingAndCommitsNothingToTheHub() throws {
        let setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        try edit(setup.apps[0], a: 2)
        try setup.group.storeDidChange("s1")   // pulls s1, pushes into s2
        #expect(try a(setup, "s2.sqlite") == ObjectState.canonical(Int32(2)))
        #expect(try !setup.group.hasUnpulledChanges("s2"), "s2's history after its cursor is the engine's push only")
        let commits = setup.group.statistics.hubCommits
        let hubPosition = try setup.group.hub.currentPosition()
        try setup.group.storeDidChange("s2")   // the push's own file event
        #expect(setup.group.statistics.hubCommits == commits, "no cursor-only hub commit for the engine's own push")
        #expect(try setup.group.hub.currentPosition() == hubPosition)
        try setup.group.close()
    }

    /// The advance kept in memory reaches the hub with the next pull that
    /// commits (s2's own change): the hub's cursor then covers the push.
    @Test func theAdvanceIsCommittedWithTheNextApplicationChange() throws {
        let setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let baseBefore = try #require(try setup.group.hub.cursor(for: "s2")).base
        try edit(setup.apps[0], a: 2)
        try setup.group.storeDidChange("s1")
        try setup.group.storeDidChange("s2")   // the push's own event: kept in memory
        let pushEnd = try #require(try setup.group.status().first { $0.name == "s2" }).storePosition
        #expect(try #require(try setup.group.hub.cursor(for: "s2")).pulledThrough < pushEnd, "not committed for the push alone")
        #expect(try #require(try setup.group.status().first { $0.name == "s2" }).pulledThrough == pushEnd, "status shows where the pull starts")
        try edit(setup.apps[1], a: 3)
        try setup.group.storeDidChange("s2")
        let cursor = try #require(try setup.group.hub.cursor(for: "s2"))
        #expect(cursor.pulledThrough > pushEnd)
        #expect(cursor.base > baseBefore, "the base the push carried, from memory")
        #expect(try setup.group.conflicts().isEmpty)
        try setup.group.close()
    }

    /// A store that only receives never has an application change to carry
    /// the advance: it is committed once it passes `idleAdvanceStep`, so the
    /// hub's cursor (and the store's history purge, which follows it) lags by
    /// a bounded amount.
    @Test func aStoreThatOnlyReceivesHasItsCursorCommittedEveryIdleAdvanceStep() throws {
        let setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var commitsWithoutAdvance = 0
        var lastCommitted = try #require(try setup.group.hub.cursor(for: "s2")).pulledThrough
        for _ in 0..<30 {
            // 20 inserts: 20 positions in s2 per push.
            try setup.apps[0].performAndWait {
                for _ in 0..<20 { _ = try setup.apps[0].insertNewObject(forEntityName: "Record") }
                try setup.apps[0].save()
            }
            try setup.group.storeDidChange("s1")
            try setup.group.storeDidChange("s2")
            let committed = try #require(try setup.group.hub.cursor(for: "s2")).pulledThrough
            let position = try #require(try setup.group.status().first { $0.name == "s2" }).storePosition
            #expect(position - committed < SyncGroup.idleAdvanceStep, "the hub's cursor lags by less than the step")
            if committed == lastCommitted { commitsWithoutAdvance += 1 } else { lastCommitted = committed }
        }
        #expect(commitsWithoutAdvance > 0, "most pushes' events commit nothing")
        #expect(lastCommitted > 0)
        try setup.group.close()
    }

    /// The base the skipped push carries: s2 saw s1's a = 2 (pushed) before
    /// its own a = 3, so s2's change is no conflict, whether the pull skips
    /// the push (in memory) or reads it (after a restart).
    @Test(arguments: [false, true])
    func aChangeMadeAfterThePushIsBasedOnIt(reopen: Bool) throws {
        var setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        try edit(setup.apps[0], a: 2)
        try setup.group.storeDidChange("s1")
        if reopen {
            try setup.group.close()
            setup = Setup(directory: setup.directory, group: try SyncFixtures.group([.error, .error], in: setup.directory), apps: setup.apps)
        }
        try edit(setup.apps[1], a: 3)
        #expect(try setup.group.hasUnpulledChanges("s2"))
        try setup.group.storeDidChange("s2")
        #expect(try !setup.group.hasUnpulledChanges("s2"))
        #expect(try setup.group.conflicts().isEmpty, "s2's change was made on top of the hub's")
        try setup.group.runUntilIdle()
        for file in ["state/hub.sqlite", "s1.sqlite", "s2.sqlite"] {
            #expect(try a(setup, file) == ObjectState.canonical(Int32(3)), "\(file)")
        }
        try setup.group.close()
    }

    /// A real concurrent change still conflicts: s2 saved a = 3 before the
    /// push of s1's a = 2 could reach it (the push is skipped: s2 has an
    /// unpulled change), so nothing is skipped at s2's pull either.
    @Test func aChangeMadeBeforeThePushStillConflicts() throws {
        let setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        try edit(setup.apps[0], a: 2)
        try edit(setup.apps[1], a: 3)
        try setup.group.runRound()
        #expect(try setup.group.conflicts().count == 1)
        try setup.group.close()
    }

    /// What the daemon asks before running a round for a store's file event.
    @Test func endsWithOwnPushTellsThePushsEventFromAnApplicationCommit() throws {
        let setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        #expect(try setup.group.endsWithOwnPush("s2"), "the setup's round pushed s1's record into s2")
        try edit(setup.apps[0], a: 2)
        try setup.group.storeDidChange("s1")   // pushes a = 2 into s2
        #expect(try setup.group.endsWithOwnPush("s2"))
        #expect(try !setup.group.endsWithOwnPush("s1"), "s1's last transaction is its application's")
        try edit(setup.apps[1], a: 3)
        #expect(try !setup.group.endsWithOwnPush("s2"), "an application commit after the push")
        try setup.group.storeDidChange("s2")
        #expect(try !setup.group.endsWithOwnPush("s2"), "pulled, but still the application's commit at the end")
        try setup.group.close()
        let reopened = try SyncFixtures.group([.error, .error], in: setup.directory)
        #expect(try !reopened.endsWithOwnPush("s1"), "a new process knows of no push yet")
        try reopened.close()
    }

    @Test func aPausedStoreReportsNothingToPull() throws {
        let setup = try setUp()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        try edit(setup.apps[1], a: 5)
        #expect(try setup.group.hasUnpulledChanges("s2"))
        try setup.group.pause("s2")
        #expect(try !setup.group.hasUnpulledChanges("s2"), "its pulls wait: the daemon must not rerun for it")
        try setup.group.close()
    }
}
