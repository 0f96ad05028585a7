import Foundation
import ObjectGraph

/// Where each object's changes end in a store transaction read in parts: the
/// pull's first pass over such a transaction fills it (identifiers only, no
/// change is kept), the second settles each object's changes, folded, in
/// the part that `settlingPart(of:reading:)` names (docs/SYNC.md "Settled in
/// parts").
///
/// - An object the transaction inserts is settled in the part of its last
///   own change (row change), with every earlier change folded in. Later
///   changes that only reflect other objects' (members added or removed)
///   are settled in their own parts: an object new at the hub has no hub
///   change to conflict with, so they apply the same alone.
/// - Any other object with an own change (an update or a delete of a row
///   the hub has) is settled once, in the last part that changes it at all,
///   with everything folded in: what the policy decides depends on the
///   whole change (a delete after an update is one delete; under rollback
///   a conflicting attribute keeps the members added back too).
/// - An object whose only changes reflect other objects' is settled in each
///   part: such a change can never conflict, so settling it alone or folded
///   gives the same hub.
///
/// What this holds is one entry per object of the transaction (its
/// identifier and two part numbers), not the decoded changes.
struct PartedTransactionPlan {
    private struct Entry {
        /// The last part with a change of the object's own row (-1: none).
        var lastOwn: Int32 = -1
        /// The last part with any change of the object.
        var lastAny: Int32 = 0
        var inserted = false
    }
    private var entries: [UUID: Entry] = [:]
    /// Parts noted so far.
    private(set) var parts = 0

    /// Notes the changes of the next part.
    mutating func note(_ changes: [StoreChange]) {
        let part = Int32(parts)
        for change in changes {
            var entry = entries[change.globalIdentifier] ?? Entry()
            entry.lastAny = part
            if !change.onlyReflectsOtherObjects {
                entry.lastOwn = part
                if change.changeType == .insert { entry.inserted = true }
            }
            entries[change.globalIdentifier] = entry
        }
        parts += 1
    }

    /// The part (0-based) in which the object's changes are settled, for a
    /// change of it read in part `part`.
    func settlingPart(of object: UUID, reading part: Int) -> Int {
        guard let entry = entries[object], entry.lastOwn >= 0 else { return part }
        return Int(entry.inserted ? entry.lastOwn : entry.lastAny)
    }
}
