#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Logging
import StoreSync
import StoreSyncConfig
import StoreSyncControl
import Synchronization

/// The running daemon: owns the libuv loop and everything on it (directory
/// watches, timers, signals, systemd notifications) and one `GroupRunner`
/// per group for the blocking work. All of its state is touched on the loop
/// thread only; runners hand results back through `loop.post`.
// @unchecked Sendable: all of its state is the loop thread's; its entry points check it (loop.assertOnLoop).
final class Daemon: @unchecked Sendable {
    enum State { case starting, running, reloading, stopping }

    let loop: EventLoop
    private(set) var configuration: DaemonConfiguration
    private let overrides: ConfigurationOverrides
    private let notifier: SystemdNotifier?
    private var logger = Logger(label: "storesyncd")

    /// How a reload asked for through the control socket ended.
    enum ReloadOutcome {
        /// The new configuration runs; `failedGroups` could not be opened.
        case reloaded(groups: Int, failedGroups: [String])
        /// The new configuration was refused (the reason); the old one runs on.
        case refused(String)
        /// The daemon stopped before the reload finished.
        case cancelled
    }

    private(set) var state = State.starting
    private(set) var runners: [GroupRunner] = []
    /// When the process started, for `status` (uptime).
    let startTime = Date()
    let metrics = DaemonMetrics()
    private(set) var control: ControlServer?
    /// Stores paused through the control socket, by group; new runners
    /// (after a reload) start with them, since the engine keeps pauses in memory.
    var pausedStores: [String: Set<String>] = [:]
    /// Waiting for the reload in progress, and for the one asked for while
    /// it ran (which re-reads the file, so its waiters learn about the newest file).
    private var reloadWaiters: [(ReloadOutcome) -> Void] = []
    private var nextReloadWaiters: [(ReloadOutcome) -> Void] = []
    private var watches: [DirectoryWatch] = []
    /// By "group/store".
    private var triggers: [String: StoreTrigger] = [:]
    private var triggerTimers: [LoopTimer] = []
    private var rescanTimer: LoopTimer?
    /// By group: the fallback poll of a PostgreSQL hub (`hub_poll_interval`).
    private var hubPollTimers: [String: LoopTimer] = [:]
    /// By group: LISTEN on a PostgreSQL hub's channel, once the hub has opened.
    private(set) var hubListeners: [String: HubListener] = [:]
    private var watchdogTimer: LoopTimer?
    private var signals: [SignalWatch] = []
    /// The last job's summary per group (status falls back on it when a
    /// group's queue is busy).
    private(set) var latest: [String: RoundSummary] = [:]
    private var reloadAgain = false
    private(set) var exitCode: Int32 = 0

    /// Called on the loop thread once every group is open (after READY=1).
    var onReady: (() -> Void)?
    /// Called on the loop thread after every round of any group.
    var onRound: ((RoundSummary) -> Void)?

    init(configuration: DaemonConfiguration, overrides: ConfigurationOverrides) throws {
        self.configuration = configuration
        self.overrides = overrides
        loop = try EventLoop()
        notifier = SystemdNotifier()
    }

    /// Runs until SIGTERM/SIGINT (or `stop()`); returns the exit status.
    func run() throws -> Int32 {
        // A write to a closed pipe must be an error, not a silent death.
        signal(SIGPIPE, SIG_IGN)
        for (signalNumber, action) in [(SIGTERM, stop), (SIGINT, stop), (SIGHUP, { [unowned self] in reload() })] as [(Int32, () -> Void)] {
            signals.append(try SignalWatch(loop, signal: signalNumber) { action() })
        }
        if let interval = SystemdNotifier.watchdogInterval(), let notifier {
            // Half the deadline, as sd_watchdog_enabled(3) recommends; from
            // the loop itself, so a wedged loop stops pinging and systemd
            // restarts it.
            let timer = try LoopTimer(loop)
            timer.start(after: interval / 2, repeating: interval / 2) { notifier.send(["WATCHDOG=1"]) }
            watchdogTimer = timer
            logger.debug("watchdog enabled", metadata: ["interval_s": "\(interval)"])
        }
        logger.info("starting", metadata: ["config": "\(configuration.file)", "groups": "\(configuration.groups.count)",
                                           "state_directory": "\(configuration.stateDirectory.path)", "pid": "\(getpid())"])
        try prepareDirectories(configuration)
        // Before the groups open: a second daemon must stop here, before it
        // touches any store the first one is syncing.
        control = try ControlServer(loop: loop, path: configuration.controlSocket.path,
                                    service: ControlService(daemon: self), metrics: metrics, logger: logger)
        startGroups { [self] failures in
            guard state == .starting else { return }
            if !failures.isEmpty {
                logger.critical("cannot start", metadata: ["groups": "\(failures.joined(separator: ","))"])
                exitCode = 1
                notify(["STATUS=cannot open group \(failures.joined(separator: ", "))", "ERRNO=5"])
                stop()
                return
            }
            state = .running
            notify(["READY=1", "STATUS=\(statusLine())"])
            logger.info("ready", metadata: ["groups": "\(runners.count)", "stores": "\(runners.reduce(0) { $0 + $1.settings.stores.count })"])
            onReady?()
            // A SIGHUP or reload request that came while starting.
            reloadIfAsked()
        }
        loop.run()
        return exitCode
    }

