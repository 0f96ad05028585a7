import Foundation

/// A store the coordinator reads objects from and saves them to (PS-*):
/// Core Data's `NSPersistentStore`. Concrete stores (in-memory, atomic XML and
/// binary, SQLite) subclass it and override the row-level methods below,
/// which the coordinator calls; contexts never talk to a store directly.
///
/// The row-level contract:
/// - `fetchSnapshots(_:)` returns the stored objects of the request's entity
///   (and sub-entities when `includesSubentities`) that match its predicate,
///   sorted and limited as it asks. A store that cannot evaluate part of a
///   request returns a superset and says so in `StoreFetchResult`, and the
///   coordinator finishes the job in memory: the answer is the same either way.
/// - `snapshots(for:)` fires faults: current values of objects by ID; a
///   missing ID is absent from the result (the context reports 133000).
/// - `relatedObjectIDs(for:of:)` fires to-many faults;
///   `relatedObjectIDs(for:ofAll:)` fires them for many owners (prefetching).
/// - `newObjectIDs(for:count:)` allocates permanent IDs (Z_MAX for SQLite).
/// - `save(_:)` writes one context save in one transaction, checking
///   optimistic-locking versions (`StoreVersionConflict`).
///
/// ```swift
/// final class MyStore: PersistentStore {
///     override class var storeType: String { "MyStore" }
///     override func fetchSnapshots(_ request: FetchRequest) throws -> StoreFetchResult { ... }
/// }
/// ```
open class PersistentStore {
    /// The type string the coordinator's registry knows this class by.
    open class var storeType: String { String(describing: self) }

    /// The store's location; changed only through the coordinator's `setURL(_:for:)` (PS-08).
    public internal(set) var url: URL?
    public let configurationName: String?
    public let options: [String: Any]
    /// The model the store's objects follow (the coordinator's, frozen).
    public let model: ManagedObjectModel
    /// Stores keep their metadata (`NSStoreType`, `NSStoreUUID`, model version
    /// hashes …) here; the identifier is the `NSStoreUUID` entry.
    open var metadata: [String: Any] {
        didSet { identifier = Self.identifier(in: metadata) }
    }
    public var isReadOnly: Bool { (options[PersistentStore.readOnlyOption] as? Bool) ?? false }

    public static let storeTypeKey = "NSStoreType"
    public static let storeUUIDKey = "NSStoreUUID"
    public static let readOnlyOption = "NSReadOnlyPersistentStoreOption"
    public static let timeoutOption = "NSPersistentStoreTimeoutOption"
    /// `NSIgnorePersistentStoreVersioningOption`: when true, a store opens
    /// whatever its version hashes say (PC-37).
    public static let ignoreVersioningOption = "NSIgnorePersistentStoreVersioningOption"

    /// `NSMigratePersistentStoresAutomaticallyOption` (PC-38): when true and
    /// the store does not fit the coordinator's model, adding it migrates it
    /// first (see docs/MIGRATION.md): the source model is looked for among
    /// `migrationSearchURLsOption`'s models (and, for SQLite, the model the
    /// store caches), the mapping model among its mapping files.
    public static let migratePersistentStoresAutomaticallyOption = "NSMigratePersistentStoresAutomaticallyOption"
    /// `NSInferMappingModelAutomaticallyOption` (PC-39): with the option
    /// above, infers a mapping model when no mapping file fits. Alone it does nothing.
    public static let inferMappingModelAutomaticallyOption = "NSInferMappingModelAutomaticallyOption"
    /// ObjectGraph's: where automatic migration looks for source models and
    /// mapping models (Linux has no app bundles to search), as `[URL]`:
    /// model bundles (`.xcdatamodeld`, `.momd`), single models, mapping files
    /// (`.xcmappingmodel`, `.json`), or directories holding them.
    public static let migrationSearchURLsOption = "ObjectGraphMigrationSearchURLs"

