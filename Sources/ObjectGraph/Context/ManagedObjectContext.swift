import Foundation

/// A scratch pad of managed objects over a coordinator's stores: Core Data's
/// `NSManagedObjectContext` (MOC-*). It registers one instance per record
/// (MOC-00a), tracks inserts, updates and deletes, applies delete rules,
/// validates and saves, undoes, and merges other contexts' saves.
///
/// A context owns a serial queue; use it inside `perform`/`performAndWait`
/// (a main-queue context on the main thread). Debug builds trap when a
/// context is used off its queue.
///
/// ```swift
/// let context = ManagedObjectContext(coordinator: coordinator)
/// try context.performAndWait {
///     let dept = try context.insertNewObject(forEntityName: "Department")
///     try dept.setValue("Sales", forKey: "name")
///     try context.save()
/// }
/// ```
public final class ManagedObjectContext: NSLocking {
    public enum ConcurrencyType: Sendable { case privateQueue, mainQueue }

    public let concurrencyType: ConcurrencyType
    /// The coordinator; required, so never nil (MOC-00c, MOC-PC-01/02).
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    @exclusivity(unchecked) public var name: String?
    /// Who is saving, recorded with each save (change history, sync).
    @exclusivity(unchecked) public var transactionAuthor: String?
    /// The conflict policy of `save()`; `.error` by default (MOC-MP-01).
    @exclusivity(unchecked) public var mergePolicy: MergePolicy = .error
    /// Nil by default, as on iPhone OS (MOC-UN-01); set one to enable undo.
    @exclusivity(unchecked) public var undoManager: ContextUndoManager?
    /// Negative: cached snapshots never go stale (the default, -1); 0: always
    /// refetch when firing faults (MOC-ST-*).
    @exclusivity(unchecked) public var stalenessInterval: TimeInterval = -1
    /// True (default): delete rules run at `processPendingChanges`; false: at save (MOC-DP-*).
    @exclusivity(unchecked) public var propagatesDeletesAtEndOfEvent = true
    /// False (default): clean objects are held weakly and freed when unused (MOC-RR-*).
    @exclusivity(unchecked) public var retainsRegisteredObjects = false {
        didSet {
            if !retainsRegisteredObjects { sweepThreshold = Self.minimumSweepThreshold }
        }
    }

    /// True: saves of other contexts on the same coordinator (this
    /// context's parent store) are merged into this one on its queue, as
    /// Core Data's `automaticallyMergesChangesFromParent` (see
    /// `ManagedObjectContext+AutomaticMerging.swift`). False by default.
    @exclusivity(unchecked) public var automaticallyMergesChangesFromParent = false {
        didSet { if oldValue != automaticallyMergesChangesFromParent { updateAutomaticMerging() } }
    }
    @exclusivity(unchecked) var automaticMergeObserver: NSObjectProtocol?

    /// Global identifiers given to inserted objects, written at their save.
    var assignedGlobalIdentifiers: [ManagedObject: UUID] = [:]

    let queue: DispatchQueue
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    /// Marks the main queue for every main-queue context at once. A value
    /// per context (as private queues get) would be overwritten by the next
    /// main-queue context, and after `dispatchMain()` the main queue's
    /// blocks run on pool threads, where `Thread.isMainThread` is false:
    /// the first context then looked off its queue inside its own block.
    private static let mainQueueKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()
    /// The context whose identity marks `queue` (see `isOnQueue`): this
    /// context, or the one whose queue it shares (`init(coordinator:sharingQueueOf:)`).
    private var queueOwner: ObjectIdentifier?
    private let recursiveLock = NSRecursiveLock()

