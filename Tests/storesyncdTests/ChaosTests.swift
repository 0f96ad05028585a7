#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import SyncWorkload
import XCTest

/// Chaos (issue 16): the real `storesyncd` killed with SIGKILL at random
/// points while three writer processes save into its three stores, and
/// stopped with SIGTERM in the middle of rounds. At checkpoints the writers
/// stop, the daemon is started again, the stores converge, the daemon exits 0
/// on SIGTERM, and the checker compares the stores and the hub with the
/// writers' logs by global identifier: 0 lost, 0 duplicated, 0 extra, 0 stale,
/// 0 echoed, 0 repeated.
///
/// `STORESYNC_CHAOS_KILLS` (default 25), `STORESYNC_CHAOS_SEED` (hex, default
/// below), `STORESYNC_CHAOS_CHECK_EVERY` (kills between checkpoints, default 1: after every restart);
/// `scripts/chaos N [SEED]` runs any number. A seed fixes the policies, the
/// writers' operations and pauses, and when each kill comes (relative to
/// start-up or readiness); the interleaving with the daemon's rounds is the
/// machine's.
final class ChaosTests: XCTestCase {
    static let defaultSeed: UInt64 = 0xC4A0_5EED

    func testDaemonKilledAtRandomPointsWhileWritersSaveLosesNothing() throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["STORESYNC_CHAOS_SEED"].flatMap { UInt64($0.hasPrefix("0x") ? String($0.dropFirst(2)) : $0, radix: 16) } ?? Self.defaultSeed
        let kills = environment["STORESYNC_CHAOS_KILLS"].flatMap(Int.init) ?? 25
        let checkEvery = max(1, environment["STORESYNC_CHAOS_CHECK_EVERY"].flatMap(Int.init) ?? 1)
        let label = "chaos seed 0x\(String(seed, radix: 16)) (rerun: scripts/chaos \(kills) \(String(seed, radix: 16)))"
        print("\(label): \(kills) kills, checkpoint every \(checkEvery)")

