import Foundation

/// What one batch of context changes did to a controller's sections, in a
/// table view's batch-update terms: deletes and updates at old index paths,
/// inserts at new ones, moves from old to new (FRC-04).
///
/// An object that changed and whose index path is not the same after the
/// batch is a move; one that changed and kept its index path is an update;
/// an object that did not change is not reported, even when others moved
/// it (the table view shifts it with the inserts and deletes).
struct FetchedResultsChanges {
    struct ObjectChange {
        let object: ManagedObject
        let type: FetchedResultsChangeType
        let indexPath: IndexPath?
        let newIndexPath: IndexPath?
    }

    private(set) var deletedSections: [Int] = []
    private(set) var insertedSections: [Int] = []
    /// Deletes, then inserts, then moves, then updates; each in index order.
    private(set) var objects: [ObjectChange] = []

    var isEmpty: Bool { deletedSections.isEmpty && insertedSections.isEmpty && objects.isEmpty }

    init(old: [AnyFetchedResultsController.Section], new: [AnyFetchedResultsController.Section], updated: Set<ObjectIdentifier>) {
        let oldNames = Set(old.map(\.name)), newNames = Set(new.map(\.name))
        deletedSections = old.indices.filter { !newNames.contains(old[$0].name) }
        insertedSections = new.indices.filter { !oldNames.contains(new[$0].name) }

        func positions(_ sections: [AnyFetchedResultsController.Section]) -> [ObjectIdentifier: IndexPath] {
            var result: [ObjectIdentifier: IndexPath] = [:]
            for (s, section) in sections.enumerated() {
                for (row, object) in section.members.enumerated() { result[ObjectIdentifier(object)] = IndexPath(row: row, section: s) }
            }
            return result
        }
        let before = positions(old), after = positions(new)
        var deletes: [ObjectChange] = [], inserts: [ObjectChange] = [], moves: [ObjectChange] = [], updates: [ObjectChange] = []
        for section in old {
            for object in section.members where after[ObjectIdentifier(object)] == nil {
                deletes.append(ObjectChange(object: object, type: .delete, indexPath: before[ObjectIdentifier(object)], newIndexPath: nil))
            }
        }
        for section in new {
            for object in section.members {
                let id = ObjectIdentifier(object)
                guard let to = after[id] else { continue }
                if let from = before[id] {
                    guard updated.contains(id) else { continue }
                    if from == to {
                        updates.append(ObjectChange(object: object, type: .update, indexPath: from, newIndexPath: to))
                    } else {
                        moves.append(ObjectChange(object: object, type: .move, indexPath: from, newIndexPath: to))
                    }
                } else {
                    inserts.append(ObjectChange(object: object, type: .insert, indexPath: nil, newIndexPath: to))
                }
            }
        }
        objects = deletes + inserts + moves + updates
    }
}
