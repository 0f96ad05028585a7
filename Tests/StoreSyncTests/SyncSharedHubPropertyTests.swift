import Foundation
import ObjectGraph
import Testing
@testable import StoreSync
import StoreSyncPostgreSQL
import PostgreSQLTestSupport

/// Convergence across hosts (issue 19): two engines, standing for the
/// daemons of two hosts, each with two stores of its own and random
/// policies, share one PostgreSQL hub. Applications on both hosts write at
/// random; rounds run on one host or on both at once (two threads, so their
/// hub transactions really overlap and PostgreSQL's serialisable isolation
/// aborts and the engine retries); a host is closed and reopened now and
/// then (what a restarted daemon does, minus the crash: the process kill
/// test is the daemon's). Once the writers stop and every conflict is
/// resolved, all four stores and the hub hold the same objects, values and
/// relationships. Seeds: `STORESYNC_SHARED_SEEDS` (count, default 12) from
/// `STORESYNC_SEED_BASE`.
@Suite struct SyncSharedHubPropertyTests {
    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["STORESYNC_SHARED_SEEDS"].flatMap(Int.init) ?? 12
        let base = environment["STORESYNC_SEED_BASE"].flatMap { UInt64($0, radix: 16) } ?? 0x5A_0000
        return (0..<UInt64(count)).map { base + $0 }
    }()

    /// One host: its engine over its own connection to the shared hub.
    final class Host {
        let name: String
        let configuration: SyncGroupConfiguration
        let conninfo: String
        let hubGroup: String
        var group: SyncGroup

        init(name: String, policies: [SyncPolicy], directory: URL, conninfo: String, hubGroup: String) throws {
            self.name = name
            self.conninfo = conninfo
            self.hubGroup = hubGroup
            let stores = policies.enumerated().map { index, policy in
                SyncStoreConfiguration(name: "s\(index + 1)", url: directory.appendingPathComponent("\(name)-s\(index + 1).sqlite"), policy: policy)
            }
            configuration = SyncGroupConfiguration(name: "shared", model: SyncFixtures.model(),
                                                   stateDirectory: directory.appendingPathComponent("state-\(name)"), stores: stores)
            group = try Self.open(configuration, conninfo: conninfo, hubGroup: hubGroup, host: name)
        }

        static func open(_ configuration: SyncGroupConfiguration, conninfo: String, hubGroup: String, host: String) throws -> SyncGroup {
            let hub = try PostgreSQLHub(model: configuration.model, conninfo: conninfo, group: hubGroup, host: host)
            return try SyncGroup(configuration: configuration, hub: hub)
        }

        /// Closed and opened again, as a restarted daemon.
        func restart() throws {
            try group.close()
            group = try Self.open(configuration, conninfo: conninfo, hubGroup: hubGroup, host: name)
        }

        var urls: [URL] { configuration.stores.map(\.url) }
    }

    static func run(seed: UInt64, conninfo: String) throws {
        var rng = SyncRandom(seed: seed)
        let directory = try SyncFixtures.directory()
        let hubGroup = TestPostgreSQL.uniqueGroupName()
        let hosts = try ["a", "b"].map { name in
            try Host(name: name, policies: (0..<2).map { _ in SyncPolicy.allCases[Int.random(in: 0..<SyncPolicy.allCases.count, using: &rng)] },
                     directory: directory, conninfo: conninfo, hubGroup: hubGroup)
        }
        let context = "seed \(String(seed, radix: 16)), policies \(hosts.map { $0.configuration.stores.map(\.policy.rawValue) })"
        let apps = try hosts.map { host in try host.urls.map { try SyncFixtures.app($0) } }

        for _ in 0..<Int.random(in: 8...14, using: &rng) {
            for app in apps.joined() where Int.random(in: 0..<3, using: &rng) > 0 {
                SyncConvergencePropertyTests.edit(app, &rng)
            }
            switch Int.random(in: 0..<6, using: &rng) {
            case 0, 1:
                // Both hosts at once: their hub transactions overlap.
                let which = (0..<2).map { _ in Int.random(in: 0..<3, using: &rng) }
                let failures = Failures()
                DispatchQueue.concurrentPerform(iterations: 2) { index in
                    do { try Self.step(hosts[index], which[index]) } catch { failures.add("\(hosts[index].name): \(error)") }
                }
                for failure in failures.all { Issue.record("\(context): \(failure)") }
            case 2, 3:
                try Self.step(hosts[Int.random(in: 0..<2, using: &rng)], Int.random(in: 0..<3, using: &rng))
            case 4:
                try hosts[Int.random(in: 0..<2, using: &rng)].restart()
            default:
                break
            }
        }

        // Writers stop: rounds on both hosts until neither moves, conflicts
        // resolved on the host whose store has them.
        var resolved = 0
        for _ in 0..<10 {
            try settle(hosts)
            var any = false
            for host in hosts {
                for conflict in try host.group.conflicts() {
                    try host.group.resolve(conflict.id, taking: Bool.random(using: &rng) ? .incoming : .hub)
                    resolved += 1
                    any = true
                }
            }
            if !any { break }
        }
        try settle(hosts)
        for host in hosts {
            #expect(try host.group.conflicts().isEmpty, "\(context)")
            for status in try host.group.status() {
                #expect(status.lastError == nil, "\(context): \(host.name)/\(status.name): \(status.lastError ?? "")")
            }
        }

        // Every store, on both hosts, holds exactly the hub's objects.
        let compared = try SyncFixtures.differences(hub: hosts[0].group.hub, stores: hosts.flatMap(\.urls))
        #expect(compared.hubObjects > 0, "\(context): nothing was written")
        for difference in compared.differences { Issue.record("\(context): \(difference)") }
        let retries = hosts.reduce(0) { $0 + (($1.group.hub as? PostgreSQLHub)?.connection.serializationRetries ?? 0) }
        for host in hosts { try host.group.close() }
        print("shared hub seed \(String(seed, radix: 16)): \(compared.hubObjects) objects, \(resolved) conflicts resolved, \(retries) hub transactions retried")
    }

    /// One host's move: a whole round, one store's change, or the hub's.
    static func step(_ host: Host, _ kind: Int) throws {
        switch kind {
        case 0: try host.group.runRound()
        case 1: try host.group.storeDidChange("s\(kind % 2 + 1)")
        default: try host.group.hubDidChange()
        }
    }

    /// Rounds on each host in turn until a turn where neither moved.
    static func settle(_ hosts: [Host]) throws {
        for _ in 0..<50 {
            var moved = false
            for host in hosts { moved = try host.group.runRound() || moved }
            let failing = try hosts.contains { try $0.group.status().contains { $0.lastError != nil } }
            if !moved && !failing { return }
        }
    }

    final class Failures: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [String] = []
        func add(_ failure: String) { lock.withLock { list.append(failure) } }
        var all: [String] { lock.withLock { list } }
    }

    @Test(.enabled(if: HubKind.available.contains(.postgreSQL)), arguments: seeds)
    func hostsSharingAPostgreSQLHubConverge(seed: UInt64) throws {
        let conninfo = try #require(TestPostgreSQL.conninfo, "no PostgreSQL test server: run `scripts/postgres start` and export STORESYNC_TEST_POSTGRESQL")
        try Self.run(seed: seed, conninfo: conninfo)
    }

    /// Two daemons on two hosts, each with its own store named "s1", share
    /// one group through the PostgreSQL hub: each one's changes reach the
    /// other's store, and a conflict is decided once, by the policy of the
    /// store whose change meets the hub's.
    @Test(.enabled(if: HubKind.available.contains(.postgreSQL)))
    func twoHostsWithStoresOfTheSameNameConverge() throws {
        let groupName = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + groupName) }
        let conninfo = try TestPostgreSQL.requireConninfo()
        let directories = try (0..<2).map { _ in try SyncFixtures.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let hosts = ["alpha", "beta"]
        let policies: [SyncPolicy] = [.objectTrump, .storeTrump]
        let groups = try (0..<2).map { n in
            let hub = try PostgreSQLHub(model: SyncFixtures.model(), conninfo: conninfo, group: groupName, host: hosts[n])
            let store = SyncStoreConfiguration(name: "s1", url: directories[n].appendingPathComponent("s1.sqlite"), policy: policies[n])
            return try SyncGroup(configuration: SyncGroupConfiguration(name: groupName, model: SyncFixtures.model(),
                                                                       stateDirectory: directories[n].appendingPathComponent("state"), stores: [store]), hub: hub)
        }
        defer { for group in groups { try? group.close() } }
        let apps = try (0..<2).map { n -> ManagedObjectContext in
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: SyncFixtures.model())
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
        let hub = try PostgreSQLHub(model: SyncFixtures.model(), conninfo: conninfo, group: groupName, host: "observer")
        defer { try? hub.close() }
        #expect(try hub.knownStores().map { "\($0.host)/\($0.store)" } == ["alpha/s1", "beta/s1"])
    }
}
