import Foundation

/// A fetched results controller typed by its objects' class: Core Data's
/// `NSFetchedResultsController<ResultType>`. The untyped work and the
/// change tracking are in ``AnyFetchedResultsController``, which its
/// delegate receives (Core Data's delegate gets the type-erased
/// `NSFetchedResultsController<NSFetchRequestResult>`).
///
/// ```swift
/// let request = FetchRequest(entityName: "Note")
/// request.sortDescriptors = [FetchSortDescriptor(key: "folder"), FetchSortDescriptor(key: "title")]
/// let notes = FetchedResultsController<Note>(fetchRequest: request, managedObjectContext: container.viewContext,
///                                            sectionNameKeyPath: "folder", cacheName: nil)
/// notes.delegate = list
/// try notes.performFetch()
/// let first: Note = notes.object(at: IndexPath(row: 0, section: 0))
/// ```
public final class FetchedResultsController<ResultType: ManagedObject>: AnyFetchedResultsController {
    /// The objects, in section then row order; nil before `performFetch`.
    public var fetchedObjects: [ResultType]? {
        fetchedManagedObjects.map { $0.map { $0 as! ResultType } }
    }

    /// The object at `indexPath`; traps outside the results, as Core Data
    /// raises a range exception.
    public func object(at indexPath: IndexPath) -> ResultType {
        managedObject(at: indexPath) as! ResultType
    }

    /// Every fetched object must be a `ResultType` (the entity's class
    /// registered for it), or the typed accessors would trap later.
    override func check(_ objects: [ManagedObject]) throws {
        if let wrong = objects.first(where: { !($0 is ResultType) }) {
            throw CoreDataError(.coreData, "FetchedResultsController<\(ResultType.self)> fetched a \(type(of: wrong)) for entity \(wrong.entity.name); register \(ResultType.self) for the entity or use FetchedResultsController<ManagedObject>")
        }
    }
}
