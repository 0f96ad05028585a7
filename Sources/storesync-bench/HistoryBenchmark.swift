import ArgumentParser
import CSQLite
import Foundation
import ObjectGraph

/// `storesync-bench history [--count N] [--runs R] [--pragma name=value] [--no-raw] [--json]`: the
/// cost of persistent history tracking (docs/benchmarks/history.md).
///
/// Runs the write workloads of `storesync-bench sqlite` (the same
/// `GraphSide` and `RawSide` functions) on a store opened without and with
/// `PersistentStore.persistentHistoryTrackingKey`, in one process, with the
/// same N, `--runs` times on fresh files (the order of the two sides
/// alternates from run to run); each figure is the median over the runs.
///
/// Per run and side: insert N objects of 4 attributes + save (timed); reset
/// the context and fetch all objects (untimed, as in `sqlite` the fetch is
/// its own workload and history does not touch reads); update every tenth
/// object + save (timed); delete every tenth object + save (timed).
///
/// On the history side, right after the insert, the history of the store
/// (N recorded changes in one transaction) is fetched through a context
/// with `fetchHistory(after: nil)` (timed, with the peak RSS of that
/// fetch). After the delete the files are checkpointed and measured, and the
/// history of the update and delete saves is fetched (untimed) to check
/// that every change was recorded.
///
/// Unless `--no-raw`, the raw SQLite C API writes the same rows into a file
/// without and a file with the history triggers: the triggers record a raw
/// writer's changes too, so that ratio is the cost of the triggers alone,
/// without ObjectGraph's per-save bookkeeping.
///
/// `--json` prints one object:
///
/// - `benchmark` ("history"), `count`, `runs`, `pragmas` (the `--pragma`
///   arguments, applied to both sides), `target_ratio` (1.5),
///   `all_met` (every save workload within the target).
/// - `workloads`: one object per save workload, in order insert, update,
///   delete: `workload` (short name), `description`, `history_off_s`,
///   `history_on_s` (medians), `ratio` (`history_on_s / history_off_s`),
///   `ratio_min`, `ratio_max` (range of the per-run on/off ratios),
///   `target` (1.5), `met`, `history_off_runs_s`, `history_on_runs_s`
///   (every run); with the raw side also `raw_off_s`, `raw_on_s`,
///   `raw_ratio`.
/// - `history_fetch`: `changes` and `transactions` fetched, `seconds`
///   (median), `changes_per_second`, `runs_s`, `peak_rss_mb` (highest).
/// - `file_size`: after the three workloads, checkpointed (main file + WAL):
///   `history_off_bytes`, `history_on_bytes`, `growth_bytes`,
///   `growth_ratio`, `recorded_changes`, `bytes_per_change`.
struct HistoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Persistent history off vs on: insert, update, delete saves (the sqlite workloads), fetching the history of N changes, file growth."
    )

    static let target = 1.5

    @Option(help: "Objects to insert (updates and deletes take every tenth).")
    var count = 100_000

    @Option(help: "Repetitions on fresh files; figures are medians.")
    var runs = 5

    @Option(name: .customLong("pragma"), help: ArgumentHelp("A connection pragma for every store of both sides, e.g. temp_store=MEMORY (repeatable).", valueName: "name=value"))
    var pragmas: [String] = []

    @Flag(help: "Skip the raw SQLite C API reference.")
    var noRaw = false

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    enum Workload: Int, CaseIterable {
        case insert, update, delete

        var name: String { ["insert", "update", "delete"][rawValue] }

        func description(_ count: Int) -> String {
            ["insert \(count) objects of 4 attributes, save", "update 10%, save", "delete 10%, save"][rawValue]
        }
    }

    /// One run of one side: seconds per workload.
    typealias Times = [Double]

    struct HistoryFetch {
        var seconds: Double
        var changes: Int
        var transactions: Int
        var peakRSS: Double
    }

    func validate() throws {
        guard count >= 10 else { throw ValidationError("--count must be at least 10") }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        for pragma in pragmas where pragma.split(separator: "=").count != 2 {
            throw ValidationError("--pragma takes name=value, not \(pragma)")
        }
    }

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-bench-history-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        var graph: [Bool: [Times]] = [false: [], true: []]
        var raw: [Bool: [Times]] = [false: [], true: []]
        var fetches: [HistoryFetch] = []
        var sizes: [Bool: Int64] = [:]
        var recorded = 0

        for run in 0..<runs {
            // Alternate which side goes first, so neither always runs on a warmer heap.
            for history in run % 2 == 0 ? [false, true] : [true, false] {
                let url = directory.appendingPathComponent("Graph-\(run)-\(history ? "on" : "off").sqlite")
                let (times, fetch, changes) = try graphRun(url: url, history: history)
                graph[history]!.append(times)
                if let fetch { fetches.append(fetch) }
                if history { recorded = changes }
                sizes[history] = try Self.checkpointedSize(url)
                if !noRaw {
                    let rawURL = directory.appendingPathComponent("Raw-\(run)-\(history ? "on" : "off").sqlite")
                    raw[history]!.append(try rawRun(url: rawURL, history: history))
                }
                Self.removeStoreFiles(url)
                Self.removeStoreFiles(directory.appendingPathComponent("Raw-\(run)-\(history ? "on" : "off").sqlite"))
            }
        }
        report(graph: graph, raw: noRaw ? nil : raw, fetches: fetches, sizes: sizes, recorded: recorded)
    }

    // MARK: - One side of one run

    /// The ObjectGraph side: the `sqlite` benchmark's `GraphSide` on a store
    /// opened with or without history. Returns the workload times, the
    /// history fetch (history side only) and the number of recorded changes.
    private var pragmaPairs: [(String, String)] {
        pragmas.map { let parts = $0.split(separator: "=", maxSplits: 1); return (String(parts[0]), String(parts[1])) }
    }

    private func graphRun(url: URL, history: Bool) throws -> (Times, HistoryFetch?, Int) {
        var options: [String: Any] = history ? [PersistentStore.persistentHistoryTrackingKey: true] : [:]
        if !pragmas.isEmpty {
            options[SQLiteStoreOptions.pragmasKey] = Dictionary(pragmaPairs, uniquingKeysWith: { _, b in b }) as [String: Any]
        }
        let side = try GraphSide(model: SQLiteBenchmark.model(), url: url, options: options)
        var times = Times(repeating: 0, count: Workload.allCases.count)
        times[Workload.insert.rawValue] = try Clock.seconds { try side.insert(count) }
        try side.resetContext()

        var fetch: HistoryFetch?
        var afterInsert: PersistentHistoryToken?
        if history {
            var transactions: [PersistentHistoryTransaction] = []
            Memory.resetPeak()
            let seconds = try Clock.seconds { transactions = try side.fetchHistory(after: nil) }
            let peak = Memory.peakMB()
            let changes = transactions.reduce(0) { $0 + $1.changes.count }
            let inserts = transactions.reduce(0) { $0 + $1.changes.filter { $0.changeType == .insert }.count }
            try SQLiteBenchmark.expect(changes == count && inserts == count, "history after the insert: \(changes) changes, \(inserts) inserts, not \(count)")
            afterInsert = transactions.last?.token
            fetch = HistoryFetch(seconds: seconds, changes: changes, transactions: transactions.count, peakRSS: peak)
        }

        // Untimed, as the `sqlite` benchmark's separate fetch workload: the
        // update and delete pick their objects from it.
        let fetched = try side.fetchAll()
        try SQLiteBenchmark.expect(fetched == count, "fetch all: \(fetched) of \(count)")
        times[Workload.update.rawValue] = try Clock.seconds { try side.updateTenthPercent() }
        times[Workload.delete.rawValue] = try Clock.seconds { try side.deleteTenthPercent() }
        try side.resetContext()
        let deleted = (count - 5 + 9) / 10
        let updated = (count + 9) / 10
        try SQLiteBenchmark.expect(try side.remainingItems() == count - deleted, "\(count - deleted) objects should remain")

        var changes = 0
        if history {
            let later = try side.fetchHistory(after: afterInsert)
            let kinds = later.flatMap(\.changes).map(\.changeType)
            let updates = kinds.filter { $0 == .update }.count, deletes = kinds.filter { $0 == .delete }.count
            try SQLiteBenchmark.expect(updates == updated && deletes == deleted,
                                       "history of the update and delete: \(updates) updates, \(deletes) deletes, not \(updated) and \(deleted)")
            changes = count + kinds.count
        }
        return (times, fetch, changes)
    }

    /// The raw C API side on a file laid out by `SQLiteStore`, with the
    /// history tables and triggers when `history`.
    private func rawRun(url: URL, history: Bool) throws -> Times {
        let options: [String: Any] = history ? [PersistentStore.persistentHistoryTrackingKey: true] : [:]
        try SQLiteStore(model: SQLiteBenchmark.model(), configurationName: nil, url: url, options: options).load()
        let side = try RawSide(path: url.path)
        defer { side.close() }
        for (name, value) in pragmaPairs { sqlite3_exec(side.db, "PRAGMA \(name) = \(value)", nil, nil, nil) }
        var times = Times(repeating: 0, count: Workload.allCases.count)
        times[Workload.insert.rawValue] = try Clock.seconds { try side.insert(count) }
        times[Workload.update.rawValue] = try Clock.seconds { try side.updateTenthPercent(count) }
        times[Workload.delete.rawValue] = try Clock.seconds { try side.deleteTenthPercent(count) }
        return times
    }

    // MARK: - Files

    /// Bytes of the store after a full checkpoint (main file plus whatever is left in the WAL).
    static func checkpointedSize(_ url: URL) throws -> Int64 {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(url.path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let handle else {
            throw ValidationError("cannot open \(url.path)")
        }
        sqlite3_exec(handle, "PRAGMA wal_checkpoint(TRUNCATE)", nil, nil, nil)
        sqlite3_close_v2(handle)
        func size(_ path: String) -> Int64 {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
        }
        return size(url.path) + size(url.path + "-wal")
    }

    static func removeStoreFiles(_ url: URL) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }

    // MARK: - Report

    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    private func report(graph: [Bool: [Times]], raw: [Bool: [Times]]?, fetches: [HistoryFetch], sizes: [Bool: Int64], recorded: Int) {
        func column(_ runs: [Times], _ w: Workload) -> [Double] { runs.map { $0[w.rawValue] } }
        var workloads: [[String: Any]] = []
        var allMet = true
        for w in Workload.allCases {
            let off = column(graph[false]!, w), on = column(graph[true]!, w)
            let offMedian = Self.median(off), onMedian = Self.median(on)
            let ratio = offMedian > 0 ? onMedian / offMedian : 0
            let paired = zip(on, off).map { $1 > 0 ? $0 / $1 : 0 }
            let met = ratio <= Self.target
            allMet = allMet && met
            var object: [String: Any] = [
                "workload": w.name, "description": w.description(count),
                "history_off_s": offMedian, "history_on_s": onMedian, "ratio": ratio,
                "ratio_min": paired.min() ?? 0, "ratio_max": paired.max() ?? 0,
                "target": Self.target, "met": met,
                "history_off_runs_s": off, "history_on_runs_s": on,
            ]
            if let raw {
                let rawOff = Self.median(column(raw[false]!, w)), rawOn = Self.median(column(raw[true]!, w))
                object["raw_off_s"] = rawOff
                object["raw_on_s"] = rawOn
                object["raw_ratio"] = rawOff > 0 ? rawOn / rawOff : 0
            }
            workloads.append(object)
        }
        let fetchSeconds = Self.median(fetches.map(\.seconds))
        let fetchChanges = fetches.first?.changes ?? 0
        let fetch: [String: Any] = [
            "changes": fetchChanges, "transactions": fetches.first?.transactions ?? 0,
            "seconds": fetchSeconds, "changes_per_second": fetchSeconds > 0 ? Double(fetchChanges) / fetchSeconds : 0,
            "runs_s": fetches.map(\.seconds), "peak_rss_mb": fetches.map(\.peakRSS).max() ?? 0,
        ]
        let offBytes = sizes[false] ?? 0, onBytes = sizes[true] ?? 0
        let size: [String: Any] = [
            "history_off_bytes": offBytes, "history_on_bytes": onBytes, "growth_bytes": onBytes - offBytes,
            "growth_ratio": offBytes > 0 ? Double(onBytes) / Double(offBytes) : 0,
            "recorded_changes": recorded, "bytes_per_change": recorded > 0 ? Double(onBytes - offBytes) / Double(recorded) : 0,
        ]

        if json {
            let object: [String: Any] = [
                "benchmark": "history", "count": count, "runs": runs, "pragmas": pragmas, "target_ratio": Self.target, "all_met": allMet,
                "workloads": workloads, "history_fetch": fetch, "file_size": size,
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted]) {
                print(String(decoding: data, as: UTF8.self))
            }
            return
        }
        func right(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        print("median of \(runs) run\(runs == 1 ? "" : "s"), N = \(count)" + (pragmas.isEmpty ? "" : ", pragmas \(pragmas.joined(separator: " "))"))
        var header = "workload".padding(toLength: 44, withPad: " ", startingAt: 0)
            + [right("off", 11), right("on", 11), right("on/off", 8), right("(range)", 12), right("target", 7), right("met", 4)].joined(separator: " ")
        if raw != nil { header += " " + [right("raw off", 11), right("raw on", 11), right("on/off", 8)].joined(separator: " ") }
        print(header)
        for object in workloads {
            var line = (object["description"] as! String).padding(toLength: 44, withPad: " ", startingAt: 0)
                + String(format: "%8.1f ms %8.1f ms %7.2fx  %4.2f-%4.2fx %6.1fx ",
                         (object["history_off_s"] as! Double) * 1000, (object["history_on_s"] as! Double) * 1000, object["ratio"] as! Double,
                         object["ratio_min"] as! Double, object["ratio_max"] as! Double, Self.target)
                + right((object["met"] as! Bool) ? "yes" : "no", 4)
            if raw != nil {
                line += String(format: " %8.1f ms %8.1f ms %7.2fx", (object["raw_off_s"] as! Double) * 1000, (object["raw_on_s"] as! Double) * 1000,
                               object["raw_ratio"] as! Double)
            }
            print(line)
        }
        let transactionCount = fetches.first?.transactions ?? 0
        print("fetch history of \(fetchChanges) changes (\(transactionCount) transaction\(transactionCount == 1 ? "" : "s")): "
              + String(format: "%.1f ms, %.0f changes/s, peak RSS %.1f MB", fetchSeconds * 1000, fetch["changes_per_second"] as! Double, fetch["peak_rss_mb"] as! Double))
        print(String(format: "file size after the three saves: off %.2f MB, on %.2f MB (+%.2f MB, %.2fx, %.0f bytes per recorded change, ",
                     Double(offBytes) / 1e6, Double(onBytes) / 1e6, Double(onBytes - offBytes) / 1e6,
                     size["growth_ratio"] as! Double, size["bytes_per_change"] as! Double) + "\(recorded) changes)")
        print("target (history on at most \(Self.target)x of off on every save): \(allMet ? "met" : "missed")")
    }
}

extension GraphSide {
    /// Every transaction after `token` (nil: the whole history), through the context.
    func fetchHistory(after token: PersistentHistoryToken?) throws -> [PersistentHistoryTransaction] {
        try context.performAndWait {
            try context.execute(PersistentHistoryChangeRequest.fetchHistory(after: token)).transactions
        }
    }
}
