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
    /// The app's own values kept with the context (Core Data's `userInfo`,
    /// MOC-UI-01); used on the context's queue like the rest of it.
    ///
    /// ```swift
    /// context.userInfo["importBatch"] = 12
    /// ```
    @exclusivity(unchecked) public var userInfo: [AnyHashable: Any] = [:]
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
    @exclusivity(unchecked) var lastObjectClass: (entity: EntityDescription, className: String, generation: Int, type: ManagedObject.Type)?
    /// The last entity `checkInsertable` accepted (see there).
    @exclusivity(unchecked) var lastInsertableEntity: EntityDescription?
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

    func hasChangesMayHaveChanged() {
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
}