    private func prepareDirectories(_ configuration: DaemonConfiguration) throws {
        for directory in [configuration.stateDirectory, configuration.runtimeDirectory] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
    }

    // MARK: - Groups

    /// Opens a runner per group (each on its own queue), then watches their
    /// stores and starts the safety timer. `completion` runs on the loop
    /// with the names of groups whose hub could not be opened.
    private func startGroups(_ completion: @escaping ([String]) -> Void) {
        loop.assertOnLoop()
        let completion = LoopBound(completion, loop: loop)
        let dispatchGroup = DispatchGroup()
        let failures = Mutex<[String]>([])
        runners = configuration.groups.map { settings in
            let runner = GroupRunner(settings: settings,
                                     configuration: settings.syncConfiguration(stateDirectory: configuration.stateDirectory,
                                                                               historyRetention: configuration.historyRetention),
                                     hostName: configuration.hostName,
                                     logger: logger, paused: pausedStores[settings.name] ?? [], metrics: metrics) { [loop] summary in
                loop.post { [weak self] in self?.roundFinished(summary) }
            }
            if settings.hub.postgreSQL != nil {
                runner.onHubSession = { [loop, weak runner] channel in
                    loop.post { [weak self] in
                        guard let self, let runner, self.runners.contains(where: { $0 === runner }) else { return }
                        self.listen(runner, channel: channel)
                    }
                }
            }
            return runner
        }
        for runner in runners {
            dispatchGroup.enter()
            runner.open { error in
                if error != nil { failures.withLock { $0.append(runner.name) } }
                dispatchGroup.leave()
            }
        }
        dispatchGroup.notify(queue: .global()) { [loop] in
            let failures = failures.withLock { $0 }
            loop.post { [self] in
                guard state != .stopping else { return completion.value(failures) }
                if failures.isEmpty {
                    do { try watchStores() } catch {
                        logger.error("cannot watch the stores; the safety timer still runs rounds", metadata: ["error": "\(error)"])
                    }
                    startRescanTimer()
                    startHubPolls()
                    // Changes made while the daemon was down, or before a
                    // reload, are picked up now, not at the first timer tick.
                    for runner in runners { runner.schedule(.round(trigger: "start")) }
                }
                completion.value(failures)
            }
        }
    }

    /// Closes every runner (each finishes its round in flight first), then
    /// calls `completion` on the loop.
    private func stopGroups(_ completion: @escaping () -> Void) {
        loop.assertOnLoop()
        let completion = LoopBound(completion, loop: loop)
        for watch in watches { watch.close() }
        watches.removeAll()
        for trigger in triggers.values { trigger.close() }
        triggers.removeAll()
        for timer in triggerTimers { timer.close() }
        triggerTimers.removeAll()
        rescanTimer?.close()
        rescanTimer = nil
        for timer in hubPollTimers.values { timer.close() }
        hubPollTimers.removeAll()
        for listener in hubListeners.values { listener.close() }
        hubListeners.removeAll()
        let dispatchGroup = DispatchGroup()
        for runner in runners {
            dispatchGroup.enter()
            runner.close { dispatchGroup.leave() }
        }
        runners.removeAll()
        latest.removeAll()
        dispatchGroup.notify(queue: .global()) { [loop] in loop.post { completion.value() } }
    }

