import Foundation

/// A map from object IDs to values, for the two tables every fetched row and
/// every saved object goes through: a context's uniquing table and the
/// coordinator's row cache.
///
/// IDs with a store-assigned primary key live in one array per entity and
/// store, indexed by the key; temporary IDs this process made, in one array
/// per entity indexed by their sequence number. Stores hand out keys densely
/// (SQLite's `Z_PK` counts up from 1) and temporary IDs are numbered in
/// order, so a fetch, an insert or a save over consecutive objects touches
/// consecutive entries: a hash table put each of them in a random bucket and
/// compared IDs field by field, and at 100,000 objects those cache misses
/// were a third of a fetch. Keys far past an array's end (a sparse store)
/// and other temporary IDs go to a dictionary. Whichever part holds an
/// entry, an equal ID finds it (entities match by name, as IDs do).
///
/// ```swift
/// var table = ObjectIDTable<String>()
/// table[id] = "row"
/// table[id]          // "row"
/// ```
struct ObjectIDTable<Value> {
    typealias Entry = Value

    /// One entity's entries in one store; a class so an entry is changed in
    /// place without copying the array.
    private final class Keyed {
        let entity: EntityDescription
        let storeIdentifier: String
        /// Unchecked: a dynamic exclusivity check per access of a class's
        /// stored property was a tenth of a lookup.
        @exclusivity(unchecked) var entries: [Value?] = []
        /// The key of `entries[0]`: a table whose first key is high (a
        /// context fetching rows added long after the first) starts there.
        @exclusivity(unchecked) var base = 0

        /// The index of `key` when it is inside the array.
        @inline(__always)
        func index(_ key: Int) -> Int? {
            let i = key &- base
            return i >= 0 && i < entries.count ? i : nil
        }

        /// Makes room for `key` and returns its index, or nil when that
        /// would grow the array past `limit` entries.
        func makeRoom(for key: Int, limit: Int) -> Int? {
            if entries.isEmpty { base = key }
            let i = key - base
            if i >= entries.count {
                guard i < limit else { return nil }
                // Appending grows the array geometrically; reserving to a
                // computed size on every growth would copy it each time.
                while entries.count <= i { entries.append(nil) }
                return i
            }
            if i >= 0 { return i }
            // Below the start: move the start down with headroom, so keys
            // arriving in descending order do not shift the array each time.
            let newBase = Swift.max(1, key - Swift.max(1_024, entries.count / 2))
            guard entries.count + (base - newBase) <= limit else { return nil }
            entries.insert(contentsOf: repeatElement(nil, count: base - newBase), at: 0)
            base = newBase
            return key - base
        }

        init(entity: EntityDescription, storeIdentifier: String) {
            self.entity = entity
            self.storeIdentifier = storeIdentifier
        }

        /// IDs are equal across model copies by entity name (see
        /// `ManagedObjectID.==`), so an array is found by name too.
        func holds(_ id: ManagedObjectID) -> Bool {
            guard entity === id.entity || entity.name == id.entity.name else { return false }
            // A store's IDs share its one identifier string
            // (`PersistentStore.identifier`), so this is a pointer check.
            return (id.storeIdentifier ?? ObjectIDTable.temporaryStore) == storeIdentifier
        }
    }

    /// The store name under which this process's temporary IDs are filed
    /// by their sequence number (no store identifier is empty).
    fileprivate static var temporaryStore: String { "" }

    private var keyed: [Keyed] = []
    /// The array the last access used: consecutive accesses are nearly
    /// always to one entity of one store.
    private var lastKeyed: Keyed?
    private var others: [ManagedObjectID: Value] = [:]
    /// The number of entries in the arrays (the dictionary counts its own).
    private var keyedCount = 0
    /// The number of entries.
    var count: Int { keyedCount + others.count }
    /// How many of them are in the per-entity arrays (tests).
    var countInArrays: Int { keyedCount }
    var isEmpty: Bool { count == 0 }

    /// How far past an array's end a key may grow it (beyond that the entry
    /// goes to the dictionary): room for gaps in a store's keys without
    /// letting one huge key allocate a huge array.
    private static func growthLimit(_ count: Int) -> Int { count + max(4_096, count) }

    /// Where an ID is filed in the arrays: its primary key, or the sequence
    /// number of a temporary ID this process made (filed under the store
    /// name `temporaryStore`); nil for the dictionary.
    private static func key(of id: ManagedObjectID) -> Int? {
        switch id.referenceObject {
        case .primaryKey(let key): return key > 0 && key < Int64(Int32.max) && id.storeIdentifier != nil ? Int(key) : nil
        case .temporary: return id.temporaryNumber
        }
    }

