#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import CSQLite
import Foundation
import SyncWorkload

/// `storesync-bench daemon [--saves S] [--rate R] [--batch B] [--bulk-count N]
/// [--catchup-count C] [--catchup-batch CB] [--idle-seconds T] [--debounce D]
/// [--only latency,bulk,catchup,idle] [--json]`: the real `storesyncd` process on
/// three stores, writers in other processes (`storesync-writer`), both found
/// beside this binary (docs/benchmarks/daemon.md).
///
/// Each workload starts from a fresh directory (`storesync-writer setup`: three
/// stores of the workload model, policy store-trump, `debounce` as given,
/// `log_level` info, debug for idle) where the daemon has run once and synced
/// the empty stores (untimed). Arrival is watched from this process: inotify on
/// the stores' directory wakes a reader that counts `Record` rows in s2 and s3
/// through read-only SQLite connections.
///
/// - **latency**: a writer saves B (10) new records into s1 R (100) times a second,
///   S saves; for each save, the time from its commit (the writer's
///   `CLOCK_MONOTONIC` after `save()` returned, from its log) to the first moment
///   both s2 and s3 hold it → p50, p99 (target p99 < 20 ms).
/// - **bulk**: a writer inserts N records in one save into s1; its commit to both
///   s2 and s3 holding all N → objects per second.
/// - **catch-up**: the daemon stopped (SIGTERM), a writer inserts C records in
///   saves of CB into s1; the daemon started again, from its start to s2 and s3
///   holding all C. The time for 1,000,000 is extrapolated linearly when C is
///   smaller, and labelled so.
/// - **idle**: once the daemon has finished its start-up round, its CPU time
///   (`utime + stime` of /proc/PID/stat) over T (60) seconds, as a share of one
///   core (target < 0.5%); the safety timer (30 s) runs twice in that time.
///
/// Memory: the daemon's `VmHWM` (/proc/PID/status) at the end of each workload
/// (target < 64 MB for every one). The load average is reported with each
/// workload: the machine may be shared.
struct DaemonBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "The real storesyncd on three stores, writers in other processes: save-to-visible latency, bulk, catch-up, idle CPU, peak memory."
    )

    static let latencyTarget = 20.0          // ms, p99, under
    static let memoryTarget = 64.0           // MB VmHWM, under
    static let idleTarget = 0.5              // % of one core, under
    static let catchupTargetCount = 1_000_000

    @Option(help: "Saves in the latency workload.")
    var saves = 1000

    @Option(help: "Saves per second in the latency workload.")
    var rate = 100.0

    @Option(help: "Records per save in the latency workload.")
    var batch = 10

    @Option(help: "Records of the bulk workload (one save).")
    var bulkCount = 20_000

    @Option(help: "Changes made while the daemon is down (the target is for 1,000,000; fewer are extrapolated linearly).")
    var catchupCount = 100_000

    @Option(help: "Records per save while those changes are made.")
    var catchupBatch = 1_000

    @Option(help: "Seconds of idle CPU measurement.")
    var idleSeconds = 60.0

    @Option(help: "The daemon's debounce, the least time between two rounds of a store (the shipped default is 5ms).")
    var debounce = "5ms"

    @Option(help: "Workloads to run, comma separated: latency, bulk, catchup, idle.")
    var only = "latency,bulk,catchup,idle"

    @Flag(help: "Print one JSON object instead of lines.")
    var json = false

    private var workloads: Set<String> { Set(only.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) }

    func validate() throws {
        guard saves >= 1, rate > 0, batch >= 1, bulkCount >= 1, catchupCount >= 1, catchupBatch >= 1, idleSeconds > 0 else {
            throw ValidationError("counts, rates and durations must be positive")
        }
        let unknown = workloads.subtracting(["latency", "bulk", "catchup", "idle"])
        guard unknown.isEmpty else { throw ValidationError("unknown workload(s) in --only: \(unknown.sorted().joined(separator: ", "))") }
    }

    func run() throws {
        _ = try WorkloadBinaries.locate("storesyncd")
        _ = try WorkloadBinaries.locate("storesync-writer")
        var report: [String: Any] = ["benchmark": "daemon", "stores": 3, "debounce": debounce, "cores": ProcessInfo.processInfo.activeProcessorCount,
                                     "build": Self.isDebugBuild ? "debug" : "release"]
        var peaks: [String: Double] = [:]
        var allMet = true
        func record(_ name: String, _ result: [String: Any]) {
            report[name] = result
            if let met = result["met"] as? Bool { allMet = allMet && met }
            if let peak = result["daemon_vmhwm_mb"] as? Double { peaks[name] = peak }
            if !json { print("\(name): " + Self.line(result)) }
        }
        if workloads.contains("latency") { record("latency", try latency()) }
        if workloads.contains("bulk") { record("bulk", try bulk()) }
        if workloads.contains("catchup") { record("catchup", try catchup()) }
        if workloads.contains("idle") { record("idle", try idle()) }
        let peak = peaks.values.max() ?? 0
        let memoryMet = peak < Self.memoryTarget
        report["peak_memory"] = ["vmhwm_mb": peak, "by_workload": peaks, "target_mb": Self.memoryTarget, "met": memoryMet]
        allMet = allMet && memoryMet
        report["all_met"] = allMet
        if json {
            let data = try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(String(format: "peak memory: %.1f MB (target < %.0f MB: %@); all targets: %@", peak, Self.memoryTarget,
                         memoryMet ? "met" : "missed", allMet ? "met" : "missed"))
        }
    }

    static var isDebugBuild: Bool {
        #if DEBUG
        return true
        #else
        return false
        #endif
    }

    // MARK: - Setup

    /// A directory with three stores and a config; the daemon has synced them once.
    final class Setup {
        let directory: URL
        let config: URL
        let model: URL
        var logs = 0

        init(_ label: String, debounce: String, logLevel: String = "info") throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-bench-daemon-\(label)-\(UUID().uuidString)")
            config = try WorkloadModel.setUp(in: directory, policies: ["store-trump", "store-trump", "store-trump"],
                                             settings: ["debounce": "\"\(debounce)\"", "log_level": "\"\(logLevel)\""])
            model = directory.appendingPathComponent(WorkloadModel.modelFileName)
            let daemon = try start()
            try daemon.waitForStartRound()
            try daemon.stop()
        }

        func store(_ index: Int) -> URL { directory.appendingPathComponent("s\(index).sqlite") }

        func start() throws -> DaemonProcess {
            logs += 1
            return try DaemonProcess(config: config, log: directory.appendingPathComponent("daemon-\(logs).log"))
        }

        /// A writer on s1 to completion; its saves as logged.
        func write(_ arguments: [String], name: String = "w1") throws -> [WriterSave] {
            let log = directory.appendingPathComponent("\(name).log")
            let writer = try WriterProcess(name: name, storeName: "s1", store: store(1), model: model, log: log, seed: 1,
                                           arguments: arguments + ["--no-sync"])
            guard writer.wait(timeout: 3600) == 0 else { throw ValidationError("writer failed: \(writer.messages)") }
            return try WriterLogFile.read(log)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    static func loadAverage() -> [Double] {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).compactMap { Double($0) }
    }

    // MARK: - Workloads

    func latency() throws -> [String: Any] {
        let setup = try Setup("latency", debounce: debounce)
        defer { setup.remove() }
        let load = Self.loadAverage()
        let daemon = try setup.start()
        defer { try? daemon.stop() }
        try daemon.waitForStartRound()
        let watcher = try ArrivalWatcher(directory: setup.directory, stores: [setup.store(2), setup.store(3)])
        let cpuBefore = daemon.cpuSeconds()
        let saves = try setup.write(["--inserts", "\(batch)", "--rate", "\(rate)", "--saves", "\(self.saves)"])
        guard watcher.waitUntil(count: saves.count * batch, timeout: 120) else {
            throw ValidationError("latency: s2/s3 hold \(watcher.counts) of \(saves.count * batch) records\n\(daemon.logTail)")
        }
        let cpu = daemon.cpuSeconds() - cpuBefore
        let peak = daemon.vmHWM()
        var latencies: [Double] = []
        for save in saves {
            guard let seen = watcher.firstTime(atLeast: save.save * batch) else { continue }
            latencies.append(Double(Int64(seen) - Int64(save.committedNanoseconds)) / 1e6)
        }
        watcher.close()
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))] }
        let p99 = percentile(0.99)
        let elapsed = Double(saves.last!.committedNanoseconds - saves.first!.committedNanoseconds) / 1e9
        let tenth = max(1, latencies.count / 10)
        return [
            "saves": saves.count, "objects_per_save": batch, "rate_asked": rate, "rate_achieved": Double(saves.count - 1) / max(elapsed, 1e-9),
            "p50_ms": percentile(0.5), "p90_ms": percentile(0.9), "p99_ms": p99, "max_ms": sorted.last!, "mean_ms": latencies.reduce(0, +) / Double(latencies.count),
            "first_tenth_p50_ms": Self.median(Array(latencies.prefix(tenth))), "last_tenth_p50_ms": Self.median(Array(latencies.suffix(tenth))),
            "target_p99_ms": Self.latencyTarget, "met": p99 < Self.latencyTarget,
            "daemon_cpu_seconds": cpu, "daemon_vmhwm_mb": peak, "rounds": daemon.rounds(), "load_average_before": load, "load_average_after": Self.loadAverage(),
            "description": "a writer process saves \(batch) records into s1 \(rate) times a second (\(saves.count) saves); commit (writer's clock) to both s2 and s3 holding them",
        ]
    }

    func bulk() throws -> [String: Any] {
        let setup = try Setup("bulk", debounce: debounce)
        defer { setup.remove() }
        let load = Self.loadAverage()
        let daemon = try setup.start()
        defer { try? daemon.stop() }
        try daemon.waitForStartRound()
        let watcher = try ArrivalWatcher(directory: setup.directory, stores: [setup.store(2), setup.store(3)])
        let saves = try setup.write(["--inserts", "\(bulkCount)", "--saves", "1"])
        guard watcher.waitUntil(count: bulkCount, timeout: 3600), let seen = watcher.firstTime(atLeast: bulkCount) else {
            throw ValidationError("bulk: s2/s3 hold \(watcher.counts) of \(bulkCount)\n\(daemon.logTail)")
        }
        watcher.close()
        let seconds = Double(Int64(seen) - Int64(saves[0].committedNanoseconds)) / 1e9
        return [
            "objects": bulkCount, "seconds": seconds, "objects_per_second": Double(bulkCount) / seconds, "daemon_vmhwm_mb": daemon.vmHWM(),
            "daemon_cpu_seconds": daemon.cpuSeconds(), "load_average_before": load, "load_average_after": Self.loadAverage(),
            "description": "a writer process inserts \(bulkCount) records into s1 in one save; its commit to both s2 and s3 holding them",
        ]
    }

    func catchup() throws -> [String: Any] {
        let setup = try Setup("catchup", debounce: debounce)
        defer { setup.remove() }
        // The daemon is down (Setup stopped it after its first round).
        let writeStart = monotonicNanoseconds()
        let saves = try setup.write(["--inserts", "\(catchupBatch)", "--saves", "\((catchupCount + catchupBatch - 1) / catchupBatch)"])
        let written = saves.count * catchupBatch
        let writeSeconds = Double(monotonicNanoseconds() - writeStart) / 1e9
        let load = Self.loadAverage()
        let watcher = try ArrivalWatcher(directory: setup.directory, stores: [setup.store(2), setup.store(3)])
        let start = monotonicNanoseconds()
        let daemon = try setup.start()
        defer { try? daemon.stop() }
        var peakSeen = 0.0
        let done = watcher.waitUntil(count: written, timeout: 3600) { peakSeen = max(peakSeen, daemon.vmHWM()) }
        guard done, let seen = watcher.firstTime(atLeast: written) else {
            throw ValidationError("catch-up: s2/s3 hold \(watcher.counts) of \(written)\n\(daemon.logTail)")
        }
        watcher.close()
        let seconds = Double(seen - start) / 1e9
        let peak = max(peakSeen, daemon.vmHWM())
        let measuredFull = written >= Self.catchupTargetCount
        var out: [String: Any] = [
            "changes": written, "saves": saves.count, "objects_per_save": catchupBatch, "write_seconds_untimed": writeSeconds,
            "seconds": seconds, "changes_per_second": Double(written) / seconds, "daemon_cpu_seconds": daemon.cpuSeconds(),
            "daemon_vmhwm_mb": peak, "load_average_before": load, "load_average_after": Self.loadAverage(),
            "description": "\(written) inserts in \(saves.count) saves into s1 while the daemon is down; from its start to s2 and s3 holding them",
        ]
        if measuredFull {
            out["seconds_for_1000000"] = seconds
        } else {
            out["seconds_for_1000000_extrapolated_linearly"] = seconds * Double(Self.catchupTargetCount) / Double(written)
            out["daemon_vmhwm_note"] = "measured for \(written) changes, not extrapolated"
        }
        return out
    }

    func idle() throws -> [String: Any] {
        let setup = try Setup("idle", debounce: debounce, logLevel: "debug")
        defer { setup.remove() }
        // Some data, so rounds have something to look at.
        _ = try setup.write(["--inserts", "100", "--saves", "10"])
        let daemon = try setup.start()
        defer { try? daemon.stop() }
        try daemon.waitForStartRound()
        // Settle: the start round's pushes cause file events and one more round each.
        Thread.sleep(forTimeInterval: 2)
        let load = Self.loadAverage()
        let roundsBefore = daemon.rounds()
        let ticksBefore = daemon.cpuSeconds()
        let wallStart = monotonicNanoseconds()
        Thread.sleep(forTimeInterval: idleSeconds)
        let cpu = daemon.cpuSeconds() - ticksBefore
        let wall = Double(monotonicNanoseconds() - wallStart) / 1e9
        let share = cpu / wall * 100
        return [
            "seconds": wall, "cpu_seconds": cpu, "cpu_percent_of_one_core": share, "target_percent": Self.idleTarget, "met": share < Self.idleTarget,
            "rounds": daemon.rounds() - roundsBefore, "clock_ticks_per_second": Int(sysconf(Int32(_SC_CLK_TCK))),
            "daemon_vmhwm_mb": daemon.vmHWM(), "load_average_before": load, "load_average_after": Self.loadAverage(),
            "description": "the daemon on three synced stores of 1,000 records each, nothing written; utime+stime over \(Int(idleSeconds)) s",
        ]
    }

    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    static func line(_ result: [String: Any]) -> String {
        result.keys.sorted().filter { $0 != "description" }.map { key in
            switch result[key] {
            case let value as Double: return "\(key)=\(String(format: "%.3f", value))"
            default: return "\(key)=\(result[key].map { "\($0)" } ?? "")"
            }
        }.joined(separator: " ")
    }
}