    /// `NSPersistentHistoryTrackingKey`: when true, the store records every
    /// change made to it, by any writer, as persistent history (SQLite
    /// stores; see docs/HISTORY.md).
    public static let persistentHistoryTrackingKey = "NSPersistentHistoryTrackingKey"

    // MARK: - External records (docs/EXTERNAL-RECORDS.md)

    /// The writer of this store's external records, when it was added with
    /// `PersistentStoreCoordinator.externalRecordsDirectoryOption` (any store
    /// type: the coordinator writes records after each save to the store commits).
    public internal(set) var externalRecordWriter: ExternalRecordWriter?

    /// The last error writing this store's external records; nil when none
    /// happened or every record missed since has been written. A records
    /// failure never fails a save.
    ///
    /// ```swift
    /// try context.save()
    /// if let problem = store.lastExternalRecordsError { log.warning("records behind: \(problem)") }
    /// ```
    public var lastExternalRecordsError: Error? { externalRecordWriter?.lastError }

    /// Posted (object: the store; `NSUnderlyingErrorKey`: the error) when
    /// writing external records after a save fails. The save stands; the
    /// records are written at a later save or by a rebuild.
    public static let externalRecordsDidFailNotification = Notification.Name("ObjectGraphExternalRecordsDidFailNotification")

    // MARK: - Persistent history and global identifiers (overridden by stores that record history)

    /// True when the store records persistent history and global identifiers.
    open var recordsPersistentHistory: Bool { false }

    /// The history position of the last change the store's latest save
    /// recorded; nil when it recorded none or the store keeps no history.
    open var historyTokenOfLastSave: PersistentHistoryToken? { nil }

    /// The global identifiers of the objects `ids` names, for those that have one.
    open func globalIdentifiers(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: UUID] { [:] }

    /// The live object this store holds under a global identifier.
    open func objectID(forGlobalIdentifier globalIdentifier: UUID) throws -> ManagedObjectID? { nil }

    /// The live objects this store holds under global identifiers, for those
    /// it has. Stores answer many at once (the SQLite store with a query per
    /// few hundred); this default asks `objectID(forGlobalIdentifier:)` for each.
    open func objectIDs(forGlobalIdentifiers globalIdentifiers: [UUID]) throws -> [UUID: ManagedObjectID] {
        var out: [UUID: ManagedObjectID] = [:]
        for gid in globalIdentifiers { if let id = try objectID(forGlobalIdentifier: gid) { out[gid] = id } }
        return out
    }

    /// The newest position of the store's history; nil when it records none.
    open func currentPersistentHistoryToken() throws -> PersistentHistoryToken? { nil }

    /// Runs a history fetch or delete on this store.
    open func executeHistoryRequest(_ request: PersistentHistoryChangeRequest) throws -> PersistentHistoryResult {
        throw CoreDataError(.persistentStoreOperation, "\(Self.storeType) stores do not record persistent history")
    }

    /// True when `options[key]` is a true Bool or a non-zero number.
    func boolOption(_ key: String) -> Bool {
        switch options[key] {
        case let flag as Bool: return flag
        case let number as NSNumber: return number.boolValue
        default: return false
        }
    }