        var rng = WorkloadRandom(seed: seed)
        let directory = try Daemon.temporaryDirectory()
        let policies = (0..<3).map { _ in ["store-trump", "object-trump", "overwrite", "rollback", "error"][Int.random(in: 0..<5, using: &rng)] }
        let config = try WorkloadModel.setUp(in: directory, policies: policies, settings: ["log_level": "\"debug\""])
        let model = directory.appendingPathComponent(WorkloadModel.modelFileName)
        let stores = (1...3).map { ("s\($0)", directory.appendingPathComponent("s\($0).sqlite")) }
        let logs = (1...3).map { directory.appendingPathComponent("w\($0).log") }
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: directory) } }
        print("\(label): policies \(policies), directory \(directory.path)")

        // The group bootstraps on empty stores first; writers start after.
        var run = 0
        func startDaemon() throws -> (Daemon.Running, LogTail) {
            run += 1
            let log = directory.appendingPathComponent("daemon-\(run).log")
            return (try Daemon.Running(["--config", config.path], logFile: log), LogTail(log))
        }
        do {
            let (daemon, tail) = try startDaemon()
            XCTAssertTrue(tail.wait(timeout: 60) { $0.contains("trigger=start") && $0.contains("msg=round ") }, "\(label): no start round\n\(daemon.log)")
            daemon.signal(SIGTERM)
            XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
        }

        var writers: [WriterProcess] = []
        func startWriters() throws {
            writers = try (1...3).map { index in
                try WriterProcess(name: "w\(index)", storeName: "s\(index)", store: stores[index - 1].1, model: model, log: logs[index - 1],
                                  seed: rng.next(), arguments: ["--pause", "0-30"])
            }
        }
        func stopWriters() {
            for writer in writers {
                let status = writer.stop()
                XCTAssertEqual(status, 0, "\(label): writer \(writer.name) did not stop cleanly: \(writer.messages)")
            }
            writers = []
        }

        var checkpoints = 0
        func checkpoint() throws {
            stopWriters()
            let (daemon, tail) = try startDaemon()
            XCTAssertTrue(tail.wait(timeout: 60) { $0.contains("msg=ready") }, "\(label): not ready\n\(daemon.log)")
            var last: WorkloadCheck.Report?
            let converged = Daemon.wait(timeout: 120) {
                last = try? WorkloadCheck.run(model: try ManagedObjectModel(contentsOf: model), stores: stores, hubDirectory: nil, logs: logs,
                                              includeHistory: false)
                return last?.isClean == true
            }
            XCTAssertTrue(converged, "\(label): stores did not converge: \(last?.summary ?? "-")\n\(last?.json ?? "")")
            daemon.signal(SIGTERM)
            XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, "\(label): SIGTERM after convergence\n\(daemon.log)")
            let report = try WorkloadCheck.run(model: try ManagedObjectModel(contentsOf: model), stores: stores,
                                               hubDirectory: directory.appendingPathComponent("state/workload"), logs: logs)
            checkpoints += 1
            print("\(label): checkpoint \(checkpoints): \(report.summary)")
            if !report.isClean {
                keep = true
                XCTFail("\(label): checkpoint \(checkpoints): \(report.summary)\n\(report.json)\nkept in \(directory.path)")
            }
        }

        try startWriters()
        var killed = 0, beforeReady = 0, midRound = 0
        var terms = 0, termsMidRound = 0
        while killed < kills {
            let (daemon, tail) = try startDaemon()
            // About one cycle in six stops with SIGTERM during a round instead.
            if Int.random(in: 0..<6, using: &rng) == 0 {
                XCTAssertTrue(tail.wait(timeout: 60) { $0.contains("msg=ready") }, "\(label): not ready\n\(daemon.log)")
                _ = tail.wait(timeout: 10) { _ in tail.roundsInFlight > 0 }
                daemon.signal(SIGTERM)
                let status = daemon.waitForExit(timeout: 30)
                XCTAssertEqual(status, 0, "\(label): SIGTERM during a round: exit \(status.map(String.init) ?? "none (killed after 30 s)")\n\(daemon.log)")
                terms += 1
                if LogTail.stoppedMidRound(daemon.log) { termsMidRound += 1 }
                continue
            }
            if Int.random(in: 0..<5, using: &rng) == 0 {
                // During start-up: opening the hub and stores, the first round.
                usleep(useconds_t(Int.random(in: 0...300, using: &rng) * 1000))
            } else {
                XCTAssertTrue(tail.wait(timeout: 60) { $0.contains("msg=ready") }, "\(label): not ready\n\(daemon.log)")
                usleep(useconds_t(Int.random(in: 0...800, using: &rng) * 1000))
            }
            let inFlight = tail.roundsInFlight
            XCTAssertTrue(daemon.process.isRunning, "\(label): the daemon exited before kill \(killed + 1)\n\(daemon.log)")
            daemon.signal(SIGKILL)
            daemon.process.waitUntilExit()
            XCTAssertEqual(daemon.process.terminationReason, .uncaughtSignal, daemon.log)
            killed += 1
            if !daemon.log.contains("msg=ready") { beforeReady += 1 }
            if inFlight > 0 { midRound += 1 }
            if killed % checkEvery == 0 || killed == kills { try checkpoint(); if killed < kills { try startWriters() } }
        }
        // At least one SIGTERM must have come during a round: try until one does (bounded).
        var extra = 0
        while termsMidRound == 0 && extra < 10 {
            extra += 1
            try startWriters()
            let (daemon, tail) = try startDaemon()
            XCTAssertTrue(tail.wait(timeout: 60) { $0.contains("msg=ready") }, daemon.log)
            _ = tail.wait(timeout: 10) { _ in tail.roundsInFlight > 0 }
            daemon.signal(SIGTERM)
            XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
            terms += 1
            if LogTail.stoppedMidRound(daemon.log) { termsMidRound += 1 }
            try checkpoint()
        }
        print("\(label): \(killed) SIGKILLs (\(beforeReady) before ready, \(midRound) during a round), \(terms) SIGTERMs (\(termsMidRound) during a round), \(checkpoints) checkpoints")
        XCTAssertEqual(killed, kills)
        XCTAssertGreaterThanOrEqual(killed - beforeReady, kills / 2, "\(label): too few kills after start-up")
        XCTAssertGreaterThan(midRound, 0, "\(label): no kill landed during a round")
        XCTAssertGreaterThan(termsMidRound, 0, "\(label): no SIGTERM landed during a round")
        let final = try WorkloadCheck.run(model: try ManagedObjectModel(contentsOf: model), stores: stores, hubDirectory: nil, logs: logs,
                                          includeHistory: false)
        XCTAssertGreaterThan(final.saves, 100, "\(label): the writers saved too little to prove anything: \(final.summary)")
    }
}

/// Reads a daemon's log file as it grows (only the new bytes each time)
/// and counts rounds started and finished.
final class LogTail {
    let url: URL
    private var handle: FileHandle?
    private(set) var text = ""
    private(set) var started = 0
    private(set) var finished = 0
    private var partial = ""

    init(_ url: URL) { self.url = url }

    /// Rounds started and not finished, as far as the log has been read.
    var roundsInFlight: Int {
        refresh()
        return started - finished
    }

    func refresh() {
        if handle == nil { handle = try? FileHandle(forReadingFrom: url) }
        guard let handle, let data = try? handle.readToEnd(), !data.isEmpty else { return }
        let chunk = partial + String(decoding: data, as: UTF8.self)
        var lines = chunk.components(separatedBy: "\n")
        partial = lines.removeLast()
        for line in lines {
            if Self.isRoundStart(line) { started += 1 } else if Self.isRoundEnd(line) { finished += 1 }
            // Keep the start-up lines and a bounded tail for conditions and messages.
            if text.count < 200_000 { text += line + "\n" }
        }
    }

    static func isRoundStart(_ line: String) -> Bool { line.contains("msg=\"round started\"") }
    static func isRoundEnd(_ line: String) -> Bool { line.contains("msg=round ") || line.contains("msg=\"round failed\"") }

    /// Waits (bounded) until `condition` holds for the text read so far.
    func wait(timeout: TimeInterval, _ condition: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            refresh()
            if condition(text) { return true }
            usleep(5_000)
        } while Date() < deadline
        refresh()
        return condition(text)
    }

    /// Whether "stopping" came while a round had started and not finished.
    static func stoppedMidRound(_ log: String) -> Bool {
        var inFlight = 0
        for line in log.split(separator: "\n") {
            let line = String(line)
            if isRoundStart(line) { inFlight += 1 } else if isRoundEnd(line) { inFlight -= 1 }
            if line.contains("msg=stopping") { return inFlight > 0 }
        }
        return false
    }
}