/// The storesyncd binary beside this one, its log, and what /proc says about it.
final class DaemonProcess {
    let process = Process()
    let log: URL

    init(config: URL, log: URL) throws {
        self.log = log
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = try WorkloadBinaries.locate("storesyncd")
        process.arguments = ["--config", config.path]
        var environment = ProcessInfo.processInfo.environment
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"] { environment[key] = nil }
        process.environment = environment
        let handle = try FileHandle(forWritingTo: log)
        process.standardError = handle
        process.standardOutput = handle
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var text: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
    var logTail: String { String(text.suffix(3000)) }

    func waitForStartRound(timeout: TimeInterval = 600) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if text.split(separator: "\n").contains(where: { $0.contains("msg=round ") && $0.contains("trigger=start") }) { return }
            guard process.isRunning else { throw ValidationError("storesyncd exited: \(logTail)") }
            usleep(20_000)
        }
        throw ValidationError("storesyncd: no start-up round in \(Int(timeout)) s: \(logTail)")
    }

    /// Round summary lines logged so far (at info those that moved; at debug all).
    func rounds() -> Int { text.split(separator: "\n").filter { $0.contains("msg=round ") }.count }

    /// utime + stime from /proc/PID/stat, in seconds.
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        // Fields after the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return 0 }
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmHWM (peak resident set) from /proc/PID/status, in MB.
    func vmHWM() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return (line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) } ?? 0) / 1024
        }
        return 0
    }

    func stop() throws {
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(120)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            throw ValidationError("storesyncd did not stop within 120 s of SIGTERM")
        }
        guard process.terminationStatus == 0 else { throw ValidationError("storesyncd exited \(process.terminationStatus): \(logTail)") }
    }
}

