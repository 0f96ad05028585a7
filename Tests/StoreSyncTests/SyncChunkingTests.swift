import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// Backlogs larger than one chunk: a pull commits them in several hub
/// transactions (each with its cursor) and a push writes them in several
/// saves inside one store transaction. A failure between two pull chunks or
/// in the middle of a push loses, duplicates and echoes nothing, and what
/// the engine holds at once is bounded by the chunk size.
@Suite struct SyncChunkingTests {
    /// The embedded hub, failing like a crash at a chosen call: the failing
    /// call commits nothing, as a process killed there would not.
    final class FailingHub: SyncHub {
        let inner: EmbeddedHub
        var commitsLeft: Int
        var stateReadsLeft: Int
        /// `states(of:)` calls so far.
        var stateReads = 0
        /// Batches refused as a full disk would refuse them (nil: none), and how many were.
        var refusing: ((HubBatch) -> Bool)?
        var refused = 0
        /// Runs before each `states(of:)` call (what another process does meanwhile).
        var onStateRead: (() -> Void)?
        struct Crash: Error {}

        init(_ inner: EmbeddedHub, commits: Int = .max, stateReads: Int = .max) {
            self.inner = inner
            commitsLeft = commits
            stateReadsLeft = stateReads
        }

        var displayName: String { inner.displayName }
        // The embedded hub's own transaction scope, so a crash inside it rolls back what it committed.
        func transaction<T>(_ body: () throws -> T) throws -> T { try inner.transaction(body) }
        var takesTransactionsInParts: Bool { inner.takesTransactionsInParts }
        func currentPosition() throws -> Int64 { try inner.currentPosition() }
        func state(of object: UUID) throws -> ObjectState? { try inner.state(of: object) }
        func states(of objects: [UUID]) throws -> [UUID: ObjectState] {
            onStateRead?()
            stateReads += 1
            stateReadsLeft -= 1
            if stateReadsLeft < 0 { throw Crash() }
            return try inner.states(of: objects)
        }
        func allObjects() throws -> [UUID] { try inner.allObjects() }
        func changes(after position: Int64) throws -> [HubChange] { try inner.changes(after: position) }
        func changes(after position: Int64, excludingOrigin: String?, changeLimit: Int) throws -> (changes: [HubChange], through: Int64) {
            try inner.changes(after: position, excludingOrigin: excludingOrigin, changeLimit: changeLimit)
        }
        func cursor(for store: String) throws -> SyncCursor? { try inner.cursor(for: store) }
        func pending(for store: String) throws -> Set<UUID> { try inner.pending(for: store) }
        func conflicts(store: String?, includingResolved: Bool) throws -> [SyncConflict] { try inner.conflicts(store: store, includingResolved: includingResolved) }
        func commit(_ batch: HubBatch) throws -> Int64 {
            if let refusing, refusing(batch) {
                refused += 1
                throw CoreDataError(.persistentStoreSave, "database or disk is full (simulated)")
            }
            commitsLeft -= 1
            if commitsLeft < 0 { throw Crash() }
            return try inner.commit(batch)
        }
        func purgeHistory(through position: Int64, committedBefore: Date?) throws { try inner.purgeHistory(through: position, committedBefore: committedBefore) }
        func close() throws { try inner.close() }
    }

    static func configuration(_ directory: URL, _ policies: [SyncPolicy], model: ManagedObjectModel = SyncFixtures.model()) -> SyncGroupConfiguration {
        let stores = policies.enumerated().map {
            SyncStoreConfiguration(name: "s\($0.offset + 1)", url: directory.appendingPathComponent("s\($0.offset + 1).sqlite"), policy: $0.element)
        }
        return SyncGroupConfiguration(name: "test", model: model, stateDirectory: directory.appendingPathComponent("state"), stores: stores)
    }

    /// The group's stores, empty, joined (bootstrapped) and closed again.
    static func prepare(_ directory: URL, _ policies: [SyncPolicy], model: ManagedObjectModel = SyncFixtures.model()) throws {
        let group = try SyncGroup(configuration: configuration(directory, policies, model: model))
        try group.runUntilIdle()
        try group.close()
    }

