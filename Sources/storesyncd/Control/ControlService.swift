#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSync
import StoreSyncControl

/// What each control op does (docs/CONTROL.md). Called on the loop thread;
/// anything that reads or writes a store or the hub goes to the group's
/// queue (`GroupRunner.perform`) and its answer is posted back to the loop
/// before the reply is written, so the loop never blocks.
final class ControlService {
    unowned let daemon: Daemon
    /// How long `status` waits for a busy group before answering from the
    /// group's last round (marked `"fresh": false`): a catch-up can hold a
    /// group's queue for minutes, and that is when an operator asks.
    static let statusFreshness: TimeInterval = 1

    init(daemon: Daemon) {
        self.daemon = daemon
    }

    var loop: EventLoop { daemon.loop }

    /// Answers one request through `reply` (exactly once, on the loop).
    func handle(_ request: ControlRequest, on connection: ControlConnection, reply: @escaping (JSONValue) -> Void) {
        let fail = { (error: ControlError) in reply(ControlReply.error(request.id, error)) }
        do {
            switch request.op {
            case .status: try status(request, reply: reply)
            case .pause, .resume: try pause(request, reply: reply)
            case .sync: try sync(request, reply: reply)
            case .reload: try reload(request, reply: reply)
            case .metrics: reply(ControlReply.ok(request.id, ["content_type": "text/plain; version=0.0.4", "text": .string(daemon.metrics.exposition())]))
            case .conflictsList: try conflictsList(request, reply: reply)
            case .conflictsShow: try conflictsShow(request, reply: reply)
            case .conflictsResolve: try conflictsResolve(request, reply: reply)
            case .exportRebuild: try exportRebuild(request, reply: reply)
            case .events: try events(request, on: connection, reply: reply)
            case .log: try log(request, on: connection, reply: reply)
            case .cancel:
                guard let target = request.fields["subscription"], !target.isNull else {
                    throw ControlError(.badRequest, "missing field subscription (the id of the request that opened the stream)")
                }
                guard connection.cancelSubscription(id: target) else {
                    throw ControlError(.notFound, "this connection has no stream opened by request id \(target.text)")
                }
                reply(ControlReply.ok(request.id, ["cancelled": target]))
            }
        } catch let error as ControlError {
            fail(error)
        } catch {
            fail(ControlError(.failed, "\(error)"))
        }
    }

    /// Ops that act on groups need them open and not being replaced.
    func requireRunning(_ op: ControlProtocol.Op) throws {
        switch daemon.state {
        case .running: return
        case .starting: throw ControlError(.unavailable, "the daemon is starting (its groups are opening); try \(op.rawValue) again shortly")
        case .reloading: throw ControlError(.unavailable, "the daemon is reloading its configuration; try \(op.rawValue) again shortly")
        case .stopping: throw ControlError(.unavailable, "the daemon is stopping")
        }
    }

    // MARK: - Targets

    /// A group, or some of its stores (nil: all of them).
    struct Target {
        var runner: GroupRunner
        var stores: [String]?
    }

    /// Resolves `"name"` (a group, a store, or `GROUP/STORE`) or
    /// `"group"`/`"store"`; none of them means every group.
    func targets(_ request: ControlRequest) throws -> [Target] {
        let runners = daemon.runners
        let name = try request.string("name")
        var group = try request.string("group")
        var store = try request.string("store")
        if let name {
            guard group == nil, store == nil else { throw ControlError(.badRequest, "give name, or group and store, not both") }
            if let slash = name.firstIndex(of: "/") {
                group = String(name[..<slash])
                store = String(name[name.index(after: slash)...])
                guard !group!.isEmpty, !store!.isEmpty else { throw ControlError(.badRequest, "field name: '\(name)' is not GROUP/STORE") }
            } else if runners.contains(where: { $0.name == name }) {
                group = name
            } else {
                store = name
            }
        }
        if let group {
            guard let runner = runners.first(where: { $0.name == group }) else {
                throw ControlError(.notFound, "no group named \(group) (groups: \(Self.list(runners.map(\.name))))")
            }
            guard let store else { return [Target(runner: runner, stores: nil)] }
            guard runner.settings.stores.contains(where: { $0.name == store }) else {
                throw ControlError(.notFound, "group \(group) has no store named \(store) (stores: \(Self.list(runner.settings.stores.map(\.name))))")
            }
            return [Target(runner: runner, stores: [store])]
        }
        if let store {
            let holders = runners.filter { $0.settings.stores.contains { $0.name == store } }
            guard !holders.isEmpty else {
                throw ControlError(.notFound, "no group or store named \(store) (groups: \(Self.list(runners.map(\.name))))")
            }
            guard holders.count == 1 else {
                throw ControlError(.ambiguous, "store \(store) is in groups \(holders.map(\.name).joined(separator: ", ")); name it GROUP/STORE")
            }
            return [Target(runner: holders[0], stores: [store])]
        }
        return runners.map { Target(runner: $0, stores: nil) }
    }

