// Over 600 lines, not split yet (issue 31): opening and hub reachability,
// running jobs, and status/metrics all touch the queue-owned state declared
// here. The planned split (`+Open`, `+Jobs`, `+Status`) comes with the one
// daemon-to-engine entry point, which moves much of the job code out.
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Logging
import StoreSync
import StoreSyncConfig
import StoreSyncControl
import StoreSyncPostgreSQL

/// What one round of work did, for the log line, `STATUS=` and the demo.
struct RoundSummary: Sendable {
    var group: String
    /// What asked for the round: `start`, `timer`, `store:<name>`.
    var trigger: String
    var moved: Bool
    var duration: TimeInterval
    var stores: [SyncStoreStatus]
    var error: String?
    /// The job only read the status (after a pause): not a sync round.
    var isStatusOnly = false
    /// When it finished.
    var finished = Date()
    /// Stores that still had application changes after their pull cursor
    /// when a `.store` job ended (only that job's store is checked): the
    /// round may have read before a writer's commit was visible.
    var unpulled: Set<String> = []

    func count(_ state: SyncStoreStatus.State) -> Int { stores.filter { $0.state == state }.count }
    var conflicts: Int { stores.reduce(0) { $0 + $1.conflictsWaiting } }
    var hubPosition: Int64 { stores.first?.hubPosition ?? 0 }
}

/// One sync group and the serial queue all of its blocking work runs on:
/// opening the hub and the stores, rounds, closing. The loop thread only
/// calls `schedule`, `open` and `close`, which never block.
///
/// Rounds asked for while one is already waiting are merged into it (a
/// burst of file events costs one round); a request that arrives while a
/// round *runs* queues one more, since that round may have read the store
/// before the new change committed.
// @unchecked Sendable: `waiting`, `completions`, `stopping`, `publishedHubReport` are under `lock`; the group's state is `queue`'s (dispatchPrecondition checks); the rest is set before `open`, then only read.
final class GroupRunner: @unchecked Sendable {
    enum Job: Hashable {
        /// `runRound()` until idle: every store pulled, then pushed.
        case round(trigger: String)
        /// `storeDidChange(_:)`: pull this store, push to all.
        case store(String)
        /// No sync, only `status()`: after a pause, so the new state is
        /// reported (event, `STATUS=`) without moving anything.
        case status(trigger: String)
        /// `hubDidChange()`: another host committed to the shared hub (a
        /// notification, or the fallback poll): push the hub's changes to
        /// every store. With the hub not open yet, or just back after being
        /// unreachable, a whole round instead (opening it, pulling what the
        /// stores saved meanwhile).
        case hub

        var trigger: String {
            switch self {
            case .round(let trigger), .status(let trigger): return trigger
            case .store(let name): return "store:\(name)"
            case .hub: return "hub"
            }
        }
    }

    /// Where the group's hub stands, for `status`: its kind and server,
    /// whether this daemon reaches it, and (a PostgreSQL hub) every host's
    /// stores it knows.
    struct HubReport: Sendable {
        /// "embedded" or "postgresql".
        var kind: String
        /// The hub file, or `host:port/db` (never user or password).
        var server: String
        /// This host's name in a shared hub; nil for the embedded hub.
        var hostName: String?
        var reachable: Bool
        var error: String?
        /// When the hub became unreachable (nil while reachable).
        var unreachableSince: Date?
        /// A PostgreSQL hub's stores of every host (nil: embedded, or not read).
        var knownStores: [PostgreSQLHub.StoreRecord]?
    }

    /// Why `perform` did not run its body.
    struct NotOpen: Error, CustomStringConvertible {
        var group: String
        var cancelled: Bool
        var description: String {
            cancelled ? "group \(group) is closing (the daemon is stopping or reloading)" : "group \(group) is not open (its hub could not be opened; see the log)"
        }
    }

    let settings: GroupSettings
    let configuration: SyncGroupConfiguration
    private let queue: DispatchQueue
    private var logger: Logger
    /// Called on the group's queue after every job.
    private let onRound: @Sendable (RoundSummary) -> Void
    private let metrics: DaemonMetrics?
    /// `[group.export]`: the records kept after every job (nil: none configured).
    let export: GroupExport?