    static func group(_ directory: URL, _ policies: [SyncPolicy], chunk: Int, commits: Int = .max, stateReads: Int = .max,
                      hubPart: Int = 2_000, model: ManagedObjectModel = SyncFixtures.model()) throws -> SyncGroup {
        let configuration = configuration(directory, policies, model: model)
        let embedded = try EmbeddedHub(model: configuration.model, directory: configuration.stateDirectory)
        embedded.partSize = hubPart
        let hub = FailingHub(embedded, commits: commits, stateReads: stateReads)
        let group = try SyncGroup(configuration: configuration, hub: hub)
        group.chunkChanges = chunk
        return group
    }

    /// Saves `transactions` transactions of `perTransaction` records into the store; every
    /// fourth transaction also makes a folder holding its records and labels them.
    static func write(_ url: URL, transactions: Int, perTransaction: Int, prefix: String = "r") throws {
        let app = try SyncFixtures.app(url)
        try app.performAndWait {
            for t in 0..<transactions {
                let folder = t % 4 == 0 ? try app.insertNewObject(forEntityName: "Folder") : nil
                try folder?.setValue("f\(t)", forKey: "name")
                let label = t % 4 == 0 ? try app.insertNewObject(forEntityName: "Label") : nil
                try label?.setValue("l\(t)", forKey: "name")
                for i in 0..<perTransaction {
                    let record = try app.insertNewObject(forEntityName: "Record")
                    try record.setValue("\(prefix)\(t)-\(i)", forKey: "name")
                    try record.setValue(Int32(i), forKey: "a")
                    try record.setValue(folder, forKey: "folder")
                    if let label { try record.mutableSetValue(forKey: "labels").insert(label) }
                }
                try app.save()
                app.reset()
            }
        }
    }

    /// Every store equals the hub object by object, and every record name is there once.
    static func expectConverged(_ directory: URL, stores: Int, records expected: Int, model: ManagedObjectModel = SyncFixtures.model()) throws {
        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"), model: model)
        for n in 1...stores {
            let url = directory.appendingPathComponent("s\(n).sqlite")
            let store = try SyncFixtures.contents(url, model: model)
            #expect(store.count == hub.count, "\(url.lastPathComponent): \(store.count) objects, hub \(hub.count)")
            for (gid, fields) in hub where store[gid] != fields {
                Issue.record("\(url.lastPathComponent) differs on \(gid): hub \(fields), store \(store[gid] ?? [:])")
            }
            let names = store.values.filter { $0["entity"] == "Record" }.compactMap { $0["name"] }
            #expect(names.count == expected && Set(names).count == expected, "\(url.lastPathComponent): \(names.count) records, \(Set(names).count) distinct, expected \(expected)")
        }
    }

