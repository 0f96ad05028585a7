import Foundation

/// Search criteria for fetching objects of one entity: Core Data's
/// `NSFetchRequest`, without its result type (Core Data's
/// `NSFetchRequest<NSFetchRequestResult>`). Requests are made as
/// ``FetchRequest``, typed by what a fetch returns; everything that takes any
/// request (a context's `execute`, stores, models' templates) takes this
/// class. Models store named requests as templates whose predicate may hold
/// `$VARIABLE`s, and fetched properties are defined by one.
///
/// ```swift
/// let request = FetchRequest(entityName: "Employee")   // FetchRequest<ManagedObject>
/// request.predicate = try FetchPredicate(format: "salary > %@", Decimal(500))
/// request.sortDescriptors = [FetchSortDescriptor(key: "lastName")]
/// request.fetchLimit = 10
/// ```
public class AnyFetchRequest {
    /// What a fetch returns (FR-RT-*).
    public enum ResultType: Sendable {
        /// Managed objects, registered in the context (the default).
        case managedObject
        /// Object IDs only.
        case managedObjectID
        /// `[String: Any]` rows: one per object with `propertiesToFetch` (all
        /// attributes when nil), to-one relationships as object IDs, nil values
        /// left out; one per group with aggregates or `propertiesToGroupBy`.
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
    /// For dictionary results: the columns of each dictionary (FR-17); nil
    /// gives every attribute of the entity. Each element is one of
    /// - a `String`, the name of an attribute or to-one relationship, or a
    ///   key path through to-one relationships (`"department.name"`);
    /// - a `PropertyDescription`: an attribute or to-one relationship of the entity;
    /// - an `ExpressionDescription` whose expression is a key path, or an
    ///   aggregate of one (`sum:`, `average:`, `min:`, `max:`, `count:`),
    ///   keyed by its `name` (XD-01, XD-05).
    ///
    /// Typed `[Any]` because Core Data mixes names and descriptions in one
    /// array; anything else is refused when the request runs (134060).
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Employee")
    /// request.resultType = .dictionary
    /// request.propertiesToFetch = ["department", ExpressionDescription(
    ///     name: "total", expression: try FetchExpression(format: "sum:(salary)"),
    ///     expressionResultType: .integer64)]
    /// request.propertiesToGroupBy = ["department"]
    /// let rows = try context.execute(request) as! [[String: Any]]
    /// // [["department": <ManagedObjectID>, "total": 5500], ...]
    /// ```
    public var propertiesToFetch: [Any]?
    /// For dictionary results: one row per distinct combination of these
    /// values (names, key paths, `PropertyDescription`s or key-path
    /// `ExpressionDescription`s). Every fetched property that is not an
    /// aggregate must be among them.
    public var propertiesToGroupBy: [Any]?
    /// For grouped dictionary results: which group rows to keep, evaluated on
    /// each result dictionary, so it names `propertiesToFetch` keys and
    /// expression-description names (`total > 1000`). Ignored without
    /// `propertiesToGroupBy`, as in Core Data.
    public var havingPredicate: FetchPredicate?
    /// For dictionary results with `propertiesToFetch` set: leave out
    /// duplicate dictionaries (FR-18); ignored when `propertiesToFetch` is nil.
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
                // Trap kept (issue 28 audit): a program's own format string, as NSPredicate(format:) raises; files never set it.
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

    /// Required, so that `copy()` makes a request of the same result type.
    public required init(entityName: String? = nil) {
        self.entityName = entityName
    }

    /// A distinct copy with the same criteria and result type.
    public func copy() -> Self {
        let c = Self(entityName: entityName)
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
        c.propertiesToGroupBy = propertiesToGroupBy
        c.havingPredicate = havingPredicate
        c.returnsDistinctResults = returnsDistinctResults
        c.includesPropertyValues = includesPropertyValues
        c.relationshipKeyPathsForPrefetching = relationshipKeyPathsForPrefetching

        return c
    }

    /// Field-by-field differences between two optional requests.
    static func differences(_ a: AnyFetchRequest?, _ b: AnyFetchRequest?) -> [String] {
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
