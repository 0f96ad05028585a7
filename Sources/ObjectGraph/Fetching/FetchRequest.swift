import Foundation

/// Search criteria for fetching objects of one entity: Core Data's
/// `NSFetchRequest`. Models store named requests as templates whose predicate
/// may hold `$VARIABLE`s, and fetched properties are defined by one.
///
/// ```swift
/// let request = FetchRequest(entityName: "Employee")
/// request.predicate = try FetchPredicate(format: "salary > %@", Decimal(500))
/// request.sortDescriptors = [FetchSortDescriptor(key: "lastName")]
/// request.fetchLimit = 10
/// ```
public final class FetchRequest {
    /// What a fetch returns (FR-RT-*).
    public enum ResultType: Sendable {
        /// Managed objects, registered in the context (the default).
        case managedObject
        /// Object IDs only.
        case managedObjectID
        /// One `[String: Any]` per object: `propertiesToFetch` (all attributes
        /// when nil), to-one relationships as object IDs.
        case dictionary
        /// A single `Int`: how many objects match.
        case count
    }

    /// The name of the entity to fetch.
    public var entityName: String?
    /// The entity to fetch; takes precedence over `entityName`.
    public var entity: EntityDescription? {
        didSet { if let entity { entityName = entity.name } }
    }
    public var resultType: ResultType = .managedObject
    /// Unsaved inserts, updates and deletes of the context count (MOC-FE-04…06).
    public var includesPendingChanges = true
    /// Fetched objects stay faults until a property is read (the default).
    public var returnsObjectsAsFaults = true
    /// For dictionary results: the property names to include (nil: all attributes).
    public var propertiesToFetch: [String]?
    /// For dictionary results: leave out duplicate dictionaries.
    public var returnsDistinctResults = false
    /// False: object-ID results without values; kept for API parity.
    public var includesPropertyValues = true
    /// Relationships whose destinations are loaded with the results.
    public var relationshipKeyPathsForPrefetching: [String] = []

    /// Which objects match; nil fetches every object (MOC-FE-03). Evaluated
    /// on the objects' in-memory values (MOC-FE-05).
    public var predicate: FetchPredicate?
    /// The predicate in format syntax, a view of `predicate`. Setting parses
    /// the string and traps on invalid syntax, as `NSPredicate(format:)`
    /// raises; to handle the error, set `predicate = try FetchPredicate(format:)`.
    public var predicateFormat: String? {
        get { predicate?.predicateFormat }
        set {
            guard let newValue, !newValue.isEmpty else { predicate = nil; return }
            do { predicate = try FetchPredicate(format: newValue) } catch {
                preconditionFailure("ObjectGraph: invalid predicate format '\(newValue)': \(error)")
            }
        }
    }
    /// The order of the results, first descriptor first (FR-06).
    public var sortDescriptors: [FetchSortDescriptor] = []
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
        c.predicate = predicate
        c.sortDescriptors = sortDescriptors
        c.fetchLimit = fetchLimit
        c.fetchOffset = fetchOffset
        c.fetchBatchSize = fetchBatchSize
        c.includesSubentities = includesSubentities
        c.sourceLine = sourceLine
        c.entity = entity
        c.entityName = entityName
        c.resultType = resultType
        c.includesPendingChanges = includesPendingChanges
        c.returnsObjectsAsFaults = returnsObjectsAsFaults
        c.propertiesToFetch = propertiesToFetch
        c.returnsDistinctResults = returnsDistinctResults
        c.includesPropertyValues = includesPropertyValues
        c.relationshipKeyPathsForPrefetching = relationshipKeyPathsForPrefetching

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
            if x.predicate != y.predicate { out.append("predicate: \(x.predicate?.predicateFormat ?? "nil") vs \(y.predicate?.predicateFormat ?? "nil")") }
            if x.sortDescriptors != y.sortDescriptors { out.append("sortDescriptors: \(x.sortDescriptors) vs \(y.sortDescriptors)") }
            if x.fetchLimit != y.fetchLimit { out.append("fetchLimit: \(x.fetchLimit) vs \(y.fetchLimit)") }
            if x.fetchOffset != y.fetchOffset { out.append("fetchOffset: \(x.fetchOffset) vs \(y.fetchOffset)") }
            if x.fetchBatchSize != y.fetchBatchSize { out.append("fetchBatchSize: \(x.fetchBatchSize) vs \(y.fetchBatchSize)") }
            if x.includesSubentities != y.includesSubentities { out.append("includesSubentities differ") }
            return out
        }
    }
}
