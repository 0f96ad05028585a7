import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The policy table of docs/SYNC.md, cell by cell (`Settlement.decide`).
/// The store's change plays the in-memory object, the hub the persistent
/// store (MOC-MP-09: shared properties; MOC-MP-10: a delete against an
/// update either way). `SyncPolicyTests` runs the same cases end to end.
@Suite struct SettlementTests {
    typealias Hub = Settlement.HubSide
    static let updated = Hub(has: true, deleted: false, updated: true)
    static let unchanged = Hub(has: true, deleted: false, updated: false)
    static let deleted = Hub(has: false, deleted: true, updated: false)
    static let absent = Hub(has: false, deleted: false, updated: false)

    static func decide(_ type: PersistentHistoryChangeType, _ policy: SyncPolicy, _ hub: Hub,
                       store: Set<String> = ["a"], hubChanged: Set<String> = []) -> Settlement {
        Settlement.decide(type, policy: policy, hub: hub, storeChanged: store, hubChanged: hubChanged)
    }

    @Test(arguments: SyncPolicy.allCases)
    func anUpdateWithNoSharedPropertyAppliesWhole(policy: SyncPolicy) {
        #expect(Self.decide(.update, policy, Self.updated, store: ["a"], hubChanged: ["b"]) == .apply)
        #expect(Self.decide(.update, policy, Self.unchanged) == .apply)
    }

    /// MOC-MP-09: both sides changed `a`; the store also changed `b`.
    @Test func anUpdateOfSharedPropertiesFollowsThePolicy() {
        let expected: [SyncPolicy: Settlement] = [
            .error: .conflict(.update),
            .storeTrump: .applyExcept(["a"]),
            .objectTrump: .apply,
            .overwrite: .applyStoreObject,
            .rollback: .sendHubObject,
        ]
        for policy in SyncPolicy.allCases {
            #expect(Self.decide(.update, policy, Self.updated, store: ["a", "b"], hubChanged: ["a", "c"]) == expected[policy], "\(policy)")
        }
    }

    /// MOC-MP-10 (ii): updated in the store, deleted at the hub.
    @Test func anUpdateOfAnObjectTheHubDeletedFollowsThePolicy() {
        let expected: [SyncPolicy: Settlement] = [
            .error: .conflict(.updateVersusDelete),
            .storeTrump: .sendHubObject,
            .objectTrump: .reinsertStoreObject,
            .overwrite: .reinsertStoreObject,
            .rollback: .sendHubObject,
        ]
        for policy in SyncPolicy.allCases { #expect(Self.decide(.update, policy, Self.deleted) == expected[policy], "\(policy)") }
    }

    /// MOC-MP-10 (i): deleted in the store, updated at the hub.
    @Test func aDeleteOfAnObjectTheHubUpdatedFollowsThePolicy() {
        let expected: [SyncPolicy: Settlement] = [
            .error: .conflict(.deleteVersusUpdate),
            .storeTrump: .sendHubObject,
            .objectTrump: .delete,
            .overwrite: .delete,
            .rollback: .sendHubObject,
        ]
        for policy in SyncPolicy.allCases { #expect(Self.decide(.delete, policy, Self.updated) == expected[policy], "\(policy)") }
    }

    @Test(arguments: SyncPolicy.allCases)
    func aDeleteOfAnObjectTheHubLeftAloneDeletes(policy: SyncPolicy) {
        #expect(Self.decide(.delete, policy, Self.unchanged) == .delete)
    }

    @Test(arguments: SyncPolicy.allCases)
    func anInsertInserts(policy: SyncPolicy) {
        #expect(Self.decide(.insert, policy, Self.absent) == .insert)
        // A dead row's identifier given to a new row: the hub has the object, the values apply.
        #expect(Self.decide(.insert, policy, Self.unchanged) == .apply)
    }

    /// An update or delete of an object the hub never had and did not
    /// delete (held back, or bookkeeping the hub does not keep): nothing.
    @Test(arguments: SyncPolicy.allCases)
    func changesOfAnObjectTheHubNeverHadDoNothing(policy: SyncPolicy) {
        #expect(Self.decide(.update, policy, Self.absent) == .none)
        #expect(Self.decide(.delete, policy, Self.absent) == .none)
        #expect(Self.decide(.delete, policy, Self.deleted) == .none)
    }
}
