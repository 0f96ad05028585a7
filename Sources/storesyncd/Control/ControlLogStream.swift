import Foundation
import StoreSync
import StoreSyncControl

/// The `log` op's stream (docs/CONTROL.md): the change log of the daemon's
/// groups, one `transaction` item per transaction as it is committed, in the
/// CHANGELOG-FORMAT JSON shape.
///
/// The log is a `SyncChangeLog` reading the files read-only, as
/// `storesyncctl log` does; it runs on a queue of its own, never on the loop
/// or a group's queue, so a slow reader holds up neither requests nor
/// rounds. The loop asks it for a batch, sends what it got, and asks again
/// at once while there is more, or after `pollInterval` once caught up
/// (one small query per source; a commit shows within a second).
/// Backpressure: while the client has more than `highWater` bytes unread,
/// no batch is read, so a slow client costs the daemon no memory and is
/// not cut off as a slow consumer.
// @unchecked Sendable: its state is the loop thread's (assertOnLoop checks); its queue touches only `reader` (a LogBox).
final class ControlLogStream: @unchecked Sendable {
    static let pollInterval: TimeInterval = 0.2
    static let batchSize = 128
    /// A batch also ends past this many bytes of entries, so one batch
    /// cannot take a client from under `highWater` past the 4 MiB at which
    /// `sendEvent` cuts a slow consumer off (only a single transaction of
    /// more than about 3 MiB can).
    static let batchBytes = 256 * 1024
    static let highWater = 1024 * 1024

    private let loop: EventLoop
    private weak var connection: ControlConnection?
    private let subscription: ControlSubscription
    private let queue: DispatchQueue
    private let reader: LogBox
    private var timer: LoopTimer?
    private var reading = false
    private var ended = false
    /// Sent a transaction since the last `caught-up` (the first one is always sent).
    private var sentSinceCaughtUp = true

    /// The log, touched only on `queue`.
    final class LogBox: @unchecked Sendable {
        var log: SyncChangeLog?
    }

    /// What one read on the queue gave.
    private struct Batch: Sendable {
        var items: [[String: JSONValue]] = []
        var warnings: [String] = []
        var caughtUp = false
        var cursor = ""
    }

    /// Opens the log on its queue and answers the request there-after on
    /// the loop: `ok` with the sources and the starting cursor, then the
    /// stream; or the error, and no stream.
    static func open(groups: [SyncGroupConfiguration], filter: ChangeLogFilter, after: ChangeLogPosition?,
                     request: ControlRequest, connection: ControlConnection, loop: EventLoop,
                     reply: @escaping (JSONValue) -> Void) {
        let subscription = ControlSubscription(id: request.id, op: request.op.rawValue, topics: [], group: nil)
        let stream = ControlLogStream(loop: loop, connection: connection, subscription: subscription)
        // Added now, so a `cancel` or a closed connection before the log
        // opened still ends it.
        connection.add(subscription)
        subscription.onEnd = { stream.end() }
        let box = stream.reader
        // Used on the loop again once the log is open.
        let reply = LoopBound(reply, loop: loop), connection = LoopBound(connection, loop: loop)
        stream.queue.async {
            let result: Result<(sources: [String], cursor: String), Error> = Result {
                let log = try SyncChangeLog(groups: groups, filter: filter, after: after ?? .start)
                if after == nil { try log.skipToEnd() }
                box.log = log
                return (log.sources.map(\.key), log.position.description)
            }
            loop.post {
                let reply = reply.value, connection = connection.value
                switch result {
                case .success(let opened):
                    reply(ControlReply.ok(request.id, ["sources": .array(opened.sources.map(JSONValue.string)), "cursor": .string(opened.cursor)]))
                    stream.start()
                case .failure(let error):
                    connection.cancelSubscription(id: request.id)
                    if let error = error as? ChangeLogError {
                        reply(ControlReply.error(request.id, ControlError(.badRequest, "\(error)")))
                    } else {
                        reply(ControlReply.error(request.id, ControlError(.failed, "the change log could not be opened: \(error)")))
                    }
                }
            }
        }
    }

    private init(loop: EventLoop, connection: ControlConnection, subscription: ControlSubscription) {
        self.loop = loop
        self.connection = connection
        self.subscription = subscription
        self.queue = DispatchQueue(label: "storesyncd.log.\(connection.serial)")
        self.reader = LogBox()
    }

    private func start() {
        loop.assertOnLoop()
        guard !ended else { return }
        timer = try? LoopTimer(loop)
        pump()
    }

    /// On the loop: reads the next batch unless one is being read, the
    /// stream ended, or the client is behind.
    private func pump() {
        loop.assertOnLoop()
        guard !ended, !reading, let connection, connection.isOpen else { return }
        if connection.queuedBytes > Self.highWater { return later() }
        reading = true
        let box = reader
        queue.async { [weak self, loop] in
            var batch = Batch()
            if let log = box.log {
                do {
                    var bytes = 0
                    var full = false
                    while !full, let entry = try log.next() {
                        let item = try Self.item(entry)
                        batch.items.append(item.fields)
                        bytes += item.bytes
                        full = batch.items.count >= Self.batchSize || bytes >= Self.batchBytes
                    }
                    batch.caughtUp = !full
                } catch {
                    batch.warnings.append("reading the change log failed: \(error); trying again")
                    batch.caughtUp = true
                }
                batch.warnings += log.takeProblems().map(\.description)
                batch.cursor = log.position.description
            }
            loop.post { self?.deliver(batch) }
        }
    }

    private func deliver(_ batch: Batch) {
        loop.assertOnLoop()
        reading = false
        guard !ended, let connection else { return }
        for warning in batch.warnings { connection.sendEvent(subscription, "warning", ["message": .string(warning)]) }
        for item in batch.items { connection.sendEvent(subscription, "transaction", item) }
        if !batch.items.isEmpty { sentSinceCaughtUp = true }
        guard batch.caughtUp else { return pump() }
        if sentSinceCaughtUp {
            connection.sendEvent(subscription, "caught-up", ["cursor": .string(batch.cursor)])
            sentSinceCaughtUp = false
        }
        later()
    }

    private func later() {
        loop.assertOnLoop()
        timer?.start(after: Self.pollInterval) { [weak self] in self?.pump() }
    }

    /// The subscription ended (cancel, the connection closed): stop reading
    /// and close the files on the queue, after any read in flight.
    private func end() {
        loop.assertOnLoop()
        guard !ended else { return }
        ended = true
        timer?.close()
        timer = nil
        let box = reader
        queue.async {
            box.log?.close()
            box.log = nil
        }
    }

    /// One `transaction` item: the entry as `log --json` prints it, and
    /// what a client needs to read its values back exactly (`kinds`).
    static func item(_ entry: ChangeLogEntry) throws -> (fields: [String: JSONValue], bytes: Int) {
        let line = Data(try entry.jsonLine().utf8)
        let kinds = entry.valueKinds.map { JSONValue.object($0.mapValues(JSONValue.string)) }
        return (["entry": try JSONValue.parse(line), "kinds": .array(kinds)], line.count)
    }
}
