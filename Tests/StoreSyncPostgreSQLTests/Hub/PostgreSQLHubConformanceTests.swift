import Foundation
import ObjectGraph
import Testing
@testable import StoreSync
import StoreSyncPostgreSQL
import PostgreSQLTestSupport

/// The same hub batches committed to an `EmbeddedHub` and a `PostgreSQLHub`
/// leave the same objects, history, cursors, pending objects and conflicts:
/// the PostgreSQL hub decides nothing differently (docs/SYNC.md, "Model").
@Suite(.enabled(if: TestPostgreSQL.isAvailable))
struct PostgreSQLHubConformanceTests {
    /// Both hubs, and what each answered so far.
    final class Pair {
        let embedded: EmbeddedHub
        let postgres: PostgreSQLHub
        var gids: Set<UUID> = []
        /// Each hub's position before and after every commit.
        var positions: [(embedded: (Int64, Int64), postgres: (Int64, Int64))] = []

        init(model: ManagedObjectModel) throws {
            embedded = try EmbeddedHub(model: model, directory: try PostgreSQLHubFixtures.directory())
            postgres = try PostgreSQLHubFixtures.hub(model: model)
        }

        deinit {
            try? embedded.close()
            try? TestPostgreSQL.dropSchema(postgres.notificationChannel)
            try? postgres.close()
        }

        /// Commits to both and compares everything a hub answers.
        func commit(_ batch: HubBatch, _ step: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            for (gid, state) in batch.inserts { gids.insert(gid); gids.formUnion(references(state.values)) }
            for (gid, values) in batch.updates { gids.insert(gid); gids.formUnion(references(values)) }
            let before = (try embedded.currentPosition(), try postgres.currentPosition())
            let after = (try embedded.commit(batch), try postgres.commit(batch))
            let current = (try embedded.currentPosition(), try postgres.currentPosition())
            #expect(after.0 == current.0 && after.1 == current.1, "\(step)", sourceLocation: sourceLocation)
            #expect(after.1 > before.1 || batch.isEmpty, "\(step): the PostgreSQL hub's position moves", sourceLocation: sourceLocation)
            positions.append(((before.0, after.0), (before.1, after.1)))
            try compare(step, since: (before.0, before.1), sourceLocation: sourceLocation)
        }

        func references(_ values: [String: SyncValue]) -> [UUID] {
            values.values.flatMap { value -> [UUID] in
                switch value {
                case .attribute: return []
                case .toOne(let gid): return gid.map { [$0] } ?? []
                case .members(let gids): return gids
                case .memberChange(let added, let removed, _): return added + removed
                }
            }
        }

