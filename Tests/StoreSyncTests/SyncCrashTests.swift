import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The engine's process killed with SIGKILL at random points, 25 times,
/// while three writers keep saving to their stores: after the last
/// restart the stores converge, and counting shows nothing lost (every
/// record and every writer's last value everywhere), nothing duplicated
/// (each record once per store) and nothing echoed (the hub never applied
/// a store's change to a record that store's writer does not own, which is
/// what pulling a push back would do).
@Suite struct SyncCrashTests {
    static let stores = 3

    static func configuration(_ directory: URL) -> SyncGroupConfiguration {
        let stores = (1...Self.stores).map {
            SyncStoreConfiguration(name: "s\($0)", url: directory.appendingPathComponent("s\($0).sqlite"), policy: .objectTrump)
        }
        return SyncGroupConfiguration(name: "crash", model: SyncFixtures.model(), stateDirectory: directory.appendingPathComponent("state"), stores: stores)
    }

    /// Writer `index`: inserts records named "w<index>-<n>" and raises `a`
    /// of its own records; returns each record's last saved `a`.
    final class Writer: @unchecked Sendable {
        let index: Int
        let context: ManagedObjectContext
        private(set) var lastValues: [String: Int32] = [:]
        private var counter = 0
        private let lock = NSLock()

        init(index: Int, url: URL) throws {
            self.index = index
            context = try SyncFixtures.app(url, author: "writer\(index)")
        }

        func step(_ rng: inout SyncRandom) {
            context.performAndWait {
                context.reset()
                do {
                    var written: [String: Int32] = [:]
                    if lastValues.isEmpty || Bool.random(using: &rng) {
                        counter += 1
                        let record = try context.insertNewObject(forEntityName: "Record")
                        let name = "w\(index)-\(counter)"
                        try record.setValue(name, forKey: "name")
                        try record.setValue(Int32(0), forKey: "a")
                        written[name] = 0
                    } else {
                        let request = FetchRequest(entityName: "Record")
                        request.predicate = try FetchPredicate(format: "name BEGINSWITH %@", argumentArray: ["w\(index)-"])
                        let mine = try context.fetch(request)
                        if let record = mine.randomElement(using: &rng), let name = try record.value(forKey: "name") as? String {
                            let next = (lastValues[name] ?? 0) + 1
                            try record.setValue(next, forKey: "a")
                            written[name] = next
                        }
                    }
                    try context.save()
                    lock.lock(); lastValues.merge(written) { $1 }; lock.unlock()
                } catch {
                    // The engine wrote the same row meanwhile: the write is dropped, not recorded.
                    context.rollback()
                }
            }
        }

        var values: [String: Int32] { lock.lock(); defer { lock.unlock() }; return lastValues }
    }

    /// Run with the engine's defaults (0) and with chunks of 2 changes and hub
    /// transactions written one object per save, so kills also land between
    /// pull chunks, between the saves of a push and between the saves of a
    /// hub transaction.
    @Test(arguments: [0, 2])
    func engineKilledAtRandomPointsLosesDuplicatesAndEchoesNothing(chunk: Int) async throws {
        let directory = try SyncFixtures.directory()
        do { try SyncGroup(configuration: Self.configuration(directory)).close() }   // history on, hub made
        let writers = try (1...Self.stores).map { try Writer(index: $0, url: directory.appendingPathComponent("s\($0).sqlite")) }
        let running = ManagedAtomicFlag()
        var rng = SyncRandom(seed: 0xC4A5_0001)
        let kills = Int(ProcessInfo.processInfo.environment["STORESYNC_KILLS"] ?? "") ?? 25
        for kill in 0..<kills {
            running.set(true)
            let writerSeed = rng.next()
            Thread.detachNewThread {
                var local = SyncRandom(seed: writerSeed)
                while running.value { for writer in writers { writer.step(&local) } }
            }
            let path = directory.path, delay = Int.random(in: 5...120, using: &rng)
            await #expect(processExitsWith: .signal(SIGKILL), "kill \(kill)") { [path = path as String, delay = delay as Int, chunk = chunk as Int] in
                let group = try SyncGroup(configuration: SyncCrashTests.configuration(URL(fileURLWithPath: path)))
                if chunk > 0 {
                    group.chunkChanges = chunk
                    (group.hub as? EmbeddedHub)?.partSize = 1
                }
                Thread.detachNewThread {
                    usleep(useconds_t(delay * 1000))
                    Foundation.kill(getpid(), SIGKILL)
                }
                while true { try group.runRound() }
            }
            running.set(false)
            usleep(20_000)   // the writer thread finishes its step
        }

        let group = try SyncGroup(configuration: Self.configuration(directory))
        if chunk > 0 {
            group.chunkChanges = chunk
            (group.hub as? EmbeddedHub)?.partSize = 1
        }
        try group.runUntilIdle()
        #expect(try group.conflicts().isEmpty)
        for status in try group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        // Echo: a hub change pulled from store S to a record S's writer does not own.
        var echoes: [HubChange] = []
        var checked = 0
        for change in try group.hub.changes(after: 0) where change.origin != nil && change.entityName == "Record" {
            var name = change.changedProperties["name"] as? String
            if name == nil, case .attribute(let value)? = try group.hub.state(of: change.globalIdentifier)?.values["name"] { name = value as? String }
            guard let name, let origin = change.origin else { continue }
            checked += 1
            if !name.hasPrefix("w\(origin.dropFirst())-") { echoes.append(change) }
        }
        #expect(checked > 50, "too few pulled changes to check for echoes (\(checked))")
        try group.close()

        let hub = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"))
        var expected: [String: String] = [:]
        for writer in writers { for (name, value) in writer.values { expected[name] = ObjectState.canonical(value) } }
        #expect(expected.count > 50, "too little was written (\(expected.count) records)")
        for place in ["state/hub.sqlite"] + (1...Self.stores).map({ "s\($0).sqlite" }) {
            let contents = try SyncFixtures.contents(directory.appendingPathComponent(place))
            #expect(contents.count == hub.count, "\(place): \(contents.count) objects, hub \(hub.count)")
            var seen: [String: Int] = [:]
            for fields in contents.values { if let name = fields["name"] { seen[name, default: 0] += 1 } }
            let byName = Dictionary(contents.values.compactMap { f in f["name"].map { ($0, f) } }, uniquingKeysWith: { a, _ in a })
            let lost = expected.keys.filter { seen[ObjectState.canonical($0)] == nil }
            let duplicated = seen.filter { $0.value > 1 }
            let stale = expected.filter { byName[ObjectState.canonical($0.key)]?["a"] != $0.value }
            #expect(lost.isEmpty, "\(place): lost \(lost.sorted().prefix(5))")
            #expect(duplicated.isEmpty, "\(place): duplicated \(duplicated.keys.sorted().prefix(5))")
            #expect(stale.isEmpty, "\(place): \(stale.count) records without their writer's last value, e.g. \(stale.first.map { "\($0.key)=\($0.value)" } ?? "")")
        }
        #expect(echoes.isEmpty, "\(echoes.count) echoed changes")
        print("sync crash (chunk \(chunk == 0 ? "default" : String(chunk))): \(kills) kills, \(expected.count) records, 0 lost/duplicated/echoed checked")
    }
}

/// A flag shared between the test and its writer thread.
final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool { lock.lock(); defer { lock.unlock() }; return flag }
    func set(_ new: Bool) { lock.lock(); flag = new; lock.unlock() }
}
