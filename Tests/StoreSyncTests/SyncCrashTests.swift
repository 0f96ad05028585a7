import Foundation
import ObjectGraph
import SyncWorkload
import Testing
@testable import StoreSync

/// The engine's process killed with SIGKILL at random points, 25 times,
/// while three writer processes (`storesync-writer`) keep saving to their
/// stores: after the last restart the stores converge, and the checker
/// (`WorkloadCheck`, docs/WORKLOAD.md) compares every store and the hub with
/// the writers' logs by global identifier: nothing lost, duplicated, extra or
/// stale, nothing echoed (a change pulled back from a store that did not
/// make it, or pushed into the store that made it), nothing applied twice.
///
/// `STORESYNC_KILLS` (default 25) and `STORESYNC_CRASH_SEED` (hex); the seed
/// is printed. `scripts/sync-crash N [SEED]` runs any number.
@Suite struct SyncCrashTests {
    static let stores = 3
    /// Saves per writer: what is written is bounded whatever the machine's
    /// load (writers running until the kills end wrote more the slower the
    /// machine, and the run grew with it); kills after the writers stop
    /// still land in pulls and pushes of the backlog.
    static let saves = Int(ProcessInfo.processInfo.environment["STORESYNC_CRASH_SAVES"] ?? "") ?? 150

    static func configuration(_ directory: URL) -> SyncGroupConfiguration {
        let stores = (1...Self.stores).map {
            SyncStoreConfiguration(name: "s\($0)", url: directory.appendingPathComponent("s\($0).sqlite"), policy: .objectTrump)
        }
        return SyncGroupConfiguration(name: "crash", model: SyncFixtures.model(), stateDirectory: directory.appendingPathComponent("state"), stores: stores)
    }

    /// Run with the engine's defaults (0) and with chunks of 2 changes and hub
    /// transactions written one object per save, so kills also land between
    /// pull chunks, between the saves of a push and between the saves of a
    /// hub transaction; and with chunks of 20. Besides the three ObjectGraph
    /// writers, a raw SQL writer (`storesync-writer write --raw-sql`, not
    /// ObjectGraph) on s1 commits transactions of up to three chunks (60 row
    /// changes with the defaults) and runs of small commits, so kills also
    /// land between the parts of store transactions settled in parts.
    @Test(arguments: [0, 2, 20])
    func engineKilledAtRandomPointsLosesDuplicatesAndEchoesNothing(chunk: Int) async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["STORESYNC_CRASH_SEED"].flatMap { UInt64($0.hasPrefix("0x") ? String($0.dropFirst(2)) : $0, radix: 16) } ?? 0xC4A5_0001
        let kills = Int(environment["STORESYNC_KILLS"] ?? "") ?? 25
        let label = "sync crash seed 0x\(String(seed, radix: 16)), chunk \(chunk) (rerun: scripts/sync-crash \(kills) \(String(seed, radix: 16)))"
        print("\(label): \(kills) kills")

        let directory = try SyncFixtures.directory()
        do { try SyncGroup(configuration: Self.configuration(directory)).close() }   // history on, hub made
        let model = directory.appendingPathComponent("Model.xcdatamodel")
        try XcodeModelWriter.write(SyncFixtures.model(), to: model)
        let stores = (1...Self.stores).map { ("s\($0)", directory.appendingPathComponent("s\($0).sqlite")) }
        let logs = (1...Self.stores).map { directory.appendingPathComponent("w\($0).log") } + [directory.appendingPathComponent("x1.log")]
        var rng = WorkloadRandom(seed: seed)
        var writers = try (1...Self.stores).map { index in
            try WriterProcess(name: "w\(index)", storeName: "s\(index)", store: stores[index - 1].1, model: model, log: logs[index - 1],
                              seed: rng.next(), arguments: ["--pause", "10-40", "--saves", "\(Self.saves)"])
        }
        writers.append(try WriterProcess(name: "x1", storeName: "s1", store: stores[0].1, model: model, log: logs[Self.stores], seed: rng.next(),
                                         arguments: ["--raw-sql", "--max-changes", "\(3 * (chunk > 0 ? chunk : 20))", "--pause", "20-60",
                                                     "--saves", "\(Self.saves / 2)"]))

        for kill in 0..<kills {
            let path = directory.path, delay = Int.random(in: 5...120, using: &rng)
            await #expect(processExitsWith: .signal(SIGKILL), "\(label): kill \(kill)") { [path = path as String, delay = delay as Int, chunk = chunk as Int] in
                let group = try SyncGroup(configuration: SyncCrashTests.configuration(URL(fileURLWithPath: path)))
                if chunk > 0 {
                    group.chunkChanges = chunk
                    if chunk == 2 { (group.hub as? EmbeddedHub)?.partSize = 1 }
                }
                Thread.detachNewThread {
                    usleep(useconds_t(delay * 1000))
                    Foundation.kill(getpid(), SIGKILL)
                }
                while true { try group.runRound() }
            }
        }
        for writer in writers {
            #expect(writer.stop() == 0, "\(label): writer \(writer.name): \(writer.messages)")
        }

        let group = try SyncGroup(configuration: Self.configuration(directory))
        try group.runUntilIdle()
        #expect(try group.conflicts().isEmpty)
        for status in try group.status() { #expect(status.lastError == nil, "\(status.name): \(status.lastError ?? "")") }
        try group.close()

        let report = try WorkloadCheck.run(model: SyncFixtures.model(), stores: stores, hubDirectory: directory.appendingPathComponent("state"), logs: logs)
        #expect(report.saves > 50, "\(label): too little was written: \(report.summary)")
        #expect(report.places.first { $0.name == "hub" }.map { $0.engineChanges > 50 } == true, "\(label): too few pulled changes: \(report.json)")
        #expect(report.isClean, "\(label): \(report.summary)\n\(report.json)")
        print("\(label): \(report.summary)")
        if report.isClean { try? FileManager.default.removeItem(at: directory) }
    }
}
