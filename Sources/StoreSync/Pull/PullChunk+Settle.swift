import Foundation
import ObjectGraph

extension PullChunk {
    /// Decides one store change against the hub (`Settlement`, the policy
    /// table in docs/SYNC.md) and adds what it comes to to the batch.
    func settle(_ change: StoreChange, base: Int64, hubState: ObjectState?, hubChanges: [HubChange]) throws {
        let gid = change.globalIdentifier
        var hubChanged: [String: Any?] = [:]
        for entry in hubChanges.reversed() { for (name, old) in entry.changedProperties { hubChanged[name] = old } }
        let hubSide = Settlement.HubSide(has: hubState != nil, deleted: hubChanges.contains(where: \.isDelete),
                                         updated: hubChanges.contains { !$0.isDelete && !$0.isInsert })
        let decision = Settlement.decide(change.changeType, policy: member.configuration.policy, hub: hubSide,
                                         storeChanged: change.settableProperties, hubChanged: Set(hubChanged.keys))
        /// The store's object as it is now, every property (nil: gone since).
        func storeObject() throws -> ObjectState? {
            try member.context.performAndWait { try member.access.object(gid).map(member.access.state) }
        }
        switch decision {
        case .insert:
            batch.inserts.append((gid, ObjectState(entityName: change.entity.name, values: change.values)))
        case .apply:
            batch.updates.append((gid, change.values))
        case .applyExcept(let kept):
            batch.updates.append((gid, change.values.filter { !kept.contains($0.key) }))
            batch.pendingAdded.append((member.name, gid))
        case .applyStoreObject:
            batch.updates.append((gid, try storeObject()?.values ?? change.values))
        case .reinsertStoreObject:
            if let object = try storeObject() { batch.inserts.append((gid, object)) }
        case .sendHubObject:
            batch.pendingAdded.append((member.name, gid))
        case .delete:
            batch.deletes.append(gid)
        case .conflict(let kind):
            var baseValues: [String: String] = [:]
            for (name, old) in hubChanged { baseValues[name] = ObjectState.canonical(old) }
            let incoming = change.changeType == .delete ? ["(deleted)": "true"] : SyncGroup.describe(change.values)
            batch.newConflicts.append(SyncConflict(id: 0, store: member.name, globalIdentifier: gid, entityName: change.entity.name,
                                                   kind: kind, basePosition: base, hubPosition: try hub.currentPosition(),
                                                   base: baseValues, incoming: incoming,
                                                   hub: hubState.map { SyncGroup.describe($0.values) } ?? [:], created: Date()))
        case .none:
            break
        }
    }
}