    // Only touched on `queue`: every private method that reads or writes
    // these checks it (`dispatchPrecondition`).
    private var group: SyncGroup?
    private var previous: RoundSummary?
    /// Failures that repeat every round, logged once, then rate-limited.
    private var repeatedErrors = RepeatedErrors()
    /// At debug level, one line per store transaction.
    private var transactionLog = TransactionLog()
    /// The runner's own view of the stores' histories (debug transaction lines).
    private lazy var historyReader = StoreHistoryReader(settings: settings)
    /// Stores paused through the control socket. The engine keeps pauses in
    /// memory on its members, which a reload (a new `SyncGroup`) or a store
    /// opened late would lose, so they are kept here and applied again.
    private var paused: Set<String>
    /// The highest conflict number seen, to count new conflicts for metrics.
    private var highestConflict: Int64 = 0
    /// Positions when the group opened: what the first job's metrics count from.
    private var openedStatus: [SyncStoreStatus]?
    /// When history was last purged (after a full round, at most every `purgeInterval`).
    private var lastPurge = Date.distantPast
    static let purgeInterval: TimeInterval = 300

    // Touched from the loop thread and the queue.
    private let lock = NSLock()
    private var waiting: Set<Job> = []
    /// Callers waiting for a job to finish (`sync` with `"wait"`), by job.
    private var completions: [Job: [@Sendable (RoundSummary?) -> Void]] = [:]
    private var stopping = false

    var name: String { settings.name }

    /// Rounds one `.round` job runs at most while they keep moving.
    static let roundLimit = 20

