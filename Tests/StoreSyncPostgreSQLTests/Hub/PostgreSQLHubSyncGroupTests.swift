import Foundation
import ObjectGraph
import Testing
@testable import StoreSync
import StoreSyncPostgreSQL

/// The engine over a PostgreSQL hub: the MOC-MP-09/MOC-MP-10 policy table of
/// `SyncPolicyTests` (docs/SYNC.md) played the same way, each store's
/// values and the hub's checked.
@Suite(.enabled(if: TestPostgreSQL.isAvailable))
struct PostgreSQLHubSyncGroupTests {
    /// `Record` (a, b, c integers, a name, a date, a folder, labels), `Folder`
    /// (records), `Label` (records): the model of the engine's own tests.
    static func model() -> ManagedObjectModel {
        let record = EntityDescription(name: "Record")
        let folder = EntityDescription(name: "Folder")
        let label = EntityDescription(name: "Label")
        let records = RelationshipDescription(name: "records", destination: record, toMany: true)
        let recordFolder = RelationshipDescription(name: "folder", destination: folder, toMany: false)
        records.inverseRelationship = recordFolder
        recordFolder.inverseRelationship = records
        let labels = RelationshipDescription(name: "labels", destination: label, toMany: true)
        let labelRecords = RelationshipDescription(name: "records", destination: record, toMany: true)
        labels.inverseRelationship = labelRecords
        labelRecords.inverseRelationship = labels
        for rel in [records, recordFolder, labels, labelRecords] { rel.deleteRule = .nullify }
        record.properties = ["a", "b", "c"].map { AttributeDescription(name: $0, type: .integer32) }
            + [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "when", type: .date), recordFolder, labels]
        folder.properties = [AttributeDescription(name: "name", type: .string), records]
        label.properties = [AttributeDescription(name: "name", type: .string), labelRecords]
        let model = ManagedObjectModel()
        model.entities = [folder, label, record]
        return model
    }

    final class Setup {
        let directory: URL
        let hub: PostgreSQLHub
        let group: SyncGroup
        let apps: [ManagedObjectContext]
        var record = UUID()

        init(_ policies: [SyncPolicy]) throws {
            let directory = try PostgreSQLHubFixtures.directory()
            self.directory = directory
            let hub = try PostgreSQLHubFixtures.hub(model: PostgreSQLHubSyncGroupTests.model())
            self.hub = hub
            let stores = policies.enumerated().map {
                SyncStoreConfiguration(name: "s\($0.offset + 1)", url: directory.appendingPathComponent("s\($0.offset + 1).sqlite"), policy: $0.element)
            }
            group = try SyncGroup(configuration: SyncGroupConfiguration(name: "test", model: PostgreSQLHubSyncGroupTests.model(),
                                                                        stateDirectory: directory.appendingPathComponent("state"), stores: stores), hub: hub)
            apps = try (1...policies.count).map { n in
                let coordinator = try PersistentStoreCoordinator(managedObjectModel: PostgreSQLHubSyncGroupTests.model())
                try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("s\(n).sqlite"))
                let context = ManagedObjectContext(coordinator: coordinator)
                context.transactionAuthor = "app\(n)"
                return context
            }
        }

        deinit {
            try? group.close()
            try? TestPostgreSQL.dropSchema(hub.notificationChannel)
            try? FileManager.default.removeItem(at: directory)
        }

        func edit(_ n: Int, _ values: [String: Int32]) throws {
            let app = apps[n]
            try app.performAndWait {
                app.reset()
                let record = try #require(try app.fetch(FetchRequest(entityName: "Record")).first)
                for (key, value) in values { try record.setValue(value, forKey: key) }
                try app.save()
            }
        }

        func delete(_ n: Int) throws {
            let app = apps[n]
            try app.performAndWait {
                app.reset()
                app.delete(try #require(try app.fetch(FetchRequest(entityName: "Record")).first))
                try app.save()
            }
        }

        /// Every object of a store by global identifier, as comparable text.
        func contents(_ n: Int) throws -> [UUID: [String: String]] {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: PostgreSQLHubSyncGroupTests.model())
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("s\(n + 1).sqlite"),
                                               options: [PersistentStore.persistentHistoryTrackingKey: true])
            defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }
            let context = ManagedObjectContext(coordinator: coordinator)
            let access = GraphAccess(context: context)
            return try context.performAndWait {
                var out: [UUID: [String: String]] = [:]
                for entity in coordinator.managedObjectModel.entities where entity.superentity == nil {
                    for object in try context.fetch(FetchRequest(entityName: entity.name)) {
                        guard let gid = try access.globalIdentifier(of: object) else { continue }
                        var fields = SyncGroup.describe(try access.state(of: object).values)
                        fields["entity"] = object.entity.name
                        out[gid] = fields
                    }
                }
                return out
            }
        }

        /// The hub's objects as comparable text.
        func hubContents() throws -> [UUID: [String: String]] {
            var out: [UUID: [String: String]] = [:]
            for (gid, state) in try hub.states(of: try hub.allObjects()) { out[gid] = PostgreSQLHubFixtures.describe(state) }
            return out
        }

        /// The record's `a` in the hub and each store ("gone" where absent).
        func outcome(_ key: String = "a") throws -> [String] {
            [try hubContents()[record]?[key] ?? "gone"] + (try (0..<apps.count).map { try contents($0)[record]?[key] ?? "gone" })
        }
    }

    /// a = b = c = 1 everywhere, synced; then the edits, not yet synced.
    func setUp(_ policy: SyncPolicy, edits: (Setup) throws -> Void = { try $0.edit(0, ["a": 2, "b": 2]); try $0.edit(1, ["a": 3, "c": 3]) }) throws -> Setup {
        let setup = try Setup([.objectTrump, policy])
        try setup.apps[0].performAndWait {
            let record = try setup.apps[0].insertNewObject(forEntityName: "Record")
            for key in ["a", "b", "c"] { try record.setValue(Int32(1), forKey: key) }
            try setup.apps[0].save()
        }
        try setup.group.runUntilIdle()
        setup.record = try #require(try setup.contents(1).keys.first)
        try edits(setup)
        return setup
    }

    func expect(_ setup: Setup, _ a: Int32, _ b: Int32, _ c: Int32, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = [a, b, c].map { ObjectState.canonical($0) }
        let places = [("hub", try setup.hubContents())] + (try (0..<2).map { ("s\($0 + 1)", try setup.contents($0)) })
        for (place, contents) in places {
            let fields = contents[setup.record]
            #expect(["a", "b", "c"].map { fields?[$0] ?? "?" } == expected, "\(place)", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: [
        // MOC-MP-09 per policy of the store whose change meets the hub's.
        (SyncPolicy.storeTrump, Int32(2), Int32(2), Int32(3)),
        (.objectTrump, 3, 2, 3),
        (.overwrite, 3, 1, 3),
        (.rollback, 2, 2, 1),
    ])
    func mergePolicyTruthTable(_ policy: SyncPolicy, _ a: Int32, _ b: Int32, _ c: Int32) throws {
        let setup = try setUp(policy)
        try setup.group.runUntilIdle()
        for status in try setup.group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        #expect(try setup.group.conflicts().isEmpty)
        try expect(setup, a, b, c)
    }

    @Test(arguments: [(ConflictResolution.incoming, Int32(3), Int32(1), Int32(3)), (.hub, 2, 2, 1)])
    func errorPolicyListsOneConflictAndEitherResolutionFinishes(_ resolution: ConflictResolution, _ a: Int32, _ b: Int32, _ c: Int32) throws {
        let setup = try setUp(.error)
        try setup.group.runUntilIdle()
        let conflicts = try setup.group.conflicts()
        try #require(conflicts.count == 1)
        #expect(conflicts[0].store == "s2" && conflicts[0].globalIdentifier == setup.record && conflicts[0].kind == .update)
        #expect(conflicts[0].hub["a"] == ObjectState.canonical(Int32(2)) && conflicts[0].base["a"] == ObjectState.canonical(Int32(1)))
        try setup.group.resolve(conflicts[0].id, taking: resolution)
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        try expect(setup, a, b, c)
    }

    static let a2 = ObjectState.canonical(Int32(2)), a3 = ObjectState.canonical(Int32(3))

    /// MOC-MP-10 (i): deleted in the store, updated at the hub.
    @Test(arguments: [(SyncPolicy.storeTrump, false), (.rollback, false), (.objectTrump, true), (.overwrite, true)])
    func deletedInTheStoreUpdatedAtTheHub(_ policy: SyncPolicy, _ deleted: Bool) throws {
        let setup = try setUp(policy) { try $0.edit(0, ["a": 2]); try $0.delete(1) }
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        #expect(try setup.outcome() == Array(repeating: deleted ? "gone" : Self.a2, count: 3))
    }

    /// MOC-MP-10 (ii): updated in the store, deleted at the hub.
    @Test(arguments: [(SyncPolicy.storeTrump, false), (.rollback, false), (.objectTrump, true), (.overwrite, true)])
    func updatedInTheStoreDeletedAtTheHub(_ policy: SyncPolicy, _ kept: Bool) throws {
        let setup = try setUp(policy) { try $0.delete(0); try $0.edit(1, ["a": 3]) }
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty)
        #expect(try setup.outcome() == Array(repeating: kept ? Self.a3 : "gone", count: 3))
    }

    /// Three stores, relationships: folders, records moved between them,
    /// labels (many-to-many) and deletes converge everywhere, hub included.
    @Test func threeStoresWithRelationshipsConverge() throws {
        let setup = try Setup([.objectTrump, .storeTrump, .overwrite])
        let app = setup.apps[0]
        try app.performAndWait {
            let folders = try (0..<2).map { i -> ManagedObject in
                let folder = try app.insertNewObject(forEntityName: "Folder")
                try folder.setValue("f\(i)", forKey: "name")
                return folder
            }
            let labels = try (0..<3).map { i -> ManagedObject in
                let label = try app.insertNewObject(forEntityName: "Label")
                try label.setValue("l\(i)", forKey: "name")
                return label
            }
            for i in 0..<6 {
                let record = try app.insertNewObject(forEntityName: "Record")
                try record.setValue(Int32(i), forKey: "a")
                try record.setValue(Date(timeIntervalSinceReferenceDate: 1000.123_456_789 * Double(i)), forKey: "when")
                try record.setValue(folders[i % 2], forKey: "folder")
                try record.mutableSetValue(forKey: "labels").insert(labels[i % 3])
            }
            try app.save()
        }
        try setup.group.runUntilIdle()
        // s2 moves records and relabels; s3 deletes a folder and a label.
        try setup.apps[1].performAndWait {
            let context = setup.apps[1]
            context.reset()
            let folders = try context.fetch(FetchRequest(entityName: "Folder"))
            let labels = try context.fetch(FetchRequest(entityName: "Label"))
            for record in try context.fetch(FetchRequest(entityName: "Record")) {
                try record.setValue(folders[0], forKey: "folder")
                try record.mutableSetValue(forKey: "labels").insert(labels[0])
            }
            try context.save()
        }
        try setup.group.runUntilIdle()
        try setup.apps[2].performAndWait {
            let context = setup.apps[2]
            context.reset()
            let folder = try #require(try context.fetch(FetchRequest(entityName: "Folder")).first { (try? $0.value(forKey: "name") as? String) == "f1" })
            context.delete(folder)
            context.delete(try #require(try context.fetch(FetchRequest(entityName: "Label")).first))
            try context.save()
        }
        try setup.group.runUntilIdle()
        for status in try setup.group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        let hub = try setup.hubContents()
        #expect(hub.count == 2 + 3 + 6 - 2)
        for n in 0..<3 { #expect(try setup.contents(n) == hub, "s\(n + 1)") }
    }

    /// Two daemons on two hosts, each with its own store named "s1", share
    /// one group through the PostgreSQL hub: each one's changes reach the
    /// other's store, and a conflict is decided once, by the policy of the
    /// store whose change meets the hub's.
    @Test func twoHostsWithStoresOfTheSameNameConverge() throws {
        let groupName = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + groupName) }
        let conninfo = try TestPostgreSQL.requireConninfo()
        let directories = try (0..<2).map { _ in try PostgreSQLHubFixtures.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let hosts = ["alpha", "beta"]
        let policies: [SyncPolicy] = [.objectTrump, .storeTrump]
        let groups = try (0..<2).map { n in
            let hub = try PostgreSQLHub(model: Self.model(), conninfo: conninfo, group: groupName, host: hosts[n])
            let store = SyncStoreConfiguration(name: "s1", url: directories[n].appendingPathComponent("s1.sqlite"), policy: policies[n])
            return try SyncGroup(configuration: SyncGroupConfiguration(name: groupName, model: Self.model(),
                                                                       stateDirectory: directories[n].appendingPathComponent("state"), stores: [store]), hub: hub)
        }
        defer { for group in groups { try? group.close() } }
        let apps = try (0..<2).map { n -> ManagedObjectContext in
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directories[n].appendingPathComponent("s1.sqlite"))
            let context = ManagedObjectContext(coordinator: coordinator)
            context.transactionAuthor = "app"
            return context
        }
        func rounds() throws { for _ in 0..<2 { for group in groups { try group.runUntilIdle() } } }
        func values(_ n: Int) throws -> [String: Int32] {
            try apps[n].performAndWait {
                apps[n].reset()
                var out: [String: Int32] = [:]
                for record in try apps[n].fetch(FetchRequest(entityName: "Record")) {
                    out[(try record.value(forKey: "name") as? String) ?? "?"] = try record.value(forKey: "a") as? Int32
                }
                return out
            }
        }
        func save(_ n: Int, _ body: (ManagedObjectContext) throws -> Void) throws {
            try apps[n].performAndWait {
                apps[n].reset()
                try body(apps[n])
                try apps[n].save()
            }
        }
        try save(0) { context in
            let record = try context.insertNewObject(forEntityName: "Record")
            try record.setValue("from alpha", forKey: "name")
            try record.setValue(Int32(1), forKey: "a")
        }
        try rounds()
        #expect(try values(1) == ["from alpha": 1])
        try save(1) { context in
            let record = try context.insertNewObject(forEntityName: "Record")
            try record.setValue("from beta", forKey: "name")
            try record.setValue(Int32(2), forKey: "a")
        }
        try rounds()
        #expect(try values(0) == ["from alpha": 1, "from beta": 2])
        // Both change one record before either syncs: alpha's pull comes first,
        // beta's store-trump keeps the hub's value and gets it back.
        for (n, a) in [(0, Int32(10)), (1, Int32(20))] {
            try save(n) { context in
                let record = try #require(try context.fetch(FetchRequest(entityName: "Record")).first { (try? $0.value(forKey: "name") as? String) == "from alpha" })
                try record.setValue(a, forKey: "a")
            }
        }
        try rounds()
        #expect(try values(0) == ["from alpha": 10, "from beta": 2])
        #expect(try values(1) == ["from alpha": 10, "from beta": 2])
        let hub = try PostgreSQLHub(model: Self.model(), conninfo: conninfo, group: groupName, host: "observer")
        defer { try? hub.close() }
        #expect(try hub.knownStores().map { "\($0.host)/\($0.store)" } == ["alpha/s1", "beta/s1"])
    }
}
