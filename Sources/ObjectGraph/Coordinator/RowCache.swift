import Foundation

/// The coordinator's cache of stored rows (Core Data's row cache): the last
/// snapshot read or saved for each stored object, and when, so faults fire
/// without a query while the row is fresh enough. Kept in an
/// `ObjectIDTable`, so rows of consecutive keys sit in consecutive entries.
///
/// Not thread-safe: the coordinator reads and writes it under its lock.
///
/// ```swift
/// var cache = RowCache()
/// cache[snapshot.objectID] = (snapshot, Date())
/// ```
typealias RowCache = ObjectIDTable<(snapshot: StoreSnapshot, time: Date)>