    private var isStopping: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopping
    }

    /// This host's name in a shared hub (`host_name`).
    let hostName: String
    /// Called on the group's queue each time a PostgreSQL hub opens, with
    /// its notification channel: the daemon listens on it.
    var onHubSession: (@Sendable (_ channel: String) -> Void)?

    // Only touched on `queue`.
    /// The hub could not be reached: the reason and since when (nil: reachable).
    private var hubFailure: (reason: String, since: Date)?
    /// The hub was unreachable: the next job catches up with a whole round
    /// (stores saved while it was gone have changes only a pull finds).
    private var hubWasDown = false

    init(settings: GroupSettings, configuration: SyncGroupConfiguration, hostName: String = DaemonConfiguration.machineHostName(),
         logger: Logger, paused: Set<String> = [], metrics: DaemonMetrics? = nil, onRound: @escaping @Sendable (RoundSummary) -> Void) {
        self.settings = settings
        self.configuration = configuration
        self.hostName = hostName
        self.paused = paused
        self.metrics = metrics
        self.queue = DispatchQueue(label: "storesyncd.group.\(settings.name)")
        var logger = logger
        logger[metadataKey: "group"] = "\(settings.name)"
        self.logger = logger
        self.onRound = onRound
        export = settings.export.map { [queue] in GroupExport(settings: $0, queue: queue, logger: logger) }
    }

    /// Opens the hub and the stores on the group's queue; `completion` runs
    /// there too, with the error when the hub could not be opened (stores
    /// that cannot be opened only show as failed and are retried).
    ///
    /// A PostgreSQL hub that cannot be reached is no such error: the daemon
    /// starts anyway (the applications go on saving, the stores keep their
    /// history), and the fallback poll, the safety timer and a restored
    /// notification connection try to open it again.
    func open(completion: @escaping @Sendable (Error?) -> Void) {
        queue.async { [self] in
            do {
                try FileManager.default.createDirectory(at: configuration.stateDirectory, withIntermediateDirectories: true)
                try openGroup()
                completion(nil)
            } catch {
                if settings.hub.postgreSQL != nil {
                    hubUnreachable("\(error)", opening: true)
                    completion(nil)
                } else {
                    logger.error("cannot open group", metadata: ["error": "\(error)"])
                    completion(error)
                }
            }
        }
    }

    /// The description of the hub for logs and status.
    var hubServer: String {
        switch settings.hub {
        case .embedded: return configuration.stateDirectory.appendingPathComponent("hub.sqlite").path
        case .postgreSQL(let hub): return hub.serverDescription
        }
    }

    /// Makes the engine's group on the configured hub (on the queue).
    private func makeGroup() throws -> SyncGroup {
        dispatchPrecondition(condition: .onQueue(queue))
        switch settings.hub {
        case .embedded:
            return try SyncGroup(configuration: configuration)
        case .postgreSQL(let settings):
            let hub = try PostgreSQLHub(model: configuration.model, conninfo: try settings.conninfo(), group: name, host: hostName)
            do {
                return try SyncGroup(configuration: configuration, hub: hub)
            } catch {
                try? hub.close()
                throw error
            }
        }
    }

    /// Opens the group (hub and stores) and notes what it found (on the queue).
    private func openGroup() throws {
        dispatchPrecondition(condition: .onQueue(queue))
        let group = try makeGroup()
        self.group = group
        export?.attach(group)
        fileIdentities = Self.fileIdentities(configuration)
        applyPauses(group)
        highestConflict = (try? group.conflicts(includingResolved: true).map(\.id).max()) ?? 0
        let opened = try group.status()
        openedStatus = opened
        let failed = opened.filter { $0.state == .failed }
        for store in failed {
            let reason = store.lastError ?? "unknown"
            logger.warning("store not open", metadata: errorMetadata(reason).merging(["store": "\(store.name)"]) { $1 })
            // The rounds that follow are the same failure: not logged again.
            _ = repeatedErrors.failed("store:\(store.name)", reason: reason)
        }
        logger.info("group open", metadata: ["stores": "\(configuration.stores.count)", "hub": "\(hubServer)"])
        if group.hub is PostgreSQLHub {
            hubReachable()
            if let hub = group.hub as? PostgreSQLHub { onHubSession?(hub.notificationChannel) }
        }
    }

    /// The PostgreSQL hub failed to connect or lost its connection: logged
    /// once per episode (then rate-limited by `RepeatedErrors`), shown in status.
    private func hubUnreachable(_ reason: String, opening: Bool = false) {
        dispatchPrecondition(condition: .onQueue(queue))
        if hubFailure == nil {
            hubFailure = (reason, Date())
            logger.error(opening ? "hub unreachable; the stores are synced once it can be opened" : "hub unreachable; the stores catch up when it returns",
                         metadata: ["hub": "\(hubServer)", "error": "\(reason)"])
        } else {
            hubFailure?.reason = reason
        }
        hubWasDown = true
        publishReachability()
    }

    private func hubReachable() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let failure = hubFailure else { return }
        hubFailure = nil
        publishReachability()
        logger.notice("hub reachable again", metadata: ["hub": "\(hubServer)", "unreachable_s": "\(Int(Date().timeIntervalSince(failure.since).rounded()))"])
    }

    /// A PostgreSQL hub whose connection broke is reconnected before a job,
    /// so a hub still out of reach ends the job at once instead of failing
    /// every store in turn. PostgreSQLHub reopens a broken session by
    /// itself at its next operation (setting the session up as it does at
    /// open): one read makes it. Throws the reason it is still unreachable.
    private func ensureConnected(_ group: SyncGroup) throws {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let hub = group.hub as? PostgreSQLHub, !hub.connection.isConnected else { return }
        do {
            _ = try hub.currentPosition()
            logger.info("hub reconnected", metadata: ["hub": "\(hubServer)"])
            hubReachable()
        } catch {
            hubUnreachable("\(error)")
            throw error
        }
    }

    /// After a job: a PostgreSQL hub whose connection is gone is unreachable.
    private func noteHubState(_ group: SyncGroup, failure: String?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let hub = group.hub as? PostgreSQLHub else { return }
        if hub.connection.isConnected {
            if failure == nil { hubReachable() }
        } else {
            hubUnreachable(failure ?? "the connection to \(hubServer) was lost")
        }
    }

    /// Asks for a job; merged with an identical one not started yet (a
    /// job waiting has not read anything yet, so it covers the new request).
    /// `completion`, if given, runs on the group's queue once the job has
    /// run, with its summary, or with nil when the job was dropped (the
    /// group closed first).
    func schedule(_ job: Job, completion: (@Sendable (RoundSummary?) -> Void)? = nil) {
        lock.lock()
        if stopping {
            lock.unlock()
            if let completion { queue.async { completion(nil) } }
            return
        }
        if let completion { completions[job, default: []].append(completion) }
        guard waiting.insert(job).inserted else {
            lock.unlock()
            return
        }
        lock.unlock()
        queue.async { [self] in run(job) }
    }

    /// Runs `body` on the group's queue with the open group (control
    /// requests: status, conflicts, resolve, pause). `completion` runs on
    /// the queue with the result, or `NotOpen` when there is no group.
    func perform<T>(_ body: @escaping @Sendable (SyncGroup) throws -> T, completion: @escaping @Sendable (Result<T, Error>) -> Void) {
        queue.async { [self] in
            lock.lock()
            let cancelled = stopping
            lock.unlock()
            guard !cancelled, let group else { return completion(.failure(NotOpen(group: name, cancelled: cancelled))) }
            completion(Result { try body(group) })
        }
    }

    /// `status`: the engine's view of the stores and where the hub stands,
    /// on the queue. A PostgreSQL hub not open or not reachable gives the
    /// stores' failure (the hub's reason) and `reachable: false`.
    func statusReport(completion: @escaping @Sendable (Result<[SyncStoreStatus], Error>, HubReport) -> Void) {
        queue.async { [self] in
            lock.lock()
            let cancelled = stopping
            lock.unlock()
            var report = HubReport(kind: settings.hub.postgreSQL == nil ? "embedded" : "postgresql", server: hubServer,
                                   hostName: settings.hub.postgreSQL == nil ? nil : hostName, reachable: true)
            guard !cancelled, let group else {
                if let failure = hubFailure {
                    report.reachable = false
                    report.error = failure.reason
                    report.unreachableSince = failure.since
                }
                    publish(report)
                let error: Error = hubFailure.map { HubUnreachable(group: name, server: hubServer, reason: $0.reason) }
                    ?? NotOpen(group: name, cancelled: cancelled)
                return completion(.failure(error), report)
            }
            var stores: Result<[SyncStoreStatus], Error>
            do {
                try ensureConnected(group)
                stores = Result { try group.status() }
                if let hub = group.hub as? PostgreSQLHub {
                    report.knownStores = try hub.knownStores()
                }
            } catch {
                stores = .failure(error)
            }
            if let hub = group.hub as? PostgreSQLHub {
                if !hub.connection.isConnected, case .failure(let error) = stores { hubUnreachable("\(error)") }
                if let failure = hubFailure, !hub.connection.isConnected {
                    report.reachable = false
                    report.error = failure.reason
                    report.unreachableSince = failure.since
                    stores = .failure(HubUnreachable(group: name, server: hubServer, reason: failure.reason))
                }
            }
            publish(report)
            completion(stores, report)
        }
    }

    /// Where the hub stood at the last job or status (read on the loop when
    /// a group is too busy to answer at once).
    var latestHubReport: HubReport {
        lock.lock()
        defer { lock.unlock() }
        return publishedHubReport ?? HubReport(kind: settings.hub.postgreSQL == nil ? "embedded" : "postgresql", server: hubServer,
                                               hostName: settings.hub.postgreSQL == nil ? nil : hostName, reachable: true)
    }
    private var publishedHubReport: HubReport?

    private func publish(_ report: HubReport) {
        lock.lock()
        publishedHubReport = report
        lock.unlock()
    }

    /// Brings the published report's reachability up to date after a job
    /// (the stores it knew are kept until the next status reads them again).
    private func publishReachability() {
        dispatchPrecondition(condition: .onQueue(queue))
        var report = latestHubReport
        report.reachable = hubFailure == nil
        report.error = hubFailure?.reason
        report.unreachableSince = hubFailure?.since
        publish(report)
    }

    /// A PostgreSQL hub this daemon cannot reach (server down, network cut,
    /// authentication refused): the stores go on, unsynced, and catch up
    /// when it returns.
    struct HubUnreachable: Error, CustomStringConvertible {
        var group: String
        var server: String
        var reason: String
        var description: String { "the hub of group \(group) at \(server) is unreachable: \(reason)" }
    }

    /// `export.rebuild`: rewrites the group's records directory from the
    /// hub, on the queue (between rounds). `completion` runs on the queue.
    func rebuildExport(completion: @escaping @Sendable (Result<SyncRecordExporter.Report, Error>) -> Void) {
        guard let export else {
            return queue.async { [self] in completion(.failure(ControlError(.notConfigured, "group \(name) has no [group.export] table"))) }
        }
        perform({ _ in try export.rebuild() }, completion: completion)
    }

    /// Pauses or resumes stores (`nil`: every store of the group). On the
    /// queue, so it takes effect between jobs, never inside a round.
    /// `completion` gets the store names changed, or the engine's error
    /// (no such store).
    func setPaused(_ pause: Bool, stores: [String]?, completion: @escaping @Sendable (Result<[String], Error>) -> Void) {
        perform({ [self] group -> [String] in
            let names = stores ?? settings.stores.map(\.name)
            for name in names where !settings.stores.contains(where: { $0.name == name }) {
                throw ControlError(.notFound, "group \(self.name) has no store named \(name)")
            }
            for name in names {
                if pause { paused.insert(name) } else { paused.remove(name) }
            }
            applyPauses(group)
            return names
        }, completion: completion)
    }

    /// Makes the engine's members agree with `paused`. A store that is not
    /// open cannot be paused in the engine; it is paused when it opens
    /// (the next job applies this again).
    private func applyPauses(_ group: SyncGroup) {
        dispatchPrecondition(condition: .onQueue(queue))
        for store in settings.stores {
            if paused.contains(store.name) { try? group.pause(store.name) } else { try? group.resume(store.name) }
        }
    }

    /// Finishes the job in flight, drops the ones not started, closes the
    /// stores and the hub; `completion` runs on the group's queue.
    func close(completion: @escaping @Sendable () -> Void) {
        lock.lock()
        stopping = true
        waiting.removeAll()
        let dropped = completions.values.flatMap { $0 }
        completions.removeAll()
        lock.unlock()
        queue.async { [self] in
            for completion in dropped { completion(nil) }
            if let group {
                do { try group.close() } catch { logger.error("closing the group failed", metadata: ["error": "\(error)"]) }
                logger.info("group closed")
            }
            group = nil
            export?.detach()
            historyReader.closeAll()
            completion()
        }
    }

    private func run(_ job: Job) {
        dispatchPrecondition(condition: .onQueue(queue))
        lock.lock()
        let cancelled = stopping
        waiting.remove(job)
        let waiters = completions.removeValue(forKey: job) ?? []
        lock.unlock()
        if !cancelled { reopenIfReplaced() }
        let start = Date()
        if !cancelled, group == nil, settings.hub.postgreSQL != nil {
            // The shared hub was not reachable when the group opened: the
            // safety timer, the fallback poll and a restored notification
            // connection try again; a store's file event only reports it
            // (its back-off keeps a busy store from hammering the server).
            switch job {
            case .round, .hub:
                do { try openGroup() } catch { hubUnreachable("\(error)", opening: true) }
            case .store, .status: break
            }
            if group == nil {
                return finishWithoutHub(job, start: start, waiters: waiters)
            }
        }
        guard !cancelled, let group else {
            for waiter in waiters { waiter(nil) }
            return
        }
        do {
            try ensureConnected(group)
        } catch {
            return finishWithoutHub(job, start: start, waiters: waiters)
        }

        // The file event of the daemon's own push into this store: nothing to
        // pull and nothing new for the others; the job that pushed already
        // reported where every store stands. No round and no report (at 100
        // saves a second these were two of every three jobs). A commit after
        // the push, even one in flight, makes this false (docs/DAEMON.md).
        if case .store(let name) = job, !hubWasDown, let previous,
           previous.stores.first(where: { $0.name == name })?.state != .failed,
           (try? group.endsWithOwnPush(name)) == true {
            logger.trace("event of the daemon's own push", metadata: ["store": "\(name)"])
            // The store's trigger waits for an outcome: done, not failed,
            // nothing left to pull (a follow-up it owes still runs).
            let summary = RoundSummary(group: self.name, trigger: job.trigger, moved: false, duration: Date().timeIntervalSince(start),
                                       stores: previous.stores, error: nil)
            for waiter in waiters { waiter(summary) }
            return
        }
        if case .status = job {} else { logger.debug("round started", metadata: ["trigger": "\(job.trigger)"]) }
        var failure: String?
        // A store that opened since the last job starts unpaused in the engine.
        applyPauses(group)
        // Back from an outage: the stores saved meanwhile and only a pull
        // finds that, so whatever asked, a whole round runs.
        var work = job
        if hubWasDown, job == .hub || { if case .store = job { return true } else { return false } }() {
            work = .round(trigger: job.trigger)
        }
        do {
            switch work {
            case .round:
                // Rounds until one moves nothing, at most `roundLimit`; a stop
                // asked for meanwhile ends it after the round in flight (with
                // writers saving all the time every round moves something,
                // and twenty of them outlasted systemd's stop timeout).
                // A failing store is not retried here: the next event or
                // the safety timer tries it again.
                for _ in 0..<Self.roundLimit {
                    guard try group.runRound(), !isStopping else { break }
                }
            case .store(let name):
                let before = previous?.stores.first { $0.name == name }
                // A store that failed (not open: corrupt, another model; or
                // missing) may be back: a whole round opens it and syncs it.
                if before?.state == .failed {
                    try group.runRound()
                } else {
                    // (An event of the daemon's own push alone ran no job, see
                    // above. Its pushes are read by the next pull, which keeps
                    // that advance in memory: docs/SYNC.md, Pull, item 4.)
                    try group.storeDidChange(name)
                }
            case .hub:
                try group.hubDidChange()
            case .status: break
            }
        } catch {
            failure = "\(error)"
        }
        noteHubState(group, failure: failure)
        if failure == nil, group.hub is PostgreSQLHub, hubFailure == nil, case .round = work { hubWasDown = false }
        // The records follow the hub (whatever the round did: a store that
        // failed leaves the others' changes in it). Before the purge below,
        // so the exporter's cursor is never behind what the purge may delete
        // unless exporting itself fails for longer than the retention (then
        // it rebuilds). Its failure is its own: logged and shown in status,
        // never the round's.
        if case .status = job {} else { export?.run() }
        // History every party has moved past and that is older than the
        // retention goes, now and then, after a full round.
        if case .round = job, failure == nil, Date().timeIntervalSince(lastPurge) >= Self.purgeInterval {
            lastPurge = Date()
            do {
                let purged = try group.purgeHistory()
                if purged > 0 { logger.info("purged history", metadata: ["group": "\(name)", "changes": "\(purged)"]) }
            } catch {
                logger.warning("purging history failed", metadata: ["group": "\(name)", "error": "\(error)"])
            }
        }
        var stores: [SyncStoreStatus] = []
        do { stores = try group.status() } catch {
            failure = failure ?? "status: \(error)"
            noteHubState(group, failure: failure)
            // Without the hub the engine cannot say where a store stands:
            // every store is shown failed with the hub's reason.
            if hubFailure != nil { stores = unreachableStores() }
        }
        var summary = RoundSummary(group: name, trigger: job.trigger, moved: Self.moved(from: previous?.stores, to: stores),
                                   duration: Date().timeIntervalSince(start), stores: stores, error: failure)
        if case .status = job { summary.isStatusOnly = true }
        if case .store(let name) = job, failure == nil,
           let state = stores.first(where: { $0.name == name })?.state, state == .ok || state == .catchingUp {
            // A failed confirmation is left to the next event or the safety timer.
            if (try? group.hasUnpulledChanges(name)) == true { summary.unpulled = [name] }
        }
        var newConflicts = 0
        // Only waiting ones: a conflict is resolved through `perform`, never
        // inside a job, so every conflict this job recorded is still waiting.
        if let newest = try? group.conflicts().map(\.id).max(), newest > highestConflict {
            // Numbers are handed out in order by the hub: those above the
            // highest seen are the ones this job recorded.
            newConflicts = Int(newest - highestConflict)
            highestConflict = newest
        }
        metrics?.recordJob(summary, previous: previous?.stores ?? openedStatus, newConflicts: newConflicts)
        log(summary)
        previous = summary
        onRound(summary)
        for waiter in waiters { waiter(summary) }
    }

    /// The stores as a job reports them while the hub is unreachable: as
    /// last seen, failed with the hub's reason (none before the hub was
    /// ever reached: the engine has not looked at them).
    private func unreachableStores() -> [SyncStoreStatus] {
        dispatchPrecondition(condition: .onQueue(queue))
        let reason = HubUnreachable(group: name, server: hubServer, reason: hubFailure?.reason ?? "unknown").description
        return (previous?.stores ?? []).map { store in
            var store = store
            store.state = .failed
            store.lastError = reason
            return store
        }
    }

    /// Ends a job that could not reach the hub: the round is reported
    /// failed (log line, `STATUS=`, the store triggers' back-off) and its
    /// waiters answered with that.
    private func finishWithoutHub(_ job: Job, start: Date, waiters: [@Sendable (RoundSummary?) -> Void]) {
        dispatchPrecondition(condition: .onQueue(queue))
        let reason = HubUnreachable(group: name, server: hubServer, reason: hubFailure?.reason ?? "not open").description
        var summary = RoundSummary(group: name, trigger: job.trigger, moved: false, duration: Date().timeIntervalSince(start),
                                   stores: unreachableStores(), error: reason)
        if case .status = job { summary.isStatusOnly = true }
        log(summary)
        previous = summary
        onRound(summary)
        for waiter in waiters { waiter(summary) }
    }

    /// Device and inode of each store file when the group opened it.
    private var fileIdentities: [String: FileIdentity] = [:]
    /// The last reopen failed: the group is closed until one succeeds.
    private var reopenFailed = false

    struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    static func fileIdentities(_ configuration: SyncGroupConfiguration) -> [String: FileIdentity] {
        var out: [String: FileIdentity] = [:]
        for store in configuration.stores {
            var info = stat()
            if stat(store.url.path, &info) == 0 { out[store.name] = FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)) }
        }
        return out
    }

    /// A store file replaced by another (a copy renamed over it, a restore)
    /// while the group has it open: the engine's connection would go on
    /// writing the old, unlinked file. The group is closed and opened again
    /// on the files now in place (their own metadata says what they hold).
    private func reopenIfReplaced() {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = Self.fileIdentities(configuration)
        let replaced = now.filter { name, identity in fileIdentities[name].map { $0 != identity } ?? false }.keys.sorted()
        if replaced.isEmpty && !reopenFailed {
            // A file missing at open and there now is opened by the engine itself.
            fileIdentities.merge(now) { old, _ in old }
            return
        }
        if !replaced.isEmpty {
            logger.notice("store file replaced; reopening the group", metadata: ["stores": "\(replaced.joined(separator: ","))"])
        }
        if let group {
            do { try group.close() } catch { logger.warning("closing the group failed", metadata: ["error": "\(error)"]) }
        }
        group = nil
        export?.detach()
        historyReader.closeAll()
        do {
            let reopened = try makeGroup()
            group = reopened
            export?.attach(reopened)
            fileIdentities = Self.fileIdentities(configuration)
            reopenFailed = false
        } catch {
            // Tried again at the next job (file event or safety timer).
            if !reopenFailed { logger.error("cannot reopen the group", metadata: ["error": "\(error)"]) }
            reopenFailed = true
        }
    }

    /// Positions are what a round moves; comparing them tells a round that
    /// did something from one that only looked.
    static func moved(from old: [SyncStoreStatus]?, to new: [SyncStoreStatus]) -> Bool {
        guard let old else { return true }
        let key = { (s: SyncStoreStatus) in "\(s.name):\(s.pulledThrough):\(s.pushedThrough):\(s.hubPosition):\(s.storePosition)" }
        return old.map(key) != new.map(key)
    }

    /// One line per round. A round that moved nothing and changed no state
    /// logs at debug: the safety timer would otherwise put an idle line in
    /// the journal every 30 s per group (Litestream issue #1203 is users
    /// asking for exactly that to stop).
    private func log(_ summary: RoundSummary) {
        dispatchPrecondition(condition: .onQueue(queue))
        let states = summary.stores.map { "\($0.name)=\($0.state.rawValue)" }.joined(separator: ",")
        let changedState = previous.map { old in old.stores.map(\.state) != summary.stores.map(\.state) || old.conflicts != summary.conflicts } ?? true
        let metadata: Logger.Metadata = [
            "trigger": "\(summary.trigger)", "moved": "\(summary.moved)",
            "duration_ms": "\(Int((summary.duration * 1000).rounded()))", "hub_position": "\(summary.hubPosition)",
            "ok": "\(summary.count(.ok))", "catching_up": "\(summary.count(.catchingUp))", "paused": "\(summary.count(.paused))",
            "failed": "\(summary.count(.failed))", "conflicts": "\(summary.conflicts)", "stores": "\(states)",
        ]
        let message: Logger.Message = summary.isStatusOnly ? "state" : "round"
        if let error = summary.error {
            // A round that fails every time (the hub cannot be written, a
            // store named by a file event is not open) is rate-limited.
            switch repeatedErrors.failed("round", reason: error) {
            case .started:
                logger.error("\(message) failed", metadata: metadata.merging(errorMetadata(error)) { $1 })
            case .repeating(let failures, let reasons):
                logger.error("rounds still failing", metadata: metadata.merging(errorMetadata(error)) { $1 }
                    .merging(["failures": "\(failures)", "reasons": "\(reasons)", "interval_s": "\(Int(repeatedErrors.interval))"]) { $1 })
            case .suppressed:
                logger.debug("\(message) failed", metadata: metadata.merging(["error": "\(error)"]) { $1 })
            }
        } else {
            if let ended = repeatedErrors.succeeded("round") {
                logger.notice("rounds failing stopped", metadata: ["failures": "\(ended.failures)", "failing_s": "\(Int(ended.duration.rounded()))"])
            }
            if summary.moved || changedState {
                logger.info(message, metadata: metadata)
            } else {
                logger.debug(message, metadata: metadata)
            }
        }
        // A store that keeps failing is logged when it starts, then at most
        // once a minute with the count and latest reason, and when it recovers.
        for store in summary.stores {
            let key = "store:\(store.name)"
            if let error = store.lastError {
                let fields: Logger.Metadata = ["store": "\(store.name)"]
                switch repeatedErrors.failed(key, reason: error) {
                case .started:
                    logger.warning("store failing", metadata: fields.merging(errorMetadata(error)) { $1 })
                case .repeating(let failures, let reasons):
                    logger.warning("store still failing", metadata: fields.merging(errorMetadata(error)) { $1 }
                        .merging(["failures": "\(failures)", "reasons": "\(reasons)", "interval_s": "\(Int(repeatedErrors.interval))"]) { $1 })
                case .suppressed:
                    break
                }
            } else if let ended = repeatedErrors.succeeded(key) {
                logger.notice("store recovered", metadata: ["store": "\(store.name)", "failures": "\(ended.failures)",
                                                             "failing_s": "\(Int(ended.duration.rounded()))"])
            }
        }
        if logger.logLevel <= .debug {
            transactionLog.log(summary.stores, reader: historyReader, logger: logger)
        }
        for store in summary.stores where store.state == .failed { historyReader.close(store.name) }
    }

    /// `error`, and Core Data's code and name when the reason carries one.
    private func errorMetadata(_ error: String) -> Logger.Metadata {
        var out: Logger.Metadata = ["error": "\(error)"]
        for (key, value) in CoreDataErrorNames.metadata(for: error) { out[key] = "\(value)" }
        return out
    }
}
