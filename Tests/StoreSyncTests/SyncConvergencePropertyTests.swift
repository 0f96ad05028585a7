import Foundation
import ObjectGraph
import SyncWorkload
import Testing
@testable import StoreSync

/// SplitMix64: deterministic, so a failing seed reproduces.
struct SyncRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Convergence: three to five stores with random policies, random inserts,
/// updates, deletes and relationship edits by each store's application (and
/// by writers in other processes), rounds interleaved at random; once the
/// writers stop and every conflict is resolved, every store and the hub hold
/// the same objects with the same values and relationships, compared by
/// global identifier. Seeds: `STORESYNC_SEEDS` (count, default 200) from
/// `STORESYNC_SEED_BASE`; `scripts/sync-property N` runs any number. The
/// same runs over a PostgreSQL hub (`HubKind`) take the first
/// `STORESYNC_POSTGRESQL_SEEDS` (default 20) of those seeds.
///
/// Two more modes take the first `STORESYNC_PARTS_SEEDS` (default 30) and
/// `STORESYNC_RAW_SEEDS` (default 30) seeds (issue 27): the same runs with
/// chunks of 2 and 7 row changes, so nearly every store transaction is
/// settled in parts; and runs where raw SQL writers (`RawSQLWriter`, not
/// ObjectGraph) also commit transactions of up to three chunks (forward
/// to-one references, updates, moves, clears and deletes of objects made
/// earlier in the same transaction, folders cleared then deleted) and runs
/// of small commits history cannot tell apart, checked besides by the
/// workload checker against their logs. In every mode every value the hub
/// ends with is one some writer committed for that object and property
/// (`CommittedValues`): nothing settled in parts is invented.
@Suite struct SyncConvergencePropertyTests {
    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["STORESYNC_SEEDS"].flatMap(Int.init) ?? 200
        let base = environment["STORESYNC_SEED_BASE"].flatMap { UInt64($0, radix: 16) } ?? 0xC0_0000
        return (0..<UInt64(count)).map { base + $0 }
    }()

    static let postgreSQLSeeds: [UInt64] = {
        let count = ProcessInfo.processInfo.environment["STORESYNC_POSTGRESQL_SEEDS"].flatMap(Int.init) ?? 20
        return Array(seeds.prefix(count))
    }()

    static func firstSeeds(_ variable: String, default count: Int) -> [UInt64] {
        let environment = ProcessInfo.processInfo.environment
        let count = environment[variable].flatMap(Int.init) ?? count
        let base = environment["STORESYNC_SEED_BASE"].flatMap { UInt64($0, radix: 16) } ?? 0xC0_0000
        return (0..<UInt64(count)).map { base + $0 }
    }
    static let partsSeeds = firstSeeds("STORESYNC_PARTS_SEEDS", default: 30)
    /// Seeds that once failed, run in every mode besides the first ones:
    /// e00028 (an owner's membership moved a waiting member, which was
    /// written twice), e00034 and e00124 (a folder deleted as a related
    /// object nulled its records outside their own write).
    static let regressionSeeds: [UInt64] = [0xE0_0028, 0xE0_0034, 0xE0_0124]
    static let rawSeeds: [UInt64] = {
        let first = firstSeeds("STORESYNC_RAW_SEEDS", default: 30)
        return first + regressionSeeds.filter { !first.contains($0) }
    }()

    /// Objects of the raw SQL writers (named `x<n>-…`): the applications'
    /// random edits leave them alone, so the logs say what they must be.
    static func isRawWritersObject(_ object: ManagedObject) -> Bool {
        ((try? object.value(forKey: "name")) as? String)?.hasPrefix("x") ?? false
    }

    /// One batch of random edits by an application, saved; a save that
    /// meets the engine's concurrent write fails and is dropped, as an
    /// application would retry.
    static func edit(_ app: ManagedObjectContext, _ rng: inout SyncRandom) {
        app.performAndWait {
            app.reset()
            do {
                var all: [String: [ManagedObject]] = [:]
                for name in ["Record", "Folder", "Label"] {
                    all[name] = try app.fetch(FetchRequest(entityName: name)).filter { !isRawWritersObject($0) }
                        .sorted { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
                }
                var gone = Set<ObjectIdentifier>()
                func any(_ name: String) -> ManagedObject? {
                    guard let list = all[name], !list.isEmpty else { return nil }
                    let object = list[Int.random(in: 0..<list.count, using: &rng)]
                    return gone.contains(ObjectIdentifier(object)) ? nil : object
                }
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0, 1:
                        let name = ["Record", "Record", "Folder", "Label"][Int.random(in: 0..<4, using: &rng)]
                        let object = try app.insertNewObject(forEntityName: name)
                        try object.setValue("n\(Int.random(in: 0...99, using: &rng))", forKey: "name")
                        if name == "Record" { for key in ["a", "b", "c"] { try object.setValue(Int32.random(in: 0...9, using: &rng), forKey: key) } }
                        all[name, default: []].append(object)
                    case 2, 3, 4:
                        guard let record = any("Record") else { continue }
                        let key = ["a", "b", "c", "name", "when"][Int.random(in: 0..<5, using: &rng)]
                        let value: Any
                        switch key {
                        case "name": value = "v\(Int.random(in: 0...99, using: &rng))"
                        case "when": value = Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0...1000, using: &rng)))
                        default: value = Int32.random(in: 0...9, using: &rng)
                        }
                        try record.setValue(value, forKey: key)
                    case 5:
                        guard let record = any("Record") else { continue }
                        try record.setValue(Bool.random(using: &rng) ? any("Folder") : nil, forKey: "folder")
                    case 6, 7:
                        guard let record = any("Record"), let label = any("Label") else { continue }
                        let labels = try record.mutableSetValue(forKey: "labels")
                        if Bool.random(using: &rng) { try labels.insert(label) } else { try labels.remove(label) }
                    default:
                        let name = ["Record", "Folder", "Label"][Int.random(in: 0..<3, using: &rng)]
                        guard let victim = any(name) else { continue }
                        app.delete(victim)
                        gone.insert(ObjectIdentifier(victim))
                    }
                }
                try app.save()
            } catch {
                app.rollback()
            }
        }
    }

    /// - Parameters:
    ///   - chunk: the engine's chunk (row changes), nil for its default.
    ///   - rawWriters: raw SQL writers committing transactions of up to three chunks.
    static func run(seed: UInt64, childWriter: Bool, hub kind: HubKind = .embedded, chunk: Int? = nil, rawWriters: Bool = false) async throws {
        var rng = SyncRandom(seed: seed)
        let directory = try SyncFixtures.directory()
        let count = Int.random(in: 3...5, using: &rng)
        let policies = (0..<count).map { _ in SyncPolicy.allCases[Int.random(in: 0..<SyncPolicy.allCases.count, using: &rng)] }
        let group = try SyncFixtures.group(policies, hub: kind, in: directory)
        if let chunk { group.chunkChanges = chunk }
        let urls = (1...count).map { directory.appendingPathComponent("s\($0).sqlite") }
        let apps = try urls.map { try SyncFixtures.app($0) }
        var context = "seed \(String(seed, radix: 16)), \(kind.rawValue) hub, policies \(policies.map(\.rawValue))"
        if let chunk { context += ", chunk \(chunk)" }
        context += ", files in \(directory.path)"
        var raw: [RawSQLWriter] = []
        if rawWriters {
            for n in 1...Int.random(in: 1...2, using: &rng) {
                let store = Int.random(in: 0..<count, using: &rng)
                raw.append(try RawSQLWriter(name: "x\(n)", storeName: "s\(store + 1)", store: urls[store],
                                            log: directory.appendingPathComponent("x\(n).log")))
            }
            context += ", raw SQL writers on \(raw.map(\.storeName))"
        }
        var rawRNG = WorkloadRandom(seed: rng.next())

        for step in 0..<Int.random(in: 8...16, using: &rng) {
            for (i, app) in apps.enumerated() where Int.random(in: 0..<3, using: &rng) > 0 || i == step % count {
                edit(app, &rng)
            }
            for writer in raw where Bool.random(using: &rng) {
                if Int.random(in: 0..<3, using: &rng) == 0 { writer.burst(&rawRNG) } else { writer.step(maxChanges: 3 * group.chunkChanges, &rawRNG) }
            }
            if childWriter && step == 3 {
                let path = urls[0].path, childSeed = rng.next()
                await #expect(processExitsWith: .success, "\(context)") { [path = path as String, childSeed = childSeed as UInt64] in
                    var childRNG = SyncRandom(seed: childSeed)
                    let child = try SyncFixtures.app(URL(fileURLWithPath: path), author: "child")
                    for _ in 0..<3 { SyncConvergencePropertyTests.edit(child, &childRNG) }
                }
            }
            // Rounds interleaved at random: whole rounds, or single stores.
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: try group.runRound()
            case 1: try group.storeDidChange("s\(Int.random(in: 1...count, using: &rng))")
            default: break
            }
        }

        // Writers stop: settle every conflict, then everything must agree.
        var resolved = 0
        for _ in 0..<10 {
            try group.runUntilIdle()
            let conflicts = try group.conflicts()
            if conflicts.isEmpty { break }
            for conflict in conflicts { try group.resolve(conflict.id, taking: Bool.random(using: &rng) ? .incoming : .hub) }
            resolved += conflicts.count
        }
        try group.runUntilIdle()
        // Every problem is recorded; a clean run's files are removed, a failing one's kept (their path is in `context`).
        var clean = true
        func fail(_ message: String) {
            clean = false
            Issue.record(Comment(rawValue: "\(context): \(message)"))
        }
        defer { if clean { try? FileManager.default.removeItem(at: directory) } }
        if !(try group.conflicts().isEmpty) { fail("conflicts left") }
        for status in try group.status() where status.lastError != nil { fail("\(status.name): \(status.lastError ?? "")") }
        for invented in try CommittedValues.inventedValues(hub: group.hub, stores: urls) { fail(invented) }
        for writer in raw where writer.failedSaves > 0 { print("\(context): raw writer \(writer.name): \(writer.failedSaves) failed (\(writer.lastError ?? ""))") }
        if !raw.isEmpty {
            let report = try WorkloadCheck.run(model: SyncFixtures.model(), stores: urls.enumerated().map { ("s\($0.offset + 1)", $0.element) },
                                               hub: group.hub, logs: raw.map { directory.appendingPathComponent("\($0.name).log") },
                                               onlyWritersObjects: true)
            if report.saves == 0 { fail("the raw writers committed nothing") }
            if !report.isClean { fail("\(report.summary)\n\(report.json)") }
        }
        guard kind == .embedded else {
            // The verifier reads the embedded hub's file; any other hub is compared through SyncHub.
            let compared = try SyncFixtures.differences(hub: group.hub, stores: urls)
            try group.close()
            if compared.hubObjects == 0 { fail("nothing was written") }
            print("sync seed \(String(seed, radix: 16)) (\(kind.rawValue)): \(compared.hubObjects) objects, \(resolved) conflicts resolved")
            for difference in compared.differences { fail(difference) }
            return
        }
        try group.close()

        // Every store holds the hub's objects, values and relationships (by
        // global identifier): the verifier storesyncctl verify runs.
        let verification = try SyncVerifier(configuration: group.configuration).verify()
        if verification.hubObjects == 0 { fail("nothing was written") }
        print("sync seed \(String(seed, radix: 16)): \(verification.hubObjects) objects, \(resolved) conflicts resolved")
        for difference in verification.differences { fail("\(difference)") }
    }

    @Test(arguments: seeds)
    func storesConvergeAfterWritersStop(seed: UInt64) async throws {
        try await Self.run(seed: seed, childWriter: seed % 20 == 0)
    }

    /// Chunks of 2 and 7 row changes: nearly every store transaction is settled in parts.
    @Test(arguments: partsSeeds, [2, 7])
    func storesConvergeWithEveryTransactionInParts(seed: UInt64, chunk: Int) async throws {
        try await Self.run(seed: seed, childWriter: false, chunk: chunk)
    }

    /// Raw SQL writers' transactions of up to three chunks (of 20 row
    /// changes), and runs of their small commits, among the applications'.
    @Test(arguments: rawSeeds)
    func storesConvergeWithRawSQLWritersLargeTransactions(seed: UInt64) async throws {
        try await Self.run(seed: seed, childWriter: false, chunk: 20, rawWriters: true)
    }

    @Test(.enabled(if: HubKind.available.contains(.postgreSQL)), arguments: postgreSQLSeeds)
    func storesConvergeOverAPostgreSQLHub(seed: UInt64) async throws {
        try await Self.run(seed: seed, childWriter: seed % 20 == 0, hub: .postgreSQL)
    }
}
