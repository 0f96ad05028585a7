#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSync
import StoreSyncControl
import StoreSyncPostgreSQL

extension ControlService {
    /// `status`: the daemon, then each group and store. Each group's
    /// `status()` runs on its queue; a group that does not answer within
    /// `statusFreshness` is reported from its last round instead
    /// (`"fresh": false`, `"as_of"` that round's end) so a long round does
    /// not hold the answer.
    func status(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        var runners = daemon.runners
        if let group = try request.string("group") {
            runners = runners.filter { $0.name == group }
            guard !runners.isEmpty else {
                throw ControlError(.notFound, "no group named \(group) (groups: \(Self.list(daemon.runners.map(\.name))))")
            }
        }
        var fresh: [String: Result<[SyncStoreStatus], Error>] = [:]
        var hubs: [String: GroupRunner.HubReport] = [:]
        var answered = false
        let timer = try LoopTimer(loop)
        let answer = { [self] in
            guard !answered else { return }
            answered = true
            timer.close()
            let groups = runners.map { groupJSON($0, fresh: fresh[$0.name], hub: hubs[$0.name] ?? $0.latestHubReport) }
            // Records that cannot be written are behind the stores, and a
            // hub out of reach leaves them unsynced: not in sync.
            let inSync = !groups.isEmpty && groups.allSatisfy { group in
                group["error"]?.isNull != false && group["export"]?["state"]?.string != "failing"
                    && group["hub"]?["reachable"]?.bool != false
                    && (group["stores"]?.array ?? []).allSatisfy {
                    $0["state"]?.string == SyncStoreStatus.State.ok.rawValue && $0["conflicts_waiting"]?.int == 0
                }
            }
            reply(ControlReply.ok(request.id, ["daemon": daemonJSON(), "groups": .array(groups), "in_sync": .bool(inSync && daemon.state == .running)]))
        }
        let arrived = LoopBound({ (name: String, result: Result<[SyncStoreStatus], Error>, hub: GroupRunner.HubReport) in
            guard !answered else { return }
            fresh[name] = result
            hubs[name] = hub
            if fresh.count == runners.count { answer() }
        }, loop: loop)
        for runner in runners {
            runner.statusReport { [loop] result, hub in
                loop.post { arrived.value(runner.name, result, hub) }
            }
        }
        if runners.isEmpty { return answer() }
        timer.start(after: Self.statusFreshness) { answer() }
    }

    func daemonJSON() -> JSONValue {
        let state: String
        switch daemon.state {
        case .starting: state = "starting"
        case .running: state = "running"
        case .reloading: state = "reloading"
        case .stopping: state = "stopping"
        }
        return [
            "version": .string(StoreSyncVersion.current),
            "pid": JSONValue(Int(getpid())),
            "started": JSONValue(daemon.startTime),
            "uptime_s": .double(Date().timeIntervalSince(daemon.startTime)),
            "state": .string(state),
            "config": .string(daemon.configuration.file),
            "control_socket": .string(daemon.control?.path ?? daemon.configuration.controlSocket.path),
            "protocol": .int(ControlProtocol.version),
        ]
    }

    private func groupJSON(_ runner: GroupRunner, fresh: Result<[SyncStoreStatus], Error>?, hub: GroupRunner.HubReport) -> JSONValue {
        let latest = daemon.latest[runner.name]
        var group: [String: JSONValue] = [
            "name": .string(runner.name),
            "hub": hubJSON(hub, listener: daemon.hubListeners[runner.name]),
            "paused": .array((daemon.pausedStores[runner.name] ?? []).sorted().map(JSONValue.string)),
            "last_round": latest.map(Self.json) ?? .null,
            "error": .null,
            "export": runner.export.map { GroupExport.json($0.status) } ?? .null,
        ]
        switch fresh {
        case .success(let stores)?:
            group["fresh"] = true
            group["as_of"] = JSONValue(Date())
            group["stores"] = .array(stores.map(Self.json))
        case .failure(let error)?:
            group["fresh"] = true
            group["as_of"] = JSONValue(Date())
            group["error"] = .string("\(error)")
            group["stores"] = .array(runner.settings.stores.map { Self.unknownStore($0.name, state: "failed", reason: "\(error)") })
        case nil:
            group["fresh"] = false
            if let latest {
                group["as_of"] = JSONValue(latest.finished)
                group["stores"] = .array(latest.stores.map(Self.json))
            } else {
                group["as_of"] = .null
                group["stores"] = .array(runner.settings.stores.map {
                    Self.unknownStore($0.name, state: "unknown", reason: "no status yet: the group is opening or busy with its first round")
                })
            }
        }
        return .object(group)
    }

    /// The group's hub: kind, server, reachability and, for a PostgreSQL
    /// hub, this host's name, the notification connection and every host's
    /// stores the hub knows.
    func hubJSON(_ hub: GroupRunner.HubReport, listener: HubListener?) -> JSONValue {
        var out: [String: JSONValue] = [
            "kind": .string(hub.kind),
            "server": .string(hub.server),
            "reachable": .bool(hub.reachable),
            "error": JSONValue(hub.error),
            "unreachable_since": hub.unreachableSince.map { JSONValue($0) } ?? .null,
        ]
        guard hub.kind == "postgresql" else { return .object(out) }
        out["host_name"] = JSONValue(hub.hostName)
        out["notifications"] = listener.map { listener in
            ["state": .string(listener.state.rawValue), "channel": .string(listener.channel), "error": JSONValue(listener.lastError),
             "received": JSONValue(listener.received), "ignored_own": JSONValue(listener.ignored)]
        } ?? ["state": "not-started", "channel": .null, "error": .null, "received": 0, "ignored_own": 0]
        out["known_stores"] = hub.knownStores.map { stores in
            .array(stores.map { store in
                ["host": .string(store.host), "store": .string(store.store), "this_host": .bool(store.host == hub.hostName),
                 "pulled_through": .int(store.pulledThrough), "base": .int(store.base), "pushed_through": .int(store.pushedThrough),
                 "needs_full_push": .bool(store.needsFullPush), "last_seen": JSONValue(store.lastSeen)]
            })
        } ?? .null
        return .object(out)
    }

    /// A store the engine could not report on.
    static func unknownStore(_ name: String, state: String, reason: String) -> JSONValue {
        ["name": .string(name), "state": .string(state), "reason": .string(reason), "positions": .null, "lag": .null,
         "conflicts_waiting": .null, "last_error": .string(reason)]
    }
}
