import Foundation
import Testing
@testable import ObjectGraph

/// The map behind the uniquing table and the row cache: one array per
/// entity and store indexed by primary key, a dictionary for keys far past
/// an array's end and for IDs that are not keys. Whichever holds an entry,
/// an equal ID finds it; the count follows every change.
@Suite struct ObjectIDTableTests {
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
        cache.removeAll(inStore: "S1")
        #expect(cache[Self.id(1, store: "S1")] == nil)
        #expect(cache[Self.id(1 << 40, store: "S1")] == nil)
        #expect(cache[Self.id(1, store: "S2")]?.snapshot.version == 2)
        #expect(cache[temporary]?.snapshot.version == 1)
        #expect(cache.count == 2)
    }

    @Test func keysStartingHighOrArrivingInDescendingOrderStayInTheArrays() {
        var table = ObjectIDTable<Int64>()
        for key in Int64(100_001)...100_100 { table[Self.id(key)] = key }
        #expect(table.countInArrays == 100)
        for key in stride(from: Int64(100_000), through: 90_000, by: -1) { table[Self.id(key)] = key }
        #expect(table.countInArrays == 10_101)
        table[Self.id(1)] = 1   // far below: the dictionary
        #expect(table.countInArrays == 10_101 && table.count == 10_102)
        for key in [Int64(1), 90_000, 95_555, 100_100] { #expect(table[Self.id(key)] == key) }
        #expect(table[Self.id(89_999)] == nil && table[Self.id(100_101)] == nil)
        #expect(table.removeValue(forKey: Self.id(95_555)) == 95_555 && table.count == 10_101)
    }

    @Test func temporaryIDsAreFiledByNumberPerEntity() {
        var table = ObjectIDTable<Int>()
        // Interleaved entities: each gets its own array, numbers have gaps.
        let departments = (0..<50).map { _ in ManagedObjectID(temporaryFor: Self.department) }
        let employees = (0..<50).map { _ in ManagedObjectID(temporaryFor: Self.employee) }
        for (i, id) in departments.enumerated() { table[id] = i }
        for (i, id) in employees.enumerated() { table[id] = 100 + i }
        #expect(table.countInArrays == 100 && table.count == 100)
        for (i, id) in departments.enumerated() { #expect(table[id] == i) }
        for (i, id) in employees.enumerated() { #expect(table[id] == 100 + i) }
        #expect(table[ManagedObjectID(temporaryFor: Self.department)] == nil)
        #expect(table.removeValue(forKey: departments[3]) == 3 && table[departments[3]] == nil && table.count == 99)
    }

    @Test func anIDOfAModelCopyFindsTheEntryByEntityName() {
        // MOID-02: IDs of the same record are equal across model instances (same entity name)
        var table = ObjectIDTable<Int>()
        let copy = ReferenceModel.make()
        let copiedDepartment = copy.entitiesByName["Department"]!
        table[Self.id(7)] = 7
        let twin = ManagedObjectID(entity: copiedDepartment, storeIdentifier: "S1", primaryKey: 7)
        #expect(twin == Self.id(7))
        #expect(table[twin] == 7)
        table[twin] = 8
        #expect(table[Self.id(7)] == 8 && table.count == 1)
    }

    @Test func findOrAddMakesOnceAndRemoveAllWhereSeesEntriesInPlace() {
        final class Box { let n: Int64; init(_ n: Int64) { self.n = n } }
        var table = ObjectIDTable<Box>()
        var made = 0
        let keys: [Int64] = [1, 2, 3, 9_000_000]
        for key in keys {
            let first = table.value(for: Self.id(key)) { made += 1; return Box(key) }
            let again = table.value(for: Self.id(key)) { made += 1; return Box(-1) }
            #expect(first.made && !again.made && first.value === again.value)
        }
        #expect(made == keys.count && table.count == keys.count)
        // Hold two of them: only the others are referenced by the table alone.
        let held = [table[Self.id(2)]!, table[Self.id(9_000_000)]!]
        var removed: [Int64] = []
        table.removeAll(where: { isKnownUniquelyReferenced(&$0) }, removed: { removed.append($0.n) })
        #expect(removed.sorted() == [1, 3])
        #expect(table.count == 2 && table[Self.id(1)] == nil && table[Self.id(2)] === held[0] && table[Self.id(9_000_000)] === held[1])
        #expect(Set(table.values.map(\.n)) == [2, 9_000_000])
        #expect(table.removeValue(forKey: Self.id(2)) === held[0])
        #expect(table.removeValue(forKey: Self.id(2)) == nil)
        #expect(table.count == 1 && !table.isEmpty)
        // `read` hands the entry over in place: the table's is the only reference.
        #expect(table.read(Self.id(9_000_000)) { isKnownUniquelyReferenced(&$0!) } == false)   // `held` has one too
        table[Self.id(5)] = Box(5)
        #expect(table.read(Self.id(5)) { isKnownUniquelyReferenced(&$0!) })
        #expect(table.read(Self.id(6)) { $0 == nil })
        table.removeAll()
        #expect(table.isEmpty && table[Self.id(9_000_000)] == nil)
    }
}
