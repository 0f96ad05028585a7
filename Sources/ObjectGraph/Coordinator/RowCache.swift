import Foundation

/// The coordinator's cache of stored rows (Core Data's row cache): the last
/// snapshot read or saved for each stored object, and when, so faults fire
/// without a query while the row is fresh enough.
///
/// Rows with a store-assigned primary key live in one table per entity and
/// store, indexed by the key. Stores hand out keys densely (SQLite's `Z_PK`
/// counts up from 1), so a fetch or a walk over consecutive keys touches
/// consecutive entries: a hash table keyed by object ID put every row in a
/// random bucket and compared IDs field by field, and those cache misses
/// were a third of fetching 100,000 objects. Keys too far past a table's
/// end (a sparse store) and non-integer references go to a dictionary.
///
/// Not thread-safe: the coordinator reads and writes it under its lock.
struct RowCache {
    typealias Entry = (snapshot: StoreSnapshot, time: Date)

    /// One entity's rows in one store; a class so an entry is replaced in
    /// place without copying the table.
    private final class Table {
        let entity: EntityDescription
        let storeIdentifier: String
        var entries: [Entry?] = []

        init(entity: EntityDescription, storeIdentifier: String) {
            self.entity = entity
            self.storeIdentifier = storeIdentifier
        }

        func holds(_ id: ManagedObjectID) -> Bool { entity === id.entity && storeIdentifier == id.storeIdentifier }
    }

    private struct TableKey: Hashable {
        let entity: ObjectIdentifier
        let storeIdentifier: String
    }

    private var tables: [TableKey: Table] = [:]
    /// The table the last access used: consecutive accesses are nearly
    /// always to one entity of one store.
    private var lastTable: Table?
    private var others: [ManagedObjectID: Entry] = [:]

    /// How far past a table's end a key may grow it (beyond that the row
    /// goes to the dictionary): room for a store's keys to have gaps without
    /// letting one huge key allocate a huge table.
    private static func growthLimit(_ count: Int) -> Int { count + max(4_096, count) }

    subscript(id: ManagedObjectID) -> Entry? {
        mutating get {
            if case .primaryKey(let key) = id.referenceObject, key > 0, let table = table(for: id, creating: false),
               key < table.entries.count, let entry = table.entries[Int(key)] {
                return entry
            }
            return others.isEmpty ? nil : others[id]
        }
        set {
            if case .primaryKey(let key) = id.referenceObject, key > 0, id.storeIdentifier != nil {
                let table = table(for: id, creating: newValue != nil)
                if let table, key < table.entries.count {
                    table.entries[Int(key)] = newValue
                    if !others.isEmpty { others[id] = nil }
                    return
                }
                if let table, newValue != nil, key <= Self.growthLimit(table.entries.count) {
                    while table.entries.count < key { table.entries.append(nil) }
                    table.entries.append(newValue)
                    if !others.isEmpty { others[id] = nil }
                    return
                }
            }
            if newValue != nil || !others.isEmpty { others[id] = newValue }
        }
    }

    private mutating func table(for id: ManagedObjectID, creating: Bool) -> Table? {
        if let last = lastTable, last.holds(id) { return last }
        guard let storeIdentifier = id.storeIdentifier else { return nil }
        let key = TableKey(entity: ObjectIdentifier(id.entity), storeIdentifier: storeIdentifier)
        if let table = tables[key] {
            lastTable = table
            return table
        }
        guard creating else { return nil }
        let table = Table(entity: id.entity, storeIdentifier: storeIdentifier)
        tables[key] = table
        lastTable = table
        return table
    }

    /// Forgets every row of a store (it was removed from the coordinator).
    mutating func removeRows(ofStore storeIdentifier: String) {
        tables = tables.filter { $0.key.storeIdentifier != storeIdentifier }
        lastTable = nil
        others = others.filter { $0.key.storeIdentifier != storeIdentifier }
    }

    /// The number of cached rows (tests).
    var count: Int {
        tables.values.reduce(others.count) { total, table in total + table.entries.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
    }
}
