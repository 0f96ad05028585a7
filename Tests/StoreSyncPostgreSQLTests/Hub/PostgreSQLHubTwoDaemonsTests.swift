import Foundation
import ObjectGraph
import Testing
@testable import StoreSync
import StoreSyncPostgreSQL

/// Two daemons (hosts) running rounds at the same time on one PostgreSQL hub
/// group, two stores each, random edits: once they stop and conflicts are
/// resolved, all four stores equal the hub. Serialisation failures between
/// the daemons' commits are retried by the hub; none reaches the engine.
@Suite(.enabled(if: TestPostgreSQL.isAvailable))
struct PostgreSQLHubTwoDaemonsTests {
    @Test(arguments: [UInt64(0xD0), 0xD1, 0xD2, 0xD3])
    func concurrentDaemonsConverge(seed: UInt64) throws {
        let groupName = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + groupName) }
        let conninfo = try TestPostgreSQL.requireConninfo()
        let model = PostgreSQLHubSyncGroupTests.model()
        let directories = try (0..<2).map { _ in try PostgreSQLHubFixtures.directory() }
        let hosts = ["alpha", "beta"]
        let policies: [[SyncPolicy]] = [[.objectTrump, .storeTrump], [.overwrite, .error]]
        let groups = try (0..<2).map { h in
            let hub = try PostgreSQLHub(model: model, conninfo: conninfo, group: groupName, host: hosts[h])
            let stores = (0..<2).map { SyncStoreConfiguration(name: "s\($0 + 1)", url: directories[h].appendingPathComponent("s\($0 + 1).sqlite"), policy: policies[h][$0]) }
            return try SyncGroup(configuration: SyncGroupConfiguration(name: groupName, model: model, stateDirectory: directories[h].appendingPathComponent("state"), stores: stores), hub: hub)
        }
        let apps = try (0..<2).map { h in try (0..<2).map { s -> ManagedObjectContext in
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directories[h].appendingPathComponent("s\(s + 1).sqlite"))
            let context = ManagedObjectContext(coordinator: coordinator)
            context.transactionAuthor = "app"
            return context
        } }
        nonisolated(unsafe) var errors: [String] = []
        let lock = NSLock()
        DispatchQueue.concurrentPerform(iterations: 2) { h in
            var rng = SyncRandom(seed: seed &+ UInt64(h) &* 1000)
            for _ in 0..<12 {
                PostgreSQLHubConvergenceTests.edit(apps[h][Int.random(in: 0..<2, using: &rng)], &rng)
                do { try groups[h].runRound() } catch { lock.lock(); errors.append("\(hosts[h]): \(error)"); lock.unlock() }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        var rng = SyncRandom(seed: seed)
        for _ in 0..<10 {
            for group in groups { try group.runUntilIdle() }
            for group in groups { try group.runUntilIdle() }
            var any = false
            for group in groups {
                for conflict in try group.conflicts() { any = true; try group.resolve(conflict.id, taking: Bool.random(using: &rng) ? .incoming : .hub) }
            }
            if !any { break }
        }
        for group in groups { try group.runUntilIdle() }
        for group in groups { try group.runUntilIdle() }
        for group in groups {
            #expect(try group.conflicts().isEmpty)
            for status in try group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        }
        let hub = try PostgreSQLHub(model: model, conninfo: conninfo, group: groupName, host: "observer")
        var hubContents: [UUID: [String: String]] = [:]
        for (gid, state) in try hub.states(of: try hub.allObjects()) { hubContents[gid] = PostgreSQLHubFixtures.describe(state) }
        #expect(!hubContents.isEmpty)
        for h in 0..<2 {
            for s in 0..<2 {
                let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
                try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directories[h].appendingPathComponent("s\(s + 1).sqlite"),
                                                   options: [PersistentStore.persistentHistoryTrackingKey: true])
                let context = ManagedObjectContext(coordinator: coordinator)
                let access = GraphAccess(context: context)
                let contents: [UUID: [String: String]] = try context.performAndWait {
                    var out: [UUID: [String: String]] = [:]
                    for entity in model.entities where entity.superentity == nil {
                        for object in try context.fetch(FetchRequest(entityName: entity.name)) {
                            guard let gid = try access.globalIdentifier(of: object) else { continue }
                            var fields = SyncGroup.describe(try access.state(of: object).values)
                            fields["entity"] = object.entity.name
                            out[gid] = fields
                        }
                    }
                    return out
                }
                #expect(contents == hubContents, "\(hosts[h])/s\(s + 1)")
            }
        }
        for group in groups { try? group.close() }
        try? hub.close()
    }
}
