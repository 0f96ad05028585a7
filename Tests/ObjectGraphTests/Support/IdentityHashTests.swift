import Foundation
import Testing
@testable import ObjectGraph

/// The cheap hash of objects and object IDs (`IdentityHash`): consistent
/// with equality and spread over a table's buckets.
@Suite struct IdentityHashTests {
    static let entity: EntityDescription = {
        let e = EntityDescription(name: "Item")
        e.properties = [AttributeDescription(name: "name", type: .string)]
        return e
    }()

    @Test func equalIDsHashAlikeUnderEverySeed() {
        // MOID-02: equal IDs are one dictionary key, whichever instance is used.
        for seed in [0, 1, -7, Int.max, 0x5EED] {
            let a = ManagedObjectID(entity: Self.entity, storeIdentifier: "S", primaryKey: 42)
            let b = ManagedObjectID(entity: Self.entity, storeIdentifier: "S", primaryKey: 42)
            #expect(a == b && a._rawHashValue(seed: seed) == b._rawHashValue(seed: seed))
        }
        var table: [ManagedObjectID: Int] = [:]
        for key in 1...1_000 { table[ManagedObjectID(entity: Self.entity, storeIdentifier: "S", primaryKey: Int64(key))] = key }
        for key in 1...1_000 {
            #expect(table[ManagedObjectID(entity: Self.entity, storeIdentifier: "S", primaryKey: Int64(key))] == key)
        }
    }

    @Test func sequentialKeysAndTemporaryIDsSpreadOverBuckets() {
        // 4,096 keys into 4,096 buckets by the low bits, as Swift's tables
        // index them: a good mix leaves no bucket with many keys.
        func worstBucket(_ hashes: [Int]) -> Int {
            var counts = [Int](repeating: 0, count: 4_096)
            for h in hashes { counts[h & 4_095] += 1 }
            return counts.max() ?? 0
        }
        let sequential = (1...4_096).map { ManagedObjectID(entity: Self.entity, storeIdentifier: "S", primaryKey: Int64($0))._rawHashValue(seed: 99) }
        let temporary = (1...4_096).map { _ in ManagedObjectID(temporaryFor: Self.entity)._rawHashValue(seed: 99) }
        let strided = (1...4_096).map { ManagedObjectID(entity: Self.entity, storeIdentifier: "S", primaryKey: Int64($0) << 12)._rawHashValue(seed: 99) }
        #expect(worstBucket(sequential) <= 12)
        #expect(worstBucket(temporary) <= 12)
        #expect(worstBucket(strided) <= 12)
        #expect(Set(temporary).count == 4_096)
    }

    @Test func objectsHashByIdentity() {
        let a = ManagedObject(entity: Self.entity, insertInto: nil)
        let b = ManagedObject(entity: Self.entity, insertInto: nil)
        #expect(a._rawHashValue(seed: 3) == a._rawHashValue(seed: 3))
        #expect(Set([a, b, a]).count == 2)
    }
}
