import Foundation

/// Sets attributes of every object a predicate matches, in the SQLite store
/// itself without loading them: Core Data's `NSBatchUpdateRequest` (BU-01).
/// Run it with a context's `execute(_:)`; contexts are told with
/// `ManagedObjectContext.mergeChanges(fromRemoteContextSave:into:)`.
///
/// Values are constants for attributes (nil clears one); each updated row's
/// version moves, so a context that still holds an old copy and saves it
/// gets a merge conflict rather than overwriting. Validation rules are not
/// checked. The update is one transaction, recorded in persistent history.
///
/// ```swift
/// let read = BatchUpdateRequest(entityName: "Note")
/// read.predicate = try FetchPredicate(format: "isRead == NO")
/// read.propertiesToUpdate = ["isRead": true]
/// read.resultType = .updatedObjectsCount
/// let count = try context.execute(read).result as? Int
/// ```
public final class BatchUpdateRequest {
    /// Core Data's `NSBatchUpdateRequestResultType`, with its raw values.
    public enum ResultType: UInt, Sendable {
        case statusOnly = 0
        case updatedObjectIDs = 1
        case updatedObjectsCount = 2
    }

    public let entityName: String
    public var predicate: FetchPredicate?
    public var includesSubentities = true
    /// Attribute name → new value (nil or `NSNull` clears it).
    public var propertiesToUpdate: [String: Any?] = [:]
    public var resultType: ResultType = .statusOnly

    public init(entityName: String) { self.entityName = entityName }

    public convenience init(entity: EntityDescription) { self.init(entityName: entity.name) }
}

/// What a batch update returned (`NSBatchUpdateResult`): `true`, an `Int`
/// count or `[ManagedObjectID]`, by `resultType`.
public struct BatchUpdateResult {
    public let resultType: BatchUpdateRequest.ResultType
    public let result: Any?
}
