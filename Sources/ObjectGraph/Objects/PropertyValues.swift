import Foundation

/// The values of one object's modeled properties, one slot per property in
/// the order `EntityLayout.slotProperties` gives: what a managed object
/// holds (current and committed values) and, for the snapshot part, what a
/// `StoreSnapshot` holds. Slots instead of a `[String: Any]` because every
/// fetched row, every `setValue` and every save touches each value: an
/// array indexed by position is filled, copied (copy-on-write, so the
/// committed values share the current ones until a change) and read
/// without hashing a key or growing a table.
///
/// Access by name looks the slot up in the layout; hot paths use
/// `subscript(slot:)`. An empty value (a fault's) has no slots; reading past
/// the end is nil and writing grows the array to the layout's size.
struct PropertyValues {
    let layout: EntityLayout
    private(set) var slots: [Any?]

    init(layout: EntityLayout) {
        self.layout = layout
        self.slots = []
    }

    init(layout: EntityLayout, slots: [Any?]) {
        self.layout = layout
        self.slots = slots
    }

    /// The value of a modeled property; nil for unknown keys.
    subscript(key: String) -> Any? {
        get {
            guard let i = layout.slotIndex[key], i < slots.count else { return nil }
            return slots[i]
        }
        set {
            guard let i = layout.slotIndex[key] else { return }
            self[slot: i] = newValue
        }
    }

    subscript(slot i: Int) -> Any? {
        get { i < slots.count ? slots[i] : nil }
        set {
            if i >= slots.count {
                if newValue == nil { return }
                // The first write to a new object's values sizes them at once.
                if slots.isEmpty {
                    slots = StoreSnapshot.emptySlots(layout.slotProperties.count)
                } else {
                    slots.append(contentsOf: StoreSnapshot.emptySlots(layout.slotProperties.count - slots.count))
                }
            }
            slots[i] = newValue
        }
    }

    /// True when slot `i` holds nil or a value of exactly `type` (nil
    /// `type`: any value), read in place.
    func slot(_ i: Int, isNilOrOfType type: Any.Type?) -> Bool {
        guard i < slots.count else { return true }
        return slots.withUnsafeBufferPointer { buffer in
            guard let value = buffer[i] else { return true }
            guard let type else { return true }
            return Swift.type(of: value) == type
        }
    }

    /// True when both hold the same slot array (not merely equal values).
    func sharesSlots(with other: PropertyValues) -> Bool {
        slots.withUnsafeBufferPointer { mine in other.slots.withUnsafeBufferPointer { $0.baseAddress == mine.baseAddress } }
    }

    /// Removes and returns the value of `key`.
    @discardableResult
    mutating func removeValue(forKey key: String) -> Any? {
        let old = self[key]
        self[key] = nil
        return old
    }

    mutating func removeAll() { slots = [] }
}
