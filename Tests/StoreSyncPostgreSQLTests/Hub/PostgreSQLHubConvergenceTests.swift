import Foundation
import ObjectGraph
import Testing
@testable import StoreSync
import StoreSyncPostgreSQL

/// SplitMix64: deterministic, so a failing seed reproduces (a copy of
/// StoreSyncTests' `SyncRandom`: test targets share no files).
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

/// Convergence over the PostgreSQL hub (docs/SYNC.md, invariant 4; the
/// engine's `SyncConvergencePropertyTests` with the hub in PostgreSQL):
/// three to five stores with random policies, random inserts, updates,
/// deletes and relationship edits, rounds interleaved at random; once the
/// writers stop and every conflict is resolved, every store holds the
/// hub's objects with the same values and relationships. Seeds:
/// `STORESYNC_SEEDS` (count, default 12) from `STORESYNC_SEED_BASE`.
@Suite(.enabled(if: TestPostgreSQL.isAvailable))
struct PostgreSQLHubConvergenceTests {
    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["STORESYNC_SEEDS"].flatMap(Int.init) ?? 12
        let base = environment["STORESYNC_SEED_BASE"].flatMap { UInt64($0, radix: 16) } ?? 0xC0_0000
        return (0..<UInt64(count)).map { base + $0 }
    }()

    /// One batch of random edits by an application, saved (the engine's tests' edits).
    static func edit(_ app: ManagedObjectContext, _ rng: inout SyncRandom) {
        app.performAndWait {
            app.reset()
            do {
                var all: [String: [ManagedObject]] = [:]
                for name in ["Record", "Folder", "Label"] {
                    all[name] = try app.fetch(FetchRequest(entityName: name)).sorted { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
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
                        case "when": value = Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0...1000, using: &rng)) + 0.123_456_789)
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

    @Test(arguments: seeds)
    func storesConvergeAfterWritersStop(seed: UInt64) throws {
        var rng = SyncRandom(seed: seed)
        let count = Int.random(in: 3...5, using: &rng)
        let policies = (0..<count).map { _ in SyncPolicy.allCases[Int.random(in: 0..<SyncPolicy.allCases.count, using: &rng)] }
        let setup = try PostgreSQLHubSyncGroupTests.Setup(policies)
        let context = "seed \(String(seed, radix: 16)), policies \(policies.map(\.rawValue))"
        for step in 0..<Int.random(in: 8...16, using: &rng) {
            for (i, app) in setup.apps.enumerated() where Int.random(in: 0..<3, using: &rng) > 0 || i == step % count {
                Self.edit(app, &rng)
            }
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: try setup.group.runRound()
            case 1: try setup.group.storeDidChange("s\(Int.random(in: 1...count, using: &rng))")
            default: break
            }
        }
        var resolved = 0
        for _ in 0..<10 {
            try setup.group.runUntilIdle()
            let conflicts = try setup.group.conflicts()
            if conflicts.isEmpty { break }
            for conflict in conflicts { try setup.group.resolve(conflict.id, taking: Bool.random(using: &rng) ? .incoming : .hub) }
            resolved += conflicts.count
        }
        try setup.group.runUntilIdle()
        #expect(try setup.group.conflicts().isEmpty, "\(context)")
        for status in try setup.group.status() { #expect(status.lastError == nil, "\(context): \(status.name): \(status.lastError ?? "")") }
        let hub = try setup.hubContents()
        #expect(!hub.isEmpty, "\(context): nothing was written")
        for n in 0..<count {
            let store = try setup.contents(n)
            #expect(Set(store.keys) == Set(hub.keys), "\(context): s\(n + 1) objects")
            for (gid, fields) in hub where store[gid] != nil && store[gid] != fields {
                Issue.record("\(context): s\(n + 1) \(gid): store \(store[gid]!), hub \(fields)")
            }
        }
    }
}
