import Foundation

/// The lazily loading result of `ManagedObjectContext.fetchBatched(_:)`
/// (FR-* `fetchBatchSize`): Core Data's batched `NSArray`. It knows every
/// matching object's ID from the start, in result order; an element's batch
/// of `fetchBatchSize` objects is read from the store (one query per batch)
/// when an element of it is first accessed. Only the current batch is held
/// strongly, so walking a large result keeps memory bounded as long as the
/// caller does not keep the objects.
///
/// Use it on the context's queue, like the objects it returns. A row that
/// disappeared from the store after the fetch gives a fault, which throws
/// 133000 when fired.
///
/// ```swift
/// let request = FetchRequest(entityName: "Employee")
/// request.fetchBatchSize = 500
/// let employees = try context.fetchBatched(request)
/// for employee in employees { print(employee.objectID) }   // 500 rows per query
/// ```
public struct FetchedResults: RandomAccessCollection {
    /// One result element before materialization: an ID of a stored row, or
    /// an object that exists only in memory (pending insert).
    enum Entry {
        case id(ManagedObjectID)
        case object(ManagedObject)

        var objectID: ManagedObjectID {
            switch self {
            case .id(let id): return id
            case .object(let object): return object.objectID
            }
        }
    }

    /// Shared by copies of the collection, so a batch is loaded once.
    final class Loader {
        let context: ManagedObjectContext
        let entries: [Entry]
        let batchSize: Int
        let prefetchKeyPaths: [String]
        private(set) var currentBatch = -1
        private(set) var current: [ManagedObject] = []
        private(set) var batchesLoaded = 0

        init(context: ManagedObjectContext, entries: [Entry], batchSize: Int, prefetchKeyPaths: [String]) {
            self.context = context
            self.entries = entries
            self.batchSize = batchSize
            self.prefetchKeyPaths = prefetchKeyPaths
        }

        func object(at index: Int) -> ManagedObject {
            let batch = index / batchSize
            if batch != currentBatch {
                // Drop the previous batch first, so two are never held at once.
                current = []
                let range = (batch * batchSize)..<Swift.min(entries.count, (batch + 1) * batchSize)
                current = context.materializeBatch(entries[range], prefetching: prefetchKeyPaths)
                currentBatch = batch
                batchesLoaded += 1
            }
            return current[index - batch * batchSize]
        }
    }

    let loader: Loader

    init(context: ManagedObjectContext, entries: [Entry], batchSize: Int, prefetchKeyPaths: [String]) {
        loader = Loader(context: context, entries: entries, batchSize: Swift.max(1, batchSize), prefetchKeyPaths: prefetchKeyPaths)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { loader.entries.count }

    /// The object at `position`, loading its batch if needed.
    public subscript(position: Int) -> ManagedObject {
        // Trap kept (issue 28 audit): an index out of range, as every Swift collection (and NSArray) traps.
        precondition(indices.contains(position), "FetchedResults index \(position) out of range 0..<\(count)")
        return loader.object(at: position)
    }

    /// Every result's ID, in order, without loading anything.
    public var objectIDs: [ManagedObjectID] { loader.entries.map(\.objectID) }

    /// The number of objects loaded per store query.
    public var batchSize: Int { loader.batchSize }

    /// How many batches have been loaded so far (a batch loaded again counts again).
    public var batchesLoaded: Int { loader.batchesLoaded }

    /// The objects this collection holds strongly now: the current batch.
    public var materializedCount: Int { loader.current.count }
}