    /// The uniquing table (MOC-00a). It holds its objects strongly and lets
    /// go of the ones nothing else references (MOC-RR-02) when it sweeps:
    /// when it has doubled since the last sweep, and before answering
    /// `registeredObjects`. Weak entries would be the obvious design, but a
    /// weak reference gives every object a side table, which made each
    /// retain and release of every managed object several times slower;
    /// and an object can then only be freed on the context's queue, where
    /// the table lives.
    @exclusivity(unchecked) var registry = ObjectIDTable<ManagedObject>()
    /// Registry size that triggers the next sweep.
    @exclusivity(unchecked) var sweepThreshold = ManagedObjectContext.minimumSweepThreshold
    static let minimumSweepThreshold = 4_096
    @exclusivity(unchecked) var insertedSet = Set<ManagedObject>() {
        didSet {
            if insertedSet.isEmpty { insertionOrder.clear() }
            hasChangesMayHaveChanged()
        }
    }
    @exclusivity(unchecked) var updatedSet = Set<ManagedObject>() {
        didSet {
            if updatedSet.isEmpty { updateOrder.clear() }
            hasChangesMayHaveChanged()
        }
    }
    @exclusivity(unchecked) var deletedSet = Set<ManagedObject>() {
        didSet {
            if deletedSet.isEmpty { deletionOrder.clear() }
            hasChangesMayHaveChanged()
        }
    }
    /// The change sets' members in the order they joined (see `ChangeOrder`).
    @exclusivity(unchecked) var insertionOrder = ChangeOrder()
    @exclusivity(unchecked) var updateOrder = ChangeOrder()
    @exclusivity(unchecked) var deletionOrder = ChangeOrder()
    var insertedInOrder: [ManagedObject] { insertionOrder.ordered(insertedSet) }
    var updatedInOrder: [ManagedObject] { updateOrder.ordered(updatedSet) }
    var deletedInOrder: [ManagedObject] { deletionOrder.ordered(deletedSet) }
    @exclusivity(unchecked) private var lastReportedHasChanges = false
    @exclusivity(unchecked) private var hasChangesObservers: [Int: (Bool) -> Void] = [:]
    @exclusivity(unchecked) private var nextHasChangesObserver = 0
    /// Objects marked by `detectConflicts(for:)` (MOC-MO-13, MOC-MO-14).
    @exclusivity(unchecked) var lockedSet = Set<ManagedObject>()
    /// Faults created by a merge, held until the next save or reset (MOC-MG-03).
    @exclusivity(unchecked) var mergeRetained = Set<ManagedObject>()
    @exclusivity(unchecked) var assignedStores: [ObjectIdentifier: PersistentStore] = [:]
    /// The last class `objectClass(for:)` resolved.
    @exclusivity(unchecked) private var lastObjectClass: (entity: EntityDescription, className: String, generation: Int, type: ManagedObject.Type)?
    /// The last entity `checkInsertable` accepted (see there).
    @exclusivity(unchecked) private var lastInsertableEntity: EntityDescription?
    /// The model's uniqueness constraints, worked out at the first save
    /// (the model is frozen by then; see `ManagedObjectContext+Constraints.swift`).
    @exclusivity(unchecked) var cachedUniquenessConstraints: [UniquenessConstraint]?
    /// False makes count and dictionary fetches always take the in-memory
    /// path; tests turn it off to compare that path with the stores' SQL.
    @exclusivity(unchecked) var allowsFetchPushdown = true

    // Changes since the last processPendingChanges.
    @exclusivity(unchecked) var pendingInserted = Set<ManagedObject>()
    @exclusivity(unchecked) var pendingUpdated = Set<ManagedObject>()
    @exclusivity(unchecked) var pendingDeleted = Set<ManagedObject>()
    @exclusivity(unchecked) var pendingRefreshed = Set<ManagedObject>()
    @exclusivity(unchecked) var pendingUndo: [UndoRecord] = []
    @exclusivity(unchecked) var deletesToPropagate: [ManagedObject] = []
    @exclusivity(unchecked) var changeProcessingDisabled = 0
    @exclusivity(unchecked) var isApplyingUndo = false
    @exclusivity(unchecked) var isProcessingPendingChanges = false
    @exclusivity(unchecked) var isSaving = false
    @exclusivity(unchecked) var objectsChangedDuringWillSave: Set<ManagedObject>?
    /// Objects inserted then deleted before any save, forgotten at the next
    /// processPendingChanges (kept registered while undo may restore them).
    @exclusivity(unchecked) var forgottenInserts: [ManagedObject] = []

    /// What processPendingChanges registers with the undo manager.
    enum UndoRecord {
        case change(ManagedObject, String, Any?)
        case insert(ManagedObject)
        case delete(ManagedObject)
    }