/// Watches when records arrive in stores: inotify on their directory wakes
/// a thread that counts `Record` rows in each through a read-only
/// connection, and notes the first time the smallest count reached each value.
final class ArrivalWatcher: @unchecked Sendable {
    private let inotify: Int32
    private var connections: [OpaquePointer] = []
    private let lock = NSLock()
    /// (time, smallest count over the stores), in order.
    private var observations: [(UInt64, Int)] = []
    private var running = true
    private var thread: Thread?

    init(directory: URL, stores: [URL]) throws {
        inotify = inotify_init1(Int32(IN_CLOEXEC))
        guard inotify >= 0 else { throw ValidationError("inotify_init1 failed: \(errno)") }
        let mask = UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO)
        guard inotify_add_watch(inotify, directory.path, mask) >= 0 else { throw ValidationError("inotify_add_watch \(directory.path) failed") }
        for store in stores {
            var db: OpaquePointer?
            guard sqlite3_open_v2(store.path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let db else {
                throw ValidationError("cannot open \(store.path) read-only")
            }
            sqlite3_busy_timeout(db, 1000)
            connections.append(db)
        }
        observe()
        let thread = Thread { [self] in loop() }
        self.thread = thread
        thread.start()
    }

    private func count(_ db: OpaquePointer) -> Int {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM ZRECORD", -1, &stmt, nil) == SQLITE_OK, let stmt else { return 0 }
        defer { sqlite3_finalize(stmt) }
        return sqlite3_step(stmt) == SQLITE_ROW ? Int(sqlite3_column_int64(stmt, 0)) : 0
    }

