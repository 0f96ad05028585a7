import Foundation

/// One stored object seen through a store's row-level contract, readable by
/// key path: attributes come from its snapshot, to-one relationships are
/// further records and to-many relationships arrays of records, read from
/// the store on first use. It lets `FetchPredicate.evaluate(with:)` and
/// `FetchSortDescriptor.sort(_:using:)` run on stored rows without a
/// context, so a store's in-memory answer can be computed (and compared
/// with what SQL gives) directly at the store level.
///
/// ```swift
/// let records = StoreRecord.records(for: try store.fetchSnapshots(FetchRequest(entityName: "Bot")).snapshots, in: store)
/// let matching = try records.filter { try FetchPredicate(format: "stats.sinceDate != nil").evaluate(with: $0) }
/// ```
public final class StoreRecord: KeyValueCoding, CustomStringConvertible {
    public let objectID: ManagedObjectID
    private let reader: Reader
    private var loaded: StoreSnapshot??
    /// To-many members, read once per record: predicates and sorts read a
    /// relationship once per evaluation, the store query is the expensive part.
    private var toMany: [String: [StoreRecord]] = [:]

    init(objectID: ManagedObjectID, snapshot: StoreSnapshot?, reader: Reader) {
        self.objectID = objectID
        self.reader = reader
        self.loaded = snapshot.map { .some($0) }
    }

    /// Records for a fetch's snapshots, sharing one cache of related rows.
    public static func records(for snapshots: [StoreSnapshot], in store: PersistentStore) -> [StoreRecord] {
        let reader = Reader(store: store)
        return snapshots.map { reader.record(for: $0.objectID, snapshot: $0) }
    }

    /// The row's snapshot, or nil when the store no longer holds it (a
    /// dangling foreign key): its attributes then read as nil, as a LEFT
    /// JOIN in SQL sees them.
    public var snapshot: StoreSnapshot? {
        if let loaded { return loaded }
        let found = try? reader.store.snapshots(for: [objectID])[objectID]
        loaded = .some(found)
        return found
    }

    public var description: String { objectID.description }

    public func value(forKey key: String) throws -> Any? {
        guard let property = objectID.entity.propertiesByName[key] else {
            throw KeyValueCodingError.unknownKey(key, typeName: objectID.entity.name)
        }
        if let rel = property as? RelationshipDescription {
            if rel.isToMany {
                if let cached = toMany[key] { return cached }
                let members = try reader.store.relatedObjectIDs(for: rel, of: objectID).map { reader.record(for: $0, snapshot: nil) }
                toMany[key] = members
                return members
            }
            guard let target = snapshot?[key] as? ManagedObjectID else { return nil }
            return reader.record(for: target, snapshot: nil)
        }
        let value = snapshot?[key]
        return nilIfNSNull(value)
    }

    /// One record per object, so a row reached along several paths is read once.
    final class Reader {
        let store: PersistentStore
        private var byID: [ManagedObjectID: StoreRecord] = [:]

        init(store: PersistentStore) { self.store = store }

        func record(for id: ManagedObjectID, snapshot: StoreSnapshot?) -> StoreRecord {
            if let existing = byID[id] { return existing }
            let record = StoreRecord(objectID: id, snapshot: snapshot, reader: self)
            byID[id] = record
            return record
        }
    }
}
