import Foundation
import ObjectGraph
import Testing
@testable import StoreSync
import StoreSyncPostgreSQL
import PostgreSQLTestSupport

/// The PostgreSQL hub's own behaviour: its schema, several hosts on one
/// group, history purge bounded by every host's stores, notifications.
@Suite(.enabled(if: TestPostgreSQL.isAvailable))
struct PostgreSQLHubTests {
    func tables(_ connection: PostgreSQLConnection, _ schema: String) throws -> Set<String> {
        let result = try connection.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", [schema])
        return Set((0..<result.rowCount).compactMap { result.string($0, 0) })
    }

    @Test func openingCreatesTheSchemaAndReopeningKeepsIt() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hub = try PostgreSQLHubFixtures.hub(group: group)
        #expect(hub.notificationChannel == "storesync_" + group)
        #expect(try tables(hub.connection, "storesync_" + group) == [
            "meta", "state", "transactions", "changes", "cursors", "pending", "conflicts",
            "e_Detail", "e_Folder", "e_Item", "e_Tag", "j_Item_tags",
        ])
        // Typed columns; the to-one a uuid; the ordered one-to-many's position on the member.
        let columns = try hub.connection.execute("""
            SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'e_Item'
            """, ["storesync_" + group])
        var types: [String: String] = [:]
        for i in 0..<columns.rowCount { types[columns.string(i, 0) ?? ""] = columns.string(i, 1) }
        #expect(types["i16"] == "smallint" && types["i32"] == "integer" && types["i64"] == "bigint" && types["dec"] == "numeric")
        #expect(types["str"] == "text" && types["flag"] == "boolean" && types["blob"] == "bytea" && types["uid"] == "uuid")
        #expect(types["folder"] == "uuid" && types["_order_queuedIn"] == "integer" && types["_gid"] == "uuid")
        #expect(types["extra"] == "text", "a subentity's attribute is a column of its root's table")
        var batch = HubBatch(origin: "s1")
        let gid = UUID()
        batch.inserts = [(gid, ObjectState(entityName: "Tag", values: ["name": .attribute("kept")]))]
        let position = try hub.commit(batch)
        try hub.close()

        let again = try PostgreSQLHubFixtures.hub(group: group)
        defer { try? again.close() }
        #expect(try again.currentPosition() == position)
        #expect(PostgreSQLHubFixtures.describe(try again.state(of: gid))?["name"] == ObjectState.canonical("kept"))
    }

    @Test func twoHubsOpeningTogetherCreateTheSchemaOnce() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let conninfo = try TestPostgreSQL.requireConninfo()
        let model = PostgreSQLHubFixtures.model()
        nonisolated(unsafe) var errors: [Error] = []
        let lock = NSLock()
        DispatchQueue.concurrentPerform(iterations: 4) { i in
            do { try PostgreSQLHub(model: model, conninfo: conninfo, group: group, host: "h\(i)").close() } catch {
                lock.lock(); errors.append(error); lock.unlock()
            }
        }
        #expect(errors.isEmpty, "\(errors)")
    }

    @Test func aHubMadeForAnotherModelIsRefusedWith134100() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        try PostgreSQLHubFixtures.hub(group: group).close()
        let other = PostgreSQLHubFixtures.model()
        other.entities.first { $0.name == "Tag" }!.properties.append(AttributeDescription(name: "colour", type: .string))
        #expect {
            try PostgreSQLHubFixtures.hub(model: other, group: group)
        } throws: { error in
            guard let error = error as? CoreDataError, error.code == .persistentStoreIncompatibleVersionHash else { return false }
            let message = "\(error.userInfo[NSLocalizedDescriptionKey] ?? "")"
            return message.contains(group) && message.contains("another model")
        }
    }

    @Test(arguments: ["", "a b", "x;drop", "ünï", String(repeating: "g", count: 60)])
    func aGroupNameThatCannotNameASchemaIsRefused(_ name: String) throws {
        #expect {
            try PostgreSQLHub(model: PostgreSQLHubFixtures.model(), conninfo: try TestPostgreSQL.requireConninfo(), group: name, host: "h1")
        } throws: { error in
            guard let error = error as? CoreDataError, error.code == .coreData else { return false }
            return "\(error.userInfo[NSLocalizedDescriptionKey] ?? "")".contains("sync group name '\(name)'")
        }
    }

    /// Two daemons on one group: each host's cursors, pending objects and
    /// conflicts are its own; the other's changes have the origin "host/store".
    @Test func twoHostsShareObjectsButNotBookkeeping() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let one = try PostgreSQLHubFixtures.hub(group: group, host: "alpha")
        let two = try PostgreSQLHubFixtures.hub(group: group, host: "beta")
        defer { try? one.close(); try? two.close() }
        let a = UUID(), b = UUID()
        var fromOne = HubBatch(origin: "s1")
        fromOne.inserts = [(a, ObjectState(entityName: "Tag", values: ["name": .attribute("a")]))]
        fromOne.cursor = SyncCursor(store: "s1", pulledThrough: 4, base: 1, pushedThrough: 1, needsFullPush: false)
        fromOne.pendingAdded = [("s1", a)]
        fromOne.newConflicts = [SyncConflict(id: 0, store: "s1", globalIdentifier: a, entityName: "Tag", kind: .update, basePosition: 0,
                                             hubPosition: 0, base: [:], incoming: [:], hub: [:], created: Date())]
        let p1 = try one.commit(fromOne)
        var fromTwo = HubBatch(origin: "s1")
        fromTwo.inserts = [(b, ObjectState(entityName: "Tag", values: ["name": .attribute("b")]))]
        fromTwo.cursor = SyncCursor(store: "s1", pulledThrough: 9, base: 2, pushedThrough: 2, needsFullPush: true)
        fromTwo.newConflicts = [SyncConflict(id: 0, store: "s1", globalIdentifier: b, entityName: "Tag", kind: .update, basePosition: 0,
                                             hubPosition: 0, base: [:], incoming: [:], hub: [:], created: Date())]
        let p2 = try two.commit(fromTwo)
        #expect(p2 == p1 + 1)

        let cursors = (try one.cursor(for: "s1"), try two.cursor(for: "s1"))
        #expect(cursors.0?.pulledThrough == 4 && cursors.1?.pulledThrough == 9)
        #expect(try one.pending(for: "s1") == [a])
        #expect(try two.pending(for: "s1").isEmpty)
        #expect(try one.conflicts(store: "s1", includingResolved: false).map(\.globalIdentifier) == [a])
        #expect(try two.conflicts(store: nil, includingResolved: true).map(\.globalIdentifier) == [b])
        let numbers = try one.conflicts(store: nil, includingResolved: true).map(\.id) + (try two.conflicts(store: nil, includingResolved: true)).map(\.id)
        #expect(Set(numbers).count == 2, "conflict numbers are unique in the group")
        // Both hubs hold both objects.
        #expect(Set(try one.allObjects()) == [a, b])
        #expect(Set(try two.allObjects()) == [a, b])

        let seenByOne = try one.changes(after: 0)
        #expect(seenByOne.map(\.origin) == ["s1", "beta/s1"])
        #expect(try two.changes(after: 0).map(\.origin) == ["alpha/s1", "s1"])
        // Excluding this host's s1 leaves the other host's s1 in.
        #expect(try one.changes(after: 0, excludingOrigin: "s1", changeLimit: 100).changes.map(\.globalIdentifier) == [b])

        let known = try one.knownStores()
        #expect(known.map { "\($0.host)/\($0.store)" } == ["alpha/s1", "beta/s1"])
        #expect(known.map(\.pulledThrough) == [4, 9] && known[1].needsFullPush)
        #expect(known.allSatisfy { abs($0.lastSeen.timeIntervalSinceNow) < 600 })
    }

    /// The engine knows its own host's stores only: the hub never purges
    /// history another host's store still needs.
    @Test func purgeStopsAtTheOldestPositionOfAnyHost() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let one = try PostgreSQLHubFixtures.hub(group: group, host: "alpha")
        let two = try PostgreSQLHubFixtures.hub(group: group, host: "beta")
        defer { try? one.close(); try? two.close() }
        var positions: [Int64] = []
        for i in 0..<4 {
            var batch = HubBatch(origin: "s1")
            batch.inserts = [(UUID(), ObjectState(entityName: "Tag", values: ["name": .attribute("\(i)")]))]
            positions.append(try one.commit(batch))
        }
        var lagging = HubBatch(origin: nil)
        lagging.cursor = SyncCursor(store: "s9", pulledThrough: 0, base: positions[1], pushedThrough: positions[1], needsFullPush: false)
        try two.commit(lagging)
        var current = HubBatch(origin: nil)
        current.cursor = SyncCursor(store: "s1", pulledThrough: 0, base: positions[3], pushedThrough: positions[3], needsFullPush: false)
        try one.commit(current)

        // Committed before a minute from now: everything up to the floor.
        try one.purgeHistory(through: positions[3], committedBefore: Date().addingTimeInterval(60))
        #expect { try one.changes(after: positions[0]) } throws: { ($0 as? CoreDataError)?.code == .persistentHistoryTokenExpired }
        #expect(try one.changes(after: positions[1]).count == 2)
        // Nothing committed before a minute ago: nothing goes.
        try one.purgeHistory(through: positions[3], committedBefore: Date().addingTimeInterval(-60))
        #expect(try one.changes(after: positions[1]).count == 2)
    }

    @Test func everyCommitNotifiesItsHostAndPosition() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hub = try PostgreSQLHubFixtures.hub(group: group)
        defer { try? hub.close() }
        let listener = try PostgreSQLConnection(try TestPostgreSQL.requireConninfo())
        defer { listener.close() }
        try listener.listen(hub.notificationChannel)
        var batch = HubBatch(origin: "s1")
        batch.inserts = [(UUID(), ObjectState(entityName: "Tag", values: [:]))]
        let position = try hub.commit(batch)
        var received: [PostgreSQLNotification] = []
        for _ in 0..<100 where received.isEmpty {
            received = try listener.notifications()
            if received.isEmpty { Thread.sleep(forTimeInterval: 0.01) }
        }
        #expect(received.map(\.payload) == ["\(hub.host) \(position)"])
        #expect(received.first?.channel == hub.notificationChannel)
    }

    /// A batch the engine commits inside its own transaction (pull/bootstrap)
    /// rolls back with it: nothing of it stays.
    @Test func aCommitInsideAFailedTransactionLeavesNothing() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hub = try PostgreSQLHubFixtures.hub(group: group)
        defer { try? hub.close() }
        struct Stop: Error {}
        let gid = UUID()
        #expect(throws: Stop.self) {
            try hub.transaction {
                var batch = HubBatch(origin: "s1")
                batch.inserts = [(gid, ObjectState(entityName: "Tag", values: [:]))]
                try hub.commit(batch)
                #expect(try hub.state(of: gid) != nil)
                throw Stop()
            }
        }
        #expect(try hub.state(of: gid) == nil)
        #expect(try hub.currentPosition() == 0)
    }

    /// Two hosts committing at once: each commit gets its own position
    /// (serialisation failures retried), none is lost.
    @Test func concurrentCommitsOfTwoHostsAllLand() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hubs = try ["alpha", "beta"].map { try PostgreSQLHubFixtures.hub(group: group, host: $0) }
        defer { for hub in hubs { try? hub.close() } }
        let lock = NSLock()
        nonisolated(unsafe) var positions: [Int64] = []
        nonisolated(unsafe) var errors: [Error] = []
        let folder = UUID()
        var first = HubBatch(origin: nil)
        first.inserts = [(folder, ObjectState(entityName: "Folder", values: ["name": .attribute("shared")]))]
        try hubs[0].commit(first)
        DispatchQueue.concurrentPerform(iterations: 2) { h in
            for i in 0..<10 {
                var batch = HubBatch(origin: "s1")
                batch.inserts = [(UUID(), ObjectState(entityName: "Item", values: ["i32": .attribute(Int32(i)), "folder": .toOne(folder)]))]
                batch.updates = [(folder, ["name": .attribute("\(h)-\(i)")])]
                do {
                    let position = try hubs[h].commit(batch)
                    lock.lock(); positions.append(position); lock.unlock()
                } catch {
                    lock.lock(); errors.append(error); lock.unlock()
                }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(Set(positions).count == 20)
        let members = try hubs[1].state(of: folder)?.values["items"]
        guard case .members(let gids)? = members else { Issue.record("no items"); return }
        #expect(gids.count == 20)
    }

    /// Values the embedded hub's SQLite cannot keep (NaN becomes NULL, a
    /// decimal beyond a double's precision a double) come back exact, and a
    /// string PostgreSQL cannot hold is refused with the attribute's name.
    @Test func valuesComeBackExactAndANulStringIsRefused() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hub = try PostgreSQLHubFixtures.hub(group: group)
        defer { try? hub.close() }
        let gid = UUID()
        let values: [String: SyncValue] = [
            "dbl": .attribute(Double.nan), "flt": .attribute(-Float.zero), "dec": .attribute(Decimal(string: "12345678901234567890.125")!),
            "when": .attribute(Date(timeIntervalSinceReferenceDate: 0.000_000_123)), "i64": .attribute(Int64.min), "i32": .attribute(7),
        ]
        var batch = HubBatch(origin: "s1")
        batch.inserts = [(gid, ObjectState(entityName: "Item", values: values))]
        try hub.commit(batch)
        let state = try #require(try hub.state(of: gid))
        func value(_ name: String) -> Any? { if case .attribute(let v)? = state.values[name] { return v } else { return nil } }
        #expect((value("dbl") as? Double)?.isNaN == true)
        #expect((value("flt") as? Float).map { $0 == 0 && $0.sign == .minus } == true)
        #expect(value("dec") as? Decimal == Decimal(string: "12345678901234567890.125"))
        #expect(value("when") as? Date == Date(timeIntervalSinceReferenceDate: 0.000_000_123))
        #expect(value("i64") as? Int64 == Int64.min)
        #expect(value("i32") as? Int32 == 7, "an Int given for an integer 32 reads back as Int32, as ObjectGraph coerces it")
        var update = HubBatch(origin: "s1")
        update.updates = [(gid, ["i32": .attribute(Int32(8))])]
        try hub.commit(update)
        let change = try #require(try hub.changes(after: 1).first)
        #expect(change.changedProperties["i32"].flatMap { $0 } as? Int32 == 7)

        var bad = HubBatch(origin: "s1")
        bad.updates = [(gid, ["str": .attribute("a\u{0}b")])]
        #expect {
            try hub.commit(bad)
        } throws: { error in
            guard let error = error as? CoreDataError, error.code == .persistentStoreSave else { return false }
            return "\(error.userInfo[NSLocalizedDescriptionKey] ?? "")".contains("Item.str")
        }
        #expect(try hub.currentPosition() == 2, "the refused batch wrote nothing")
    }

    /// An ordered many-to-many keeps one order per ordered side, changed from
    /// either side (appended at the end) or by positions. The embedded hub's
    /// store loses that order when the unordered side is saved after it, so
    /// this is checked on the PostgreSQL hub alone.
    @Test func anOrderedManyToManyKeepsItsOrderFromEitherSide() throws {
        let playlist = EntityDescription(name: "Playlist"), song = EntityDescription(name: "Song")
        let songs = RelationshipDescription(name: "songs", destination: song, toMany: true)
        songs.isOrdered = true
        let playlists = RelationshipDescription(name: "playlists", destination: playlist, toMany: true)
        songs.inverseRelationship = playlists
        playlists.inverseRelationship = songs
        playlist.properties = [AttributeDescription(name: "name", type: .string), songs]
        song.properties = [AttributeDescription(name: "title", type: .string), playlists]
        let model = ManagedObjectModel()
        model.entities = [playlist, song]
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hub = try PostgreSQLHubFixtures.hub(model: model, group: group)
        defer { try? hub.close() }
        let p = UUID(), s1 = UUID(), s2 = UUID(), s3 = UUID()
        func order() throws -> [UUID] {
            guard case .members(let gids)? = try hub.state(of: p)?.values["songs"] else { return [] }
            return gids
        }
        var insert = HubBatch(origin: "s1")
        insert.inserts = [(p, ObjectState(entityName: "Playlist", values: [:]))] + [s1, s2, s3].map { ($0, ObjectState(entityName: "Song", values: [:])) }
        insert.updates = [(p, ["songs": .members([s2, s1])]), (s3, ["playlists": .memberChange(added: [p], removed: [], positions: [:])])]
        try hub.commit(insert)
        #expect(try order() == [s2, s1, s3])
        let before = try hub.currentPosition()
        var move = HubBatch(origin: "s1")
        move.updates = [(p, ["songs": .memberChange(added: [], removed: [], positions: [s3: 0])])]
        try hub.commit(move)
        #expect(try order() == [s3, s2, s1])
        #expect(try hub.changes(after: before).map(\.globalIdentifier) == [p], "a new order is a change of the playlist")
        var delete = HubBatch(origin: "s1")
        delete.deletes = [s2]
        try hub.commit(delete)
        #expect(try order() == [s3, s1])
        guard case .members(let of1)? = try hub.state(of: s1)?.values["playlists"] else { Issue.record("no playlists"); return }
        #expect(of1 == [p])
    }

    /// The server ends the hub's session (a restart, a failover): a read
    /// reconnects and is read again; a commit fails (it may have committed
    /// before the connection broke, and decided on what it read) and the
    /// next one reconnects.
    @Test func aBrokenSessionIsReopenedByTheNextOperation() throws {
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let hub = try PostgreSQLHubFixtures.hub(group: group)
        defer { try? hub.close() }
        let admin = try PostgreSQLConnection(try TestPostgreSQL.requireConninfo())
        defer { admin.close() }
        func terminate() throws {
            let pid = try #require(try hub.connection.execute("SELECT pg_backend_pid()").int64(0, 0))
            try admin.execute("SELECT pg_terminate_backend($1::integer)", [pid])
            Thread.sleep(forTimeInterval: 0.05)
        }
        var batch = HubBatch(origin: "s1")
        batch.inserts = [(UUID(), ObjectState(entityName: "Tag", values: [:]))]
        let position = try hub.commit(batch)
        try terminate()
        #expect(try hub.currentPosition() == position)
        try terminate()
        #expect { try hub.commit(batch) } throws: { ($0 as? PostgreSQLError)?.isConnectionFailure == true }
        #expect(try hub.commit(batch) == position + 1)
    }
}