    /// A context on `coordinator`.
    public init(coordinator: PersistentStoreCoordinator, concurrencyType: ConcurrencyType = .privateQueue) {
        self.persistentStoreCoordinator = coordinator
        self.concurrencyType = concurrencyType
        self.queue = concurrencyType == .mainQueue ? DispatchQueue.main : DispatchQueue(label: "ObjectGraph.ManagedObjectContext")
        if concurrencyType == .mainQueue {
            _ = Self.mainQueueKey
        } else {
            queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
        }
        queueOwner = ObjectIdentifier(self)
        storesObserver = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storesDidChangeNotification, object: coordinator, queue: nil) { [weak self] note in
            guard let removed = note.userInfo?[PersistentStoreCoordinator.removedPersistentStoresKey] as? [PersistentStore], !removed.isEmpty else { return }
            let identifiers = Set(removed.map(\.identifier))
            self?.queue.async { [weak self] in self?.invalidateObjects(inStores: identifiers) }
        }
    }

    /// A private-queue context confined to `other`'s queue, so code on that
    /// queue can use both (a migration reads the source context and writes
    /// the destination context in one pass). `other` must outlive it.
    init(coordinator: PersistentStoreCoordinator, sharingQueueOf other: ManagedObjectContext) {
        self.persistentStoreCoordinator = coordinator
        self.concurrencyType = other.concurrencyType
        self.queue = other.queue
        queueOwner = other.queueOwner
        storesObserver = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storesDidChangeNotification, object: coordinator, queue: nil) { [weak self] note in
            guard let removed = note.userInfo?[PersistentStoreCoordinator.removedPersistentStoresKey] as? [PersistentStore], !removed.isEmpty else { return }
            let identifiers = Set(removed.map(\.identifier))
            self?.queue.async { [weak self] in self?.invalidateObjects(inStores: identifiers) }
        }
    }

    deinit {
        if let storesObserver { NotificationCenter.default.removeObserver(storesObserver) }
        if let automaticMergeObserver { NotificationCenter.default.removeObserver(automaticMergeObserver) }
        // Objects hold their context unretained (see `Unretained`):
        // each one this context still knows forgets it now, as a weak
        // reference would. Every object whose reference is set is registered
        // here; the change sets are walked too for safety.
        func detach(_ object: ManagedObject) {
            if object.belongs(to: self) { object.managedObjectContext = nil }
        }
        for object in registry.values { detach(object) }
        for object in insertedSet { detach(object) }
        for object in updatedSet { detach(object) }
        for object in deletedSet { detach(object) }
        for object in forgottenInserts { detach(object) }
        for object in mergeRetained { detach(object) }
    }

    @exclusivity(unchecked) private var storesObserver: NSObjectProtocol?

    /// Objects of a store that left the coordinator are forgotten and
    /// reported under `invalidated` (MOC-UK-05).
    func invalidateObjects(inStores identifiers: Set<String>) {
        var invalidated = Set<ManagedObject>()
        for object in Array(registry.values) {
            guard let store = object.objectID.storeIdentifier, identifiers.contains(store) else { continue }
            insertedSet.remove(object); updatedSet.remove(object); deletedSet.remove(object); lockedSet.remove(object)
            unregister(object)
            invalidated.insert(object)
        }
        post(Self.objectsDidChangeNotification, invalidated: invalidated)
    }

    // MARK: - Confinement

    /// Runs `block` on the context's queue, asynchronously. The end of the
    /// block is an "end of event": pending changes are processed then (MOC-PP-02).
    public func perform(_ block: @escaping () -> Void) {
        // The block keeps the context alive until it has run (MOC-LK-05).
        queue.async { [self] in
            withExtendedLifetime(self) {
                block()
                processPendingChanges()
            }
        }
    }

    /// Runs `block` on the context's queue and waits; reentrant.
    public func performAndWait<T>(_ block: () throws -> T) rethrows -> T {
        if isOnQueue { return try block() }
        return try queue.sync(execute: block)
    }

    var isOnQueue: Bool {
        if concurrencyType == .mainQueue {
            return Thread.isMainThread || DispatchQueue.getSpecific(key: Self.mainQueueKey) == true
        }
        return DispatchQueue.getSpecific(key: Self.queueKey) == queueOwner
    }

    /// Traps in debug builds when the context is used off its queue.
    @inline(__always) func checkConfinement(_ function: StaticString = #function) {
        #if DEBUG
        if !isOnQueue {
            // Trap kept (issue 28 audit): debug builds only, as Core Data's concurrency debugging traps (Confinement, ARCHITECTURE.md).
            preconditionFailure("ObjectGraph: ManagedObjectContext.\(function) called off the context's queue; wrap the call in perform { } or performAndWait { }")
        }
        #endif
    }

    // MARK: - hasChanges observation (MOC-HC-02, MOC-HC-03)

    /// Calls `handler` with the new value each time `hasChanges` flips. The
    /// call is made asynchronously on the context's queue, after the change
    /// that caused it has finished, so the handler may use the context.
    ///
    /// ```swift
    /// let token = context.observeHasChanges { dirty in saveButton.isEnabled = dirty }
    /// ```
    public func observeHasChanges(_ handler: @escaping (Bool) -> Void) -> ObservationToken {
        nextHasChangesObserver += 1
        let id = nextHasChangesObserver
        hasChangesObservers[id] = handler
        lastReportedHasChanges = hasChanges
        return ObservationToken { [weak self] in self?.hasChangesObservers[id] = nil }
    }

    private func hasChangesMayHaveChanged() {
        guard !hasChangesObservers.isEmpty else { return }
        let now = hasChanges
        guard now != lastReportedHasChanges else { return }
        lastReportedHasChanges = now
        let handlers = Array(hasChangesObservers.values)
        queue.async { for handler in handlers { handler(now) } }
    }

    // MARK: - NSLocking (MOC-LK-*)

    public func lock() { recursiveLock.lock() }
    public func unlock() { recursiveLock.unlock() }
    public func tryLock() -> Bool { recursiveLock.try() }

    // MARK: - Registration

    /// Every registered object, faults included (MOC-00d).
    public var registeredObjects: Set<ManagedObject> {
        checkConfinement()
        sweepUnreferencedObjects(untilStable: true)
        return Set(registry.values)
    }
    public var insertedObjects: Set<ManagedObject> { checkConfinement(); return insertedSet }
    public var updatedObjects: Set<ManagedObject> { checkConfinement(); return updatedSet }
    public var deletedObjects: Set<ManagedObject> { checkConfinement(); return deletedSet }
    /// Uncommitted changes exist (MOC-HC-01).
    public var hasChanges: Bool { !insertedSet.isEmpty || !updatedSet.isEmpty || !deletedSet.isEmpty }

    /// The registered object for `id`, or nil; never touches a store.
    public func registeredObject(for id: ManagedObjectID) -> ManagedObject? {
        checkConfinement()
        // An entry only the registry holds is an object the application let
        // go of: it is gone (MOC-RR-02), even if no sweep has run yet.
        if !retainsRegisteredObjects, registry[id] != nil, isKnownUniquelyReferenced(&registry[id]!) {
            registry.removeValue(forKey: id)?.managedObjectContext = nil
            return nil
        }
        return registry[id]
    }

    /// The object for `id`: registered, or a new fault (not checked against
    /// the store until fired) (MOC-00a).
    public func object(with id: ManagedObjectID) -> ManagedObject {
        checkConfinement()
        return objectForID(id)
    }

    /// The object for `id`, loaded; throws 133000 if its record does not exist.
    public func existingObject(with id: ManagedObjectID) throws -> ManagedObject {
        checkConfinement()
        if let o = registry[id] {
            if deletedSet.contains(o) || o.wasForgotten { throw missingObject(id) }
            try o.fireFaultIfNeeded()
            return o
        }
        // The context's staleness applies as when a fault fires (MOC-ST-*):
        // with 0, a row another coordinator changed is read again.
        guard !id.isTemporaryID, let snapshot = try persistentStoreCoordinator.snapshot(for: id, staleness: stalenessInterval) else { throw missingObject(id) }
        let o = objectForID(id)
        o.load(values: lazyValues(from: snapshot), version: snapshot.version, context: self)
        return o
    }

    func missingObject(_ id: ManagedObjectID) -> CoreDataError {
        CoreDataError(.managedObjectContextReferentialIntegrity, "No \(id.entityName) object exists with ID \(id)", userInfo: [CoreDataError.affectedObjectsErrorKey: [id]])
    }

    func objectForID(_ id: ManagedObjectID) -> ManagedObject {
        // One hash lookup finds the entry or puts the new fault in its place:
        // every fetched row and every related ID comes through here.
        let (object, made) = registry.value(for: id) { objectClass(for: id.entity).makeFault(entity: id.entity, id: id) }
        if made {
            object.managedObjectContext = self
            sweepIfGrown()
        }
        return object
    }

    /// The registered class for `entity`, remembered for the last entity
    /// asked while no class is (un)registered: the registry takes a lock
    /// and a table lookup, and a fetch asks once per row.
    func objectClass(for entity: EntityDescription) -> ManagedObject.Type {
        let registry = ManagedObjectClassRegistry.shared
        let generation = registry.generation
        let className = entity.managedObjectClassName
        if let last = lastObjectClass, last.entity === entity, last.generation == generation, last.className == className { return last.type }
        let type = registry.objectClass(for: entity)
        lastObjectClass = (entity, className, generation, type)
        return type
    }

    func register(_ object: ManagedObject) {
        object.managedObjectContext = self
        registry[object.objectID] = object
        sweepIfGrown()
    }

    /// Sweeps the uniquing table when it has doubled since the last sweep.
    private func sweepIfGrown() {
        if registry.count >= sweepThreshold && !retainsRegisteredObjects {
            // Changed objects are held by the change sets and cannot go: a
            // sweep is worth its pass over the table only when enough of it
            // could (not while inserting many objects, say).
            let sweepable = registry.count - insertedSet.count - updatedSet.count - deletedSet.count
            if sweepable >= Self.minimumSweepThreshold { sweepUnreferencedObjects(untilStable: false) }
            sweepThreshold = max(Self.minimumSweepThreshold, registry.count * 2)
        }
    }

    /// Removes registered objects that only the registry references: clean
    /// objects the application let go of, which Core Data frees (MOC-RR-02).
    /// Changed objects are held by the change sets, so they stay. Freeing
    /// one object can leave another unreferenced (a to-one it held);
    /// `untilStable` sweeps again until nothing more goes.
    func sweepUnreferencedObjects(untilStable: Bool) {
        guard !retainsRegisteredObjects else { return }
        while true {
            var freed = 0
            // In place: a copy of the entry would never be the only reference.
            registry.removeAll(where: { isKnownUniquelyReferenced(&$0) }, removed: { object in
                object.managedObjectContext = nil
                freed += 1
            })
            if freed == 0 || !untilStable { return }
        }
    }

    func unregister(_ object: ManagedObject) {
        if registry[object.objectID] === object { registry[object.objectID] = nil }
        mergeRetained.remove(object)
        assignedStores[ObjectIdentifier(object)] = nil
        object.managedObjectContext = nil
        object.wasForgotten = true
    }

    /// Turns stored snapshot values into object values (to-one IDs to
    /// objects). The slots are shared with the snapshot until a to-one is
    /// replaced, so a row of attributes becomes an object's values as is.
    func values(from snapshot: StoreSnapshot) -> PropertyValues {
        var values = lazyValues(from: snapshot)
        resolveToOnes(in: &values)
        return values
    }

    /// A snapshot's slots as object values with to-ones still IDs: what
    /// `ManagedObject.load` takes, resolved when first read.
    func lazyValues(from snapshot: StoreSnapshot) -> PropertyValues {
        PropertyValues(layout: EntityLayout.of(snapshot.objectID.entity), slots: snapshot.slots)
    }

    func resolveToOnes(in values: inout PropertyValues) {
        for slot in values.layout.toOneSlots {
            if let id = values[slot: slot] as? ManagedObjectID { values[slot: slot] = objectForID(id) }
        }
    }

    func withChangeProcessingDisabled(_ body: () -> Void) {
        changeProcessingDisabled += 1
        defer { changeProcessingDisabled -= 1 }
        body()
    }

    /// Inverse maintenance is off while loading (LIFE-10) and while undoing,
    /// which replays both sides of every change itself.
    var maintainsInverses: Bool { changeProcessingDisabled == 0 && !isApplyingUndo }

    // MARK: - Faults

    func fulfillFault(_ object: ManagedObject) throws {
        guard object.isFault else { return }
        // A member of a to-many fault: read the rows of the next members
        // still missing from the row cache in the same query, so walking a
        // relationship of n objects costs n/500 queries, not n. The members
        // stay faults (each fires on its own, as in Core Data), from the cache.
        let snapshot: StoreSnapshot?
        if let group = object.faultGroup, stalenessInterval != 0 {
            object.faultGroup = nil
            snapshot = try persistentStoreCoordinator.snapshot(for: object.objectID, staleness: stalenessInterval, batchingWith: group.ids,
                                                               from: object.faultGroupIndex, limit: Self.faultGroupBatchSize)
        } else {
            object.faultGroup = nil
            snapshot = try persistentStoreCoordinator.snapshot(for: object.objectID, staleness: stalenessInterval)
        }
        guard let snapshot else {
            throw CoreDataError(.managedObjectContextReferentialIntegrity, "CoreData could not fulfill a fault for \(object.objectID): the \(object.entity.name) record no longer exists", userInfo: [CoreDataError.affectedObjectsErrorKey: [object]])
        }
        object.load(values: lazyValues(from: snapshot), version: snapshot.version, context: self)
    }

    func fetchRelated(_ rel: RelationshipDescription, of object: ManagedObject) throws -> [ManagedObject] {
        if object.objectID.isTemporaryID || insertedSet.contains(object) { return [] }
        let ids = try persistentStoreCoordinator.relatedObjectIDs(for: rel, of: object.objectID)
        let members = ids.map(objectForID)
        if members.count > 1 {
            let group = FaultGroup(ids: ids)
            for (i, member) in members.enumerated() where member.isFault {
                member.faultGroup = group
                member.faultGroupIndex = i
            }
        }
        return members
    }

    /// Rows read per query when a member of a to-many fault fires.
    static let faultGroupBatchSize = 500

    // MARK: - Insert and delete

    /// Inserts a new object (MOC-MO-01); traps for an abstract entity or one
    /// outside the coordinator's model (MOC-MO-03). Inserting twice is a no-op.
    public func insert(_ object: ManagedObject) {
        checkConfinement()
        // Trap kept (issue 28 audit): an abstract or foreign entity, or another context's object, which Core Data raises on; insertNewObject throws instead.
        do { try insertChecked(object) } catch { preconditionFailure("ObjectGraph: \(error)") }
    }

    /// Creates and inserts an object of the named entity, of its registered
    /// class (OBJ-06, OBJ-08). Throws for an unknown or abstract entity.
    ///
    /// ```swift
    /// let employee = try context.insertNewObject(forEntityName: "Employee") as! Employee
    /// ```
    @discardableResult
    public func insertNewObject(forEntityName name: String) throws -> ManagedObject {
        checkConfinement()
        guard let entity = persistentStoreCoordinator.managedObjectModel.entitiesByName[name] else {
            throw CoreDataError(.coreData, "The model has no entity named '\(name)'", userInfo: [CoreDataError.entityNameErrorKey: name])
        }
        try checkInsertable(entity)
        return objectClass(for: entity).init(entity: entity, insertInto: self)
    }

    func checkInsertable(_ entity: EntityDescription) throws {
        // The model is frozen once a coordinator uses it, so an entity that
        // passed once passes again: inserting many objects of one entity
        // skips the weak load of its model per object.
        if entity === lastInsertableEntity { return }
        if entity.isAbstract {
            throw CoreDataError(.coreData, "Cannot create an object of the abstract entity \(entity.name) (MOD-05)", userInfo: [CoreDataError.entityNameErrorKey: entity.name])
        }
        guard entity.managedObjectModel === persistentStoreCoordinator.managedObjectModel else {
            throw CoreDataError(.coreData, "The entity \(entity.name) is not from this context's model (OBJ-05)", userInfo: [CoreDataError.entityNameErrorKey: entity.name])
        }
        lastInsertableEntity = entity
    }

    func insertChecked(_ object: ManagedObject) throws {
        if object.belongs(to: self) && registry[object.objectID] === object && !deletedSet.contains(object) { return }
        if object.managedObjectContextReference.isSet && !object.belongs(to: self) {
            throw CoreDataError(.coreData, "The \(object.entity.name) object belongs to another context (MOC-MO-03)")
        }
        try checkInsertable(object.entity)
        register(object)
        object.wasForgotten = false
        if !object.hasAwokenFromInsert {
            for attribute in object.layout.attributesWithDefaults where object.storage[attribute.name] == nil {
                object.storage[attribute.name] = attribute.defaultValue
            }
            for name in object.layout.toManyNames where object.storage[name] == nil { object.storage[name] = [ManagedObject]() }
            object.unloadedToMany = []
            object.isFault = false
        }
        if insertedSet.insert(object).inserted { insertionOrder.note(object) }
        pendingInserted.insert(object)
        recordUndo(.insert(object))
        if !object.hasAwokenFromInsert {
            object.hasAwokenFromInsert = true
            object.awakeFromInsert()
        }
    }

    /// Marks an object for deletion at the next save (MOC-MO-04); a never-saved
    /// object simply leaves the context (MOC-MO-05). `prepareForDeletion` runs
    /// at once (LIFE-25); delete rules run at the end of the event or at save
    /// (MOC-MO-06, MOC-DP-*).
    public func delete(_ object: ManagedObject) {
        checkConfinement()
        guard object.belongs(to: self), !deletedSet.contains(object) else { return }
        try? object.fireFaultIfNeeded()
        object.prepareForDeletion()
        if insertedSet.contains(object) {
            insertedSet.remove(object)
            pendingInserted.remove(object)
        } else {
            if deletedSet.insert(object).inserted { deletionOrder.note(object) }
            updatedSet.remove(object)
            pendingDeleted.insert(object)
        }
        recordUndo(.delete(object))
        deletesToPropagate.append(object)
    }

    /// Applies delete rules to the objects deleted since the last call.
    func propagateDeletes() {
        // In order, by index: cascades append while the loop runs, and
        // removing from the front each time made deleting n objects O(n²).
        var next = 0
        defer { deletesToPropagate.removeAll() }
        while next < deletesToPropagate.count {
            let object = deletesToPropagate[next]
            next += 1
            for rel in object.layout.relationships {
                let destinations: [ManagedObject]
                if rel.isToMany {
                    try? object.loadToMany(rel)
                    destinations = object.storage[rel.name] as? [ManagedObject] ?? []
                } else {
                    destinations = (object.storage[rel.name] as? ManagedObject).map { [$0] } ?? []
                }
                switch rel.deleteRule {
                case .nullify:
                    guard let inverse = rel.inverseRelationship else { continue }
                    for d in destinations { try? d.removeOneSide(inverse, object) }
                case .cascade:
                    for d in destinations where !deletedSet.contains(d) && d.belongs(to: self) { delete(d) }
                case .deny, .noAction:
                    continue
                }
            }
            // An inserted-then-deleted object is gone once its rules have run.
            if !deletedSet.contains(object) && !insertedSet.contains(object) && object.objectID.isTemporaryID && !isApplyingUndo {
                forgottenInserts.append(object)
            }
        }
    }


    // MARK: - Change tracking

    func objectDidChange(_ object: ManagedObject, key: String, slot: Int?, oldValue: Any?, modeled: Bool) {
        guard changeProcessingDisabled == 0, object.belongs(to: self) else { return }
        // Unmodeled keys have no slot: they mark the object updated (when
        // the class asks for that) but are never saved, so nothing records them.
        if let slot { object.changedSlots.insert(slot) }
        // An inserted object is reported as inserted, never as updated, so
        // it need not join the update sets (one hash insert per setValue).
        if !insertedSet.contains(object) {
            if !deletedSet.contains(object), updatedSet.insert(object).inserted { updateOrder.note(object) }
            pendingUpdated.insert(object)
        }
        objectsChangedDuringWillSave?.insert(object)
        if modeled { recordUndo(.change(object, key, oldValue)) }
    }

    func recordUndo(_ record: @autoclosure () -> UndoRecord) {
        guard let manager = undoManager, manager.isUndoRegistrationEnabled else { return }
        pendingUndo.append(record())
    }

    /// Processes changes since the last call (MOC-PP-01): runs delete rules
    /// when `propagatesDeletesAtEndOfEvent`, registers one undo group and
    /// posts one objects-did-change notification if anything changed (MOC-PP-03).
    /// Called by save, undo, redo and fetches including pending changes (MOC-PP-02).
    public func processPendingChanges() {
        checkConfinement()
        guard !isProcessingPendingChanges else { return }
        isProcessingPendingChanges = true
        defer { isProcessingPendingChanges = false }
        if propagatesDeletesAtEndOfEvent { propagateDeletes() }
        for object in forgottenInserts where !insertedSet.contains(object) && !deletedSet.contains(object) {
            updatedSet.remove(object)
            pendingUpdated.remove(object)
            if undoManager == nil { unregister(object) }
        }
        forgottenInserts.removeAll()
        if !pendingUndo.isEmpty, let manager = undoManager {
            let records = pendingUndo
            pendingUndo.removeAll()
            manager.registerUndo { [weak self] in self?.applyUndo(records) }
        }
        pendingUndo.removeAll()
        // Usually every pending insert is still inserted: then the pending set
        // itself is the answer, without building a copy of it.
        let inserted = pendingInserted.allSatisfy(insertedSet.contains) ? pendingInserted : pendingInserted.intersection(insertedSet)
        let deleted = pendingDeleted.allSatisfy(deletedSet.contains) ? pendingDeleted : pendingDeleted.intersection(deletedSet)
        let updated = pendingUpdated.filter { $0.belongs(to: self) && !insertedSet.contains($0) && !deletedSet.contains($0) }
        let refreshed = pendingRefreshed
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll(); pendingRefreshed.removeAll()
        post(Self.objectsDidChangeNotification, inserted: inserted, updated: updated, deleted: deleted, refreshed: refreshed)
    }

    // MARK: - Undo (MOC-UN-*)

    /// Processes pending changes, then reverses the latest undo group.
    public func undo() {
        checkConfinement()
        guard let manager = undoManager else { return }
        processPendingChanges()
        manager.undo()
    }

    public func redo() {
        checkConfinement()
        guard let manager = undoManager else { return }
        processPendingChanges()
        manager.redo()
    }

    func applyUndo(_ records: [UndoRecord]) {
        isApplyingUndo = true
        var events: [ObjectIdentifier: (ManagedObject, SnapshotEventType)] = [:]
        func note(_ o: ManagedObject, _ e: SnapshotEventType) {
            let current = events[ObjectIdentifier(o)]?.1 ?? []
            events[ObjectIdentifier(o)] = (o, current.union(e))
        }
        for record in records.reversed() {
            switch record {
            case let .change(object, key, old):
                guard let rel = object.layout.relationshipsByName[key] else {
                    object.willChangeValue(forKey: key)
                    object.storage[key] = old
                    object.didChangeValue(forKey: key)
                    note(object, .undoUpdate)
                    continue
                }
                if rel.isToMany { object.unloadedToMany.remove(key) }
                object.willChangeValue(forKey: key)
                object.storage[key] = rel.isToMany ? (old ?? [ManagedObject]()) : old
                object.didChangeValue(forKey: key)
                note(object, .undoUpdate)
            case let .insert(object):
                // Undoing an insert removes the object; redo re-inserts it
                // without a second awakeFromInsert (LIFE-03).
                if insertedSet.remove(object) != nil {
                    pendingInserted.remove(object)
                    updatedSet.remove(object)
                    recordUndo(.delete(object))
                    note(object, .undoInsertion)
                } else if deletedSet.remove(object) != nil {
                    recordUndo(.delete(object))
                }
            case let .delete(object):
                if object.objectID.isTemporaryID || object.wasForgotten && object.storeVersion == 0 {
                    // It was an inserted object: put it back as inserted.
                    register(object)
                    object.wasForgotten = false
                    if insertedSet.insert(object).inserted { insertionOrder.note(object) }
                    pendingInserted.insert(object)
                    recordUndo(.insert(object))
                } else {
                    deletedSet.remove(object)
                    if !object.changedValues().isEmpty, updatedSet.insert(object).inserted { updateOrder.note(object) }
                    pendingUpdated.insert(object)
                    recordUndo(.insert(object))
                }
                note(object, .undoDeletion)
            }
        }
        // An object whose every change was undone is clean again.
        for object in updatedSet where object.changedValues().isEmpty { updatedSet.remove(object) }
        deletesToPropagate.removeAll { !deletedSet.contains($0) }
        isApplyingUndo = false
        for (object, event) in events.values { object.awake(fromSnapshotEvents: event) }
        processPendingChanges()
    }

    // MARK: - Rollback and reset

    /// Discards every unsaved change and clears undo (MOC-RB-01): inserts are
    /// unregistered, deletes restored, updates reverted to the last committed
    /// values, not refetched (MOC-RB-02). Reverted objects get the Rollback
    /// event (MOC-RB-03) and are reported as refreshed.
    public func rollback() {
        checkConfinement()
        undoManager?.removeAllActions()
        pendingUndo.removeAll()
        for object in insertedSet { unregister(object) }
        for object in forgottenInserts { unregister(object) }
        forgottenInserts.removeAll()
        let reverted = updatedSet.union(deletedSet)
        for object in reverted where !object.isFault {
            for key in object.changedKeys {
                if let committed = object.committed[key] { object.storage[key] = committed }
                else if object.layout.relationshipsByName[key]?.isToMany == true { object.unloadedToMany.insert(key); object.storage[key] = nil }
                else { object.storage[key] = nil }
            }
            object.changedSlots = SlotSet()
        }
        insertedSet.removeAll(); updatedSet.removeAll(); deletedSet.removeAll(); lockedSet.removeAll()
        assignedGlobalIdentifiers.removeAll()
        deletesToPropagate.removeAll()
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll()
        for object in reverted { object.awake(fromSnapshotEvents: .rollback) }
        pendingRefreshed.formUnion(reverted)
        processPendingChanges()
    }

    /// Forgets every object (MOC-RS-01, MOC-RS-02): all sets empty, undo
    /// cleared, old instances detached; posts `invalidatedAll` with their IDs.
    public func reset() {
        checkConfinement()
        let ids = registry.values.map(\.objectID)
        // Every table is emptied below, so each object is only told it was
        // let go of (what `unregister` does beyond removing table entries).
        func forget(_ o: ManagedObject) {
            guard o.belongs(to: self) else { return }
            o.managedObjectContext = nil
            o.wasForgotten = true
        }
        for o in registry.values { forget(o) }
        for o in insertedSet { forget(o) }
        for o in updatedSet { forget(o) }
        for o in deletedSet { forget(o) }
        registry.removeAll(); mergeRetained.removeAll()
        insertedSet.removeAll(); updatedSet.removeAll(); deletedSet.removeAll(); lockedSet.removeAll()
        assignedGlobalIdentifiers.removeAll()
        pendingInserted.removeAll(); pendingUpdated.removeAll(); pendingDeleted.removeAll(); pendingRefreshed.removeAll()
        pendingUndo.removeAll(); deletesToPropagate.removeAll(); forgottenInserts.removeAll(); assignedStores.removeAll()
        undoManager?.removeAllActions()
        NotificationCenter.default.post(name: Self.objectsDidChangeNotification, object: self, userInfo: [Self.invalidatedAllObjectsKey: ids])
    }

    // MARK: - Store assignment, permanent IDs, conflicts

    /// Chooses the store a newly inserted object is saved to (MOC-MO-07).
    public func assign(_ object: ManagedObject, to store: PersistentStore) {
        checkConfinement()
        // Trap kept (issue 28 audit): Core Data raises too ("Can't reassign an object to a different store once it has been saved").
        precondition(insertedSet.contains(object) && object.objectID.isTemporaryID, "ObjectGraph: assign(_:to:) takes a newly inserted object (MOC-MO-07)")
        precondition(persistentStoreCoordinator.persistentStores.contains { $0 === store }, "ObjectGraph: assign(_:to:) takes a store of this context's coordinator")
        assignedStores[ObjectIdentifier(object)] = store
    }

    /// Gives inserted objects permanent IDs now (MOC-MO-08…MOC-MO-10); objects
    /// with permanent IDs are skipped. They stay inserted until saved.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        checkConfinement()
        let pending = objects.filter { $0.objectID.isTemporaryID && $0.belongs(to: self) }
        try allocatePermanentIDs(for: pending, in: stores(for: pending))
        for object in pending {
            if let id = object.pendingPermanentID { rekey(object, to: id) }
            object.pendingPermanentID = nil
        }
    }

    /// Sets `pendingPermanentID` of each temporary object of `objects`
    /// (whose stores are `stores`, in the same order): one store call per
    /// store and entity. The save applies them once its writes succeed.
    func allocatePermanentIDs(for objects: [ManagedObject], in stores: [PersistentStore]) throws {
        struct GroupKey: Hashable { let store: ObjectIdentifier; let entity: ObjectIdentifier }
        var groups: [(store: PersistentStore, entity: EntityDescription, members: [Int])] = []
        var groupOf: [GroupKey: Int] = [:]
        // Objects of one entity usually come in runs: the run's group is
        // reused without hashing its key for every object.
        var last: (key: GroupKey, group: Int)?
        for (index, object) in objects.enumerated() where object.objectID.isTemporaryID {
            let key = GroupKey(store: ObjectIdentifier(stores[index]), entity: ObjectIdentifier(object.entity))
            let group: Int
            if let last, last.key == key {
                group = last.group
            } else if let known = groupOf[key] {
                group = known
            } else {
                group = groups.count
                groups.append((stores[index], object.entity, []))
                groupOf[key] = group
            }
            last = (key, group)
            groups[group].members.append(index)
        }
        for group in groups {
            let ids = try persistentStoreCoordinator.newObjectIDs(in: group.store, for: group.entity, count: group.members.count)
            for (index, id) in zip(group.members, ids) { objects[index].pendingPermanentID = id }
        }
    }

    /// The stores of `objects`, in order. Temporary objects not assigned to a
    /// store go to their entity's default store, looked up once per run of
    /// one entity rather than once per object (a locked scan of the stores).
    func stores(for objects: [ManagedObject]) throws -> [PersistentStore] {
        var out: [PersistentStore] = []
        out.reserveCapacity(objects.count)
        var last: (entity: EntityDescription, store: PersistentStore)?
        for object in objects {
            let usesDefault = object.objectID.isTemporaryID && (assignedStores.isEmpty || assignedStores[ObjectIdentifier(object)] == nil)
            if usesDefault, let last, last.entity === object.entity {
                out.append(last.store)
                continue
            }
            let store = try store(for: object)
            if usesDefault { last = (object.entity, store) }
            out.append(store)
        }
        return out
    }

    func store(for object: ManagedObject) throws -> PersistentStore {
        if let store = object.objectID.persistentStore ?? persistentStoreCoordinator.store(withIdentifier: object.objectID.storeIdentifier) { return store }
        if let assigned = assignedStores[ObjectIdentifier(object)] { return assigned }
        guard let store = persistentStoreCoordinator.defaultStore(for: object.entity) else {
            throw CoreDataError(.persistentStoreSave, "No writable persistent store holds the entity \(object.entity.name)", userInfo: [CoreDataError.affectedObjectsErrorKey: [object]])
        }
        return store
    }

    func rekey(_ object: ManagedObject, to id: ManagedObjectID) {
        // One removal and one insertion; an entry of another object under
        // the old ID (not expected) is put back.
        if let old = registry.removeValue(forKey: object.objectID), old !== object { registry[old.objectID] = old }
        object.objectID = id
        registry[id] = object
    }

    /// Marks an unchanged object so the next save fails (or resolves per the
    /// merge policy) if its record changed meanwhile (MOC-MO-13).
    public func detectConflicts(for object: ManagedObject) {
        checkConfinement()
        guard object.belongs(to: self), !object.objectID.isTemporaryID else { return }
        lockedSet.insert(object)
    }
}
