import Foundation

/// What happened to an object or a section, with Core Data's raw values
/// (`NSFetchedResultsChangeType`).
public enum FetchedResultsChangeType: UInt, Sendable, CustomStringConvertible {
    case insert = 1
    case delete = 2
    case move = 3
    case update = 4

    public var description: String {
        switch self {
        case .insert: "insert"
        case .delete: "delete"
        case .move: "move"
        case .update: "update"
        }
    }
}

/// A section of a controller's results (`NSFetchedResultsSectionInfo`).
public protocol FetchedResultsSectionInfo: AnyObject {
    /// The section's value of `sectionNameKeyPath`, as a string ("" for nil).
    var name: String { get }
    /// The section's index title (by default its name's first letter, capitalized).
    var indexTitle: String? { get }
    var numberOfObjects: Int { get }
    /// The section's objects, in order.
    var objects: [Any]? { get }
}

/// Told of a controller's changes, on its context's queue
/// (`NSFetchedResultsControllerDelegate`). Every method has an empty default.
///
/// Changes come as one batch per objects-did-change of the context: will,
/// then section deletes and inserts, then object deletes, inserts, moves and
/// updates, then did. Index paths follow a table view's batch updates: a
/// delete's and an update's `indexPath` are before the batch, an insert's
/// `newIndexPath` after it, a move has both (FRC-04).
///
/// ```swift
/// final class List: FetchedResultsControllerDelegate {
///     func controller(_ controller: AnyFetchedResultsController, didChange anObject: Any, at indexPath: IndexPath?,
///                     for type: FetchedResultsChangeType, newIndexPath: IndexPath?) {
///         print(type, indexPath as Any, newIndexPath as Any)
///     }
/// }
/// ```
public protocol FetchedResultsControllerDelegate: AnyObject {
    func controllerWillChangeContent(_ controller: AnyFetchedResultsController)
    func controller(_ controller: AnyFetchedResultsController, didChange anObject: Any, at indexPath: IndexPath?,
                    for type: FetchedResultsChangeType, newIndexPath: IndexPath?)
    func controller(_ controller: AnyFetchedResultsController, didChange sectionInfo: FetchedResultsSectionInfo,
                    atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType)
    func controllerDidChangeContent(_ controller: AnyFetchedResultsController)
    /// The index title of a section; nil keeps the controller's own.
    func controller(_ controller: AnyFetchedResultsController, sectionIndexTitleForSectionName sectionName: String) -> String?
}

extension FetchedResultsControllerDelegate {
    public func controllerWillChangeContent(_ controller: AnyFetchedResultsController) {}
    public func controller(_ controller: AnyFetchedResultsController, didChange anObject: Any, at indexPath: IndexPath?,
                           for type: FetchedResultsChangeType, newIndexPath: IndexPath?) {}
    public func controller(_ controller: AnyFetchedResultsController, didChange sectionInfo: FetchedResultsSectionInfo,
                           atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {}
    public func controllerDidChangeContent(_ controller: AnyFetchedResultsController) {}
    public func controller(_ controller: AnyFetchedResultsController, sectionIndexTitleForSectionName sectionName: String) -> String? { nil }
}

/// UIKit's and AppKit's spellings of a two-level index path, which Linux's
/// Foundation lacks: `[section, item]`, `row` the same as `item`.
extension IndexPath {
    public init(item: Int, section: Int) { self.init(indexes: [section, item]) }
    public init(row: Int, section: Int) { self.init(indexes: [section, row]) }
    public var section: Int { self[0] }
    public var item: Int { self[1] }
    public var row: Int { self[1] }
}
