import Foundation

/// What a ``FetchRequestExpression`` needs from a managed object context:
/// `executeFetchRequest:error:` and `countForFetchRequest:error:`.
///
/// ```swift
/// extension ManagedObjectContext: FetchRequestExecuting {
///     func execute(_ request: Any) throws -> [Any] {
///         guard let request = request as? FetchRequest else { throw CoreDataError(.coreData, "not a fetch request") }
///         return try fetch(request)
///     }
///     func count(for request: Any) throws -> Int { try execute(request).count }
/// }
/// ```
public protocol FetchRequestExecuting {
    /// Runs the request and returns its results. Throw if `request` is not a
    /// request this context understands (FE-06).
    func execute(_ request: Any) throws -> [Any]
    /// Counts the request's results without fetching them.
    func count(for request: Any) throws -> Int
}