    /// A push of several pages writes each object's hub state as it is now.
    /// A folder renamed early (first page) whose record was deleted later
    /// (a later page) must not make the engine write that record twice into
    /// the store (its folder nulled, then deleted): the workload checker
    /// counts that as a change applied that the hub never made ("repeated").
    @Test func aMultiPagePushWritesAMemberDeletedInALaterPageOnlyOnce() throws {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.objectTrump, .objectTrump], in: directory)
        let s1 = directory.appendingPathComponent("s1.sqlite"), s2 = directory.appendingPathComponent("s2.sqlite")
        let app = try SyncFixtures.app(s1)
        func save(_ body: () throws -> Void) throws {
            try app.performAndWait {
                app.reset()
                try body()
                try app.save()
            }
        }
        func first(_ entity: String, named name: String) throws -> ManagedObject {
            let request = FetchRequest(entityName: entity)
            request.predicate = try FetchPredicate(format: "name == %@", argumentArray: [name])
            return try #require(try app.fetch(request).first)
        }
        try save {
            let folder = try app.insertNewObject(forEntityName: "Folder")
            try folder.setValue("f", forKey: "name")
            for name in ["r1", "r2"] {
                let record = try app.insertNewObject(forEntityName: "Record")
                try record.setValue(name, forKey: "name")
                try record.setValue(folder, forKey: "folder")
            }
        }
        try group.runUntilIdle()
        let r1 = try #require(try SyncFixtures.contents(s2).first { $0.value["name"] == ObjectState.canonical("r1") }?.key)

        group.chunkChanges = 1
        try save { try first("Folder", named: "f").setValue("g", forKey: "name") }
        for n in 0..<3 { try save { try app.insertNewObject(forEntityName: "Label").setValue("l\(n)", forKey: "name") } }
        try save { app.delete(try first("Record", named: "r1")) }

        let coordinator = try PersistentStoreCoordinator(managedObjectModel: SyncFixtures.model())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: s2,
                                                       options: [PersistentStore.persistentHistoryTrackingKey: true])
        defer { try? coordinator.remove(store) }
        let before = try #require(try coordinator.currentPersistentHistoryToken(fromStores: [store]))
        try group.runUntilIdle()
        #expect(try group.statistics.largestPushSave < 5, "the push was written in several saves")
        let written = try coordinator.execute(PersistentHistoryChangeRequest.fetchHistory(after: before)).transactions
            .flatMap(\.changes).filter { $0.globalIdentifier == r1 }.map(\.changeType)
        #expect(written == [.delete], "r1 in s2's history after the push: \(written)")
        #expect(try SyncFixtures.contents(s2) == (try SyncFixtures.contents(s1)))
        try group.close()
    }

    /// A store transaction larger than a hub part is written in several saves;
    /// a folder deleted in one save would nullify the folder of its records
    /// (a hub change of each record, from s1, that s1 never made) when those
    /// records are deleted only in a later save of the same transaction. The
    /// workload checker counts that as a change applied twice ("repeated",
    /// `scripts/sync-crash 40 16` found it). Related objects the transaction
    /// deletes go in the same save. The same for a store transaction larger
    /// than a chunk, settled in parts (its deletes go with the last part).
    @Test(arguments: [(chunk: 2_000, hubPart: 1), (chunk: 4, hubPart: 2_000)])
    func aHubTransactionInPartsDeletesRelatedObjectsInOneSave(chunk: Int, hubPart: Int) throws {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.prepare(directory, [.objectTrump, .objectTrump])
        let group = try Self.group(directory, [.objectTrump, .objectTrump], chunk: chunk, hubPart: hubPart)
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        try app.performAndWait {
            for f in 0..<3 {
                let folder = try app.insertNewObject(forEntityName: "Folder")
                try folder.setValue("f\(f)", forKey: "name")
                for r in 0..<3 {
                    let record = try app.insertNewObject(forEntityName: "Record")
                    try record.setValue("r\(f)-\(r)", forKey: "name")
                    try record.setValue(folder, forKey: "folder")
                }
            }
            try app.save()
        }
        try group.runUntilIdle()
        let position = try group.hub.currentPosition()
        try app.performAndWait {
            app.reset()
            for entity in ["Folder", "Record"] { for object in try app.fetch(FetchRequest(entityName: entity)) { app.delete(object) } }
            try app.save()
        }
        try group.runUntilIdle()
        if chunk < 12 {
            #expect(group.statistics.partedTransactions == 2, "the inserts and the deletes were each settled in parts")
        } else {
            #expect(group.statistics.largestPullBatch == 12, "one store transaction, one hub batch")
        }
        // What the workload checker counts: inserts, deletes, and updates of
        // more than a to-many (a to-many alone is the other side's change).
        let changes = try group.hub.changes(after: position).filter { $0.isInsert || $0.isDelete || !$0.changedProperties.isEmpty }
        let byObject = Dictionary(grouping: changes, by: \.globalIdentifier)
        #expect(byObject.count == 12)
        for (gid, list) in byObject {
            #expect(list.map(\.isDelete) == [true], "\(gid): \(list.map { $0.isDelete ? "delete" : "update \($0.changedProperties.keys.sorted())" })")
        }
        #expect(try SyncFixtures.contents(directory.appendingPathComponent("s2.sqlite")).isEmpty)
        try group.close()
    }

    /// A store transaction settled in parts whose records come before the
    /// folder they point to (the order the application inserted them in):
    /// written at once, each record would miss its folder and get it set
    /// again when the folder's part comes, two hub changes for one insert
    /// (`scripts/sync-crash 40 17` found it). They wait for the last part.
    @Test func recordsSettledBeforeTheirFolderInPartsAreWrittenOnce() throws {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.prepare(directory, [.objectTrump, .objectTrump])
        let group = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 4)
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        let position = try group.hub.currentPosition()
        try app.performAndWait {
            let records = try (0..<9).map { n in
                let record = try app.insertNewObject(forEntityName: "Record")
                try record.setValue("r\(n)", forKey: "name")
                return record
            }
            let folder = try app.insertNewObject(forEntityName: "Folder")
            try folder.setValue("f", forKey: "name")
            for record in records { try record.setValue(folder, forKey: "folder") }
            let late = try app.insertNewObject(forEntityName: "Record")
            try late.setValue("late", forKey: "name")
            try late.setValue(folder, forKey: "folder")
            try app.save()
        }
        try group.runUntilIdle()
        #expect(group.statistics.partedTransactions == 1)
        let changes = try group.hub.changes(after: position).filter { $0.isInsert || $0.isDelete || !$0.changedProperties.isEmpty }
        let byObject = Dictionary(grouping: changes, by: \.globalIdentifier)
        #expect(byObject.count == 11)
        for (gid, list) in byObject {
            #expect(list.map(\.isInsert) == [true], "\(gid): \(list.map { $0.isInsert ? "insert" : "update \($0.changedProperties.keys.sorted())" })")
        }
        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"))
        let folder = try #require(hub.first { $0.value["entity"] == "Folder" }?.key)
        #expect(hub.values.filter { $0["entity"] == "Record" }.allSatisfy { $0["folder"] == folder.uuidString }, "\(hub)")
        try Self.expectConverged(directory, stores: 2, records: 10)
        try group.close()
    }

    /// Records r, p0…p5 and the `folders` in s1, synced; then a foreign
    /// writer's one transaction of `statements` (raw SQL, padded with updates
    /// of p0…p5 between them so they fall in different parts), synced with
    /// 2-change chunks. Checks it was settled in parts, with no conflict, and
    /// that every store ended as the hub did; returns the hub's contents.
    private func settleForeignTransactionInParts(folders: [String], _ statements: [String]) throws -> [UUID: [String: String]] {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.prepare(directory, [.objectTrump, .objectTrump])
        let s1 = directory.appendingPathComponent("s1.sqlite")
        let app = try SyncFixtures.app(s1)
        let padding = ["p0", "p1", "p2", "p3", "p4", "p5"]
        try app.performAndWait {
            for name in folders { try app.insertNewObject(forEntityName: "Folder").setValue(name, forKey: "name") }
            for name in ["r"] + padding { try app.insertNewObject(forEntityName: "Record").setValue(name, forKey: "name") }
            try app.save()
        }
        let group = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 2)
        try group.runUntilIdle()
        let parted = group.statistics.partedTransactions
        var sql = ["BEGIN;"]
        for (n, statement) in statements.enumerated() {
            sql.append(statement)
            if n < padding.count / 2 {
                sql.append("UPDATE ZRECORD SET ZA = \(n + 1), Z_OPT = Z_OPT + 1 WHERE ZNAME IN ('\(padding[2 * n])', '\(padding[2 * n + 1])');")
            }
        }
        try SyncBadInputTests.sql(s1.path, (sql + ["COMMIT;"]).joined(separator: " "))
        try group.runUntilIdle()
        #expect(group.statistics.partedTransactions == parted + 1)
        #expect(try group.conflicts().isEmpty)
        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"))
        try group.close()
        try Self.expectConverged(directory, stores: 2, records: 7)
        return hub
    }

    /// A foreign writer's transaction that sets a record's folder twice:
    /// first to a folder it inserts later (a forward reference, so that change
    /// waits for the last part), then back to one the hub has. Settled in
    /// parts, the second change must not be written before the first: the
    /// hub, and every store, end with the value the store ended with.
    @Test func laterChangesOfAnObjectWaitingForTheLastPartWaitWithIt() throws {
        let hub = try settleForeignTransactionInParts(folders: ["old"], [
            "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Folder'; UPDATE ZRECORD SET ZFOLDER = (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder'), Z_OPT = Z_OPT + 1 WHERE ZNAME = 'r';",
            "INSERT INTO ZFOLDER (Z_PK, Z_ENT, Z_OPT, ZNAME) SELECT Z_MAX, Z_ENT, 1, 'new' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder';",
            "UPDATE ZRECORD SET ZFOLDER = (SELECT Z_PK FROM ZFOLDER WHERE ZNAME = 'old'), Z_OPT = Z_OPT + 1 WHERE ZNAME = 'r';",
        ])
        let old = try #require(hub.first { $0.value["name"] == ObjectState.canonical("old") }?.key)
        let record = try #require(hub.values.first { $0["name"] == ObjectState.canonical("r") })
        #expect(record["folder"] == old.uuidString, "r's folder at the hub: \(record["folder"] ?? "none"), expected old \(old)")
        #expect(hub.values.contains { $0["name"] == ObjectState.canonical("new") })
    }

    /// The same for a many-to-many membership: a foreign writer's transaction
    /// adds a record to a label it inserts later, then takes it out again.
    /// Settled in parts, the membership must not come back at the end.
    @Test func aMembershipAddedForwardAndRemovedLaterInPartsStaysRemoved() throws {
        // Entities by name: Folder 1, Label 2, Record 3; the join table is Label's.
        let hub = try settleForeignTransactionInParts(folders: [], [
            "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Label'; INSERT INTO Z_2RECORDS (Z_2LABELS, Z_3RECORDS) SELECT (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Label'), Z_PK FROM ZRECORD WHERE ZNAME = 'r';",
            "INSERT INTO ZLABEL (Z_PK, Z_ENT, Z_OPT, ZNAME) SELECT Z_MAX, Z_ENT, 1, 'new' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Label';",
            "DELETE FROM Z_2RECORDS;",
        ])
        let record = try #require(hub.values.first { $0["name"] == ObjectState.canonical("r") })
        #expect(record["labels"] == "", "r's labels at the hub: \(record["labels"] ?? "none")")
        #expect(hub.values.contains { $0["name"] == ObjectState.canonical("new") && $0["entity"] == "Label" })
    }

    /// A store's first push (the whole hub) committed, then the engine died
    /// before the hub recorded it (its bookkeeping is a later hub commit), so
    /// the next engine pushes the whole hub again. Objects deleted at the hub
    /// in between must go from the store too: written whole, the hub's
    /// objects alone would leave them there for good (the store's received
    /// position moves past their deletes). Found by the SIGKILL crash test
    /// (`scripts/sync-crash 80 84`: records deleted by their writer left in
    /// the other stores).
    @Test func aWholeHubPushedAgainAfterACrashDeletesWhatTheHubDeletedMeanwhile() throws {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s1 = directory.appendingPathComponent("s1.sqlite")
        let app = try SyncFixtures.app(s1)
        try app.performAndWait {
            for name in ["kept", "deleted"] { try app.insertNewObject(forEntityName: "Record").setValue(name, forKey: "name") }
            try app.save()
        }
        // The first engine: both stores join (s2 empty: its first push is the
        // whole hub), and the hub refuses to record that push; then it dies.
        let first = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 2_000)
        let failing = try #require(first.hub as? FailingHub)
        failing.refusing = { batch in batch.cursors.contains { $0.store == "s2" && !$0.needsFullPush } }
        _ = try first.runRound()
        #expect(failing.refused > 0, "the push bookkeeping was refused")
        #expect(try SyncFixtures.contents(directory.appendingPathComponent("s2.sqlite")).count == 2)
        #expect(try first.hub.cursor(for: "s2")?.needsFullPush == true)
        try first.close()

        try app.performAndWait {
            let request = FetchRequest(entityName: "Record")
            request.predicate = try FetchPredicate(format: "name == %@", argumentArray: ["deleted"])
            for object in try app.fetch(request) { app.delete(object) }
            try app.save()
        }
        let second = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 2_000)
        try second.runUntilIdle()
        #expect(try second.hub.cursor(for: "s2")?.needsFullPush == false)
        try second.close()
        try Self.expectConverged(directory, stores: 2, records: 1)
    }

    /// Across the transactions one pull commits in one hub transaction: a
    /// foreign writer points a record at a folder row it inserts only in a
    /// later transaction (the reference misses and is set again before the
    /// hub transaction commits), then points it back at a folder the hub has.
    /// Setting the missed reference again must not undo that later change.
    @Test func aMissedReferenceSetAgainDoesNotUndoALaterChangeOfIt() throws {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.prepare(directory, [.objectTrump, .objectTrump])
        let s1 = directory.appendingPathComponent("s1.sqlite")
        let app = try SyncFixtures.app(s1)
        try app.performAndWait {
            try app.insertNewObject(forEntityName: "Folder").setValue("old", forKey: "name")
            for name in ["r", "p"] { try app.insertNewObject(forEntityName: "Record").setValue(name, forKey: "name") }
            try app.save()
        }
        let group = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 2_000)
        try group.runUntilIdle()
        // Application saves between the foreign writer's: each of its commits is a transaction of its own.
        func touch(_ value: Int32) throws {
            try app.performAndWait {
                let request = FetchRequest(entityName: "Record")
                request.predicate = try FetchPredicate(format: "name == %@", argumentArray: ["p"])
                try app.fetch(request).first?.setValue(value, forKey: "a")
                try app.save()
            }
        }
        try SyncBadInputTests.sql(s1.path, """
            BEGIN; UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Folder'; \
            UPDATE ZRECORD SET ZFOLDER = (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder'), Z_OPT = Z_OPT + 1 WHERE ZNAME = 'r'; COMMIT;
            """)
        try touch(1)
        try SyncBadInputTests.sql(s1.path, "INSERT INTO ZFOLDER (Z_PK, Z_ENT, Z_OPT, ZNAME) SELECT Z_MAX, Z_ENT, 1, 'new' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder'")
        try touch(2)
        try SyncBadInputTests.sql(s1.path, "UPDATE ZRECORD SET ZFOLDER = (SELECT Z_PK FROM ZFOLDER WHERE ZNAME = 'old'), Z_OPT = Z_OPT + 1 WHERE ZNAME = 'r'")
        try group.runUntilIdle()
        #expect(try group.conflicts().isEmpty)
        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"))
        let old = try #require(hub.first { $0.value["name"] == ObjectState.canonical("old") }?.key)
        let record = try #require(hub.values.first { $0["name"] == ObjectState.canonical("r") })
        #expect(record["folder"] == old.uuidString, "r's folder at the hub: \(record["folder"] ?? "none"), expected old \(old)")
        try group.close()
        try Self.expectConverged(directory, stores: 2, records: 2)
    }

    @Test func aBacklogLargerThanAChunkSurvivesACrashBetweenPullChunks() throws {
        let directory = try SyncFixtures.directory()
        try Self.prepare(directory, [.storeTrump, .objectTrump, .error])
        try Self.write(directory.appendingPathComponent("s1.sqlite"), transactions: 12, perTransaction: 3)

        // The third hub transaction of the pull fails (nothing of it commits, as in a crash):
        // two chunks are in the hub with their cursor. Counted by the commits that carry the
        // cursor: a transaction larger than the chunk (a folder's) is written in parts before it.
        let crashing = try Self.group(directory, [.storeTrump, .objectTrump, .error], chunk: 5)
        var cursorCommits = 0
        (crashing.hub as! FailingHub).refusing = { batch in
            guard !batch.cursors.isEmpty else { return false }
            cursorCommits += 1
            return cursorCommits > 2
        }
        try crashing.runRound()
        let s1 = try #require(try crashing.status().first { $0.name == "s1" })
        #expect(s1.pulledThrough > 0 && s1.pulledThrough < s1.storePosition, "the cursor moved with the committed chunks only")
        let partial = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite")).values.filter { $0["entity"] == "Record" }.count
        #expect(partial > 0 && partial < 36, "\(partial) records in the hub after the crash")
        try crashing.close()

        // Restarted (with chunks): the pull goes on from the cursor; nothing lost or doubled.
        let group = try Self.group(directory, [.storeTrump, .objectTrump, .error], chunk: 5)
        try group.runUntilIdle()
        #expect(try group.conflicts().isEmpty)
        for status in try group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        #expect(group.statistics.hubCommits > 3, "the rest of the backlog took several hub transactions")
        // No echo: every pulled change came from s1, the only writer.
        let origins = Set(try group.hub.changes(after: 0).compactMap(\.origin))
        #expect(origins == ["s1"])
        try group.close()
        try Self.expectConverged(directory, stores: 3, records: 36)
    }

    @Test func aPushThatFailsMidwayLeavesTheStoreAsItWas() throws {
        let directory = try SyncFixtures.directory()
        try Self.prepare(directory, [.objectTrump, .objectTrump])
        try Self.write(directory.appendingPathComponent("s1.sqlite"), transactions: 6, perTransaction: 4)
        // Pull s1 whole, then fail the push to s2 after some of its saves were made inside its transaction.
        let pulling = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 4)
        try pulling.pull(try pulling.member("s1"))
        try pulling.close()
        let failing = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 4, stateReads: 3)
        #expect(throws: FailingHub.Crash.self) { try failing.push(try failing.member("s2")) }
        try failing.close()
        let s2 = directory.appendingPathComponent("s2.sqlite")
        #expect(try SyncFixtures.contents(s2).isEmpty, "a push is one store transaction: none of its saves is there")
        #expect(try SQLiteStore.metadataForStore(at: s2)["StoreSync.test.pushedThrough"] as? Int ?? 0 < 3)

        let group = try Self.group(directory, [.objectTrump, .objectTrump], chunk: 4)
        try group.runUntilIdle()
        // One page is one hub transaction here: a store transaction's 4 records, its folder and its label.
        #expect(group.statistics.largestPushSave <= 6, "each save of the push carries one page of hub changes")
        try group.close()
        try Self.expectConverged(directory, stores: 2, records: 24)
    }

    /// The fixtures' model plus `Folder.pinned`, a to-one to a record without inverse: a
    /// folder is written before the records (entity order), so its reference points forward.
    static func pinnedModel() -> ManagedObjectModel {
        let model = SyncFixtures.model()
        let folder = model.entitiesByName["Folder"]!, record = model.entitiesByName["Record"]!
        let pinned = RelationshipDescription(name: "pinned", destination: record, toMany: false)
        pinned.deleteRule = .nullify
        folder.properties += [pinned]
        return model
    }

    @Test func aStoreTransactionLargerThanAHubPartKeepsEveryReference() throws {
        let directory = try SyncFixtures.directory()
        let model = Self.pinnedModel()
        try Self.prepare(directory, [.objectTrump, .storeTrump, .objectTrump], model: model)
        // One application transaction of 9 folders, 9 labels and 27 records that refer to
        // each other, written to the hub in saves of 4 objects: folders point forward to records.
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"), model: model)
        try app.performAndWait {
            for t in 0..<9 {
                let folder = try app.insertNewObject(forEntityName: "Folder")
                try folder.setValue("f\(t)", forKey: "name")
                let label = try app.insertNewObject(forEntityName: "Label")
                try label.setValue("l\(t)", forKey: "name")
                for i in 0..<3 {
                    let record = try app.insertNewObject(forEntityName: "Record")
                    try record.setValue("r\(t)-\(i)", forKey: "name")
                    try record.setValue(folder, forKey: "folder")
                    try record.mutableSetValue(forKey: "labels").insert(label)
                    if i == 2 { try folder.setValue(record, forKey: "pinned") }
                }
            }
            try app.save()
        }
        let group = try Self.group(directory, [.objectTrump, .storeTrump, .objectTrump], chunk: 4, hubPart: 4, model: model)
        try group.runUntilIdle()
        let transactions = try (group.hub as! FailingHub).inner.coordinator.execute(.fetchHistory(after: nil)).transactions
        #expect(transactions.filter { $0.contextName == "pull:s1" }.count > 10, "the store transaction went to the hub in parts")
        try group.close()
        try Self.expectConverged(directory, stores: 3, records: 27, model: model)
        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"), model: model)
        let records = hub.values.filter { $0["entity"] == "Record" }
        #expect(records.allSatisfy { $0["folder"] != "nil" && $0["labels"]?.isEmpty == false }, "every record keeps its folder and label")
        let folders = hub.values.filter { $0["entity"] == "Folder" }
        #expect(folders.count == 9 && folders.allSatisfy { $0["pinned"] != "nil" }, "every folder keeps the record it points to")
    }

    /// One application transaction of 40 records, their folder and label (82 row
    /// changes), pulled in chunks of 10: read and settled 10 row changes at a time,
    /// yet one hub transaction with its cursor, every reference kept.
    @Test func aStoreTransactionLargerThanAChunkIsSettledInPartsAndCommittedOnce() throws {
        let directory = try SyncFixtures.directory()
        try Self.prepare(directory, [.storeTrump, .objectTrump, .storeTrump])
        try Self.write(directory.appendingPathComponent("s1.sqlite"), transactions: 1, perTransaction: 40)
        let group = try Self.group(directory, [.storeTrump, .objectTrump, .storeTrump], chunk: 10)
        let s1 = try group.member("s1")
        let storePosition = try #require(try s1.coordinator.currentPersistentHistoryToken(fromStores: [s1.store])?.position)
        try group.pull(s1)
        #expect(group.statistics.partedTransactions == 1)
        #expect(group.statistics.transactionParts >= 8, "\(group.statistics.transactionParts) parts of 10 row changes")
        #expect(group.statistics.hubCommits == 1, "the parts are one hub transaction, committed with the cursor")
        // A part holds about a chunk of row changes (an owner of member changes may come in each).
        #expect(group.statistics.largestPullBatch <= 12, "largest part: \(group.statistics.largestPullBatch) objects")
        #expect(try group.hub.cursor(for: "s1")?.pulledThrough == storePosition)
        try group.runUntilIdle()
        #expect(try group.conflicts().isEmpty)
        try group.close()
        try Self.expectConverged(directory, stores: 3, records: 40)
        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"))
        let records = hub.values.filter { $0["entity"] == "Record" }
        #expect(records.count == 40 && records.allSatisfy { $0["folder"] != "nil" && $0["labels"]?.isEmpty == false },
                "every record keeps its folder and label")
    }

    /// A crash after some parts of a store transaction were written to the hub
    /// (inside its one SQLite transaction): nothing of it is in the hub, the
    /// cursor has not moved, and the next pull settles it whole again.
    @Test func aFailureBetweenThePartsOfAStoreTransactionLeavesTheHubAndCursorUntouched() throws {
        let directory = try SyncFixtures.directory()
        try Self.prepare(directory, [.storeTrump, .storeTrump])
        try Self.write(directory.appendingPathComponent("s1.sqlite"), transactions: 1, perTransaction: 40)
        let crashing = try Self.group(directory, [.storeTrump, .storeTrump], chunk: 10, commits: 3)
        let before = try crashing.hub.currentPosition()
        let cursorBefore = try crashing.hub.cursor(for: "s1")
        // The crash, said as the hub's failure (as a full disk would be).
        let error = #expect(throws: CoreDataError.self) { try crashing.pull(try crashing.member("s1")) }
        #expect(error?.userInfo[CoreDataError.underlyingErrorKey] is FailingHub.Crash)
        #expect(crashing.statistics.partedTransactions == 0)
        #expect(try crashing.hub.currentPosition() == before, "no part of the store transaction is in the hub")
        #expect(try crashing.hub.cursor(for: "s1") == cursorBefore)
        try crashing.close()
        let hubRecords = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite")).values.filter { $0["entity"] == "Record" }
        #expect(hubRecords.isEmpty, "\(hubRecords.count) records in the hub after the crash")

        let group = try Self.group(directory, [.storeTrump, .storeTrump], chunk: 10)
        try group.runUntilIdle()
        #expect(group.statistics.partedTransactions == 1)
        for status in try group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        try group.close()
        try Self.expectConverged(directory, stores: 2, records: 40)
    }

    @Test func storesAtTheSamePositionShareTheHubReadsOfTheirPushes() throws {
        func pushReads(together: Bool) throws -> Int {
            let directory = try SyncFixtures.directory()
            try Self.prepare(directory, [.objectTrump, .objectTrump, .objectTrump])
            try Self.write(directory.appendingPathComponent("s1.sqlite"), transactions: 12, perTransaction: 3)
            let group = try Self.group(directory, [.objectTrump, .objectTrump, .objectTrump], chunk: 5)
            try group.pull(try group.member("s1"))
            let hub = group.hub as! FailingHub
            hub.stateReads = 0
            if together {
                try group.runRound()
            } else {
                for name in ["s2", "s3"] { try group.push(try group.member(name)) }
            }
            let reads = hub.stateReads
            try group.close()
            try Self.expectConverged(directory, stores: 3, records: 36)
            return reads
        }
        let separately = try pushReads(together: false)
        let together = try pushReads(together: true)
        #expect(separately > 4 && together * 2 == separately, "hub state reads: \(together) together, \(separately) separately")
    }

    @Test func whatTheEngineHoldsAtOnceIsBoundedByTheChunk() throws {
        let directory = try SyncFixtures.directory()
        try Self.prepare(directory, [.storeTrump, .storeTrump, .storeTrump])
        // 60 small transactions of 2 records (no folders or labels: 2 objects each).
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        try app.performAndWait {
            for t in 0..<60 {
                for i in 0..<2 { try app.insertNewObject(forEntityName: "Record").setValue("r\(t)-\(i)", forKey: "name") }
                try app.save()
                app.reset()
            }
        }
        let group = try Self.group(directory, [.storeTrump, .storeTrump, .storeTrump], chunk: 10)
        try group.runUntilIdle()
        // Whole store transactions per hub transaction, up to the chunk: 5 transactions of 2.
        #expect(group.statistics.largestPullBatch == 10)
        #expect(group.statistics.largestPushSave <= 10)
        #expect(group.statistics.hubCommits >= 12, "\(group.statistics.hubCommits) hub commits for 120 changes in chunks of 10")
        try group.close()
        try Self.expectConverged(directory, stores: 3, records: 120)
    }
}
