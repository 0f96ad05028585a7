import Foundation

/// Search criteria for fetching objects of one entity: Core Data's
/// `NSFetchRequest`. Models store named requests as templates whose predicate
/// may hold `$VARIABLE`s, and fetched properties are defined by one.
///
/// ```swift
/// let request = FetchRequest(entityName: "Employee")
/// request.predicateFormat = "salary > $MIN"
/// request.fetchLimit = 10
/// ```
public final class FetchRequest {
    /// The name of the entity to fetch.
    public var entityName: String?
    /// The predicate in Core Data's format syntax; nil fetches every object.
    public var predicateFormat: String?
    /// 0 means no limit.
    public var fetchLimit: Int = 0
    public var fetchOffset: Int = 0
    public var fetchBatchSize: Int = 0
    public var includesSubentities: Bool = true

    /// Where this request appeared in a model file, for error messages.
    var sourceLine: Int?

    public init(entityName: String? = nil) {
        self.entityName = entityName
    }

    /// A distinct copy with the same criteria.
    public func copy() -> FetchRequest {
        let c = FetchRequest(entityName: entityName)
        c.predicateFormat = predicateFormat
        c.fetchLimit = fetchLimit
        c.fetchOffset = fetchOffset
        c.fetchBatchSize = fetchBatchSize
        c.includesSubentities = includesSubentities
        c.sourceLine = sourceLine
        return c
    }

    /// Field-by-field differences between two optional requests.
    static func differences(_ a: FetchRequest?, _ b: FetchRequest?) -> [String] {
        switch (a, b) {
        case (nil, nil): return []
        case (nil, _), (_, nil): return ["present: \(a != nil) vs \(b != nil)"]
        case let (x?, y?):
            var out: [String] = []
            if x.entityName != y.entityName { out.append("entityName: \(x.entityName ?? "nil") vs \(y.entityName ?? "nil")") }
            if x.predicateFormat != y.predicateFormat { out.append("predicate: \(x.predicateFormat ?? "nil") vs \(y.predicateFormat ?? "nil")") }
            if x.fetchLimit != y.fetchLimit { out.append("fetchLimit: \(x.fetchLimit) vs \(y.fetchLimit)") }
            if x.fetchOffset != y.fetchOffset { out.append("fetchOffset: \(x.fetchOffset) vs \(y.fetchOffset)") }
            if x.fetchBatchSize != y.fetchBatchSize { out.append("fetchBatchSize: \(x.fetchBatchSize) vs \(y.fetchBatchSize)") }
            if x.includesSubentities != y.includesSubentities { out.append("includesSubentities differ") }
            return out
        }
    }
}
