import Foundation
import ObjectGraph

extension SyncGroup {
    /// A store joining the group: its objects (all of which got global
    /// identifiers when history was switched on) are merged into the hub by
    /// the same rules, and the hub's whole contents are pushed back to it.
    func bootstrap(_ member: Member) throws {
        // Settled against the hub as it is when committed (see `pull`).
        try hub.transaction {
            var start: Int64 = 0
            var batch = HubBatch(origin: member.name)
            // The position and the objects must be one state of the store: read
            // apart, an application's commit between them (a record moved into a
            // folder read before it) is half in what is read, and pulled again
            // after it. Under the store's write lock no commit comes between.
            let read = {
                start = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
                try self.readWhole(member, into: &batch)
            }
            if let sqlite = member.store as? SQLiteStore { try sqlite.performInTransaction(read) } else { try read() }
            batch.cursor = SyncCursor(store: member.name, pulledThrough: start, base: 0, pushedThrough: 0, needsFullPush: true)
            try hub.commit(batch)
        }
    }

    /// The store's objects merged into `batch` by its policy (see `bootstrap`).
    func readWhole(_ member: Member, into batch: inout HubBatch) throws {
        try member.context.performAndWait {
            defer { member.access.reset() }
            for entity in configuration.model.entities where entity.superentity == nil {
                let objects = try member.context.fetch(FetchRequest(entityName: entity.name))
                let gids = try member.coordinator.globalIdentifiers(for: objects.map(\.objectID))
                let present = objects.filter { gids[$0.objectID] != nil }
                let states = try member.access.states(of: present)
                let existingStates = try hub.states(of: present.compactMap { gids[$0.objectID] })
                for (object, state) in zip(present, states) {
                    let gid = gids[object.objectID]!
                    if let existing = existingStates[gid] {
                        let differing = state.values.filter { !ObjectState.same($0.value, existing.values[$0.key]) }
                        guard !differing.isEmpty else { continue }
                        switch member.configuration.policy {
                        case .objectTrump, .overwrite: batch.updates.append((gid, differing))
                        case .storeTrump, .rollback, .error: batch.pendingAdded.append((member.name, gid))
                        }
                    } else {
                        batch.inserts.append((gid, state))
                    }
                }
            }
        }
    }
}
