import Foundation
import ObjectGraph

/// One object's change in one store transaction, as the pull settles it:
/// its kind and its new values as the engine carries them.
///
/// A store transaction larger than a chunk is read in parts, and one
/// object's row changes may fall in several of them (an insert in the first
/// part, an update or a delete in a later one). `folding(_:)` combines two
/// such changes with the rules ObjectGraph's history decoder applies to the
/// row changes of one transaction read whole (docs/HISTORY.md "Reading"),
/// so a change folded from parts is the change reading the whole
/// transaction gives, and is settled once (docs/SYNC.md "Settled in parts").
struct StoreChange {
    let globalIdentifier: UUID
    let entity: EntityDescription
    var changeType: PersistentHistoryChangeType
    var values: [String: SyncValue]

    init(globalIdentifier: UUID, entity: EntityDescription, changeType: PersistentHistoryChangeType, values: [String: SyncValue]) {
        self.globalIdentifier = globalIdentifier
        self.entity = entity
        self.changeType = changeType
        self.values = values
    }

    init(_ change: PersistentHistoryChange) {
        self.init(globalIdentifier: change.globalIdentifier, entity: change.entity, changeType: change.changeType, values: change.syncValues)
    }

    /// The attributes and to-ones the change sets: what can conflict with a
    /// hub change of the same property (to-many memberships are merged as
    /// members added and removed, never a conflict by themselves).
    var settableProperties: Set<String> {
        Set(values.keys.filter { name in !((entity.propertiesByName[name] as? RelationshipDescription)?.isToMany ?? false) })
    }

    /// Whether the change is only the reflection of other objects' changes:
    /// an update of to-many memberships alone (a member's to-one moved, a
    /// join row added or removed), no attribute, no to-one, no ordered
    /// position. Such a change can never conflict (nothing in it is a
    /// shared property) and applies the same on its own as folded with the
    /// object's other changes of the transaction.
    var onlyReflectsOtherObjects: Bool {
        guard changeType == .update else { return false }
        return values.values.allSatisfy { value in
            if case .memberChange(_, _, let positions) = value { return positions.isEmpty }
            return false
        }
    }

    /// This change followed by `later`, a change of the same object later in
    /// the same transaction; nil when nothing remains (inserted and deleted
    /// in the transaction, or member changes that cancel out).
    func folding(_ later: StoreChange) -> StoreChange? {
        precondition(later.globalIdentifier == globalIdentifier, "folding changes of two objects")
        var folded = self
        switch (changeType, later.changeType) {
        case (.delete, .insert):
            // A dead row's identifier given to a new row (an upsert): what
            // the decoder reports is the insert.
            return later
        case (.delete, _):
            // The decoder drops member changes of an object once it is deleted.
            return self
        case (.insert, .delete):
            return nil
        case (_, .delete):
            return later
        case (_, .insert):
            // Member changes seen before the object's own row belong to the insert.
            folded.changeType = .insert
        case (_, .update):
            break
        }
        for (name, value) in later.values {
            if case .memberChange(let added, let removed, let positions) = value,
               case .memberChange(let addedBefore, let removedBefore, let positionsBefore)? = folded.values[name] {
                folded.values[name] = Self.memberChange(added: addedBefore, removed: removedBefore, positions: positionsBefore,
                                                        thenAdded: added, removed: removed, positions: positions)
            } else {
                folded.values[name] = value
            }
        }
        // Member lists that cancelled out are no change (as the decoder reports them).
        for (name, value) in folded.values {
            if case .memberChange(let added, let removed, let positions) = value, added.isEmpty && removed.isEmpty && positions.isEmpty {
                folded.values[name] = nil
            }
        }
        if folded.changeType == .update && folded.values.isEmpty { return nil }
        return folded
    }

    /// Members added and removed, then those of a later change: an addition
    /// cancels an earlier removal and a removal an earlier addition, as the
    /// decoder folds the join rows and foreign keys of one transaction.
    private static func memberChange(added: [UUID], removed: [UUID], positions: [UUID: Int],
                                     thenAdded laterAdded: [UUID], removed laterRemoved: [UUID], positions laterPositions: [UUID: Int]) -> SyncValue {
        var added = added, removed = removed
        for member in laterAdded {
            if let i = removed.firstIndex(of: member) { removed.remove(at: i) } else if !added.contains(member) { added.append(member) }
        }
        for member in laterRemoved {
            if let i = added.firstIndex(of: member) { added.remove(at: i) } else if !removed.contains(member) { removed.append(member) }
        }
        return .memberChange(added: added, removed: removed, positions: positions.merging(laterPositions) { _, later in later })
    }
}