    /// One inotify watch per directory holding a store: a save writes the
    /// database, `-wal` or `-journal` beside it, and inotify does not recurse.
    /// Each store's events go through its `StoreTrigger` (leading edge, then
    /// one coalesced follow-up; see there).
    private func watchStores() throws {
        var byDirectory: [String: [(GroupRunner, StoreSettings, StoreTrigger)]] = [:]
        let rescan = configuration.rescanInterval
        for runner in runners {
            for store in runner.settings.stores {
                let timer = try LoopTimer(loop)
                triggerTimers.append(timer)
                let name = store.name
                let trigger = StoreTrigger(gap: configuration.debounce, minimumBackoff: 0.5, maximumBackoff: max(0.5, rescan),
                                           arm: { delay, fire in timer.start(after: delay, fire) }) { [weak runner, loop] done in
                    guard let runner else { return done(nil) }
                    let done = LoopBound(done, loop: loop)
                    runner.schedule(.store(name)) { summary in
                        loop.post { done.value(StoreTrigger.Outcome(summary, store: name)) }
                    }
                }
                triggers["\(runner.name)/\(name)"] = trigger
                byDirectory[store.path.deletingLastPathComponent().path, default: []].append((runner, store, trigger))
            }
        }
        for (directory, entries) in byDirectory.sorted(by: { $0.key < $1.key }) {
            let watch = try DirectoryWatch(loop, path: directory) { name in
                for (_, store, trigger) in entries {
                    let base = store.path.lastPathComponent
                    // nil: libuv could not say which file (overflow): check all.
                    if name == nil || name == base || name == base + "-wal" || name == base + "-journal" {
                        trigger.fileChanged()
                    }
                }
            }
            watches.append(watch)
            logger.debug("watching", metadata: ["directory": "\(directory)", "stores": "\(entries.map { "\($0.0.name)/\($0.1.name)" }.joined(separator: ","))"])
        }
    }

    /// Not a polling loop: a slow net under the file events (events lost to
    /// an inotify overflow, a store on a file system without inotify, a
    /// store that failed and may be back).
    private func startRescanTimer() {
        guard let timer = try? LoopTimer(loop) else { return }
        timer.start(after: configuration.rescanInterval, repeating: configuration.rescanInterval) { [weak self] in
            for runner in self?.runners ?? [] { runner.schedule(.round(trigger: "timer")) }
        }
        rescanTimer = timer
    }

    /// The slow fallback under LISTEN/NOTIFY: a `.hub` job every
    /// `hub_poll_interval` per PostgreSQL group (notifications lost while
    /// the listener reconnects; a hub not open yet is tried again).
    private func startHubPolls() {
        for runner in runners {
            guard let settings = runner.settings.hub.postgreSQL, let timer = try? LoopTimer(loop) else { continue }
            timer.start(after: settings.pollInterval, repeating: settings.pollInterval) { [weak runner] in runner?.schedule(.hub) }
            hubPollTimers[runner.name] = timer
        }
    }

    /// Starts (or, when the hub was reopened on the same channel, keeps) the
    /// group's listener.
    private func listen(_ runner: GroupRunner, channel: String) {
        loop.assertOnLoop()
        guard state != .stopping, let settings = runner.settings.hub.postgreSQL else { return }
        if let existing = hubListeners[runner.name] {
            if existing.channel == channel { return }
            existing.close()
        }
        do {
            let listener = try HubListener(loop: loop, group: runner.name, channel: channel, hostName: configuration.hostName,
                                           maximumBackoff: min(30, settings.pollInterval), conninfo: { try settings.conninfo() },
                                           logger: logger) { [weak runner] in runner?.schedule(.hub) }
            hubListeners[runner.name] = listener
            listener.start()
        } catch {
            logger.error("cannot listen for hub notifications; the fallback poll goes on", metadata: ["group": "\(runner.name)", "error": "\(error)"])
        }
    }

    private func roundFinished(_ summary: RoundSummary) {
        loop.assertOnLoop()
        guard runners.contains(where: { $0.name == summary.group }) else { return }
        let before = latest[summary.group]
        latest[summary.group] = summary
        for store in summary.stores where !summary.isStatusOnly {
            triggers["\(summary.group)/\(store.name)"]?.storeSeen(failed: store.state == .failed)
        }
        // Only when it changed: with a round per file event the same line
        // would go out hundreds of times a second, and a notify socket
        // whose reader falls behind blocks the loop's send.
        if state == .running, case let line = statusLine(), line != sentStatus { notify(["STATUS=\(line)"]) }
        publishChanges(summary, before: before)
        onRound?(summary)
    }