    static func list(_ names: [String]) -> String { names.isEmpty ? "none" : names.joined(separator: ", ") }

    // MARK: - Pause, resume

    private func pause(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        let pausing = request.op == .pause
        let targets = try targets(request)
        let gather = LoopBound(Gather<(String, Result<[String], Error>)>(count: targets.count) { [self] results in
            var changed: [JSONValue] = []
            var failures: [String] = []
            for (group, result) in results {
                switch result {
                case .success(let stores):
                    var set = daemon.pausedStores[group] ?? []
                    if pausing { set.formUnion(stores) } else { set.subtract(stores) }
                    daemon.pausedStores[group] = set.isEmpty ? nil : set
                    changed += stores.map { ["group": .string(group), "store": .string($0)] }
                    // Report the new state (events, STATUS=); a resume
                    // also catches the stores up at once.
                    let runner = daemon.runners.first { $0.name == group }
                    runner?.schedule(pausing ? .status(trigger: "pause") : .round(trigger: "resume"))
                case .failure(let error):
                    failures.append("\(group): \(error)")
                }
            }
            guard failures.isEmpty else {
                return reply(ControlReply.error(request.id, ControlError(.failed, failures.joined(separator: "; ")), ["changed": .array(changed)]))
            }
            reply(ControlReply.ok(request.id, [pausing ? "paused" : "resumed": .array(changed)]))
        }, loop: loop)
        for target in targets {
            target.runner.setPaused(pausing, stores: target.stores) { [loop] result in
                loop.post { gather.value.add((target.runner.name, result)) }
            }
        }
    }

    // MARK: - Sync

    private func sync(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        let wait = try request.bool("wait", default: false)
        if request.fields["store"] != nil { throw ControlError(.badRequest, "field store: sync runs whole groups; give group or name") }
        let targets = try targets(request)
        let job = GroupRunner.Job.round(trigger: "control")
        guard wait else {
            for target in targets { target.runner.schedule(job) }
            return reply(ControlReply.ok(request.id, ["scheduled": .array(targets.map { .string($0.runner.name) })]))
        }
        let gather = LoopBound(Gather<(String, RoundSummary?)>(count: targets.count) { results in
            let rounds = results.map { group, summary in summary.map(Self.json) ?? ["group": .string(group), "cancelled": true] }
            if results.contains(where: { $0.1 == nil }) {
                return reply(ControlReply.error(request.id, ControlError(.cancelled, "the round was dropped: the daemon stopped or reloaded before it ran"),
                                                ["rounds": .array(rounds)]))
            }
            let failed = results.compactMap { group, summary in summary?.error.map { "\(group): \($0)" } }
            if !failed.isEmpty {
                return reply(ControlReply.error(request.id, ControlError(.failed, "round failed: \(failed.joined(separator: "; "))"), ["rounds": .array(rounds)]))
            }
            reply(ControlReply.ok(request.id, ["rounds": .array(rounds)]))
        }, loop: loop)
        for target in targets {
            target.runner.schedule(job) { [loop] summary in
                loop.post { gather.value.add((target.runner.name, summary)) }
            }
        }
    }

    // MARK: - Export