    private mutating func keyed(for id: ManagedObjectID, creating: Bool) -> Keyed? {
        if let last = lastKeyed, last.holds(id) { return last }
        // A few arrays (entities times stores): a scan by identity, then by name.
        let found = keyed.first { $0.entity === id.entity && $0.holds(id) } ?? keyed.first { $0.holds(id) }
        if let found {
            lastKeyed = found
            return found
        }
        guard creating else { return nil }
        let made = Keyed(entity: id.entity, storeIdentifier: id.storeIdentifier ?? Self.temporaryStore)
        keyed.append(made)
        lastKeyed = made
        return made
    }

    subscript(id: ManagedObjectID) -> Value? {
        mutating get {
            if let key = Self.key(of: id), let array = keyed(for: id, creating: false), let i = array.index(key), let value = array.entries[i] {
                return value
            }
            return others.isEmpty ? nil : others[id]
        }
        _modify {
            if let key = Self.key(of: id), let array = keyed(for: id, creating: true),
               let i = array.index(key) ?? array.makeRoom(for: key, limit: Self.growthLimit(array.entries.count)) {
                // An entry put in the dictionary while the array was short
                // moves into its place now.
                if !others.isEmpty, let moved = others.removeValue(forKey: id) {
                    if array.entries[i] == nil { keyedCount += 1 }
                    array.entries[i] = moved
                }
                let was = array.entries[i] != nil
                defer { keyedCount += (array.entries[i] != nil ? 1 : 0) - (was ? 1 : 0) }
                yield &array.entries[i]
            } else {
                yield &others[id]
            }
        }
    }

    /// Hands `body` the entry for `id` in place, so it can read part of a
    /// value without copying (and retaining) all of it; `body` must not
    /// change the entry.
    mutating func read<R>(_ id: ManagedObjectID, _ body: (inout Value?) -> R) -> R {
        if let key = Self.key(of: id), let array = keyed(for: id, creating: false), let i = array.index(key), array.entries[i] != nil {
            return body(&array.entries[i])
        }
        if !others.isEmpty, others[id] != nil { return body(&others[id]) }
        var none: Value?
        return body(&none)
    }

    /// The value for `id`, made by `make` and added when there is none;
    /// `made` says which. One lookup either way.
    mutating func value(for id: ManagedObjectID, orAdd make: () -> Value) -> (value: Value, made: Bool) {
        var made = false
        let value = Self.unwrap(&self[id]) {
            made = true
            return make()
        }
        return (value, made)
    }

    private static func unwrap(_ slot: inout Value?, _ make: () -> Value) -> Value {
        if let value = slot { return value }
        let value = make()
        slot = value
        return value
    }

    @discardableResult
    mutating func removeValue(forKey id: ManagedObjectID) -> Value? {
        guard let key = Self.key(of: id), let array = keyed(for: id, creating: false), let i = array.index(key),
              let old = array.entries[i] else {
            return others.isEmpty ? nil : others.removeValue(forKey: id)
        }
        array.entries[i] = nil
        keyedCount -= 1
        return old
    }

    /// Every value, in no particular order.
    var values: [Value] {
        var out: [Value] = []
        out.reserveCapacity(count)
        for array in keyed { for case let value? in array.entries { out.append(value) } }
        out.append(contentsOf: others.values)
        return out
    }

    /// Removes the entries `shouldRemove` picks, reading each in place (so
    /// `isKnownUniquelyReferenced` sees the table's own reference), and
    /// hands each removed value to `removed`.
    mutating func removeAll(where shouldRemove: (inout Value) -> Bool, removed: (Value) -> Void = { _ in }) {
        for array in keyed {
            for i in array.entries.indices where array.entries[i] != nil {
                if shouldRemove(&array.entries[i]!) {
                    let value = array.entries[i]!
                    array.entries[i] = nil
                    keyedCount -= 1
                    removed(value)
                }
            }
        }
        for id in Array(others.keys) where shouldRemove(&others[id]!) {
            if let value = others.removeValue(forKey: id) { removed(value) }
        }
    }

    mutating func removeAll() {
        keyed = []
        lastKeyed = nil
        others = [:]
        keyedCount = 0
    }

    /// Forgets every entry of a store (it left the coordinator).
    mutating func removeAll(inStore storeIdentifier: String) {
        for array in keyed where array.storeIdentifier == storeIdentifier {
            keyedCount -= array.entries.reduce(0) { $0 + ($1 == nil ? 0 : 1) }
        }
        keyed.removeAll { $0.storeIdentifier == storeIdentifier }
        lastKeyed = nil
        others = others.filter { $0.key.storeIdentifier != storeIdentifier }
    }
}
