import Foundation

/// Membership of to-many relationships. A to-many's members are an array
/// in the object's values (ordered relationships need one, and a fetched
/// relationship arrives as one); a large one also gets an index from member
/// to position, so adding a member, testing one, or removing one from an
/// unordered relationship does not scan the array. Building a relationship
/// of n members one at a time (`mutableSetValue(forKey:).insert`, or setting
/// each member's to-one inverse) was O(n²) without it, as Core Data's
/// NSMutableSet is not.
///
/// The index is trusted only while `storageGeneration` is the one it was
/// built or last updated at: every write through `storage` (and every
/// load or fault) moves the generation on, so a change made anywhere
/// else makes the next query rebuild it from the array.
extension ManagedObject {
    /// Below this many members a scan is as fast as the index, and no
    /// index is kept.
    static let memberIndexThreshold = 32

    struct MemberIndex {
        var generation: UInt64
        var positions: [ObjectIdentifier: Int]
    }

    /// The positions of the members in `slot`, valid for `members` (the
    /// slot's current array); nil for a small relationship.
    private func memberPositions(_ slot: Int, _ members: [ManagedObject]) -> [ObjectIdentifier: Int]? {
        guard members.count >= Self.memberIndexThreshold else { return nil }
        if let index = memberIndexes[slot], index.generation == storageGeneration { return index.positions }
        var positions: [ObjectIdentifier: Int] = [:]
        positions.reserveCapacity(members.count)
        for (i, member) in members.enumerated() { positions[ObjectIdentifier(member)] = i }
        memberIndexes[slot] = MemberIndex(generation: storageGeneration, positions: positions)
        return positions
    }

    /// The position of `member` in the to-many `rel` (loaded), or nil.
    final func position(of member: ManagedObject, in rel: RelationshipDescription) -> Int? {
        guard let slot = layout.slotIndex[rel.name] else { return nil }
        let members = storage[slot: slot] as? [ManagedObject] ?? []
        if let positions = memberPositions(slot, members) { return positions[ObjectIdentifier(member)] }
        return members.firstIndex { $0 === member }
    }

    /// Appends `added` (none of them members yet) to the to-many `rel`.
    final func appendMembers(_ added: [ManagedObject], to rel: RelationshipDescription) {
        guard let slot = layout.slotIndex[rel.name], !added.isEmpty else { return }
        var members = storage[slot: slot] as? [ManagedObject] ?? []
        let indexed = memberIndexes[slot].map { $0.generation == storageGeneration } ?? false
        // Storage lets go first so `members` is the array's only owner and
        // changes in place (unless `committed` or an observer's old value
        // shares it): adding members one at a time stays linear.
        storage[slot: slot] = nil
        let start = members.count
        members.append(contentsOf: added)
        storage[slot: slot] = members
        guard indexed else { return }
        memberIndexes[slot]!.generation = storageGeneration
        for (i, member) in added.enumerated() { memberIndexes[slot]!.positions[ObjectIdentifier(member)] = start + i }
    }

    /// Removes `removed` (all of them members) from the to-many `rel`. An
    /// unordered relationship moves its last member into each gap, so a
    /// removal costs no shift of the members behind it.
    final func removeMembers(_ removed: [ManagedObject], from rel: RelationshipDescription) {
        guard let slot = layout.slotIndex[rel.name], !removed.isEmpty else { return }
        var members = storage[slot: slot] as? [ManagedObject] ?? []
        let positions = rel.isOrdered ? nil : memberPositions(slot, members)
        storage[slot: slot] = nil
        if var positions {
            memberIndexes[slot] = nil   // let go of the copy being edited
            for member in removed {
                guard let i = positions.removeValue(forKey: ObjectIdentifier(member)) else { continue }
                let last = members.count - 1
                if i != last {
                    members.swapAt(i, last)
                    positions[ObjectIdentifier(members[i])] = i
                }
                members.removeLast()
            }
            storage[slot: slot] = members
            memberIndexes[slot] = MemberIndex(generation: storageGeneration, positions: positions)
        } else if removed.count == 1 {
            if let i = members.firstIndex(where: { $0 === removed[0] }) { members.remove(at: i) }
            storage[slot: slot] = members
        } else {
            let gone = Set(removed.map(ObjectIdentifier.init))
            members.removeAll { gone.contains(ObjectIdentifier($0)) }
            storage[slot: slot] = members
        }
    }
}
