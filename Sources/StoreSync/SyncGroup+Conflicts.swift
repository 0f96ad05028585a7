import Foundation
import ObjectGraph

extension SyncGroup {
    public func conflicts(includingResolved: Bool = false) throws -> [SyncConflict] {
        try hub.conflicts(store: nil, includingResolved: includingResolved)
    }

    /// Resolves a conflict: `.incoming` takes the store's current object
    /// (or its deletion) to the hub and so to every store; `.hub` sends the
    /// hub's object back to the store. The object's held changes resume.
    public func resolve(_ id: Int64, taking resolution: ConflictResolution) throws {
        // Read and written together: a shared hub's other writers cannot come between.
        try hub.transaction {
            guard let conflict = try hub.conflicts(store: nil, includingResolved: false).first(where: { $0.id == id }) else {
                throw CoreDataError(.persistentStoreOperation, "sync group \(configuration.name) has no unresolved conflict \(id)")
            }
            let member = try member(conflict.store)
            var batch = HubBatch(origin: member.name)
            batch.resolvedConflicts = [(id, resolution)]
            switch resolution {
            case .incoming:
                let current = try member.context.performAndWait {
                    defer { member.access.reset() }
                    return try member.access.object(conflict.globalIdentifier).map(member.access.state)
                }
                if let current {
                    if try hub.state(of: conflict.globalIdentifier) == nil { batch.inserts.append((conflict.globalIdentifier, current)) } else {
                        batch.updates.append((conflict.globalIdentifier, current.values))
                    }
                } else {
                    batch.deletes.append(conflict.globalIdentifier)
                }
            case .hub:
                batch.pendingAdded.append((member.name, conflict.globalIdentifier))
            }
            // Written as a resolution, not as the store's pull: other stores
            // receive it, and so does the store itself where the hub differs.
            batch.origin = nil
            try hub.commit(batch)
        }
    }

    static func describe(_ values: [String: SyncValue]) -> [String: String] {
        var out: [String: String] = [:]
        for (name, value) in values {
            switch value {
            case .attribute(let v): out[name] = ObjectState.canonical(v)
            case .toOne(let gid): out[name] = gid?.uuidString ?? "nil"
            case .members(let gids): out[name] = gids.map(\.uuidString).joined(separator: ",")
            case .memberChange(let added, let removed, _):
                out[name] = (added.map { "+" + $0.uuidString } + removed.map { "-" + $0.uuidString }).joined(separator: ",")
            }
        }
        return out
    }
}
