#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import SyncWorkload
import XCTest

/// Issue 16's end-to-end acceptance with writer processes: the real binary
/// on three stores while three `storesync-writer` processes make inserts,
/// updates, deletes and relationship edits (records moved between folders,
/// folders deleted); every change arrives everywhere and the stores end
/// identical to each other, to the hub and to the writers' logs.
final class WriterProcessesTests: XCTestCase {
    func testChangesFromThreeWriterProcessesArriveEverywhere() throws {
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try WorkloadModel.setUp(in: directory, policies: ["store-trump", "object-trump", "overwrite"])
        let model = directory.appendingPathComponent(WorkloadModel.modelFileName)
        let stores = (1...3).map { ("s\($0)", directory.appendingPathComponent("s\($0).sqlite")) }
        let logs = (1...3).map { directory.appendingPathComponent("w\($0).log") }
        let daemon = try Daemon.Running(["--config", config.path], logFile: directory.appendingPathComponent("daemon.log"))
        XCTAssertTrue(Daemon.wait(timeout: 30) { Daemon.startRoundDone(daemon.log) }, daemon.log)

        let writers = try (1...3).map { index in
            try WriterProcess(name: "w\(index)", storeName: "s\(index)", store: stores[index - 1].1, model: model, log: logs[index - 1],
                              seed: UInt64(index) * 0x9E37, arguments: ["--saves", "60", "--pause", "0-20"])
        }
        for writer in writers { XCTAssertEqual(writer.wait(timeout: 120), 0, writer.messages) }

        var last: WorkloadCheck.Report?
        let converged = Daemon.wait(timeout: 60) {
            last = try? WorkloadCheck.run(model: try ManagedObjectModel(contentsOf: model), stores: stores, hubDirectory: nil, logs: logs,
                                          includeHistory: false)
            return last?.isClean == true
        }
        XCTAssertTrue(converged, "\(last?.json ?? "")\n\(daemon.log)")
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)

        let report = try WorkloadCheck.run(model: try ManagedObjectModel(contentsOf: model), stores: stores,
                                           hubDirectory: directory.appendingPathComponent("state/workload"), logs: logs)
        XCTAssertTrue(report.isClean, report.json)
        XCTAssertEqual(report.saves, 180, report.summary)
        // Every kind of change was made, so every kind arrived.
        let saves = try logs.flatMap { try WriterLogFile.read($0) }
        let ops = saves.flatMap(\.ops)
        XCTAssertTrue(ops.contains { $0.kind == .insert && $0.entity == "Record" && $0.folder != nil }, "no insert into a folder")
        XCTAssertTrue(ops.contains { $0.kind == .update && $0.entity == "Record" }, "no update")
        XCTAssertTrue(ops.contains { $0.kind == .delete && $0.entity == "Record" }, "no record deleted")
        XCTAssertTrue(ops.contains { $0.kind == .delete && $0.entity == "Folder" }, "no folder deleted")
        XCTAssertGreaterThan(report.liveObjects, 50, report.summary)
        print("writer processes: \(report.summary)")
    }
}
