import Foundation
import StoreSync
import StoreSyncControl

extension ControlService {
    /// The group a conflict op names: `"group"`, or the only group. Conflict
    /// numbers are per group (each hub counts its own), so with several
    /// groups a bare number is ambiguous.
    func conflictGroup(_ request: ControlRequest) throws -> GroupRunner {
        let runners = daemon.runners
        if let name = try request.string("group") {
            guard let runner = runners.first(where: { $0.name == name }) else {
                throw ControlError(.notFound, "no group named \(name) (groups: \(Self.list(runners.map(\.name))))")
            }
            return runner
        }
        guard runners.count == 1 else {
            throw ControlError(runners.isEmpty ? .unavailable : .ambiguous,
                               runners.isEmpty ? "no group is running" : "\(runners.count) groups are configured (\(Self.list(runners.map(\.name)))): give group")
        }
        return runners[0]
    }

    /// `conflicts.list`: the conflicts waiting, per group (or one group).
    func conflictsList(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        var runners = daemon.runners
        if request.fields["group"] != nil { runners = [try conflictGroup(request)] }
        let gather = LoopBound(Gather<(String, Result<[SyncConflict], Error>)>(count: runners.count) { results in
            var conflicts: [JSONValue] = []
            var failures: [String] = []
            for (group, result) in results.sorted(by: { $0.0 < $1.0 }) {
                switch result {
                case .success(let list): conflicts += list.sorted { $0.id < $1.id }.map { Self.json($0, group: group, resolved: false) }
                case .failure(let error): failures.append("\(group): \(error)")
                }
            }
            guard failures.isEmpty else {
                return reply(ControlReply.error(request.id, ControlError(.failed, failures.joined(separator: "; ")), ["conflicts": .array(conflicts)]))
            }
            reply(ControlReply.ok(request.id, ["conflicts": .array(conflicts)]))
        }, loop: loop)
        for runner in runners {
            runner.perform({ try $0.conflicts() }) { [loop] result in loop.post { gather.value.add((runner.name, result)) } }
        }
    }

    /// `conflicts.show`: one conflict, resolved or not, with its three sets of values.
    func conflictsShow(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        let runner = try conflictGroup(request)
        let id = try request.requiredInt("conflict")
        let reply = LoopBound(reply, loop: loop)
        runner.perform({ group -> (SyncConflict, Bool) in
            guard let conflict = try group.conflicts(includingResolved: true).first(where: { $0.id == id }) else {
                throw ControlError(.notFound, "group \(runner.name) has no conflict \(id)")
            }
            let waiting = try group.conflicts().contains { $0.id == id }
            return (conflict, !waiting)
        }) { [loop] result in
            loop.post {
                let reply = reply.value
                switch result {
                case .success(let (conflict, resolved)):
                    reply(ControlReply.ok(request.id, ["conflict": Self.json(conflict, group: runner.name, resolved: resolved)]))
                case .failure(let error):
                    reply(ControlReply.error(request.id, Self.controlError(error)))
                }
            }
        }
    }

    /// `conflicts.resolve`: takes `incoming` (the store's object) or `hub`;
    /// replies once the resolution is committed in the hub, then a round
    /// carries it to the stores.
    func conflictsResolve(_ request: ControlRequest, reply: @escaping (JSONValue) -> Void) throws {
        try requireRunning(request.op)
        let runner = try conflictGroup(request)
        let id = try request.requiredInt("conflict")
        let take = try request.requiredString("take")
        guard let resolution = ConflictResolution(rawValue: take) else {
            throw ControlError(.badRequest, "field take: '\(take)' is not a side (expected incoming or hub)")
        }
        let reply = LoopBound(reply, loop: loop)
        runner.perform({ group -> SyncConflict in
            guard let conflict = try group.conflicts().first(where: { $0.id == id }) else {
                let resolved = try group.conflicts(includingResolved: true).contains { $0.id == id }
                throw ControlError(.notFound, resolved ? "conflict \(id) of group \(runner.name) is already resolved" : "group \(runner.name) has no conflict \(id)")
            }
            try group.resolve(id, taking: resolution)
            return conflict
        }) { [daemon, loop] result in
            loop.post {
                let reply = reply.value
                switch result {
                case .success(let conflict):
                    daemon.metrics.recordResolution(group: runner.name)
                    runner.schedule(.round(trigger: "resolve"))
                    reply(ControlReply.ok(request.id, ["resolved": Self.json(conflict, group: runner.name, resolved: true), "took": .string(take)]))
                case .failure(let error):
                    reply(ControlReply.error(request.id, Self.controlError(error)))
                }
            }
        }
    }

    /// A conflict as the protocol gives it; `ref` is what storesyncctl
    /// takes back (`GROUP:N`).
    static func json(_ conflict: SyncConflict, group: String, resolved: Bool) -> JSONValue {
        [
            "group": .string(group),
            "id": .int(conflict.id),
            "ref": .string("\(group):\(conflict.id)"),
            "store": .string(conflict.store),
            "object": .string(conflict.globalIdentifier.uuidString),
            "entity": .string(conflict.entityName),
            "kind": .string(conflict.kind.rawValue),
            "base_position": .int(conflict.basePosition),
            "hub_position": .int(conflict.hubPosition),
            "created": JSONValue(conflict.created),
            "base": values(conflict.base),
            "incoming": values(conflict.incoming),
            "hub": values(conflict.hub),
            "types": JSONValue(types(conflict)),
            "resolved": .bool(resolved),
        ]
    }

    /// The engine records values as comparable text, attributes prefixed
    /// with their Swift type (`Int64:3`, `String:milk`); the protocol gives
    /// the value text alone and the types apart (`types`), so a script or a
    /// person reads `3`. Relationships (global IDs), `nil` and collections
    /// have no prefix and pass as they are.
    static func splitType(_ text: String) -> (type: String?, value: String) {
        guard let colon = text.firstIndex(of: ":") else { return (nil, text) }
        let type = text[..<colon]
        guard let first = type.first, first.isLetter,
              type.allSatisfy({ $0.isLetter || $0.isNumber || "_.<>".contains($0) }) else { return (nil, text) }
        return (String(type), String(text[text.index(after: colon)...]))
    }

    private static func values(_ texts: [String: String]) -> JSONValue {
        .object(texts.mapValues { .string(splitType($0).value) })
    }

    private static func types(_ conflict: SyncConflict) -> [String: String] {
        var types: [String: String] = [:]
        for texts in [conflict.base, conflict.incoming, conflict.hub] {
            for (key, text) in texts { if let type = splitType(text).type { types[key] = type } }
        }
        return types
    }

    /// Errors from a group's queue, as reply errors.
    static func controlError(_ error: Error) -> ControlError {
        if let error = error as? ControlError { return error }
        if let error = error as? GroupRunner.NotOpen { return ControlError(error.cancelled ? .cancelled : .unavailable, error.description) }
        return ControlError(.failed, "\(error)")
    }
}
