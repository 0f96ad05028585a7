/// Property name → slot of an `EntityLayout`, for key-value access by name.
///
/// Most entities have a handful of properties, and every `value(forKey:)`
/// and `setValue(_:forKey:)` looks one up: comparing the key with a few
/// short names (Swift compares small ASCII strings by their bytes) costs a
/// fraction of hashing it. Larger entities use a table.
///
/// ```swift
/// let slot = layout.slotIndex["name"]
/// ```
struct SlotIndex {
    /// Up to this many names are scanned instead of hashed.
    static let scanLimit = 12

    private let names: [String]
    /// The names' UTF-8 lengths: a name of another length is passed over
    /// without a string comparison (which, for two different strings, is a
    /// call into the runtime).
    private let lengths: [Int]
    private let table: [String: Int]

    /// `names[i]` is the name of slot `i`; a repeated name (a model
    /// `validate()` rejects) answers its last slot, the nearest declaration.
    init(names: [String]) {
        var table: [String: Int] = [:]
        for (i, name) in names.enumerated() { table[name] = i }
        self.names = names
        self.lengths = names.map(\.utf8.count)
        self.table = names.count > Self.scanLimit ? table : [:]
    }

    subscript(key: String) -> Int? {
        if names.count > Self.scanLimit { return table[key] }
        let length = key.utf8.count
        for i in names.indices.reversed() where lengths[i] == length && names[i] == key { return i }
        return nil
    }
}