    private func observe() {
        let smallest = connections.map(count).min() ?? 0
        let now = monotonicNanoseconds()
        lock.lock()
        if observations.last?.1 != smallest { observations.append((now, smallest)) }
        lock.unlock()
    }

    private func loop() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            lock.lock()
            let go = running
            lock.unlock()
            guard go else { return }
            var descriptor = pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)
            // The timeout only lets `close()` end the thread; arrivals come through events.
            if poll(&descriptor, 1, 100) > 0 { _ = read(inotify, &buffer, buffer.count) }
            observe()
        }
    }

    var counts: Int {
        lock.lock()
        defer { lock.unlock() }
        return observations.last?.1 ?? 0
    }

    /// The first time every store held at least `count` records.
    func firstTime(atLeast count: Int) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        return observations.first { $0.1 >= count }?.0
    }

    /// Waits (bounded) until every store holds `count`; `tick` runs every 50 ms meanwhile.
    func waitUntil(count: Int, timeout: TimeInterval, tick: () -> Void = {}) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if firstTime(atLeast: count) != nil { return true }
            tick()
            usleep(50_000)
        }
        return firstTime(atLeast: count) != nil
    }

    func close() {
        lock.lock()
        running = false
        lock.unlock()
        while thread?.isFinished == false { usleep(10_000) }
        for db in connections { sqlite3_close_v2(db) }
        connections = []
        Glibc.close(inotify)
    }
}
