import Foundation
import Testing
@testable import ObjectGraph

/// The coordinator's row cache: one table per entity and store indexed by
/// primary key, a dictionary for keys far past a table's end and for
/// references that are not keys. Whichever holds a row, an ID finds it.
@Suite struct RowCacheTests {
    static let model = ReferenceModel.make()
    static var department: EntityDescription { model.entitiesByName["Department"]! }
    static var employee: EntityDescription { model.entitiesByName["Employee"]! }

    static func id(_ key: Int64, of entity: EntityDescription = department, store: String = "S1") -> ManagedObjectID {
        ManagedObjectID(entity: entity, storeIdentifier: store, primaryKey: key)
    }

    static func entry(_ id: ManagedObjectID, version: Int64) -> RowCache.Entry {
        (StoreSnapshot(objectID: id, version: version, values: [:]), Date(timeIntervalSinceReferenceDate: Double(version)))
    }

    @Test func anEqualIDFindsTheRowWhicheverInstanceStoredIt() {
        var cache = RowCache()
        cache[Self.id(1)] = Self.entry(Self.id(1), version: 1)
        cache[Self.id(2)] = Self.entry(Self.id(2), version: 2)
        #expect(cache[Self.id(1)]?.snapshot.version == 1)
        #expect(cache[Self.id(2)]?.snapshot.version == 2)
        #expect(cache[Self.id(3)] == nil)
        // Same key, other entity or other store: other rows.
        #expect(cache[Self.id(1, of: Self.employee)] == nil)
        #expect(cache[Self.id(1, store: "S2")] == nil)
        cache[Self.id(1)] = nil
        #expect(cache[Self.id(1)] == nil)
        #expect(cache.count == 1)
    }

    @Test func keysWithGapsAndAHugeKeyAreKeptAndFound() {
        var cache = RowCache()
        let keys: [Int64] = [5, 3, 4_000, 9_000, 1 << 40, Int64.max]
        for key in keys { cache[Self.id(key)] = Self.entry(Self.id(key), version: key) }
        for key in keys { #expect(cache[Self.id(key)]?.snapshot.version == key) }
        #expect(cache.count == keys.count)
        #expect(cache[Self.id(4)] == nil && cache[Self.id(8_999)] == nil)
    }

    @Test func aRowStoredPastTheTableMovesInWhenTheTableGrowsToIt() {
        var cache = RowCache()
        let far: Int64 = 10_000   // beyond the growth limit of an empty table
        cache[Self.id(far)] = Self.entry(Self.id(far), version: 1)
        for key in Int64(1)...Int64(far + 10) where key != far { cache[Self.id(key)] = Self.entry(Self.id(key), version: 7) }
        #expect(cache[Self.id(far)]?.snapshot.version == 1)
        cache[Self.id(far)] = Self.entry(Self.id(far), version: 2)   // now written to the table
        #expect(cache[Self.id(far)]?.snapshot.version == 2)
        #expect(cache.count == Int(far) + 10)
        cache[Self.id(far)] = nil
        #expect(cache[Self.id(far)] == nil)
    }

    @Test func temporaryIDsAndRemovingAStoreLeaveTheOtherStoresRows() {
        var cache = RowCache()
        let temporary = ManagedObjectID(temporaryFor: Self.department)
        cache[temporary] = Self.entry(temporary, version: 1)
        cache[Self.id(1, store: "S1")] = Self.entry(Self.id(1, store: "S1"), version: 1)
        cache[Self.id(1 << 40, store: "S1")] = Self.entry(Self.id(1 << 40, store: "S1"), version: 1)
        cache[Self.id(1, store: "S2")] = Self.entry(Self.id(1, store: "S2"), version: 2)
        #expect(cache[temporary]?.snapshot.version == 1)
        cache.removeRows(ofStore: "S1")
        #expect(cache[Self.id(1, store: "S1")] == nil)
        #expect(cache[Self.id(1 << 40, store: "S1")] == nil)
        #expect(cache[Self.id(1, store: "S2")]?.snapshot.version == 2)
        #expect(cache[temporary]?.snapshot.version == 1)
    }
}