    /// Refuses, with 134100 (`NSPersistentStoreIncompatibleVersionHashError`),
    /// store metadata whose model version hashes do not fit this store's
    /// model and configuration. The one rule the coordinator and the store
    /// itself both apply: with `ignoreVersioningOption` it passes, metadata
    /// without hashes (a store being created) passes, otherwise the model
    /// must be `isConfiguration(_:compatibleWithStoreMetadata:)`. Store
    /// types whose files can come from Apple's Core Data, whose hashes are
    /// not reproducible here, refine it (`SQLiteStore`).
    ///
    /// ```swift
    /// try store.checkModelCompatibility(withStoreMetadata: try SQLiteStore.metadataForStore(at: url))
    /// ```
    open func checkModelCompatibility(withStoreMetadata metadata: [String: Any]) throws {
        if boolOption(Self.ignoreVersioningOption) { return }
        guard metadata[ManagedObjectModel.storeModelVersionHashesKey] != nil else { return }
        guard model.isConfiguration(configurationName, compatibleWithStoreMetadata: metadata) else {
            let stored = metadata[ManagedObjectModel.storeModelVersionHashesKey] as? [String: Data] ?? [:]
            var differing = entities.filter { stored[$0.name] != $0.versionHash }.map(\.name)
            if configurationName == nil {
                differing += Set(stored.keys).subtracting(entities.map(\.name)).map { "\($0) (only in the store)" }
            }
            throw incompatibleVersionHashError(differing: differing.sorted(), metadata: metadata)
        }
    }

    /// 134100 naming the entities whose version hashes did not match.
    func incompatibleVersionHashError(differing: [String] = [], metadata: [String: Any]? = nil) -> CoreDataError {
        let place = url.map { " at \($0.path)" } ?? ""
        var info: [String: Any] = url.map { [CoreDataError.filePathErrorKey: $0.path] } ?? [:]
        info[CoreDataError.reasonErrorKey] = CoreDataError.MigrationReason.incompatibleModel
        if !differing.isEmpty { info[CoreDataError.mismatchedVersionHashesErrorKey] = ["": differing] }
        if let metadata { info[CoreDataError.storeMetadataErrorKey] = metadata }
        let detail = differing.isEmpty ? "" : "; version hashes differ for \(differing.joined(separator: ", "))"
        return CoreDataError(.persistentStoreIncompatibleVersionHash,
                             "the model used to open the store\(place) is incompatible with the one used to create it\(detail)",
                             userInfo: info)
    }

    // MARK: - Migration (docs/MIGRATION.md)

    /// The migration manager class that migrates stores of this class (PS-18).
    open class var migrationManagerType: MigrationManager.Type { MigrationManager.self }

    /// Throws 134100 when the store file at `url` was not made with this
    /// store's model (its version hashes, and what the store class can tell
    /// besides), without opening it as a store; the coordinator migrates
    /// such a store when asked to. The default reads the file's metadata and
    /// applies `checkModelCompatibility(withStoreMetadata:)`.
    open func checkStoreCompatibility(at url: URL) throws {
        try checkModelCompatibility(withStoreMetadata: try Self.metadataForPersistentStore(at: url))
    }

    /// The model the store file at `url` was made with, among the models at
    /// `searchURLs` (`ManagedObjectModel.mergedModel(from:forStoreMetadata:)`),
    /// or nil. Store classes that know more about their files refine it.
    open func sourceModel(forStoreAt url: URL, metadata: [String: Any], searchURLs: [URL]) throws -> ManagedObjectModel? {
        try ManagedObjectModel.mergedModel(from: searchURLs, forStoreMetadata: metadata)
    }

