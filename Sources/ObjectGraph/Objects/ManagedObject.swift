import Foundation

/// An object of the graph: one record of an entity, Core Data's
/// `NSManagedObject` (OBJ-*). Use it generically for any entity, reading and
/// writing properties by key, or subclass it and declare typed properties with
/// `@Managed` (register the subclass with `ManagedObjectClassRegistry`).
///
/// Identity is the object itself: equality and hashing never fire a fault
/// (OBJ-17), and one context holds one instance per stored record (OBJ-18).
///
/// ```swift
/// final class Department: ManagedObject {
///     @Managed var name: String?
///     @Managed var employees: Set<Employee>
/// }
/// ManagedObjectClassRegistry.shared.register(Department.self)
/// let dept = try context.insertNewObject(forEntityName: "Department") as! Department
/// dept.name = "Sales"
/// try dept.setValue(Decimal(1000), forKey: "budget")
/// ```
open class ManagedObject: Hashable, CustomStringConvertible {
    /// The object's entity; reading it never fires a fault (OBJ-12).
    public let entity: EntityDescription
    let layout: EntityLayout
    /// The object's identity; temporary until saved (OBJ-13, OBJ-14).
    public internal(set) var objectID: ManagedObjectID {
        get {
            if let id = assignedObjectID { return id }
            // Made on first use: a fault gets its stored ID right after init,
            // so making a temporary one for it would be wasted work per row.
            let id = ManagedObjectID(temporaryFor: entity)
            assignedObjectID = id
            return id
        }
        set { assignedObjectID = newValue }
    }
    @exclusivity(unchecked) private var assignedObjectID: ManagedObjectID?
    /// The permanent ID a save in progress has allocated for this inserted
    /// object; it becomes `objectID` only once the save's writes succeed.
    @exclusivity(unchecked) var pendingPermanentID: ManagedObjectID?
    /// The context the object is registered with; nil before insertion and
    /// after its deletion is saved, a rollback of its insert or a reset (OBJ-16).
    /// Unretained, like Core Data's: the context clears it when it lets go
    /// of the object and in its deinit (see `Unretained`).
    public internal(set) var managedObjectContext: ManagedObjectContext? {
        get { managedObjectContextReference.target }
        set { managedObjectContextReference.target = newValue }
    }
    @exclusivity(unchecked) var managedObjectContextReference = Unretained<ManagedObjectContext>()

    /// True when `context` is the object's context; retains neither.
    @inline(__always)
    final func belongs(to context: ManagedObjectContext) -> Bool { managedObjectContextReference.refers(to: context) }

    /// Runs `body` with the object's context, without retaining it; nil
    /// when the object has none.
    @inline(__always)
    final func withContext<R>(_ body: (ManagedObjectContext) throws -> R) rethrows -> R? {
        try managedObjectContextReference.withTarget(body)
    }