        func compare(_ step: String, since: (Int64, Int64), sourceLocation: SourceLocation = #_sourceLocation) throws {
            let all = Array(gids)
            let e = try embedded.states(of: all), p = try postgres.states(of: all)
            #expect(Set(e.keys) == Set(p.keys), "\(step): objects", sourceLocation: sourceLocation)
            for gid in all where e[gid] != nil || p[gid] != nil {
                #expect(PostgreSQLHubFixtures.describe(e[gid]) == PostgreSQLHubFixtures.describe(p[gid]), "\(step): \(gid)", sourceLocation: sourceLocation)
            }
            #expect(Set(try embedded.allObjects()) == Set(try postgres.allObjects()), "\(step): allObjects", sourceLocation: sourceLocation)
            let ec = try embedded.changes(after: since.0).map(PostgreSQLHubFixtures.describe).sorted()
            let pc = try postgres.changes(after: since.1).map(PostgreSQLHubFixtures.describe).sorted()
            #expect(ec == pc, "\(step): history", sourceLocation: sourceLocation)
            for store in ["s1", "s2"] {
                #expect(try embedded.cursor(for: store) == (try postgres.cursor(for: store)), "\(step): cursor \(store)", sourceLocation: sourceLocation)
                #expect(try embedded.pending(for: store) == (try postgres.pending(for: store)), "\(step): pending \(store)", sourceLocation: sourceLocation)
                #expect(try embedded.conflicts(store: store, includingResolved: false) == (try postgres.conflicts(store: store, includingResolved: false)),
                        "\(step): conflicts \(store)", sourceLocation: sourceLocation)
            }
            #expect(try embedded.conflicts(store: nil, includingResolved: true) == (try postgres.conflicts(store: nil, includingResolved: true)),
                    "\(step): all conflicts", sourceLocation: sourceLocation)
        }
    }

    let folder1 = UUID(), folder2 = UUID(), tag1 = UUID(), tag2 = UUID(), item1 = UUID(), item2 = UUID(), item3 = UUID(), detail1 = UUID()

    /// Inserts of every attribute type (and nil), to-one, one-to-many (derived and ordered),
    /// many-to-many (ordered on one side) and one-to-one, in a store pull's shape
    /// (to-manys as member changes) and a full push's (`.members`).
    func insertEverything(_ pair: Pair) throws {
        var batch = HubBatch(origin: "s1")
        batch.inserts = [
            (folder1, ObjectState(entityName: "Folder", values: ["name": .attribute("one"),
                                                                   "items": .memberChange(added: [item1, item2], removed: [], positions: [:]),
                                                                   "queue": .memberChange(added: [item1, item2], removed: [], positions: [item2: 0, item1: 1])])),
            (folder2, ObjectState(entityName: "Folder", values: ["name": .attribute("two")])),
            (tag1, ObjectState(entityName: "Tag", values: ["name": .attribute("t1")])),
            (tag2, ObjectState(entityName: "Tag", values: ["name": .attribute(nil)])),
            (item1, ObjectState(entityName: "Item", values: PostgreSQLHubFixtures.itemAttributes(1).merging([
                "folder": .toOne(folder1), "queuedIn": .toOne(folder1), "tags": .members([tag1, tag2]), "detail": .toOne(detail1),
            ]) { $1 })),
            (item2, ObjectState(entityName: "Item", values: PostgreSQLHubFixtures.nilItemAttributes.merging([
                "folder": .toOne(folder1), "queuedIn": .toOne(folder1), "tags": .memberChange(added: [tag1], removed: [], positions: [:]),
            ]) { $1 })),
            (item3, ObjectState(entityName: "Item", values: PostgreSQLHubFixtures.itemAttributes(3).merging(["folder": .toOne(folder2)]) { $1 })),
            (detail1, ObjectState(entityName: "Detail", values: ["note": .attribute("d"), "item": .toOne(item1)])),
        ]
        batch.cursor = SyncCursor(store: "s1", pulledThrough: 10, base: 0, pushedThrough: 0, needsFullPush: true)
        try pair.commit(batch, "inserts")
    }

    @Test func aSequenceOfBatchesLeavesBothHubsAlike() throws {
        let pair = try Pair(model: PostgreSQLHubFixtures.model())
        try insertEverything(pair)

        // A pull's updates: attributes, a to-one moved, a membership changed, an order changed; bookkeeping.
        var update = HubBatch(origin: "s2")
        update.updates = [
            (item1, ["i32": .attribute(Int32(5)), "str": .attribute("changed"), "dbl": .attribute(-Double.infinity), "folder": .toOne(folder2),
                     "tags": .memberChange(added: [], removed: [tag2], positions: [:])]),
            (folder1, ["queue": .memberChange(added: [], removed: [], positions: [item1: 0, item2: 1])]),
            (item2, ["flt": .attribute(Float.infinity), "i16": .attribute(Int16.min)]),
        ]
        update.pendingAdded = [("s2", item1), ("s2", item2)]
        update.newConflicts = [SyncConflict(id: 0, store: "s2", globalIdentifier: item2, entityName: "Item", kind: .update, basePosition: 3,
                                            hubPosition: 4, base: ["a": "Int32:1"], incoming: ["a": "Int32:3"], hub: ["a": "Int32:2"],
                                            created: Date(timeIntervalSinceReferenceDate: 812_345_678.987_654_321))]
        update.cursor = SyncCursor(store: "s2", pulledThrough: 7, base: 2, pushedThrough: 2, needsFullPush: false)
        try pair.commit(update, "updates")

        // A resolution's full objects: memberships replaced (derived and ordered many-to-many).
        var resolution = HubBatch(origin: nil)
        resolution.updates = [
            (folder2, ["items": .members([item3])]),
            (tag1, ["items": .members([item2, item1])]),
            (item3, ["tags": .members([tag2, tag1]), "queuedIn": .toOne(folder1)]),
        ]
        resolution.resolvedConflicts = [(1, .hub)]
        resolution.pendingRemoved = [("s2", item1)]
        resolution.cursors = [SyncCursor(store: "s1", pulledThrough: 11, base: 3, pushedThrough: 3, needsFullPush: false),
                              SyncCursor(store: "s2", pulledThrough: 8, base: 3, pushedThrough: 3, needsFullPush: false)]
        try pair.commit(resolution, "members")

        // Deletes: nullified to-ones and memberships, a cascade, a no-op update beside a real one.
        var deletes = HubBatch(origin: "s1")
        deletes.updates = [(item2, ["str": .attribute(nil), "i64": .attribute(Int64(9))])]
        deletes.deletes = [item3, folder1, item1]
        try pair.commit(deletes, "deletes")

        // A destination the hub does not have; a member added by change; a
        // subentity's object; an insert of an object the hub has (an update).
        var missing = HubBatch(origin: "s2")
        let item4 = UUID(), nowhere = UUID(), special = UUID()
        missing.inserts = [
            (item4, ObjectState(entityName: "Item", values: PostgreSQLHubFixtures.itemAttributes(4).merging([
                "folder": .toOne(nowhere), "tags": .memberChange(added: [tag2, nowhere], removed: [], positions: [:]),
            ]) { $1 })),
            (special, ObjectState(entityName: "Special", values: ["extra": .attribute("sub"), "i32": .attribute(Int32(1)), "folder": .toOne(folder2),
                                                                  "tags": .members([tag1])])),
            (folder2, ObjectState(entityName: "Folder", values: ["name": .attribute("two again")])),
        ]
        try pair.commit(missing, "missing destination")
        var subentity = HubBatch(origin: "s1")
        subentity.updates = [(special, ["extra": .attribute("changed"), "queuedIn": .toOne(folder2)]), (tag1, ["name": .attribute("t1'")]),
                             (item2, ["plist": .attribute(["a": "1", "b": "2", "c": "3"])])]
        try pair.commit(subentity, "subentity update")
        var subentityDelete = HubBatch(origin: "s1")
        subentityDelete.deletes = [special]
        // The same dictionary built in another order is no change.
        var same: [String: String] = [:]
        for key in ["c", "b", "a"] { same[key] = ["a": "1", "b": "2", "c": "3"][key] }
        subentityDelete.updates = [(item2, ["plist": .attribute(same)])]
        try pair.commit(subentityDelete, "subentity delete")

        // Bookkeeping alone; then nothing at all.
        var cursorOnly = HubBatch(origin: nil)
        cursorOnly.cursor = SyncCursor(store: "s1", pulledThrough: 12, base: 5, pushedThrough: 6, needsFullPush: false)
        try pair.commit(cursorOnly, "cursor only")
        try pair.commit(HubBatch(origin: nil), "empty")

        // Pages without s1's transactions read the same changes.
        func pages(_ hub: SyncHub) throws -> [String] {
            var out: [String] = []
            var from: Int64 = 0
            while true {
                let page = try hub.changes(after: from, excludingOrigin: "s1", changeLimit: 3)
                out += page.changes.map(PostgreSQLHubFixtures.describe)
                #expect(page.changes.allSatisfy { $0.origin != "s1" })
                if page.through == from { return out }
                from = page.through
            }
        }
        #expect(try pages(pair.embedded).sorted() == (try pages(pair.postgres)).sorted())
    }

    @Test func purgedHistoryThrowsTokenExpiredOnBothHubs() throws {
        let pair = try Pair(model: PostgreSQLHubFixtures.model())
        try insertEverything(pair)
        // Cursors that let the PostgreSQL hub purge (it stops at the oldest of any host).
        var cursors = HubBatch(origin: nil)
        cursors.cursor = SyncCursor(store: "s1", pulledThrough: 1, base: 1 << 40, pushedThrough: 1 << 40, needsFullPush: false)
        try pair.commit(cursors, "cursors")
        var update = HubBatch(origin: "s2")
        update.updates = [(item1, ["i32": .attribute(Int32(6))])]
        try pair.commit(update, "update")
        let first = pair.positions[1]
        try pair.embedded.purgeHistory(through: first.embedded.1, committedBefore: nil)
        try pair.postgres.purgeHistory(through: first.postgres.1, committedBefore: nil)
        for hub in [pair.embedded as SyncHub, pair.postgres as SyncHub] {
            #expect { try hub.changes(after: 0) } throws: { ($0 as? CoreDataError)?.code == .persistentHistoryTokenExpired }
        }
        let rest = try pair.postgres.changes(after: first.postgres.1).map(PostgreSQLHubFixtures.describe)
        #expect(rest.count == 1)
        #expect(try pair.embedded.changes(after: first.embedded.1).map(PostgreSQLHubFixtures.describe) == rest)
    }

    /// A delete the model's deny rule forbids fails on both hubs and writes
    /// nothing; once the destination is gone it goes through.
    @Test func aDeniedDeleteFailsOnBothHubs() throws {
        let owner = EntityDescription(name: "Owner"), part = EntityDescription(name: "Part")
        let parts = RelationshipDescription(name: "parts", destination: part, toMany: true)
        parts.deleteRule = .deny
        let partOwner = RelationshipDescription(name: "owner", destination: owner, toMany: false)
        parts.inverseRelationship = partOwner
        partOwner.inverseRelationship = parts
        owner.properties = [AttributeDescription(name: "name", type: .string), parts]
        part.properties = [AttributeDescription(name: "name", type: .string), partOwner]
        let model = ManagedObjectModel()
        model.entities = [owner, part]
        let pair = try Pair(model: model)
        let o = UUID(), p = UUID()
        var insert = HubBatch(origin: "s1")
        insert.inserts = [(o, ObjectState(entityName: "Owner", values: ["name": .attribute("o")])),
                          (p, ObjectState(entityName: "Part", values: ["name": .attribute("p"), "owner": .toOne(o)]))]
        try pair.commit(insert, "insert")
        var denied = HubBatch(origin: "s1")
        denied.deletes = [o]
        #expect(throws: (any Error).self) { try pair.embedded.commit(denied) }
        #expect { try pair.postgres.commit(denied) } throws: { ($0 as? CoreDataError)?.code == .validationRelationshipDeniedDelete }
        try pair.compare("denied", since: (pair.positions[0].embedded.1, pair.positions[0].postgres.1))
        var both = HubBatch(origin: "s1")
        both.deletes = [p, o]
        try pair.commit(both, "part, then owner")
        #expect(try pair.postgres.allObjects().isEmpty)
    }
}
