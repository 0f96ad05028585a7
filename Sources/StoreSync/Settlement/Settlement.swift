import Foundation
import ObjectGraph

/// What the hub does with one store change: the policy table of
/// docs/SYNC.md as a pure function of the change's kind, the store's
/// policy and what the hub did to the object since the store's base, so
/// each cell is tested alone (`SettlementTests`). The pull turns the
/// answer into hub writes (`PullChunk.settle`).
///
/// The store's change plays Core Data's in-memory object, the hub the
/// persistent store (MOC-MP-09 for updates of shared properties,
/// MOC-MP-10 for a delete against an update either way).
///
/// ```swift
/// Settlement.decide(.update, policy: .storeTrump, hub: .init(has: true, deleted: false, updated: true),
///                   storeChanged: ["a", "b"], hubChanged: ["a"])   // .applyExcept(["a"]): b applies, a keeps the hub's
/// ```
enum Settlement: Equatable {
    /// The hub inserts the object with the store's values.
    case insert
    /// The store's values apply (all of the change's properties).
    case apply
    /// The store's values apply but for these shared properties, which keep
    /// the hub's; the store gets the hub's object back.
    case applyExcept(Set<String>)
    /// The store's current object applies whole, every property (overwrite).
    case applyStoreObject
    /// The hub deleted the object; it is inserted again with the store's
    /// current object (object-trump and overwrite against a hub delete).
    case reinsertStoreObject
    /// Nothing of the change applies; the store gets the hub's object back
    /// (or its deletion).
    case sendHubObject
    /// The hub deletes the object.
    case delete
    /// A conflict is recorded and the object held until it is resolved.
    case conflict(SyncConflict.Kind)
    /// Nothing to do: an update or delete of an object the hub does not
    /// have and did not delete since the store's base.
    case none

    /// What the hub did to the object since the store's base, not counting
    /// the store's own changes.
    struct HubSide: Equatable {
        /// The hub has the object now.
        var has: Bool
        /// The hub deleted it since the base.
        var deleted: Bool
        /// The hub updated it since the base.
        var updated: Bool
    }

    /// - Parameters:
    ///   - storeChanged: the attributes and to-ones the store's change sets.
    ///   - hubChanged: the properties the hub's changes since the base set.
    static func decide(_ type: PersistentHistoryChangeType, policy: SyncPolicy, hub: HubSide,
                       storeChanged: Set<String>, hubChanged: Set<String>) -> Settlement {
        switch type {
        case .insert:
            // An object the hub already has (a dead row's identifier reused) takes the values as an update.
            return hub.has ? .apply : .insert
        case .update:
            guard hub.has else {
                // Updated in the store, deleted at the hub (MOC-MP-10 ii).
                guard hub.deleted else { return .none }
                switch policy {
                case .storeTrump, .rollback: return .sendHubObject
                case .objectTrump, .overwrite: return .reinsertStoreObject
                case .error: return .conflict(.updateVersusDelete)
                }
            }
            let conflicting = storeChanged.intersection(hubChanged)
            if conflicting.isEmpty { return .apply }
            switch policy {
            case .storeTrump: return .applyExcept(conflicting)
            case .objectTrump: return .apply
            case .overwrite: return .applyStoreObject
            case .rollback: return .sendHubObject
            case .error: return .conflict(.update)
            }
        case .delete:
            guard hub.has else { return .none }
            guard hub.updated else { return .delete }
            // Deleted in the store, updated at the hub (MOC-MP-10 i).
            switch policy {
            case .storeTrump, .rollback: return .sendHubObject
            case .objectTrump, .overwrite: return .delete
            case .error: return .conflict(.deleteVersusUpdate)
            }
        }
    }
}
