import Foundation
import ObjectGraph
@testable import StoreSync

/// What writers committed, from the stores' own history (the engine's
/// transactions left out): every value some writer's transaction left
/// each object's attribute or to-one with. Whatever the policies merge, a
/// value the hub holds must be one of them: a value no transaction
/// committed (an intermediate one of a transaction, say) was invented by
/// the engine (issue 27). A to-one may also be nil: the hub's delete rule
/// nulls it when its destination was deleted elsewhere.
enum CommittedValues {
    /// Property values (as `SyncGroup.describe` renders them) by object and property.
    static func read(_ stores: [URL], model: ManagedObjectModel = SyncFixtures.model()) throws -> [UUID: [String: Set<String>]] {
        var committed: [UUID: [String: Set<String>]] = [:]
        for url in stores {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                                           options: [PersistentStore.persistentHistoryTrackingKey: true])
            defer { try? coordinator.remove(store) }
            for transaction in try coordinator.execute(.fetchHistory(after: nil)).transactions where transaction.author != SyncGroup.author {
                for change in transaction.changes where change.changeType != .delete {
                    for (name, text) in SyncGroup.describe(change.syncValues) where !isToMany(name, change.entity) {
                        committed[change.globalIdentifier, default: [:]][name, default: []].insert(text)
                    }
                }
            }
        }
        return committed
    }

    static func isToMany(_ name: String, _ entity: EntityDescription) -> Bool {
        (entity.propertiesByName[name] as? RelationshipDescription)?.isToMany ?? false
    }

    /// The hub's values that no writer committed, described.
    static func inventedValues(hub: SyncHub, stores: [URL], model: ManagedObjectModel = SyncFixtures.model()) throws -> [String] {
        let committed = try read(stores, model: model)
        var out: [String] = []
        for gid in try hub.allObjects() {
            guard let state = try hub.state(of: gid), let entity = model.entitiesByName[state.entityName] else { continue }
            for (name, text) in SyncGroup.describe(state.values) where !isToMany(name, entity) {
                if committed[gid]?[name]?.contains(text) == true { continue }
                if text == "nil" && entity.relationshipsByName[name] != nil { continue }
                out.append("the hub's \(state.entityName) \(gid) has \(name) = \(text), which no writer committed (committed: \(committed[gid]?[name]?.sorted() ?? []))")
            }
        }
        return out
    }
}
