import Foundation

/// Deletes the objects a fetch request matches, or the objects with given
/// IDs, in the SQLite store itself without loading them: Core Data's
/// `NSBatchDeleteRequest` (BD-01). Run it with a context's `execute(_:)`;
/// the context's objects are not changed (tell contexts with
/// `ManagedObjectContext.mergeChanges(fromRemoteContextSave:into:)`).
///
/// Delete rules are applied in SQL: cascade deletes the destinations too,
/// deny refuses the whole request while a destination would be left, and
/// references of the rows that stay to deleted ones are cleared. Validation
/// rules are not checked (as Core Data's). The delete is one transaction,
/// recorded in persistent history under the context's author and name.
///
/// ```swift
/// let old = FetchRequest(entityName: "Note")
/// old.predicate = try FetchPredicate(format: "modified < %@", cutoff as NSDate)
/// let delete = BatchDeleteRequest(fetchRequest: old)
/// delete.resultType = .objectIDs
/// let result = try context.execute(delete)
/// let changes = [ManagedObjectContext.deletedObjectsKey: result.result as? [ManagedObjectID] ?? []]
/// ManagedObjectContext.mergeChanges(fromRemoteContextSave: changes, into: [container.viewContext])
/// ```
public final class BatchDeleteRequest {
    /// What `execute(_:)` returns in `BatchDeleteResult.result`, with
    /// Core Data's raw values (`NSBatchDeleteRequestResultType`).
    public enum ResultType: UInt, Sendable {
        /// `true` once the delete committed (the default).
        case statusOnly = 0
        /// The IDs of every deleted object, those reached by cascading included.
        case objectIDs = 1
        /// How many objects the request matched (cascaded ones not counted).
        case count = 2
    }

    /// The objects to delete: its entity, predicate, limit and offset.
    public let fetchRequest: AnyFetchRequest
    /// The objects to delete by ID, when made with `init(objectIDs:)`.
    public let objectIDs: [ManagedObjectID]?
    public var resultType: ResultType = .statusOnly

    public init(fetchRequest: AnyFetchRequest) {
        self.fetchRequest = fetchRequest
        self.objectIDs = nil
    }

    /// Deletes these objects; they must all be of one entity (an error when
    /// the request runs, as with Core Data).
    public init(objectIDs: [ManagedObjectID]) {
        let request = AnyFetchRequest(entityName: objectIDs.first?.entity.name)
        request.entity = objectIDs.first?.entity
        self.fetchRequest = request
        self.objectIDs = objectIDs
    }
}

/// What a batch delete returned (`NSBatchDeleteResult`): `result` is a
/// `Bool`, an `Int` count or `[ManagedObjectID]`, by `resultType`.
public struct BatchDeleteResult {
    public let resultType: BatchDeleteRequest.ResultType
    public let result: Any?
}