    /// Events for subscribers (`events` on the control socket): each
    /// store whose state changed, then the round itself.
    private func publishChanges(_ summary: RoundSummary, before: RoundSummary?) {
        guard let control else { return }
        for store in summary.stores {
            let old = before?.stores.first { $0.name == store.name }
            guard old?.state != store.state || old?.conflictsWaiting != store.conflictsWaiting else { continue }
            control.publish("state", group: summary.group, [
                "store": .string(store.name), "from": JSONValue(old?.state.rawValue), "to": .string(store.state.rawValue),
                "reason": JSONValue(store.state == .failed ? store.lastError : nil), "conflicts_waiting": JSONValue(store.conflictsWaiting),
                "trigger": .string(summary.trigger),
            ])
        }
        // Built only for a subscriber: at 100 saves a second this JSON (with
        // its timestamps) was a tenth of the daemon's CPU, on the loop thread.
        if !summary.isStatusOnly, control.wants("round", group: summary.group) {
            control.publish("round", group: summary.group, ControlService.json(summary).object ?? [:])
        }
    }

    /// `STATUS=`: one line, what `systemctl status` shows.
    func statusLine() -> String {
        let stores = latest.values.flatMap(\.stores)
        let total = runners.reduce(0) { $0 + $1.settings.stores.count }
        // A group whose PostgreSQL hub was never reached has failed rounds
        // but no store statuses: its stores count as failed.
        let unreported = latest.values.filter { $0.stores.isEmpty && $0.error != nil }
            .reduce(0) { sum, summary in sum + (runners.first { $0.name == summary.group }?.settings.stores.count ?? 0) }
        guard !stores.isEmpty || unreported > 0 else { return "\(runners.count) group\(runners.count == 1 ? "" : "s"), \(total) stores: starting" }
        let count = { (state: SyncStoreStatus.State) in stores.filter { $0.state == state }.count + (state == .failed ? unreported : 0) }
        let conflicts = stores.reduce(0) { $0 + $1.conflictsWaiting }
        return "\(runners.count) group\(runners.count == 1 ? "" : "s"), \(total) stores: \(count(.ok)) ok, \(count(.catchingUp)) catching up, "
            + "\(count(.paused)) paused, \(count(.failed)) failed; \(conflicts) conflict\(conflicts == 1 ? "" : "s") waiting"
    }

    /// The last `STATUS=` sent, so a round that changes nothing sends none.
    private var sentStatus: String?

    private func notify(_ fields: [String]) {
        guard let notifier else { return }
        notifier.send(fields)
        if let status = fields.first(where: { $0.hasPrefix("STATUS=") }) { sentStatus = String(status.dropFirst("STATUS=".count)) }
    }

    // MARK: - Signals

    /// SIGTERM/SIGINT: the rounds in flight finish, queued ones are dropped,
    /// every group is closed, then the loop ends. Nothing is lost by
    /// stopping early: the engine's cursors only move with what they cover.
    func stop() {
        loop.assertOnLoop()
        guard state != .stopping else {
            logger.notice("already stopping; waiting for the rounds in flight")
            return
        }
        state = .stopping
        notify(["STOPPING=1", "STATUS=stopping"])
        logger.info("stopping")
        control?.publish("stopping", group: nil, [:])
        answerReloadWaiters(.cancelled)
        stopGroups { [self] in
            // Last: requests made while stopping were answered "unavailable",
            // and work dropped by the groups has been answered "cancelled".
            control?.close()
            watchdogTimer?.close()
            for signal in signals { signal.close() }
            signals.removeAll()
            logger.info("stopped")
            loop.closeWakeup()
        }
    }

