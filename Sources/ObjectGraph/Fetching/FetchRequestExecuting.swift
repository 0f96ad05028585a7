import Foundation

/// What a ``FetchRequestExpression`` needs from a managed object context:
/// `executeFetchRequest:error:` and `countForFetchRequest:error:`.
///
/// ```swift
/// extension ManagedObjectContext: FetchRequestExecuting {
///     func execute(_ request: Any) throws -> [Any] { try fetch(request as! FetchRequest) }
///     func count(for request: Any) throws -> Int { try count(for: request as! FetchRequest) }
/// }
/// ```
public protocol FetchRequestExecuting {
    /// Runs the request and returns its results. Throw if `request` is not a
    /// request this context understands (FE-06).
    func execute(_ request: Any) throws -> [Any]
    /// Counts the request's results without fetching them.
    func count(for request: Any) throws -> Int
}
