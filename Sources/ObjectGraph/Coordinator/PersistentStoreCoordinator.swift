import Foundation

/// Joins a model to one or more stores and routes every context request to
/// them: Core Data's `NSPersistentStoreCoordinator` (PC-*). It only uses the
/// row-level `PersistentStore` contract, so any store type works the same.
/// It caches the last snapshot read or written per object, which is what a
/// context's `stalenessInterval` measures (MOC-ST-*).
///
/// ```swift
/// let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.xmlStoreType, at: url)
/// let context = ManagedObjectContext(coordinator: coordinator)
/// ```
public final class PersistentStoreCoordinator: NSLocking {
    public static let inMemoryStoreType = "InMemory"
    public static let xmlStoreType = "XML"
    public static let binaryStoreType = "Binary"
    public static let sqliteStoreType = "SQLite"
    public static let storeModelVersionIdentifiersKey = "NSStoreModelVersionIdentifiers"

    public static let storesDidChangeNotification = Notification.Name("NSPersistentStoreCoordinatorStoresDidChangeNotification")
    /// Posted (object: the store) just before a store is removed (PC-45).
    public static let willRemoveStoreNotification = Notification.Name("NSPersistentStoreCoordinatorWillRemoveStoreNotification")
    public static let addedPersistentStoresKey = "added"
    public static let removedPersistentStoresKey = "removed"

    public let managedObjectModel: ManagedObjectModel
    @exclusivity(unchecked) public private(set) var persistentStores: [PersistentStore] = []
    private let recursiveLock = NSRecursiveLock()
    @exclusivity(unchecked) private var rowCache = RowCache()
    /// The clock staleness is measured with; tests may replace it.
    @exclusivity(unchecked) var now: () -> Date = Date.init

    /// A coordinator for `model`, which is validated and frozen (X-01).
    public init(managedObjectModel model: ManagedObjectModel) throws {
        try model.markInUse()
        self.managedObjectModel = model
        ModelsInUse.shared.add(model)
    }

    // MARK: - NSLocking

