import Foundation

extension PersistentStore {
    /// The snapshots a fetch request asks for, exactly: the store's answer
    /// when it applied everything itself (`isExact`), otherwise finished here
    /// with the request's predicate, sort descriptors, offset and limit on
    /// `StoreRecord`s, with the in-memory evaluator's semantics.
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Bot")
    /// request.predicate = try FetchPredicate(format: "name CONTAINS[cd] %@", "ios")
    /// request.sortDescriptors = [FetchSortDescriptor(key: "name")]
    /// request.fetchLimit = 10
    /// let rows = try store.finishedSnapshots(request)
    /// ```
    public func finishedSnapshots(_ request: AnyFetchRequest) throws -> [StoreSnapshot] {
        let result = try fetchSnapshots(request)
        if result.isExact { return result.snapshots }
        return try Self.finish(StoreRecord.records(for: result.snapshots, in: self), request).compactMap(\.snapshot)
    }

    /// Filters, sorts, offsets and limits records in memory, as Core Data
    /// does: the sort is stable, so ties keep the records' order.
    static func finish(_ records: [StoreRecord], _ request: AnyFetchRequest) throws -> [StoreRecord] {
        var records = records
        if let predicate = request.predicate {
            records = try records.filter { try predicate.evaluate(with: $0) }
        }
        records = try FetchSortDescriptor.sort(records, using: request.sortDescriptors)
        let start = min(max(0, request.fetchOffset), records.count)
        let end = request.fetchLimit > 0 ? min(records.count, start + request.fetchLimit) : records.count
        return Array(records[start..<end])
    }
}
