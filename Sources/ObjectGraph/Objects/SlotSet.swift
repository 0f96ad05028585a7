import Foundation

/// A set of property slots (`EntityLayout.slotIndex`): which properties of
/// an object changed since the last save. Every `setValue` adds to it, so it
/// is a bit mask (with a side set past slot 63) rather than a `Set<String>`,
/// which allocated a table per object and hashed the key on each change.
struct SlotSet {
    private var low: UInt64 = 0
    private var high: Set<Int> = []

    var isEmpty: Bool { low == 0 && high.isEmpty }

    func contains(_ slot: Int) -> Bool {
        slot < 64 ? low & (1 << UInt64(slot)) != 0 : high.contains(slot)
    }

    mutating func insert(_ slot: Int) {
        if slot < 64 { low |= 1 << UInt64(slot) } else { high.insert(slot) }
    }

    /// The slots in ascending order.
    var slots: [Int] {
        var out: [Int] = []
        var bits = low
        while bits != 0 {
            let i = bits.trailingZeroBitCount
            out.append(i)
            bits &= bits - 1
        }
        return out + high.sorted()
    }
}

extension ManagedObject {
    /// The changed properties by name: a view of `changedSlots` for the code
    /// that works with names (refresh, rollback, merge policies).
    var changedKeys: Set<String> {
        get { Set(changedSlots.slots.map { layout.slotProperties[$0].name }) }
        set {
            var slots = SlotSet()
            for key in newValue { if let slot = layout.slotIndex[key] { slots.insert(slot) } }
            changedSlots = slots
        }
    }

    /// True when the property named `key` changed since the last save.
    func hasChangedKey(_ key: String) -> Bool {
        guard let slot = layout.slotIndex[key] else { return false }
        return changedSlots.contains(slot)
    }
}
