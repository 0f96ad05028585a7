import Foundation

/// What a fetch can return (Core Data's `NSFetchRequestResult`): managed
/// objects, object IDs, dictionaries and counts.
public protocol FetchRequestResult {}
extension ManagedObject: FetchRequestResult {}
extension ManagedObjectID: FetchRequestResult {}
extension NSDictionary: FetchRequestResult {}
extension NSNumber: FetchRequestResult {}

/// A fetch request typed by its results: Core Data's `NSFetchRequest<Result>`.
/// `fetch(_:)` on a context returns `[Result]`. Without a type parameter,
/// `FetchRequest(entityName:)` is a request for `ManagedObject`s; a class's
/// `fetchRequest()` is one for that class.
///
/// ```swift
/// let request = FetchRequest<Note>(entityName: "Note")
/// request.predicate = try FetchPredicate(format: "title BEGINSWITH %@", "A")
/// let notes: [Note] = try context.fetch(request)
/// let ids = try context.fetch(FetchRequest<ManagedObjectID>(entityName: "Note", resultType: .managedObjectID))
/// ```
///
/// `Result` is not constrained, so that the erased Core Data spelling
/// `NSFetchRequest<NSFetchRequestResult>` ports as
/// `FetchRequest<any FetchRequestResult>`.
public final class FetchRequest<Result>: AnyFetchRequest {
    /// A request with `resultType` set, for results other than objects
    /// (`FetchRequest<ManagedObjectID>`, `FetchRequest<NSDictionary>`).
    public convenience init(entityName: String, resultType: ResultType) {
        self.init(entityName: Optional(entityName))
        self.resultType = resultType
    }
}

extension FetchRequest where Result == ManagedObject {
    /// `FetchRequest(entityName:)` with no type: a request for managed objects.
    public convenience init(entityName: String) {
        self.init(entityName: Optional(entityName))
    }

    /// `FetchRequest()` with no type: set `entityName` or `entity` before fetching.
    public convenience init() {
        self.init(entityName: nil)
    }
}

extension ManagedObjectContext {
    /// The results of `request`, typed (Core Data's `fetch(_:) -> [T]`):
    /// objects, object IDs, dictionaries (as `NSDictionary` or
    /// `[String: Any]`) or a count (as `NSNumber` or `Int`), by the request's
    /// `resultType`.
    ///
    /// - Throws: the fetch's errors; 134060 when a result is not a `Result`
    ///   (a `FetchRequest<Note>` whose entity's class is not `Note`), naming both.
    public func fetch<Result>(_ request: FetchRequest<Result>) throws -> [Result] {
        let rows: [Any] = request.resultType == .managedObject ? try fetch(request as AnyFetchRequest) : try execute(request)
        if let typed = rows as? [Result] { return typed }
        return try rows.map { row in
            if let value = row as? Result { return value }
            if let dictionary = row as? [String: Any], let value = NSDictionary(dictionary: dictionary) as? Result { return value }
            if let count = row as? Int, let value = NSNumber(value: count) as? Result { return value }
            throw CoreDataError(.coreData, "a FetchRequest<\(Result.self)> for entity \(request.entityName ?? "nil") fetched a \(type(of: row)) (result type \(request.resultType)); use FetchRequest<\(type(of: row))> or register the entity's class")
        }
    }
}