    /// Replaces the store file at `url` with its migration by `manager`
    /// through `mappingModel`. The default migrates into a new file beside it
    /// and moves that over the original (a rename, atomic on one file
    /// system); nothing changes at `url` when the migration fails. SQLite
    /// stores migrate in place with SQL when they can (`SQLiteStore`).
    open class func migrateStore(at url: URL, options: [String: Any], mappingModel: MappingModel, manager: MigrationManager) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).migrating-\(UUID().uuidString)")
        var storeOptions = options
        storeOptions[migratePersistentStoresAutomaticallyOption] = nil
        do {
            try manager.migrateStore(from: url, sourceType: storeType, options: storeOptions, with: mappingModel,
                                     toDestinationURL: temporary, destinationType: storeType, destinationOptions: storeOptions)
            // rename(2): atomic on one file system, the original replaced whole.
            guard rename(temporary.path, url.path) == 0 else {
                let code = errno
                throw CoreDataError(.migrationManagerDestinationStore, "moving the migrated store over \(url.path) failed: \(String(cString: strerror(code)))",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
    }

    public required init(model: ManagedObjectModel, configurationName: String?, url: URL?, options: [String: Any]) {
        self.model = model
        self.configurationName = configurationName
        self.url = url
        self.options = options
        let metadata: [String: Any] = [PersistentStore.storeUUIDKey: UUID().uuidString, PersistentStore.storeTypeKey: Self.storeType]
        self.metadata = metadata
        self.identifier = Self.identifier(in: metadata)
        _ = objectIDHandle  // made here, before any other thread can see the store
    }

    /// The store's UUID (`NSStoreUUID`), the host part of its object URIs.
    /// Kept as one string, set with the metadata: every object ID a store
    /// makes holds it, and a string read from the metadata each time (a new
    /// copy when the metadata came from a property list) made every
    /// comparison of two IDs' stores compare their bytes.
    public private(set) var identifier: String

    private static func identifier(in metadata: [String: Any]) -> String {
        metadata[PersistentStore.storeUUIDKey] as? String ?? ""
    }

    /// The entities this store holds: its configuration's, or the whole model's.
    public var entities: [EntityDescription] { model.entities(forConfiguration: configurationName) ?? [] }

    // MARK: - Metadata of a store file that is not open (AS-03, PC metadata)

    /// Reads the metadata of the store file at `url` without adding it to a
    /// coordinator. File-backed store classes override it.
    open class func metadataForPersistentStore(at url: URL) throws -> [String: Any] {
        throw CoreDataError(.persistentStoreOperation, "\(String(describing: self)) cannot read metadata from a file")
    }

    /// Writes the metadata of the store file at `url` without opening it.
    open class func setMetadata(_ metadata: [String: Any], forPersistentStoreAt url: URL) throws {
        throw CoreDataError(.persistentStoreOperation, "\(String(describing: self)) cannot write metadata to a file")
    }

    /// A weak reference to the store that its object IDs share (see
    /// `ManagedObjectID.persistentStore`).
    final class Handle: @unchecked Sendable {
        weak var store: PersistentStore?
        init(_ store: PersistentStore) { self.store = store }
    }
    lazy var objectIDHandle = Handle(self)

    /// The coordinator the store was added to (PS-05); weak, the coordinator owns its stores.
    public internal(set) weak var persistentStoreCoordinator: PersistentStoreCoordinator?

    /// Moves the store to `url` (PC-14). The default relabels it: an atomic
    /// store writes its next save there and moves no file now. Stores with
    /// an open connection (SQLite) override it to reopen at the new place.
    open func relocate(to url: URL) throws {
        self.url = url
    }

    /// Called when the store has been added to a coordinator, before `load()`
    /// (PS-16). The default does nothing.
    open func didAdd(to coordinator: PersistentStoreCoordinator) {}

    /// Called when the coordinator removes the store (AS-10: a store that
    /// created a reservation file and never saved deletes it here).
    open func willRemoveFromPersistentStoreCoordinator() {}

    // MARK: - Row-level contract (overridden by concrete stores)

    /// Opens the store: reads or creates the file, loads metadata.
    open func load() throws {}

    open func fetchSnapshots(_ request: AnyFetchRequest) throws -> StoreFetchResult {
        throw Self.unsupported("fetchSnapshots")
    }

    /// `fetchSnapshots(_:)` that also hands each row to `each` as soon as
    /// it is read, with the answer's `isExact` (a store knows it before
    /// reading: it is whether it could translate the whole request). The
    /// coordinator caches a row and the context makes its object there,
    /// while the row is still in the processor's cache; over the finished
    /// array each pass met cold memory again. By default the rows go to
    /// `each` after the fetch; a store that reads rows one at a time
    /// overrides it.
    ///
    /// ```swift
    /// let result = try store.fetchSnapshots(request) { row, isExact in cache(row) }
    /// ```
    open func fetchSnapshots(_ request: AnyFetchRequest, each: (StoreSnapshot, _ isExact: Bool) throws -> Void) throws -> StoreFetchResult {
        let result = try fetchSnapshots(request)
        for snapshot in result.snapshots { try each(snapshot, result.isExact) }
        return result
    }

    open func snapshots(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: StoreSnapshot] {
        throw Self.unsupported("snapshots(for:)")
    }

    open func relatedObjectIDs(for relationship: RelationshipDescription, of id: ManagedObjectID) throws -> [ManagedObjectID] {
        throw Self.unsupported("relatedObjectIDs(for:of:)")
    }

    /// The members of `relationship` for many owners at once: what
    /// relationship prefetching asks for, so a store that can answer in one
    /// query (SQLite) does not pay one round-trip per owner. Owners with no
    /// members may be absent or map to an empty array; members keep the
    /// order `relatedObjectIDs(for:of:)` gives them. The default asks that
    /// method owner by owner, which is right for stores that hold their
    /// objects in memory.
    ///
    /// ```swift
    /// let employees = department.entity.relationshipsByName["employees"]!
    /// let byOwner = try store.relatedObjectIDs(for: employees, ofAll: departmentIDs)
    /// let firstMembers = byOwner[departmentIDs[0]] ?? []
    /// ```
    open func relatedObjectIDs(for relationship: RelationshipDescription, ofAll ids: [ManagedObjectID]) throws -> [ManagedObjectID: [ManagedObjectID]] {
        var out: [ManagedObjectID: [ManagedObjectID]] = [:]
        for id in ids { out[id] = try relatedObjectIDs(for: relationship, of: id) }
        return out
    }

    open func newObjectIDs(for entity: EntityDescription, count: Int) throws -> [ManagedObjectID] {
        throw Self.unsupported("newObjectIDs(for:count:)")
    }

    open func save(_ request: StoreSaveRequest) throws {
        throw Self.unsupported("save(_:)")
    }

    /// How many objects `request` matches (its entity, predicate, offset and
    /// limit), counted by the store itself; nil when it cannot count exactly
    /// and the caller must count fetched objects. The default returns nil.
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Employee")
    /// request.predicate = try FetchPredicate(format: "salary > 1000")
    /// let n = try store.countObjects(request) // SELECT COUNT(*) … in SQLite
    /// ```
    open func countObjects(_ request: AnyFetchRequest) throws -> Int? { nil }

    /// The dictionary results of `request` (columns, aggregates, grouping,
    /// having, distinct, sort, offset, limit) computed by the store itself,
    /// exactly as the context computes them from objects; nil when the store
    /// cannot. Values have the attribute's Swift type, to-one relationships
    /// are `ManagedObjectID`s, nil values are left out. The default returns nil.
    ///
    /// ```swift
    /// request.resultType = .dictionary
    /// request.propertiesToFetch = ["department.name"]
    /// request.returnsDistinctResults = true
    /// let rows = try store.fetchDictionaries(request) // nil: ask the context
    /// ```
    open func fetchDictionaries(_ request: AnyFetchRequest) throws -> [[String: Any]]? { nil }

    /// The error a store class that does not implement part of the contract
    /// gives: Core Data's store-operation error naming the method and class.
    static func unsupported(_ method: String) -> CoreDataError {
        CoreDataError(.persistentStoreOperation, "\(String(describing: self)) does not implement \(method); a PersistentStore subclass must override it")
    }
}

/// What a store's fetch returns.
public struct StoreFetchResult {
    public var snapshots: [StoreSnapshot]
    /// False when the store did not apply the predicate, sort, offset and
    /// limit itself, and the coordinator must finish them in memory.
    public var isExact: Bool

    public init(snapshots: [StoreSnapshot], isExact: Bool) {
        self.snapshots = snapshots
        self.isExact = isExact
    }
}