    /// Current values of loaded properties: attribute values, to-one
    /// destinations (`ManagedObject`), to-many members (`[ManagedObject]`).
    /// Reading or writing it first turns to-one IDs left by loading into
    /// objects (see `rawStorage`).
    var storage: PropertyValues {
        _read {
            if toOnesPending != 0 { resolveToOnes() }
            yield rawStorage
        }
        _modify {
            if toOnesPending != 0 { resolveToOnes() }
            storageGeneration &+= 1
            yield &rawStorage
        }
        set {
            rawStorage = newValue
            storageGeneration &+= 1
            if layout.hasToOnes { toOnesPending |= Self.storageToOnesPending }
        }
    }
    /// The last fetched or saved values, same shapes (CHG-08), resolved
    /// like `storage`.
    var committed: PropertyValues {
        _read {
            if toOnesPending != 0 { resolveToOnes() }
            yield rawCommitted
        }
        _modify {
            if toOnesPending != 0 { resolveToOnes() }
            yield &rawCommitted
        }
        set {
            rawCommitted = newValue
            if layout.hasToOnes { toOnesPending |= Self.committedToOnesPending }
        }
    }
    /// The values as loaded: a fetched row's to-one slots hold the
    /// destination's `ManagedObjectID` until something reads a to-one, as
    /// Core Data resolves to-ones lazily. Loading a row then shares the
    /// row's slot array as is (no copy to put objects in, no uniquing lookup
    /// per to-one), which was a quarter of walking a to-many. Only attribute
    /// slots may be read here directly; everything else goes through
    /// `storage` and `committed`.
    @exclusivity(unchecked) var rawStorage: PropertyValues
    @exclusivity(unchecked) var rawCommitted: PropertyValues
    /// Moves on with every write through `storage` and every load: the
    /// to-many member indexes are valid for one generation (see
    /// `ManagedObject+ToManyMembers.swift`).
    @exclusivity(unchecked) var storageGeneration: UInt64 = 0
    @exclusivity(unchecked) var memberIndexes: [Int: MemberIndex] = [:]
    /// Which of `rawStorage` and `rawCommitted` may still hold to-one IDs.
    @exclusivity(unchecked) var toOnesPending: UInt8 = 0
    static let storageToOnesPending: UInt8 = 1
    static let committedToOnesPending: UInt8 = 2
    /// To-many relationships not loaded yet: relationship faults (FLT-08).
    @exclusivity(unchecked) var unloadedToMany: Set<String> = []
    /// The members of the to-many fault this fault came from, and its place
    /// there: firing it reads the rows of the next members too (see
    /// `ManagedObjectContext.fulfillFault`).
    @exclusivity(unchecked) var faultGroup: FaultGroup?
    @exclusivity(unchecked) var faultGroupIndex = 0
    /// Keys set through will/did-change since the last save or fetch.
    @exclusivity(unchecked) var changedSlots = SlotSet()
    /// The store version (Z_OPT) the context last saw, for optimistic locking.
    @exclusivity(unchecked) var storeVersion: Int64 = 0
    @exclusivity(unchecked) var hasAwokenFromInsert = false
    /// Set when a context let go of the object (reset, rollback, saved delete).
    @exclusivity(unchecked) var wasForgotten = false
    @exclusivity(unchecked) var pendingOldValues: [String: Any] = [:]
    /// Fetched-property results, kept until the object is refreshed (FP).
    @exclusivity(unchecked) var fetchedValues: [String: [Any]] = [:]
    @exclusivity(unchecked) var observerTable: [String: [(id: Int, handler: (ObservedChange) -> Void)]] = [:]
    @exclusivity(unchecked) var nextObserverID = 0

    /// The object's class is ManagedObject itself, so none of its open
    /// hooks is overridden (validation takes shortcuts for it).
    var isPlainManagedObject: Bool { type(of: self) == ManagedObject.self }

    /// True while the persistent values are not loaded (FLT-01, FLT-05).
    @exclusivity(unchecked) public internal(set) var isFault = false
    /// 0 when settled; non-zero while turning into or out of a fault (FLT-09).
    @exclusivity(unchecked) public internal(set) var faultingState = 0