    /// `export.rebuild`: every group with `[group.export]` (or the one named)
    /// rewrites its records directory on its queue; answered with the
    /// records written per group once all are done.
    private func exportRebuild(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        var runners = daemon.runners
        if let group = try request.string("group") {
            guard let runner = runners.first(where: { $0.name == group }) else {
                throw ControlError(.notFound, "no group named \(group) (groups: \(Self.list(runners.map(\.name))))")
            }
            guard runner.export != nil else {
                throw ControlError(.notConfigured, "group \(group) exports no records: its [[group]] has no [group.export] table")
            }
            runners = [runner]
        } else {
            runners = runners.filter { $0.export != nil }
            guard !runners.isEmpty else {
                throw ControlError(.notConfigured, "no group exports records: none has a [group.export] table (groups: \(Self.list(daemon.runners.map(\.name))))")
            }
        }
        let started = Date()
        let gather = LoopBound(Gather<(GroupRunner, Result<SyncRecordExporter.Report, Error>, TimeInterval)>(count: runners.count) { results in
            var groups: [JSONValue] = []
            var failures: [String] = []
            var total = 0
            for (runner, result, duration) in results.sorted(by: { $0.0.name < $1.0.name }) {
                var entry: [String: JSONValue] = ["group": .string(runner.name), "directory": .string(runner.export?.settings.directory.path ?? ""),
                                                  "duration_s": .double(duration)]
                switch result {
                case .success(let report):
                    total += report.written
                    entry["records"] = JSONValue(report.written)
                    entry["position"] = .int(report.position)
                    entry["error"] = .null
                case .failure(let error):
                    let message = (error as? ControlError)?.message ?? "\(error)"
                    failures.append("\(runner.name): \(message)")
                    entry["records"] = .null
                    entry["error"] = .string(message)
                }
                groups.append(.object(entry))
            }
            guard failures.isEmpty else {
                return reply(ControlReply.error(request.id, ControlError(.failed, "export rebuild failed: \(failures.joined(separator: "; "))"),
                                                ["groups": .array(groups)]))
            }
            reply(ControlReply.ok(request.id, ["groups": .array(groups), "records": JSONValue(total)]))
        }, loop: loop)
        for runner in runners {
            runner.rebuildExport { [loop] result in
                let duration = Date().timeIntervalSince(started)
                loop.post { gather.value.add((runner, result, duration)) }
            }
        }
    }

    // MARK: - Reload

    private func reload(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        let wait = try request.bool("wait", default: false)
        if daemon.state == .stopping { throw ControlError(.unavailable, "the daemon is stopping") }
        guard wait else {
            daemon.reload()
            return reply(ControlReply.ok(request.id, ["started": true]))
        }
        daemon.reload { outcome in
            switch outcome {
            case .reloaded(let groups, let failed):
                reply(ControlReply.ok(request.id, ["groups": JSONValue(groups), "failed_groups": .array(failed.map(JSONValue.string))]))
            case .refused(let reason):
                reply(ControlReply.error(request.id, ControlError(.reloadRefused, "the new configuration was refused; the running one is kept: \(reason)")))
            case .cancelled:
                reply(ControlReply.error(request.id, ControlError(.cancelled, "the daemon stopped before the reload finished")))
            }
        }
    }

    // MARK: - Events

    static let eventTopics: Set<String> = ["round", "state", "reload", "stopping"]

    private func events(_ request: ControlRequest, on connection: ControlConnection, reply: @escaping (JSONValue) -> Void) throws {
        let group = try request.string("group")
        if let group, !daemon.runners.contains(where: { $0.name == group }) {
            throw ControlError(.notFound, "no group named \(group) (groups: \(Self.list(daemon.runners.map(\.name))))")
        }
        if connection.subscriptions.contains(where: { $0.id == request.id }) {
            throw ControlError(.badRequest, "this connection already has a stream with id \(request.id.text); use another id")
        }
        connection.add(ControlSubscription(id: request.id, op: request.op.rawValue, topics: Self.eventTopics, group: group))
        reply(ControlReply.ok(request.id, ["subscribed": .array(Self.eventTopics.sorted().map(JSONValue.string)), "group": JSONValue(group)]))
    }

    // MARK: - JSON

    /// A store's status as the protocol gives it.
    static func json(_ store: SyncStoreStatus) -> JSONValue {
        [
            "name": .string(store.name),
            "state": .string(store.state.rawValue),
            "reason": JSONValue(store.state == .failed ? store.lastError : nil),
            "positions": [
                "pulled_through": .int(store.pulledThrough), "store": .int(store.storePosition),
                "pushed_through": .int(store.pushedThrough), "hub": .int(store.hubPosition),
            ],
            "lag": ["transactions": .int(DaemonMetrics.lagTransactions(store)), "seconds": .double(store.lagSeconds)],
            "conflicts_waiting": JSONValue(store.conflictsWaiting),
            "last_error": JSONValue(store.lastError),
        ]
    }

    /// One job's summary (sync replies, `round` events).
    static func json(_ summary: RoundSummary) -> JSONValue {
        [
            "group": .string(summary.group),
            "trigger": .string(summary.trigger),
            "moved": .bool(summary.moved),
            "duration_s": .double(summary.duration),
            "finished": JSONValue(summary.finished),
            "error": JSONValue(summary.error),
            "hub_position": .int(summary.hubPosition),
            "stores": .array(summary.stores.map { store in
                ["name": .string(store.name), "state": .string(store.state.rawValue),
                 "reason": JSONValue(store.state == .failed ? store.lastError : nil), "conflicts_waiting": JSONValue(store.conflictsWaiting)]
            }),
        ]
    }
}
