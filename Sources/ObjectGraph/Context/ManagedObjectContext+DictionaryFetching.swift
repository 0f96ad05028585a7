import Foundation

/// Count and dictionary results (FR-11c, FR-17, FR-18, MOC-FE-08, XD-01…05).
///
/// Two paths give the same rows: the stores' (`countObjects`,
/// `fetchDictionaries`: SQL for the SQLite store) when nothing unsaved in
/// this context can change the answer, otherwise the matching objects with
/// pending changes merged (`matchingObjects`) grouped and aggregated here.
extension ManagedObjectContext {
    /// The one-element result of a `.count` request and the body of `count(for:)`.
    func countResult(_ request: AnyFetchRequest) throws -> Int {
        let entity = try resolveEntity(request)
        if try canPushDown(request, entity: entity, paths: []),
           let count = try persistentStoreCoordinator.countObjects(for: entity, request: request) {
            return count
        }
        return try matchingObjects(request, prefetching: false).count
    }

    /// The rows of a `.dictionary` request.
    func dictionaryResults(_ request: AnyFetchRequest) throws -> [[String: Any]] {
        let entity = try resolveEntity(request)
        let plan = try DictionaryFetchPlan(request, entity: entity)
        if try canPushDown(request, entity: entity, paths: plan.paths),
           let rows = try persistentStoreCoordinator.fetchDictionaries(for: entity, request: request) {
            return rows
        }
        // Offset and limit count result rows (groups, distinct rows), not objects.
        let unlimited = request.copy()
        unlimited.fetchLimit = 0
        unlimited.fetchOffset = 0
        let objects = try matchingObjects(unlimited, prefetching: false)
        let rows = try Self.dictionaryRows(plan, objects: objects)
        return Self.limited(rows, request)
    }

    /// Refuses aggregates and grouping for result types other than dictionaries.
    func checkPropertiesToFetch(_ request: AnyFetchRequest) throws {
        guard request.propertiesToFetch != nil || request.propertiesToGroupBy != nil else { return }
        try DictionaryFetchPlan.checkNotGrouped(request, entity: resolveEntity(request))
    }

    /// Whether a store may answer alone: true unless this context holds
    /// unsaved changes the in-memory path would see. Objects of the fetched
    /// entity's hierarchy count; when any key path leaves the entity (to-one
    /// hops in the predicate, sort, columns or groups) every pending change
    /// does, since a related object's unsaved value could change a row.
    private func canPushDown(_ request: AnyFetchRequest, entity: EntityDescription, paths: [DictionaryFetchPlan.Path]) throws -> Bool {
        guard allowsFetchPushdown else { return false }
        guard request.includesPendingChanges else { return true }
        processPendingChanges()
        if insertedSet.isEmpty && updatedSet.isEmpty && deletedSet.isEmpty { return true }
        let readsOtherEntities = paths.contains { $0.throughRelationships }
            || request.sortDescriptors.contains { $0.key.contains(".") }
            || (request.predicate.map { RowPredicateFilter($0, entity: entity) == nil } ?? false)
        if readsOtherEntities { return false }
        func inHierarchy(_ object: ManagedObject) -> Bool {
            request.includesSubentities ? object.entity.isKindOf(entity: entity) : object.entity === entity
        }
        return !insertedSet.contains(where: inHierarchy) && !updatedSet.contains(where: inHierarchy) && !deletedSet.contains(where: inHierarchy)
    }

    static func limited(_ rows: [[String: Any]], _ request: AnyFetchRequest) -> [[String: Any]] {
        let start = min(max(0, request.fetchOffset), rows.count)
        let end = request.fetchLimit > 0 ? min(rows.count, start + request.fetchLimit) : rows.count
        return start == 0 && end == rows.count ? rows : Array(rows[start..<end])
    }

    /// The rows for `objects` (already filtered and sorted): one per object,
    /// or one per group in the order each group first appears. Hashing each
    /// row's values keeps grouping and distinct results O(n).
    static func dictionaryRows(_ plan: DictionaryFetchPlan, objects: [ManagedObject]) throws -> [[String: Any]] {
        func read(_ path: DictionaryFetchPlan.Path, _ object: ManagedObject) throws -> Any? {
            let value = path.keys.count == 1 ? try object.value(forKey: path.keys[0]) : try object.value(forKeyPath: path.keyPath)
            if let related = value as? ManagedObject { return related.objectID }
            return value
        }
        var rows: [[String: Any]] = []
        if !plan.isGrouped {
            rows.reserveCapacity(objects.count)
            for object in objects {
                var row: [String: Any] = [:]
                for column in plan.columns {
                    if let value = try column.finish(read(column.path, object)) { row[column.name] = value }
                }
                rows.append(row)
            }
        } else {
            // Groups in order of first appearance; without propertiesToGroupBy
            // one group holds every object (one row even when there are none).
            var groupIndex: [DictionaryRowKey: Int] = [:]
            var groups: [(first: ManagedObject?, members: [ManagedObject])] = plan.groupBy.isEmpty ? [(objects.first, objects)] : []
            if !plan.groupBy.isEmpty {
                for object in objects {
                    let key = DictionaryRowKey(try plan.groupBy.map { try read($0, object) })
                    if let index = groupIndex[key] {
                        groups[index].members.append(object)
                    } else {
                        groupIndex[key] = groups.count
                        groups.append((object, [object]))
                    }
                }
            }
            for group in groups {
                var row: [String: Any] = [:]
                for column in plan.columns {
                    let value: Any?
                    if let aggregate = column.aggregate {
                        value = try aggregateValue(aggregate, try group.members.compactMap { try read(column.path, $0) }, column: column)
                    } else {
                        value = try group.first.flatMap { try read(column.path, $0) }
                    }
                    if let value = try column.finish(value) { row[column.name] = value }
                }
                if let having = plan.having {
                    // Keys a row leaves out (nil values) read as NSNull, as rows do in predicates elsewhere.
                    var subject = row
                    for column in plan.columns where subject[column.name] == nil { subject[column.name] = NSNull() }
                    guard try having.evaluate(with: subject) else { continue }
                }
                rows.append(row)
            }
        }
        if plan.distinct {
            var seen = Set<DictionaryRowKey>()
            rows = rows.filter { row in seen.insert(DictionaryRowKey(plan.columns.map { row[$0.name] })).inserted }
        }
        return rows
    }

    /// An aggregate over a group's non-nil values, through the predicate
    /// functions so results have their types (sum of integers an `Int`,
    /// average a `Double`, sum of nothing 0, average/min/max of nothing nil).
    /// `count:` counts non-nil values, as SQL's `COUNT(column)` does.
    static func aggregateValue(_ aggregate: DictionaryFetchPlan.Aggregate, _ values: [Any], column: DictionaryFetchPlan.Column) throws -> Any? {
        do {
            switch aggregate {
            case .count: return values.count
            case .sum: return try FetchFunction.sum(values)
            case .average: return values.isEmpty ? nil : try FetchFunction.average(values)
            case .min: return try FetchFunction.extreme(values, wantMax: false)
            case .max: return try FetchFunction.extreme(values, wantMax: true)
            }
        } catch var error as PredicateEvaluationError {
            if error.operatorName == nil { error.operatorName = aggregate.rawValue }
            error.keyPath = column.name
            throw error
        }
    }
}