    /// Creates an object of `entity` and, given a context, inserts it there,
    /// which calls `awakeFromInsert` (OBJ-04, OBJ-07). The entity must belong
    /// to the context's model (OBJ-05) and must not be abstract (MOD-05):
    /// either is a programming error and traps; use
    /// `ManagedObjectContext.insertNewObject(forEntityName:)` for a throwing form.
    /// Subclasses may override it and call `super` (OBJ-10), but should put
    /// set-up in `awakeFromInsert`/`awakeFromFetch` (LIFE-13).
    public required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        self.entity = entity
        let layout = EntityLayout.of(entity)
        self.layout = layout
        self.rawStorage = PropertyValues(layout: layout)
        self.rawCommitted = PropertyValues(layout: layout)
        if let context {
            // Trap kept (issue 28 audit): an abstract or foreign entity, which Core Data raises on (MOD-05, OBJ-05).
            do { try context.insertChecked(self) } catch { preconditionFailure("ObjectGraph: \(error)") }
        }
    }

    /// A fault for a stored record, made by a context; no hooks run.
    class func makeFault(entity: EntityDescription, id: ManagedObjectID) -> ManagedObject {
        let object = self.init(entity: entity, insertInto: nil)
        object.objectID = id
        object.isFault = true
        object.unloadedToMany = Set(object.layout.toManyNames)
        return object
    }

    // MARK: - State (none of these fire a fault: FLT-02)

    /// Inserted and not yet saved (CHG-01).
    public var isInserted: Bool { withContext { $0.insertedSet.contains(self) } ?? false }
    /// Changed since the last save (CHG-02).
    public var isUpdated: Bool { withContext { $0.updatedSet.contains(self) } ?? false }
    /// Marked for deletion at the next save (CHG-03).
    public var isDeleted: Bool { withContext { $0.deletedSet.contains(self) } ?? false }
    /// Inserted, updated or deleted.
    public var hasChanges: Bool { isInserted || isUpdated || isDeleted }

    /// True when the to-many relationship `name` is not loaded; never fires it (FLT-08).
    public final func hasFaultForRelationshipNamed(_ name: String) -> Bool {
        isFault || unloadedToMany.contains(name)
    }

    /// The persistent properties changed since the last fetch or save, with
    /// their new values (CHG-06, CHG-07); never fires a relationship fault (FLT-10).
    public final func changedValues() -> [String: Any] {
        var out: [String: Any] = [:]
        for key in changedKeys where layout.persistentKeySet.contains(key) {
            let now = storage[key]
            if !ManagedObject.valuesEqual(now, committed[key], ordered: layout.relationshipsByName[key]?.isOrdered == true) { out[key] = ManagedObject.publicValue(now, layout.relationshipsByName[key]) ?? NSNull() }
        }
        return out
    }

    /// The last fetched or saved values of `keys` (all persistent keys for
    /// nil); transient and unknown keys are left out (CHG-08…CHG-10).
    public final func committedValues(forKeys keys: [String]?) throws -> [String: Any] {
        try fireFaultIfNeeded()
        var out: [String: Any] = [:]
        for key in keys ?? layout.persistentKeys where layout.persistentKeySet.contains(key) {
            if let rel = layout.relationshipsByName[key], rel.isToMany, unloadedToMany.contains(key) {
                try loadToMany(rel)
            }
            if isInserted { continue }
            out[key] = ManagedObject.publicValue(committed[key], layout.relationshipsByName[key]) ?? NSNull()
        }
        return out
    }

    // MARK: - Lifecycle hooks (SUB-03); overrides call super first (LIFE-11)

    /// Called once in the record's life, when first inserted (LIFE-01…LIFE-04).
    /// Values set here with `setPrimitiveValue` are baseline values (LIFE-05).
    open func awakeFromInsert() {}
    /// Called each time the values are loaded from a store (LIFE-07); change
    /// tracking and inverse maintenance are off meanwhile (LIFE-09, LIFE-10).
    open func awakeFromFetch() {}
    /// Called after undo, redo, rollback, refresh or a merge-policy repair
    /// reset several properties at once (LIFE-14…LIFE-17).
    open func awake(fromSnapshotEvents events: SnapshotEventType) {}
    /// Called on every inserted, updated and deleted object before a save
    /// writes (LIFE-18); changes made here are saved (LIFE-19, LIFE-20).
    open func willSave() {}
    /// Called on every committed object after a save (LIFE-23).
    open func didSave() {}
    /// Called when the object is deleted, while relationships are intact (LIFE-25).
    open func prepareForDeletion() {}
    /// Called before the object turns into a fault; values still readable (LIFE-26).
    open func willTurnIntoFault() {}
    /// Called after the object turned into a fault (LIFE-27).
    open func didTurnIntoFault() {}

    /// Called for a key the entity does not model. Subclasses with unmodeled
    /// properties override it (KVC-05); the default throws (KVC-03).
    open func value(forUndefinedKey key: String) throws -> Any? {
        throw unknownKey(key)
    }

    /// Called to set a key the entity does not model; throws by default.
    open func setValue(_ value: Any?, forUndefinedKey key: String) throws {
        throw unknownKey(key)
    }

    /// The keys whose changes also change `key` (DEP-01, DEP-02); merge with
    /// `super`'s answer. Paths through to-many relationships are not supported
    /// (DEP-03): observe each member instead. A path through a to-one
    /// relationship notifies when the relationship itself changes.
    open class func keyPathsForValuesAffectingValue(forKey key: String) -> Set<String> { [] }

    /// False for modeled properties, whose notifications come from the
    /// will/did-change calls only; true for unmodeled ones (KVO-02…KVO-04).
    open class func automaticallyNotifiesObservers(forKey key: String) -> Bool { true }

    // MARK: - Validation hooks (VAL-*)

    /// The single property-validation entry point (VAL-01): model constraints
    /// first, then `validateCustomValue(_:forKey:)`. Overriding is discouraged (VAL-09).
    open func validateValue(_ value: inout Any?, forKey key: String) throws {
        try validateModelConstraints(&value, forKey: key)
        try validateCustomValue(&value, forKey: key)
    }

    /// Per-key custom validation (VAL-03): override and switch on `key`;
    /// throw a `CoreDataError` to reject, or replace `value` (VAL-05, discouraged).
    /// Never call `validateValue` from here (VAL-07).
    open func validateCustomValue(_ value: inout Any?, forKey key: String) throws {}

    /// Object-level validation before inserting (VAL-12). Overrides call
    /// super first and combine errors with `CoreDataError.combining` (VAL-14).
    open func validateForInsert() throws { try validateAllProperties() }
    /// Object-level validation before updating: every property (VAL-11).
    open func validateForUpdate() throws { try validateAllProperties() }
    /// Object-level validation before deleting: Deny rules (VAL-13).
    open func validateForDelete() throws { try validateDenyRules() }

    /// When true (the default), changes to unmodeled properties do not mark
    /// the object updated (CHG-11).
    open class var contextShouldIgnoreUnmodeledPropertyChanges: Bool { true }

    // MARK: - Faulting

    func fireFaultIfNeeded() throws {
        guard isFault else { return }
        guard try withContext({ try $0.fulfillFault(self) }) != nil else {
            throw CoreDataError(.managedObjectContextReferentialIntegrity, "The \(entity.name) object \(objectID) is a fault outside any context and cannot be loaded")
        }
    }

    /// Replaces the object's values with a stored snapshot (PRIM-07: no
    /// notifications, no tracking) and calls `awakeFromFetch`.
    /// `values` may hold to-one IDs (`ManagedObjectContext.lazyValues(from:)`).
    /// Without `awake`, the caller calls `awakeFromFetch` itself later.
    func load(values: PropertyValues, version: Int64, context: ManagedObjectContext, awake: Bool = true) {
        faultingState = 1
        if layout.transientDefaults.isEmpty {
            rawStorage = values
        } else {
            // Transients start at their defaults, as on insert; both copies
            // still share one array.
            var withDefaults = values
            for (slot, value) in layout.transientDefaults { withDefaults[slot: slot] = value }
            rawStorage = withDefaults
        }
        rawCommitted = rawStorage
        storageGeneration &+= 1
        toOnesPending = layout.hasToOnes ? Self.storageToOnesPending | Self.committedToOnesPending : 0
        changedSlots = SlotSet()
        unloadedToMany = Set(layout.toManyNames)
        storeVersion = version
        isFault = false
        faultGroup = nil
        faultingState = 0
        if awake { context.withChangeProcessingDisabled { awakeFromFetch() } }
    }

    /// Drops the loaded values and becomes a fault (FLT-11, MOC-RF-01/02).
    func turnIntoFault() {
        guard !isFault else { return }
        faultingState = 1
        willTurnIntoFault()
        fetchedValues = [:]
        rawStorage.removeAll()
        rawCommitted.removeAll()
        toOnesPending = 0
        storageGeneration &+= 1
        memberIndexes = [:]
        changedSlots = SlotSet()
        unloadedToMany = Set(layout.toManyNames)
        isFault = true
        didTurnIntoFault()
        faultingState = 0
    }

    /// Turns the to-one IDs loading left in the values into objects of the
    /// object's context. Without a context they stay IDs (and pending): the
    /// object is invalid then, and its to-ones read as nil.
    final func resolveToOnes() {
        guard let context = managedObjectContext else { return }
        let pending = toOnesPending
        toOnesPending = 0
        // Freshly loaded values are one array shared by both: resolve it
        // once and share the result, as loading eagerly did.
        let shared = pending == Self.storageToOnesPending | Self.committedToOnesPending && rawStorage.sharesSlots(with: rawCommitted)
        if pending & Self.storageToOnesPending != 0 { context.resolveToOnes(in: &rawStorage) }
        if shared {
            rawCommitted = rawStorage
        } else if pending & Self.committedToOnesPending != 0 {
            context.resolveToOnes(in: &rawCommitted)
        }
    }

    func loadToMany(_ relationship: RelationshipDescription) throws {
        guard unloadedToMany.contains(relationship.name) else { return }
        guard let context = managedObjectContext else {
            unloadedToMany.remove(relationship.name)
            storage[relationship.name] = [ManagedObject]()
            return
        }
        fulfillToMany(relationship, with: try context.fetchRelated(relationship, of: self))
    }

    /// Installs the stored membership of a to-many fault, as both current
    /// and committed value (loading is not a change).
    func fulfillToMany(_ relationship: RelationshipDescription, with members: [ManagedObject]) {
        unloadedToMany.remove(relationship.name)
        storage[relationship.name] = members
        committed[relationship.name] = members
    }

    // MARK: - Values

    /// Equality of stored representations: values by value, objects by identity.
    /// Member lists compare as sets, or in order when `ordered`.
    static func valuesEqual(_ a: Any?, _ b: Any?, ordered: Bool = false) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        if let same = ModelValue.sameTypeEqual(a, b) { return same }
        switch (a, b) {
        case let (x as ManagedObject, y as ManagedObject): return x === y
        case let (x as [ManagedObject], y as [ManagedObject]):
            guard x.count == y.count else { return false }
            return ordered ? zip(x, y).allSatisfy { $0 === $1 } : Set(x) == Set(y)
        case (is ManagedObject, _), (_, is ManagedObject): return false
        default: return ModelValue.equal(a, b)
        }
    }

    /// A stored value as KVC returns it: to-many as `Set` (or an array when ordered).
    static func publicValue(_ stored: Any?, _ relationship: RelationshipDescription?) -> Any? {
        guard let rel = relationship, rel.isToMany else { return stored }
        let members = stored as? [ManagedObject] ?? []
        return rel.isOrdered ? members : Set(members)
    }

    // MARK: - Identity (OBJ-17)

    public static func == (a: ManagedObject, b: ManagedObject) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// Sets and tables of objects hash the address with one mix (see `IdentityHash`).
    public func _rawHashValue(seed: Int) -> Int {
        IdentityHash.mix(UInt64(UInt(bitPattern: ObjectIdentifier(self))), seed: seed)
    }

    /// Never fires a fault (OBJ-19).
    open var description: String {
        "<\(type(of: self)) \(entity.name) \(objectID)\(isFault ? " (fault)" : "")>"
    }
}

/// The object IDs of one loaded to-many relationship, shared by the member
/// faults it made.
final class FaultGroup {
    let ids: [ManagedObjectID]
    init(ids: [ManagedObjectID]) { self.ids = ids }
}