    /// SIGHUP: re-read the file off the loop; a valid one replaces the
    /// groups (each finishes its round in flight first), an invalid one is
    /// refused and the running configuration kept.
    func reload(completion: ((ReloadOutcome) -> Void)? = nil) {
        loop.assertOnLoop()
        switch state {
        case .stopping:
            completion?(.cancelled)
            return
        case .starting, .reloading:
            // Read the file again once this settles: it may have changed since.
            reloadAgain = true
            if let completion { nextReloadWaiters.append(completion) }
            return
        case .running: break
        }
        if let completion { reloadWaiters.append(completion) }
        state = .reloading
        notify(["RELOADING=1", "MONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())", "STATUS=reloading"])
        logger.info("reloading", metadata: ["config": "\(configuration.file)"])
        let file = configuration.file, overrides = overrides
        DispatchQueue.global().async { [loop] in
            let result = Result { try DaemonConfiguration.load(file: file, overrides: overrides) }
            loop.post { [weak self] in self?.finishReload(result) }
        }
    }

    private func finishReload(_ result: Result<DaemonConfiguration, Error>) {
        loop.assertOnLoop()
        guard state == .reloading else { return }
        switch result {
        case .failure(let error):
            logger.error("reload refused; keeping the running configuration", metadata: ["error": "\(error)"])
            state = .running
            notify(["READY=1", "STATUS=reload refused (\(error)); \(statusLine())"])
            answerReloadWaiters(.refused("\(error)"))
            reloadIfAsked()
        case .success(let new):
            DaemonLogHandler.level = new.logLevel
            DaemonLogHandler.output = DaemonLogHandler.resolve(new.logFormat)
            do { try prepareDirectories(new) } catch {
                logger.error("reload refused; keeping the running configuration", metadata: ["error": "\(error)"])
                state = .running
                notify(["READY=1", "STATUS=reload refused (\(error)); \(statusLine())"])
                answerReloadWaiters(.refused("\(error)"))
                return reloadIfAsked()
            }
            if new.controlSocket != configuration.controlSocket {
                // Moving the socket under connected clients would strand them;
                // it is bound once per process.
                logger.warning("control_socket changed; it takes effect when the daemon restarts",
                               metadata: ["serving": "\(configuration.controlSocket.path)", "configured": "\(new.controlSocket.path)"])
            }
            stopGroups { [self] in
                guard state == .reloading else { return }
                configuration = new
                // Pauses of stores that are gone would apply to a store that
                // is added later under the same name.
                pausedStores = pausedStores.reduce(into: [:]) { kept, entry in
                    guard let group = new.groups.first(where: { $0.name == entry.key }) else { return }
                    let stores = entry.value.filter { name in group.stores.contains { $0.name == name } }
                    if !stores.isEmpty { kept[entry.key] = stores }
                }
                startGroups { [self] failures in
                    guard state == .reloading else { return }
                    if !failures.isEmpty {
                        logger.error("groups not running after reload", metadata: ["groups": "\(failures.joined(separator: ","))"])
                    }
                    state = .running
                    notify(["READY=1", "STATUS=\(failures.isEmpty ? "" : "cannot open \(failures.joined(separator: ", ")); ")\(statusLine())"])
                    logger.info("reloaded", metadata: ["groups": "\(runners.count)"])
                    answerReloadWaiters(.reloaded(groups: runners.count, failedGroups: failures))
                    reloadIfAsked()
                }
            }
        }
    }

    private func reloadIfAsked() {
        if reloadAgain {
            reloadAgain = false
            let waiters = nextReloadWaiters
            nextReloadWaiters.removeAll()
            reload()
            if state == .reloading {
                reloadWaiters.append(contentsOf: waiters)
            } else {
                for waiter in waiters { waiter(.cancelled) }
            }
        }
    }

    /// Tells everyone waiting for the reload in progress how it ended, and
    /// subscribers too.
    private func answerReloadWaiters(_ outcome: ReloadOutcome) {
        let waiters = reloadWaiters
        reloadWaiters.removeAll()
        if case .cancelled = outcome {
            waiters.forEach { $0(outcome) }
            nextReloadWaiters.forEach { $0(outcome) }
            nextReloadWaiters.removeAll()
            return
        }
        for waiter in waiters { waiter(outcome) }
        switch outcome {
        case .reloaded(let groups, let failed):
            control?.publish("reload", group: nil, ["outcome": "reloaded", "groups": JSONValue(groups),
                                                    "failed_groups": .array(failed.map(JSONValue.string))])
        case .refused(let reason):
            control?.publish("reload", group: nil, ["outcome": "refused", "reason": .string(reason)])
        case .cancelled: break
        }
    }
}
