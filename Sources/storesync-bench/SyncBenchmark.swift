import ArgumentParser
import Foundation
import ObjectGraph
import StoreSync
import StoreSyncPostgreSQL

/// `storesync-bench sync [--count N] [--catchup-count C] [--catchup-batch B] [--saves S]
/// [--only bulk,catchup,latency] [--hub embedded|postgresql|both] [--postgresql CONNINFO] [--json]`:
/// the sync engine's performance targets (docs/benchmarks/sync.md).
///
/// `--hub postgresql` runs the same workloads across two simulated hosts sharing
/// one PostgreSQL hub (issue 19): host a's engine has s1 and s2, host b's has s3,
/// each with its own `PostgreSQLHub` connection; after host a's rounds, host b is
/// told the hub changed (`hubDidChange()`, what its daemon does on a NOTIFY), so
/// arrival in s3 is arrival on the other host. `--hub both` runs the embedded hub
/// and then the PostgreSQL one in the same run, reported side by side. The
/// server is `--postgresql` (a libpq connection string) or, by default,
/// STORESYNC_TEST_POSTGRESQL (`scripts/postgres start`).
///
/// The engine runs in this process (`SyncGroup` with its embedded hub) over three
/// stores s1, s2, s3 of `SQLiteBenchmark.model()` (policy store-trump; only `Item`s,
/// 4 attributes and a nil to-one, are written). An application writes s1 through
/// its own coordinator (`GraphSide`, the `sqlite` benchmark's writer); arrival in s2
/// and s3 is checked through a connection of their own (`RawSide`). Each workload
/// starts from a fresh directory in which the group has already bootstrapped the
/// three empty stores (untimed).
///
/// - **bulk**: the application inserts N objects into s1 in one save (untimed);
///   `group.runUntilIdle()` is timed until s2 and s3 hold all N → objects per
///   second (target at least 100,000).
/// - **catch-up**: with the engine closed, the application inserts C objects in
///   saves of B (C / B transactions pending); the group is opened again and
///   `runUntilIdle()` is timed until s2 and s3 hold all C (target for 1,000,000:
///   under 15 s), with the peak RSS of the process during it (`VmHWM` after
///   resetting it through `/proc/self/clear_refs`; target under 64 MB). When C is
///   below 1,000,000 the time for 1,000,000 is also given, extrapolated linearly
///   and labelled so (the peak memory is not extrapolated).
/// - **latency**: S saves of 10 objects in s1; after each commit
///   `group.storeDidChange("s1")`, then s2 and s3 are read until they hold them
///   (further rounds are run if a call left them behind). The time from the
///   save's return to that read → p50, p99 (target p99 under 20 ms), with the
///   median of the first and last tenth of the saves to show a trend.
///
/// `--json` prints one object with sorted keys: `benchmark` ("sync"), `stores` (3),
/// `all_met`, and one object per workload run (`bulk`, `catchup`, `latency`), each
/// with its figures, `target`(s) and `met`.
struct SyncBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "The sync engine in process over three stores: bulk throughput, catching up on pending changes (time, peak memory), save-to-arrival latency."
    )

    static let bulkTarget = 100_000.0          // objects per second, at least
    static let catchupTargetCount = 1_000_000
    static let catchupTarget = 15.0            // seconds for 1,000,000, under
    static let memoryTarget = 64.0             // MB peak RSS, under
    static let latencyTarget = 0.020           // seconds p99, under
    static let latencyBatch = 10               // objects per latency save

    @Option(help: "Objects of the bulk workload (one save into s1).")
    var count = 100_000

    @Option(help: "Changes pending for the catch-up workload (the target is for 1,000,000; a smaller count is extrapolated).")
    var catchupCount = 1_000_000

    @Option(help: "Objects per application save while the catch-up changes are made.")
    var catchupBatch = 1_000

    @Option(help: "Saves of 10 objects in the latency workload.")
    var saves = 500

    @Option(help: "Workloads to run, comma separated: bulk, catchup, latency.")
    var only = "bulk,catchup,latency"

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    enum HubChoice: String, ExpressibleByArgument, CaseIterable {
        case embedded, postgresql, both
    }

    @Option(help: "The hub: embedded, postgresql (two simulated hosts on one PostgreSQL hub), or both, side by side.")
    var hub: HubChoice = .embedded

    @Option(help: "libpq connection string of the PostgreSQL server (default: STORESYNC_TEST_POSTGRESQL).")
    var postgresql: String?

    /// Where the workloads' hub lives.
    enum HubPlace {
        case embedded
        /// Two engines (hosts a and b) on one PostgreSQL hub.
        case postgresql(conninfo: String)

        var name: String {
            switch self {
            case .embedded: return "embedded"
            case .postgresql: return "postgresql"
            }
        }
    }

    private func places() throws -> [HubPlace] {
        let conninfo = postgresql ?? ProcessInfo.processInfo.environment["STORESYNC_TEST_POSTGRESQL"]
        func server() throws -> HubPlace {
            guard let conninfo else {
                throw ValidationError("--hub \(hub.rawValue) needs a server: --postgresql CONNINFO or STORESYNC_TEST_POSTGRESQL (scripts/postgres start prints it)")
            }
            return .postgresql(conninfo: conninfo)
        }
        switch hub {
        case .embedded: return [.embedded]
        case .postgresql: return [try server()]
        case .both: return [.embedded, try server()]
        }
    }

    private var workloads: Set<String> { Set(only.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) }

    func validate() throws {
        guard count >= 1, catchupCount >= 1, catchupBatch >= 1, saves >= 1 else {
            throw ValidationError("--count, --catchup-count, --catchup-batch and --saves must be at least 1")
        }
        let unknown = workloads.subtracting(["bulk", "catchup", "latency"])
        guard unknown.isEmpty else { throw ValidationError("unknown workload(s) in --only: \(unknown.sorted().joined(separator: ", "))") }
    }

    func run() throws {
        var report: [String: Any] = ["benchmark": "sync", "stores": 3]
        var allMet = true
        let places = try places()
        for place in places {
            // One hub: its workloads at the top level, as before; several: one object each.
            var section: [String: Any] = ["hub": place.name]
            if case .postgresql = place { section["hosts"] = 2 }
            if !json && places.count > 1 { print("hub: \(place.name)") }
            if workloads.contains("bulk") {
                let bulk = try Self.bulk(count, place)
                allMet = allMet && (bulk["met"] as! Bool)
                section["bulk"] = bulk
                if !json { Self.printBulk(bulk) }
            }
            if workloads.contains("catchup") {
                let catchup = try Self.catchup(catchupCount, batch: catchupBatch, place)
                allMet = allMet && (catchup["met"] as! Bool)
                section["catchup"] = catchup
                if !json { Self.printCatchup(catchup) }
            }
            if workloads.contains("latency") {
                let latency = try Self.latency(saves, place)
                allMet = allMet && (latency["met"] as! Bool)
                section["latency"] = latency
                if !json { Self.printLatency(latency) }
            }
            if places.count == 1 { report.merge(section) { $1 } } else { report[place.name] = section }
        }
        report["all_met"] = allMet
        if json {
            let data = try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("all targets: \(allMet ? "met" : "missed")")
        }
    }

    // MARK: - Setup

    /// A fresh directory with three empty stores that the group has
    /// bootstrapped: one engine with the embedded hub, or two (hosts a: s1,
    /// s2 and b: s3) sharing a PostgreSQL hub.
    final class Bench {
        let directory: URL
        let place: HubPlace
        let configurations: [SyncGroupConfiguration]
        /// The hub's group in PostgreSQL: a new one per workload.
        let hubGroup = "bench_" + UUID().uuidString.prefix(8).lowercased()
        var groups: [SyncGroup] = []

        init(_ label: String, _ place: HubPlace) throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-bench-sync-\(label)-\(UUID().uuidString)")
            self.directory = directory
            self.place = place
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            func stores(_ numbers: [Int]) -> [SyncStoreConfiguration] {
                numbers.map { SyncStoreConfiguration(name: "s\($0)", url: directory.appendingPathComponent("s\($0).sqlite"), policy: .storeTrump) }
            }
            func configuration(_ host: String, _ numbers: [Int]) -> SyncGroupConfiguration {
                SyncGroupConfiguration(name: "bench", model: SQLiteBenchmark.model(), stateDirectory: directory.appendingPathComponent("state-\(host)"),
                                       stores: stores(numbers))
            }
            switch place {
            case .embedded: configurations = [configuration("a", [1, 2, 3])]
            case .postgresql: configurations = [configuration("a", [1, 2]), configuration("b", [3])]
            }
            try open()
            try runUntilIdle()
        }

        func url(_ store: Int) -> URL { directory.appendingPathComponent("s\(store).sqlite") }

        func open() throws {
            groups = try zip(["a", "b"], configurations).map { host, configuration in
                switch place {
                case .embedded:
                    return try SyncGroup(configuration: configuration)
                case .postgresql(let conninfo):
                    let hub = try PostgreSQLHub(model: configuration.model, conninfo: conninfo, group: hubGroup, host: host)
                    return try SyncGroup(configuration: configuration, hub: hub)
                }
            }
        }

        func close() throws {
            for group in groups { try group.close() }
            groups = []
        }

        /// Every engine's rounds until idle, host a's first.
        func runUntilIdle() throws { for group in groups { try group.runUntilIdle() } }

        /// The application saved into s1: host a pulls it and pushes to s2,
        /// then host b hears of the hub's change and pushes to s3.
        func s1DidChange() throws {
            try groups[0].storeDidChange("s1")
            for other in groups.dropFirst() { try other.hubDidChange() }
        }

        /// One round on every engine.
        func runRound() throws { for group in groups { try group.runRound() } }

        /// Stores whose last round failed, on every host.
        var failures: [String] { groups.flatMap { SyncBenchmark.storeFailures($0) } }

        /// The application's stack on s1 (its own coordinator and connection).
        func application() throws -> GraphSide {
            try GraphSide(model: SQLiteBenchmark.model(), url: url(1), options: [PersistentStore.persistentHistoryTrackingKey: true])
        }

        /// `Item` rows of s2 and s3, each read through a connection of its own.
        func otherCounts(_ readers: [RawSide]) throws -> [Int] { try readers.map { try $0.remainingItems() } }

        func readers() throws -> [RawSide] { try [2, 3].map { try RawSide(path: url($0).path) } }

        func remove() {
            try? close()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Runs rounds until s2 and s3 hold `expected` items (at most `limit` calls of `runUntilIdle`).
    static func syncUntil(_ bench: Bench, _ readers: [RawSide], expected: Int, limit: Int = 5) throws -> (rounds: Int, counts: [Int]) {
        var counts = try bench.otherCounts(readers)
        var calls = 0
        while counts.contains(where: { $0 != expected }) && calls < limit {
            try bench.runUntilIdle()
            calls += 1
            counts = try bench.otherCounts(readers)
        }
        return (calls, counts)
    }

    /// Stores whose last round failed, with the reason (for the message of a failed check).
    static func storeFailures(_ group: SyncGroup) -> [String] {
        ((try? group.status()) ?? []).compactMap { status in status.lastError.map { "\(status.name): \($0)" } }
    }

    // MARK: - Workloads

    static func bulk(_ n: Int, _ place: HubPlace) throws -> [String: Any] {
        let bench = try Bench("bulk", place)
        defer { bench.remove() }
        let app = try bench.application()
        try app.insert(n)
        try app.resetContext()
        let readers = try bench.readers()
        defer { readers.forEach { $0.close() } }

        Memory.trimHeap()
        Memory.resetPeak()
        var outcome: (rounds: Int, counts: [Int]) = (0, [])
        let cpu = CPUClock.seconds()
        let seconds = try Clock.seconds { outcome = try syncUntil(bench, readers, expected: n) }
        let cpuSeconds = CPUClock.seconds() - cpu
        let peak = Memory.peakMB()
        try SQLiteBenchmark.expect(outcome.counts == [n, n],
                                   "bulk: s2, s3 hold \(outcome.counts) of \(n) items; \(bench.failures)")
        let rate = Double(n) / seconds
        var out: [String: Any] = ["objects": n, "seconds": seconds, "objects_per_second": rate, "target_objects_per_second": bulkTarget,
                                  "met": rate >= bulkTarget, "peak_rss_mb": peak, "cpu_seconds": cpuSeconds, "description": "\(n) inserts in one save into s1, runUntilIdle until s2 and s3 hold them"]
        if case .embedded = place { out.merge(try rawReference("bulk", n, batch: n, engineSeconds: seconds)) { $1 } }
        return out
    }

    /// The same copy by `RawSyncCopy` (the SQLite C API, no engine), in the
    /// same run: `raw_seconds`, its rate, and the engine's time over it.
    static func rawReference(_ label: String, _ n: Int, batch: Int, engineSeconds: Double) throws -> [String: Any] {
        let raw = try RawSyncCopy(label: label)
        defer { raw.remove() }
        let app = try GraphSide(model: SQLiteBenchmark.model(), url: raw.url("s1"), options: [PersistentStore.persistentHistoryTrackingKey: true])
        var left = n
        while left > 0 {
            try app.insert(min(batch, left))
            try app.resetContext()
            left -= min(batch, left)
        }
        var outcome: (counts: [Int], hubSeconds: Double) = ([], 0)
        let cpu = CPUClock.seconds()
        let seconds = try Clock.seconds { outcome = try raw.copy() }
        let cpuSeconds = CPUClock.seconds() - cpu
        try SQLiteBenchmark.expect(outcome.counts == [n, n], "\(label) raw reference: s2, s3 hold \(outcome.counts) of \(n) items")
        // With the two stores written at once on two cores, the copy could take
        // no less than the hub's part and one store's: an estimate from the
        // measured parts, not a measurement.
        let parallelBound = outcome.hubSeconds + (seconds - outcome.hubSeconds) / 2
        return ["raw_seconds": seconds, "raw_cpu_seconds": cpuSeconds, "raw_objects_per_second": Double(n) / seconds,
                "raw_hub_seconds": outcome.hubSeconds, "raw_stores_seconds": seconds - outcome.hubSeconds,
                "raw_two_cores_bound_objects_per_second": Double(n) / parallelBound,
                "engine_over_raw": engineSeconds / seconds,
                "raw_description": "the same copy with the SQLite C API (RawSyncCopy): s1's history read, each page written into a hub file, the hub's history read, written into s2 and s3; same layout and history triggers"]
    }

    static func catchup(_ n: Int, batch: Int, _ place: HubPlace) throws -> [String: Any] {
        let bench = try Bench("catchup", place)
        defer { bench.remove() }
        try bench.close()   // the engine is not running while the changes are made
        var saves = 0
        let writeSeconds = try Clock.seconds {
            let app = try bench.application()
            var left = n
            while left > 0 {
                let size = min(batch, left)
                try app.insert(size)
                try app.resetContext()
                left -= size
                saves += 1
            }
        }
        let readers = try bench.readers()
        defer { readers.forEach { $0.close() } }

        // Give freed heap back first, so the peak is the engine's and not what
        // the application's writes (or an earlier workload) left in malloc's arenas.
        Memory.trimHeap()
        let startRSS = Memory.currentMB()
        Memory.resetPeak()
        var outcome: (rounds: Int, counts: [Int]) = (0, [])
        var openSeconds = 0.0
        let cpu = CPUClock.seconds()
        let seconds = try Clock.seconds {
            openSeconds = try Clock.seconds { try bench.open() }
            outcome = try syncUntil(bench, readers, expected: n)
        }
        let cpuSeconds = CPUClock.seconds() - cpu
        let peak = Memory.peakMB()
        try SQLiteBenchmark.expect(outcome.counts == [n, n],
                                   "catch-up: s2, s3 hold \(outcome.counts) of \(n) items; \(bench.failures)")
        let measuredFull = n >= catchupTargetCount
        let forTarget = measuredFull ? seconds : seconds * Double(catchupTargetCount) / Double(n)
        let timeMet = forTarget < catchupTarget
        let memoryMet = peak < memoryTarget
        var out: [String: Any] = [
            "changes": n, "saves": saves, "objects_per_save": batch, "write_seconds_untimed": writeSeconds,
            "seconds": seconds, "cpu_seconds": cpuSeconds, "open_seconds": openSeconds, "changes_per_second": Double(n) / seconds,
            "target_changes": catchupTargetCount, "target_seconds": catchupTarget, "time_met": timeMet,
            "peak_rss_mb": peak, "rss_before_mb": startRSS, "target_peak_rss_mb": memoryTarget, "memory_met": memoryMet,
            "met": timeMet && memoryMet,
            "description": "\(n) inserts in \(saves) saves into s1 while the engine is closed; open the group and runUntilIdle until s2 and s3 hold them",
        ]
        if case .embedded = place { out.merge(try rawReference("catchup", n, batch: batch, engineSeconds: seconds)) { $1 } }
        if measuredFull {
            out["seconds_for_target_count"] = seconds
        } else {
            out["seconds_for_target_count_extrapolated_linearly"] = forTarget
            out["peak_rss_note"] = "measured for \(n) changes, not extrapolated"
        }
        return out
    }

    static func latency(_ saves: Int, _ place: HubPlace) throws -> [String: Any] {
        let bench = try Bench("latency", place)
        defer { bench.remove() }
        let app = try bench.application()
        let readers = try bench.readers()
        defer { readers.forEach { $0.close() } }
        var latencies: [Double] = []
        var extraRounds = 0
        let cpu = CPUClock.seconds()
        for save in 1...saves {
            try app.insert(latencyBatch)
            let committed = DispatchTime.now().uptimeNanoseconds
            try bench.s1DidChange()
            let expected = save * latencyBatch
            var counts = try bench.otherCounts(readers)
            var rounds = 0
            while counts.contains(where: { $0 != expected }) && rounds < 5 {
                try bench.runRound()
                rounds += 1
                counts = try bench.otherCounts(readers)
            }
            let arrived = DispatchTime.now().uptimeNanoseconds
            try SQLiteBenchmark.expect(counts == [expected, expected],
                                       "latency save \(save): s2, s3 hold \(counts) of \(expected); \(bench.failures)")
            extraRounds += rounds
            latencies.append(Double(arrived - committed) / 1e9)
            try app.resetContext()
        }
        let cpuSeconds = CPUClock.seconds() - cpu
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)] }
        let tenth = max(1, saves / 10)
        let p99 = percentile(0.99)
        return [
            "saves": saves, "objects_per_save": latencyBatch, "p50_ms": percentile(0.50) * 1000, "p99_ms": p99 * 1000,
            "max_ms": sorted.last! * 1000, "mean_ms": latencies.reduce(0, +) / Double(saves) * 1000,
            "first_tenth_p50_ms": HistoryBenchmark.median(Array(latencies.prefix(tenth))) * 1000,
            "last_tenth_p50_ms": HistoryBenchmark.median(Array(latencies.suffix(tenth))) * 1000,
            "extra_rounds": extraRounds, "target_p99_ms": latencyTarget * 1000, "met": p99 < latencyTarget,
            // The whole loop's CPU time, the application's saves included: on a
            // shared machine the wall-clock figures above include waiting for a core.
            "cpu_seconds": cpuSeconds, "cpu_ms_per_save": cpuSeconds / Double(saves) * 1000,
            "description": "\(saves) saves of \(latencyBatch) inserts into s1, storeDidChange(\"s1\") after each; commit to visible in s2 and s3",
        ]
    }

    // MARK: - Table

    private static func yes(_ met: Any?) -> String { (met as? Bool) == true ? "met" : "missed" }

    static func printBulk(_ r: [String: Any]) {
        print(String(format: "bulk: %d objects s1 -> s2, s3 in %.2f s (CPU %.2f s): %.0f objects/s (target >= %.0f: %@), peak RSS %.1f MB",
                     r["objects"] as! Int, r["seconds"] as! Double, r["cpu_seconds"] as! Double, r["objects_per_second"] as! Double, bulkTarget, yes(r["met"]), r["peak_rss_mb"] as! Double))
        printRaw(r)
    }

    static func printRaw(_ r: [String: Any]) {
        guard let raw = r["raw_seconds"] as? Double else { return }
        print(String(format: "  raw SQLite C API, same copy: %.2f s (CPU %.2f s; into the hub %.2f s, into s2 and s3 %.2f s), %.0f objects/s (%.0f at best with s2 and s3 written on two cores at once, estimated); engine %.2fx the raw time",
                     raw, r["raw_cpu_seconds"] as! Double, r["raw_hub_seconds"] as! Double, r["raw_stores_seconds"] as! Double,
                     r["raw_objects_per_second"] as! Double, r["raw_two_cores_bound_objects_per_second"] as! Double, r["engine_over_raw"] as! Double))
    }

    static func printCatchup(_ r: [String: Any]) {
        let n = r["changes"] as! Int
        var line = String(format: "catch-up: %d changes (%d saves) in %.2f s (CPU %.2f s, open %.2f s), %.0f changes/s", n, r["saves"] as! Int,
                          r["seconds"] as! Double, r["cpu_seconds"] as! Double, r["open_seconds"] as! Double, r["changes_per_second"] as! Double)
        if let extrapolated = r["seconds_for_target_count_extrapolated_linearly"] as? Double {
            line += String(format: "; 1,000,000 extrapolated linearly: %.1f s", extrapolated)
        }
        line += String(format: " (target < %.0f s: %@); peak RSS %.1f MB from %.1f MB (target < %.0f MB: %@)", catchupTarget, yes(r["time_met"]),
                       r["peak_rss_mb"] as! Double, r["rss_before_mb"] as! Double, memoryTarget, yes(r["memory_met"]))
        print(line)
        printRaw(r)
    }

    static func printLatency(_ r: [String: Any]) {
        print(String(format: "latency: %d saves of %d: p50 %.2f ms, p99 %.2f ms, max %.2f ms (first tenth p50 %.2f ms, last tenth p50 %.2f ms; CPU %.2f ms per save, application included) (target p99 < %.0f ms: %@)",
                     r["saves"] as! Int, latencyBatch, r["p50_ms"] as! Double, r["p99_ms"] as! Double, r["max_ms"] as! Double,
                     r["first_tenth_p50_ms"] as! Double, r["last_tenth_p50_ms"] as! Double, r["cpu_ms_per_save"] as! Double, latencyTarget * 1000, yes(r["met"])))
    }
}

/// CPU time of the whole process (every thread): on a machine shared with other
/// work, wall time minus this is time spent waiting for a core or the disk.
enum CPUClock {
    static func seconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}

extension Memory {
    /// glibc's `malloc_trim(0)` (looked up at run time: Swift's Glibc module
    /// does not export it): returns freed heap pages to the system, so a peak
    /// measured after it starts from what is really in use.
    static func trimHeap() {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return }
        typealias Trim = @convention(c) (Int) -> Int32
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }

    /// Resident memory now (VmRSS).
    static func currentMB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kb = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) } ?? 0
            return kb / 1024
        }
        return 0
    }
}