    public func lock() { recursiveLock.lock() }
    public func unlock() { recursiveLock.unlock() }
    public func tryLock() -> Bool { recursiveLock.try() }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        recursiveLock.lock(); defer { recursiveLock.unlock() }
        return try body()
    }

    // MARK: - Store types

    /// Makes a store class available under `storeType`; nil unregisters it.
    public static func registerStoreClass(_ storeClass: PersistentStore.Type?, forStoreType storeType: String) {
        StoreTypeRegistry.shared.register(storeClass, for: storeType)
    }

    public static var registeredStoreTypes: [String: PersistentStore.Type] { StoreTypeRegistry.shared.all }

    static func storeClass(_ type: String) throws -> PersistentStore.Type {
        guard let cls = StoreTypeRegistry.shared.storeClass(for: type) else {
            throw CoreDataError(.persistentStoreInvalidType, "Unknown persistent store type '\(type)'; register its class with registerStoreClass(_:forStoreType:)", userInfo: [PersistentStore.storeTypeKey: type])
        }
        return cls
    }

    // MARK: - Adding and removing stores

    /// Opens (or creates) a store and adds it (PC add). Fails with 134000 for
    /// an unknown type and 134100 when the store's entity version hashes do
    /// not fit the model's configuration by the store's own rule
    /// (`PersistentStore.checkModelCompatibility(withStoreMetadata:)`;
    /// `NSIgnorePersistentStoreVersioningOption` skips it), unless
    /// `NSMigratePersistentStoresAutomaticallyOption` asks for the store to be
    /// migrated first (PC-38, PC-39; see `migrateStoreIfNeeded`).
    ///
    /// ```swift
    /// try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url, options: [
    ///     PersistentStore.migratePersistentStoresAutomaticallyOption: true,
    ///     PersistentStore.inferMappingModelAutomaticallyOption: true,
    ///     PersistentStore.migrationSearchURLsOption: [URL(fileURLWithPath: "Model.xcdatamodeld")],
    /// ])
    /// ```
    @discardableResult
    public func addPersistentStore(ofType type: String, configurationName: String? = nil, at url: URL? = nil, options: [String: Any] = [:]) throws -> PersistentStore {
        try locked {
            let cls = try Self.storeClass(type)
            if let configurationName, managedObjectModel.entities(forConfiguration: configurationName) == nil {
                throw CoreDataError(.persistentStoreOpen, "The model has no configuration named '\(configurationName)'")
            }
            if let url, persistentStores.contains(where: { $0.url?.standardizedFileURL == url.standardizedFileURL }) {
                throw CoreDataError(.persistentStoreOpen, "A store at \(url.path) is already added to this coordinator", userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            // A bad records option is refused before the store touches its file.
            let records = try ExternalRecordsConfiguration(storeOptions: options)
            let store = cls.init(model: managedObjectModel, configurationName: configurationName, url: url, options: options)
            store.persistentStoreCoordinator = self
            store.didAdd(to: self)
            if let url, store.boolOption(PersistentStore.migratePersistentStoresAutomaticallyOption) {
                // PC-38: a store of another model version is migrated before it opens.
                try migrateStoreIfNeeded(store, at: url)
            }
            try store.load()
            if store.metadata[ManagedObjectModel.storeModelVersionHashesKey] != nil {
                // The store's own rule: it knows which files' hashes can be
                // compared (Apple's cannot be recomputed here) and honours
                // NSIgnorePersistentStoreVersioningOption.
                try store.checkModelCompatibility(withStoreMetadata: store.metadata)
            } else {
                store.metadata[ManagedObjectModel.storeModelVersionHashesKey] = managedObjectModel.entityVersionHashesByName
                store.metadata[Self.storeModelVersionIdentifiersKey] = Array(managedObjectModel.versionIdentifiers).sorted()
            }
            if let records {
                let writer = ExternalRecordWriter(unpreparedConfiguration: records, model: managedObjectModel,
                                                  storeIdentifier: store.identifier, storeURL: url)
                store.externalRecordWriter = writer
                writer.storeDidOpen(store)
            }
            persistentStores.append(store)
            NotificationCenter.default.post(name: Self.storesDidChangeNotification, object: self, userInfo: [Self.addedPersistentStoresKey: [store]])
            return store
        }
    }

    /// Removes a store; IDs of its objects no longer resolve (MOID-05b).
    public func remove(_ store: PersistentStore) throws {
        try locked {
            guard let index = persistentStores.firstIndex(where: { $0 === store }) else {
                throw CoreDataError(.persistentStoreOperation, "The store is not added to this coordinator")
            }
            NotificationCenter.default.post(name: Self.willRemoveStoreNotification, object: store)
            store.willRemoveFromPersistentStoreCoordinator()
            persistentStores.remove(at: index)
            store.persistentStoreCoordinator = nil
            rowCache.removeAll(inStore: store.identifier)
            NotificationCenter.default.post(name: Self.storesDidChangeNotification, object: self, userInfo: [Self.removedPersistentStoresKey: [store]])
        }
    }

    /// Empties the coordinator's row cache (Core Data's cache of the last
    /// row read or saved for each object) for `stores` (nil: every store).
    /// Objects already loaded in contexts keep their values; faults fire
    /// from the store again. The cache keeps a row for every object a
    /// coordinator ever read or saved; a long-running writer that goes
    /// through millions of objects in batches, resetting its context
    /// between them, calls this too so its memory does not grow with them
    /// (Core Data frees rows no context references; here it is explicit).
    ///
    /// ```swift
    /// for batch in batches {
    ///     try write(batch, in: context)
    ///     context.reset()
    ///     coordinator.discardCachedRows()
    /// }
    /// ```
    public func discardCachedRows(in stores: [PersistentStore]? = nil) {
        locked {
            guard let stores else {
                rowCache.removeAll()
                return
            }
            for store in stores { rowCache.removeAll(inStore: store.identifier) }
        }
    }

    public func persistentStore(for url: URL) -> PersistentStore? {
        locked { persistentStores.first { $0.url?.standardizedFileURL == url.standardizedFileURL } }
    }

    /// Relocates a store (PC-14): an atomic store writes its next save to
    /// `url`; nothing is moved now.
    public func setURL(_ url: URL, for store: PersistentStore) throws {
        try locked {
            guard persistentStores.contains(where: { $0 === store }) else {
                throw CoreDataError(.persistentStoreOperation, "The store is not added to this coordinator")
            }
            if let other = persistentStore(for: url), other !== store {
                throw CoreDataError(.persistentStoreOperation, "Another store of this coordinator is at \(url.path)")
            }
            try store.relocate(to: url)
            store.externalRecordWriter?.storeDidMove(to: url)
        }
    }

    /// The store's location (PC-12).
    public func url(for store: PersistentStore) -> URL? { store.url }

    func store(withIdentifier identifier: String?) -> PersistentStore? {
        guard let identifier else { return nil }
        return locked { persistentStores.first { $0.identifier == identifier } }
    }

    /// The first writable store whose configuration holds `entity` (MOC-MO-09).
    func defaultStore(for entity: EntityDescription) -> PersistentStore? {
        locked { persistentStores.first { !$0.isReadOnly && $0.entities.contains { $0 === entity } } }
    }

    // MARK: - Object IDs

    /// The ID an object URI names, or nil when no added store has its UUID
    /// or the URI is temporary (MOID-05).
    ///
    /// ```swift
    /// let id = coordinator.managedObjectID(forURIRepresentation: savedURI)
    /// ```
    public func managedObjectID(forURIRepresentation uri: URL) -> ManagedObjectID? {
        guard let parts = ManagedObjectID.parse(uri: uri), case .primaryKey(let key) = parts.reference,
              let store = store(withIdentifier: parts.storeIdentifier),
              let entity = managedObjectModel.entitiesByName[parts.entityName] else { return nil }
        let id = ManagedObjectID(entity: entity, storeIdentifier: store.identifier, primaryKey: key)
        id.persistentStore = store
        return id
    }

    // MARK: - Metadata

    public func metadata(for store: PersistentStore) -> [String: Any] { locked { store.metadata } }

    /// Replaces a store's metadata; the type and UUID entries are kept. It
    /// reaches the file at the store's next save.
    public func setMetadata(_ metadata: [String: Any], for store: PersistentStore) {
        locked {
            var m = metadata
            m[PersistentStore.storeTypeKey] = store.metadata[PersistentStore.storeTypeKey]
            m[PersistentStore.storeUUIDKey] = store.metadata[PersistentStore.storeUUIDKey]
            if m[ManagedObjectModel.storeModelVersionHashesKey] == nil {
                m[ManagedObjectModel.storeModelVersionHashesKey] = store.metadata[ManagedObjectModel.storeModelVersionHashesKey]
            }
            store.metadata = m
        }
    }

    /// The metadata of a store file that is not added to any coordinator.
    public static func metadataForPersistentStore(ofType type: String, at url: URL) throws -> [String: Any] {
        try storeClass(type).metadataForPersistentStore(at: url)
    }

    public static func setMetadata(_ metadata: [String: Any], forPersistentStoreOfType type: String, at url: URL) throws {
        try storeClass(type).setMetadata(metadata, forPersistentStoreAt: url)
    }

    // MARK: - Migration

    /// Copies every object of `store` into a new store of `type` at `url`,
    /// relationships included, then removes `store` and returns the new one.
    /// Object IDs change (the new store has its own UUID and keys).
    public func migratePersistentStore(_ store: PersistentStore, to url: URL, options: [String: Any] = [:], type: String) throws -> PersistentStore {
        try locked {
            guard persistentStores.contains(where: { $0 === store }) else {
                throw CoreDataError(.persistentStoreOperation, "Only a store added to this coordinator can be migrated")
            }
            let target = try addPersistentStore(ofType: type, configurationName: store.configurationName, at: url, options: options)
            do {
                var rows: [(EntityDescription, StoreSnapshot)] = []
                for entity in store.entities {
                    let request = FetchRequest(entityName: entity.name)
                    request.includesSubentities = false
                    for snapshot in try store.fetchSnapshots(request).snapshots where snapshot.objectID.entity === entity {
                        rows.append((entity, snapshot))
                    }
                }
                var map: [ManagedObjectID: ManagedObjectID] = [:]
                for entity in store.entities {
                    let mine = rows.filter { $0.0 === entity }
                    guard !mine.isEmpty else { continue }
                    let ids = try target.newObjectIDs(for: entity, count: mine.count)
                    for (row, id) in zip(mine, ids) { map[row.1.objectID] = id }
                }
                var request = StoreSaveRequest()
                for (entity, row) in rows {
                    var values = row.values
                    for (key, value) in row.values { if let id = value as? ManagedObjectID { values[key] = map[id] } }
                    let newID = map[row.objectID]!
                    request.inserted.append(StoreSnapshot(objectID: newID, version: 1, values: values))
                    for rel in EntityLayout.of(entity).relationships where rel.isToMany && !rel.isTransient {
                        let related = try store.relatedObjectIDs(for: rel, of: row.objectID).compactMap { map[$0] }
                        if !related.isEmpty { request.toManyChanges.append(ToManyChange(objectID: newID, relationship: rel, destinations: related)) }
                    }
                }
                try target.save(request)
                target.externalRecordWriter?.recordCommittedSave(request, in: target)
            } catch {
                try? remove(target)
                throw error
            }
            try remove(store)
            return target
        }
    }

    // MARK: - Row access for contexts

    /// The stores' rows for a batched fetch, handed to `body` a page at a
    /// time: a store that answers a page exactly (it applied limit and offset
    /// in a deterministic order) is asked for the next one, any other store
    /// answers everything in one page. Rows refresh entries the cache already
    /// has but add none, so neither every row nor every snapshot of a large
    /// result is held at once.
    func forEachSnapshotPage(for entity: EntityDescription, request: AnyFetchRequest, pageSize: Int, _ body: ([StoreSnapshot]) throws -> Void) throws {
        try locked {
            for store in persistentStores where store.entities.contains(where: { request.includesSubentities ? $0.isKindOf(entity: entity) : $0 === entity }) {
                var offset = 0
                while true {
                    let storeRequest = request.copy()
                    storeRequest.entity = entity
                    storeRequest.fetchLimit = pageSize
                    storeRequest.fetchOffset = offset
                    let result = try store.fetchSnapshots(storeRequest)
                    let time = now()
                    for snapshot in result.snapshots {
                        if snapshot.objectID.persistentStore !== store { snapshot.objectID.persistentStore = store }
                        if rowCache[snapshot.objectID] != nil { rowCache[snapshot.objectID] = (snapshot, time) }
                    }
                    try body(result.snapshots)
                    guard result.isExact, result.snapshots.count == pageSize else { break }
                    offset += pageSize
                }
            }
        }
    }

    /// The stores' rows for a context's fetch. When `storeAppliesWindow` and
    /// one store holds the entity, that store is given the request's offset
    /// and limit too, and `isExact` says whether it applied everything
    /// (predicate, sort, offset, limit); otherwise every store is asked for
    /// all matching rows and the caller finishes in memory (`isExact` false).
    /// `each` sees every row as it is read, once it is cached, when the
    /// answer will be exact (one store that applies the whole request); an
    /// answer the caller finishes in memory goes only to the result.
    func fetchSnapshots(for entity: EntityDescription, request: AnyFetchRequest, storeAppliesWindow: Bool = false,
                        each: (StoreSnapshot) throws -> Void = { _ in }) throws -> StoreFetchResult {
        try locked {
            let stores = persistentStores.filter { store in store.entities.contains(where: { request.includesSubentities ? $0.isKindOf(entity: entity) : $0 === entity }) }
            let single = storeAppliesWindow && stores.count == 1
            let storeRequest = request.copy()
            storeRequest.entity = entity
            if !single {
                storeRequest.fetchLimit = 0
                storeRequest.fetchOffset = 0
            }
            let time = now()
            var out: [StoreSnapshot] = []
            var exact = single
            for store in stores {
                // A store that labels its IDs (SQLite does) labels them all:
                // checking the first spares a load per row.
                var labelled: Bool?
                let result = try store.fetchSnapshots(storeRequest) { snapshot, isExact in
                    if labelled == nil { labelled = snapshot.objectID.persistentStore === store }
                    if labelled == false && snapshot.objectID.persistentStore !== store { snapshot.objectID.persistentStore = store }
                    rowCache[snapshot.objectID] = (snapshot, time)
                    if single && isExact { try each(snapshot) }
                }
                exact = exact && result.isExact
                if stores.count == 1 {
                    out = result.snapshots
                } else {
                    out.append(contentsOf: result.snapshots)
                }
            }
            return StoreFetchResult(snapshots: out, isExact: exact)
        }
    }

    /// The stores' count of `request`'s objects, summed over every store
    /// holding the entity; nil when one of them cannot count (the context
    /// then counts objects). Offset and limit apply to the sum.
    func countObjects(for entity: EntityDescription, request: AnyFetchRequest) throws -> Int? {
        try locked {
            let storeRequest = request.copy()
            storeRequest.entity = entity
            storeRequest.fetchLimit = 0
            storeRequest.fetchOffset = 0
            var total = 0
            for store in persistentStores where store.entities.contains(where: { request.includesSubentities ? $0.isKindOf(entity: entity) : $0 === entity }) {
                guard let count = try store.countObjects(storeRequest) else { return nil }
                total += count
            }
            let remaining = max(0, total - max(0, request.fetchOffset))
            return request.fetchLimit > 0 ? min(remaining, request.fetchLimit) : remaining
        }
    }

    /// The dictionary rows of `request` from the one store holding the
    /// entity; nil when several stores do (rows of several stores would have
    /// to be merged, grouped and sorted again) or the store cannot.
    func fetchDictionaries(for entity: EntityDescription, request: AnyFetchRequest) throws -> [[String: Any]]? {
        try locked {
            let holders = persistentStores.filter { store in
                store.entities.contains(where: { request.includesSubentities ? $0.isKindOf(entity: entity) : $0 === entity })
            }
            guard holders.count == 1 else { return nil }
            let storeRequest = request.copy()
            storeRequest.entity = entity
            return try holders[0].fetchDictionaries(storeRequest)
        }
    }

    /// The snapshot of one object: cached when younger than `staleness`
    /// (negative: any age), else read from its store; nil when it is gone.
    func snapshot(for id: ManagedObjectID, staleness: TimeInterval) throws -> StoreSnapshot? {
        // One lookup, no arrays: every fault that fires comes through here.
        try locked {
            if let hit = cachedSnapshot(for: id, staleness: staleness) { return hit }
            guard let store = id.persistentStore ?? store(withIdentifier: id.storeIdentifier) else { return nil }
            let found = try store.snapshots(for: [id])[id]
            rowCache[id] = found.map { ($0, now()) }
            return found
        }
    }

    /// The snapshot of a member of a to-many fault (`ids`, at `start`): when
    /// the cache lacks it, the rows of up to `limit` members the cache lacks
    /// (or holds older than `staleness`), scanning from `start` and wrapping
    /// around, are read in one store round-trip and cached, so the next
    /// members' faults fire from the cache. Nil when the row is gone.
    func snapshot(for id: ManagedObjectID, staleness: TimeInterval, batchingWith ids: [ManagedObjectID], from start: Int, limit: Int) throws -> StoreSnapshot? {
        try locked {
            if let hit = cachedSnapshot(for: id, staleness: staleness) { return hit }
            var wanted: [ManagedObjectID] = [id]
            var i = ids.isEmpty ? 0 : min(max(0, start), ids.count - 1)
            var scanned = 0
            while scanned < ids.count && wanted.count < limit {
                scanned += 1
                let member = ids[i]
                if member != id {
                    if let hit = rowCache[member], isFresh(hit.time, staleness) {} else { wanted.append(member) }
                }
                i = i + 1 == ids.count ? 0 : i + 1
            }
            let found = try currentSnapshots(for: wanted)
            let time = now()
            for (member, snapshot) in found { rowCache[member] = (snapshot, time) }
            guard let own = found[id] else {
                rowCache[id] = nil
                return nil
            }
            return own
        }
    }

    /// The cached row of `id` when fresh enough, as a snapshot under `id`
    /// itself: only the row's values are retained, not the cached snapshot's
    /// own ID object, which was one more cache miss per fault that fired.
    private func cachedSnapshot(for id: ManagedObjectID, staleness: TimeInterval) -> StoreSnapshot? {
        rowCache.read(id) { entry in
            guard let time = entry?.time, isFresh(time, staleness), let version = entry?.snapshot.version, let slots = entry?.snapshot.slots else { return nil }
            return StoreSnapshot(objectID: id, version: version, slots: slots)
        }
    }

    /// A cached row read at `time` may be used under `staleness` (negative:
    /// any age). The clock is read only when an interval is set.
    private func isFresh(_ time: Date, _ staleness: TimeInterval) -> Bool {
        staleness < 0 || now().timeIntervalSince(time) <= staleness
    }

    /// `snapshot(for:staleness:)` for many objects: the cache answers what it
    /// holds fresh enough, and the rest is read with one `snapshots(for:)`
    /// call per store (prefetching relies on this being one round-trip).
    /// Rows read are cached; IDs whose rows are gone are absent.
    func snapshots(for ids: [ManagedObjectID], staleness: TimeInterval) throws -> [ManagedObjectID: StoreSnapshot] {
        try locked {
            var out: [ManagedObjectID: StoreSnapshot] = [:]
            var misses: [ManagedObjectID] = []
            for id in ids {
                if let hit = rowCache[id], staleness < 0 || now().timeIntervalSince(hit.time) <= staleness {
                    out[id] = hit.snapshot
                } else {
                    misses.append(id)
                }
            }
            guard !misses.isEmpty else { return out }
            let found = try currentSnapshots(for: misses)
            let time = now()
            for id in misses {
                if let snapshot = found[id] {
                    rowCache[id] = (snapshot, time)
                    out[id] = snapshot
                } else {
                    rowCache[id] = nil
                }
            }
            return out
        }
    }

    func cachedSnapshots(for ids: [ManagedObjectID]) -> [ManagedObjectID: StoreSnapshot] {
        locked {
            var out: [ManagedObjectID: StoreSnapshot] = [:]
            for id in ids { if let hit = rowCache[id] { out[id] = hit.snapshot } }
            return out
        }
    }

    /// What the stores hold now, bypassing the cache.
    func currentSnapshots(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: StoreSnapshot] {
        try locked {
            var byStore: [ObjectIdentifier: (PersistentStore, [ManagedObjectID])] = [:]
            for id in ids {
                guard let store = id.persistentStore ?? store(withIdentifier: id.storeIdentifier) else { continue }
                byStore[ObjectIdentifier(store), default: (store, [])].1.append(id)
            }
            var out: [ManagedObjectID: StoreSnapshot] = [:]
            for (store, members) in byStore.values {
                for (id, snapshot) in try store.snapshots(for: members) { out[id] = snapshot }
            }
            return out
        }
    }

    /// What the stores hold now for one batch of a batched fetch; like a
    /// fetch it refreshes cache entries that exist, and adds none.
    func batchSnapshots(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: StoreSnapshot] {
        try locked {
            let found = try currentSnapshots(for: ids)
            let time = now()
            for (id, snapshot) in found where rowCache[id] != nil { rowCache[id] = (snapshot, time) }
            return found
        }
    }

    func forgetCachedSnapshot(for id: ManagedObjectID, ifOlderThan: Date? = nil) {
        locked { rowCache[id] = nil }
    }

    /// Rows a batch request deleted behind the cache's back: a fault for
    /// one of them must not be fulfilled from the cache.
    func forgetCachedRows(of ids: [ManagedObjectID]) {
        locked { for id in ids { rowCache[id] = nil } }
    }

    /// Every cached row of one store (a batch update changed rows it did not list).
    func forgetCachedRows(inStore identifier: String) {
        locked { rowCache.removeAll(inStore: identifier) }
    }

    func relatedObjectIDs(for rel: RelationshipDescription, of id: ManagedObjectID) throws -> [ManagedObjectID] {
        try locked {
            guard let store = id.persistentStore ?? self.store(withIdentifier: id.storeIdentifier) else { return [] }
            let ids = try store.relatedObjectIDs(for: rel, of: id)
            for related in ids where related.persistentStore == nil { related.persistentStore = self.store(withIdentifier: related.storeIdentifier) }
            return ids
        }
    }

    /// `relatedObjectIDs(for:of:)` for many owners: one
    /// `relatedObjectIDs(for:ofAll:)` call per store holding some of them.
    func relatedObjectIDs(for rel: RelationshipDescription, ofAll ids: [ManagedObjectID]) throws -> [ManagedObjectID: [ManagedObjectID]] {
        try locked {
            var byStore: [ObjectIdentifier: (PersistentStore, [ManagedObjectID])] = [:]
            for id in ids {
                guard let store = id.persistentStore ?? store(withIdentifier: id.storeIdentifier) else { continue }
                byStore[ObjectIdentifier(store), default: (store, [])].1.append(id)
            }
            var out: [ManagedObjectID: [ManagedObjectID]] = [:]
            for (store, owners) in byStore.values {
                for (owner, members) in try store.relatedObjectIDs(for: rel, ofAll: owners) {
                    for member in members where member.persistentStore == nil { member.persistentStore = self.store(withIdentifier: member.storeIdentifier) }
                    out[owner] = members
                }
            }
            return out
        }
    }

    func newObjectIDs(in store: PersistentStore, for entity: EntityDescription, count: Int) throws -> [ManagedObjectID] {
        try locked {
            let ids = try store.newObjectIDs(for: entity, count: count)
            for id in ids { id.persistentStore = store }
            return ids
        }
    }

    /// Writes one context save to one store and updates the cache.
    /// Returns the history position the save reached in the store, if it recorded history.
    @discardableResult
    func save(_ request: StoreSaveRequest, to store: PersistentStore) throws -> PersistentHistoryToken? {
        try locked {
            if store.isReadOnly {
                throw CoreDataError(.persistentStoreSave, "The store at \(store.url?.path ?? "memory") is read-only", userInfo: [CoreDataError.affectedStoresErrorKey: [store]])
            }
            try store.save(request)
            let token = store.historyTokenOfLastSave
            // After the commit, never failing the save (docs/EXTERNAL-RECORDS.md).
            store.externalRecordWriter?.recordCommittedSave(request, in: store)
            let time = now()
            for snapshot in request.inserted { rowCache[snapshot.objectID] = (snapshot, time) }
            for (snapshot, _) in request.updated { rowCache[snapshot.objectID] = (snapshot, time) }
            for (id, _) in request.deleted { rowCache[id] = nil }
            return token
        }
    }
}
