import Foundation
import Logging
import ObjectGraph
import StoreSync
import StoreSyncConfig
import StoreSyncControl

/// A group's external records (`[group.export]`): the engine's
/// `SyncRecordExporter` run on the group's queue after every job that may
/// have moved the hub, with the state `status` shows. An export that fails
/// (the directory cannot be written, the disk is full) never fails the
/// round: it is logged (rate-limited like other repeated errors), shown in
/// status, and the next job (a file event, or the safety timer) goes on from
/// the cursor, so the records catch up once the directory can be written.
// @unchecked Sendable: `current` is under `lock`; `exporter` and `repeatedErrors` are the group queue's (dispatchPrecondition checks); the rest is immutable.
final class GroupExport: @unchecked Sendable {
    /// What `status` shows; a copy read under the lock from the loop thread.
    struct Status {
        var directory: String
        var format: String
        /// `pending` (no export yet), `ok`, `failing`.
        var state = "pending"
        /// The hub position the records reflect (nil until the first export).
        var position: Int64?
        var lastExport: Date?
        var lastError: String?
        var failingSince: Date?
        var failures = 0
        var recordsWritten = 0
        var recordsRemoved = 0
        var rebuilds = 0
        var lastRebuild: Date?
        var lastRebuildReason: String?
    }

    let settings: ExportSettings
    let configuration: ExternalRecordsConfiguration
    private var logger: Logger
    private let lock = NSLock()
    private var current: Status

    /// The group's queue, the only one `exporter` is used on (checked).
    private let queue: DispatchQueue
    // Only touched on the group's queue.
    private var exporter: SyncRecordExporter?
    private var repeatedErrors = RepeatedErrors()

    init(settings: ExportSettings, queue: DispatchQueue, logger: Logger) {
        self.settings = settings
        self.queue = queue
        configuration = ExternalRecordsConfiguration(directory: settings.directory,
                                                     format: ExternalRecordFormat(rawValue: settings.format) ?? .json,
                                                     fileExtension: settings.fileExtension,
                                                     exportsAllAttributesWhenNoneFlagged: settings.exportsAllAttributesWhenNoneFlagged,
                                                     writesPlainText: settings.writesPlainText, writesChangeFeed: settings.writesChangeFeed)
        var logger = logger
        logger[metadataKey: "export_directory"] = "\(settings.directory.path)"
        self.logger = logger
        current = Status(directory: settings.directory.path, format: settings.format)
    }

    var status: Status {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    private func update(_ body: (inout Status) -> Void) {
        lock.lock()
        body(&current)
        lock.unlock()
    }

    /// The group was opened (or reopened on new files): a new exporter on its hub.
    func attach(_ group: SyncGroup) {
        dispatchPrecondition(condition: .onQueue(queue))
        do {
            exporter = try SyncRecordExporter(group: group, configuration: configuration)
            if let position = exporter?.exportedPosition() { update { $0.position = position } }
        } catch {
            exporter = nil
            failed("\(error)")
        }
    }

    func detach() {
        dispatchPrecondition(condition: .onQueue(queue))
        exporter = nil
    }

    /// After a job: the hub's changes since the cursor. Never throws.
    func run() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let exporter else { return }
        do {
            let report = try exporter.exportChanges()
            succeeded(report)
        } catch {
            failed("\(error)")
        }
    }

    /// `export.rebuild`: the whole directory from the hub; the error is
    /// also the group's export state (and answered to the caller).
    func rebuild() throws -> SyncRecordExporter.Report {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let exporter else {
            throw ControlError(.failed, "the group's records exporter is not open (see the log)")
        }
        do {
            let report = try exporter.rebuild(reason: "asked for through the control socket")
            succeeded(report)
            return report
        } catch {
            failed("\(error)")
            throw error
        }
    }

    private func succeeded(_ report: SyncRecordExporter.Report) {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = Date()
        update {
            $0.state = "ok"
            $0.position = report.position
            $0.lastExport = now
            $0.failingSince = nil
            $0.recordsWritten += report.written
            $0.recordsRemoved += report.removed
            if report.rebuilt {
                $0.rebuilds += 1
                $0.lastRebuild = now
                $0.lastRebuildReason = report.rebuildReason
            }
        }
        if let ended = repeatedErrors.succeeded("export") {
            logger.notice("export recovered", metadata: ["failures": "\(ended.failures)", "failing_s": "\(Int(ended.duration.rounded()))",
                                                         "written": "\(report.written)", "removed": "\(report.removed)", "position": "\(report.position)"])
        }
        let metadata: Logger.Metadata = ["written": "\(report.written)", "removed": "\(report.removed)", "position": "\(report.position)",
                                         "transactions": "\(report.transactions)"]
        if report.rebuilt {
            logger.info("records rebuilt", metadata: metadata.merging(["reason": "\(report.rebuildReason ?? "")"]) { $1 })
        } else if report.written > 0 || report.removed > 0 {
            logger.debug("records exported", metadata: metadata)
        }
    }

    private func failed(_ reason: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = Date()
        update {
            if $0.state != "failing" { $0.failingSince = now }
            $0.state = "failing"
            $0.lastError = reason
            $0.failures += 1
        }
        var metadata: Logger.Metadata = ["error": "\(reason)"]
        for (key, value) in CoreDataErrorNames.metadata(for: reason) { metadata[key] = "\(value)" }
        switch repeatedErrors.failed("export", reason: reason) {
        case .started:
            logger.error("export failed; the records will be caught up once the directory can be written", metadata: metadata)
        case .repeating(let failures, let reasons):
            logger.error("export still failing", metadata: metadata.merging(["failures": "\(failures)", "reasons": "\(reasons)",
                                                                              "interval_s": "\(Int(repeatedErrors.interval))"]) { $1 })
        case .suppressed:
            break
        }
    }

    /// `status`'s `export` object (docs/CONTROL.md).
    static func json(_ status: Status) -> JSONValue {
        [
            "directory": .string(status.directory),
            "format": .string(status.format),
            "state": .string(status.state),
            "position": status.position.map(JSONValue.int) ?? .null,
            "last_export": status.lastExport.map(JSONValue.init) ?? .null,
            "last_error": JSONValue(status.lastError),
            "failing_since": status.failingSince.map(JSONValue.init) ?? .null,
            "failures": JSONValue(status.failures),
            "records_written": JSONValue(status.recordsWritten),
            "records_removed": JSONValue(status.recordsRemoved),
            "rebuilds": JSONValue(status.rebuilds),
            "last_rebuild": status.lastRebuild.map(JSONValue.init) ?? .null,
            "last_rebuild_reason": JSONValue(status.lastRebuildReason),
        ]
    }
}
