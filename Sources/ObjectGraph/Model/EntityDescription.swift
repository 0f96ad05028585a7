import Foundation

/// An entity: to managed objects what a class is to instances, or a table to
/// its rows (ED-*). Entities form single-inheritance hierarchies built top-down
/// with `subentities` (ED-10); a sub-entity inherits its ancestors' properties.
///
/// ```swift
/// let person = EntityDescription(name: "Person")
/// person.isAbstract = true
/// let employee = EntityDescription(name: "Employee")
/// person.subentities = [employee]
/// person.properties = [AttributeDescription(name: "name", type: .string)]
/// employee.attributesByName["name"]   // inherited from Person
/// ```
public final class EntityDescription: CustomStringConvertible, Sequence {
    /// The entity's name, unique in its model; part of the version hash.
    @exclusivity(unchecked) public var name: String { willSet { ensureEditable("name") } }
    /// The class instantiated for this entity; `NSManagedObject` means the
    /// generic managed object (ED-02, MOD-04). Not part of the version hash.
    @exclusivity(unchecked) public var managedObjectClassName: String = EntityDescription.genericClassName {
        willSet { ensureEditable("managedObjectClassName") }
    }
    /// Abstract entities cannot be instantiated (MOD-05); part of the version hash.
    @exclusivity(unchecked) public var isAbstract: Bool = false { willSet { ensureEditable("isAbstract") } }
    /// Application data; not part of the version hash.
    @exclusivity(unchecked) public var userInfo: [String: String] = [:] { willSet { ensureEditable("userInfo") } }
    /// Free-form text mixed into the version hash (ED-30).
    @exclusivity(unchecked) public var versionHashModifier: String? { willSet { ensureEditable("versionHashModifier") } }
    /// Matches this entity across model versions; defaults to its name (ED-08).
    public var renamingIdentifier: String? {
        get { storedRenamingIdentifier ?? name }
        set { ensureEditable("renamingIdentifier"); storedRenamingIdentifier = newValue }
    }
    /// Groups of property names whose values must be unique together.
    @exclusivity(unchecked) public var uniquenessConstraints: [[String]] = [] { willSet { ensureEditable("uniquenessConstraints") } }

    /// Fetch indexes (`<fetchIndex>` in Xcode's files); not part of the version hash.
    @exclusivity(unchecked) public var indexes: [FetchIndexDescription] = [] {
        willSet { ensureEditable("indexes") }
        didSet {
            for old in oldValue where old.entityReference.refers(to: self) && !indexes.contains(where: { $0 === old }) { old.entity = nil }
            indexes.forEach { $0.entity = self }
        }
    }

    /// The model this entity belongs to (ED-05); unretained, the model owns
    /// entities and clears it (see `Unretained`).
    public internal(set) var managedObjectModel: ManagedObjectModel? {
        get { managedObjectModelReference.target }
        set { managedObjectModelReference.target = newValue }
    }
    @exclusivity(unchecked) var managedObjectModelReference = Unretained<ManagedObjectModel>()
    /// The parent entity (ED-13); set through the parent's `subentities`,
    /// unretained like the model.
    public private(set) var superentity: EntityDescription? {
        get { superentityReference.target }
        set { superentityReference.target = newValue }
    }
    @exclusivity(unchecked) var superentityReference = Unretained<EntityDescription>()

    /// The class name an entity has when none is given (ED-02).
    public static let genericClassName = "NSManagedObject"

    /// Lookups computed once when the model freezes: a frozen model cannot
    /// change, and contexts ask for them on every key-value access.
    private struct FrozenLookups {
        let properties: [PropertyDescription]
        let propertiesByName: [String: PropertyDescription]
        let attributesByName: [String: AttributeDescription]
        let relationshipsByName: [String: RelationshipDescription]
        let fetchedPropertiesByName: [String: FetchedPropertyDescription]
        let versionHash: Data
    }
    @exclusivity(unchecked) private var frozen: FrozenLookups?

    @exclusivity(unchecked) private var ownProperties: [PropertyDescription] = []
    @exclusivity(unchecked) private var children: [EntityDescription] = []
    @exclusivity(unchecked) var storedRenamingIdentifier: String?
    /// Where the entity was declared in a model file, and its parent's name
    /// until the hierarchy is resolved.
    @exclusivity(unchecked) var sourceLine: Int?
    /// The entity's `EntityLayout` and the model-edit generation it was
    /// built at; guarded by `EntityLayout`'s lock.
    @exclusivity(unchecked) var cachedLayout: EntityLayout?
    /// Set once when the model freezes, before any context can use it, and
    /// never changed: read without the lock on every object and row.
    @exclusivity(unchecked) private(set) var frozenLayout: EntityLayout?
    @exclusivity(unchecked) var cachedLayoutGeneration: UInt64 = 0
    @exclusivity(unchecked) var parentEntityName: String?

    public init(name: String) {
        self.name = name
    }

    deinit {
        // What refers back here without retaining (see `Unretained`) forgets it.
        for property in ownProperties where property.entityReference.refers(to: self) { property.entity = nil }
        for index in indexes where index.entityReference.refers(to: self) { index.entity = nil }
        for child in children where child.superentityReference.refers(to: self) { child.superentity = nil }
    }

    // MARK: - Inheritance

    /// The direct sub-entities (ED-11). Setting makes this entity their
    /// superentity; entities dropped from the list lose it (ED-14). An entity
    /// that already has another parent is a programming error, as in Core Data.
    public var subentities: [EntityDescription] {
        get { children }
        set {
            ensureEditable("subentities")
            for child in newValue {
                if let parent = child.superentity, parent !== self {
                    // Trap kept (issue 28 audit): model building in code (ED-14, decision D4); model files give one parent.
                    fatalError("ObjectGraph: entity '\(child.name)' is already a sub-entity of '\(parent.name)'; an entity has one parent (ED-14)")
                }
            }
            for old in children where !newValue.contains(where: { $0 === old }) { old.superentity = nil }
            for child in newValue { child.superentity = self }
            children = newValue
        }
    }

    /// Direct sub-entities by name (ED-12).
    public var subentitiesByName: [String: EntityDescription] {
        Dictionary(children.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The chain of ancestors, nearest first; stops at a cycle rather than loop.
    public var ancestors: [EntityDescription] {
        var chain: [EntityDescription] = []
        var next = superentity
        while let entity = next, entity !== self, !chain.contains(where: { $0 === entity }) {
            chain.append(entity)
            next = entity.superentity
        }
        return chain
    }

    /// True if this entity is `other` or descends from it (ED-15: reflexive and transitive).
    public func isKindOf(entity other: EntityDescription) -> Bool {
        other === self || ancestors.contains { $0 === other }
    }

    /// This entity and every descendant, depth first.
    public var selfAndDescendants: [EntityDescription] {
        var out: [EntityDescription] = []
        var seen = Set<ObjectIdentifier>()
        func visit(_ e: EntityDescription) {
            guard seen.insert(ObjectIdentifier(e)).inserted else { return }
            out.append(e)
            e.children.forEach(visit)
        }
        visit(self)
        return out
    }

    // MARK: - Properties

    /// Inherited properties (root first) followed by this entity's own (ED-16,
    /// ED-17). Setting replaces this entity's own properties only (ED-18).
    public var properties: [PropertyDescription] {
        get { frozen?.properties ?? ancestors.reversed().flatMap { $0.ownProperties } + ownProperties }
        set {
            ensureEditable("properties")
            for old in ownProperties where !newValue.contains(where: { $0 === old }) { old.entity = nil }
            for property in newValue { property.entity = self }
            ownProperties = newValue
        }
    }

    /// The properties this entity declares itself, without inherited ones.
    public var directProperties: [PropertyDescription] { ownProperties }

    /// Every property, inherited included, by name (ED-19). On a duplicate
    /// name (a model `validate()` rejects) the nearest declaration wins.
    public var propertiesByName: [String: PropertyDescription] {
        if let frozen { return frozen.propertiesByName }
        return Dictionary(properties.map { ($0.name, $0) }, uniquingKeysWith: { _, nearest in nearest })
    }

    /// Attributes by name, inherited included (ED-20).
    public var attributesByName: [String: AttributeDescription] {
        frozen?.attributesByName ?? propertiesByName.compactMapValues { $0 as? AttributeDescription }
    }

    /// Relationships by name, inherited included; no fetched properties (ED-21).
    public var relationshipsByName: [String: RelationshipDescription] {
        frozen?.relationshipsByName ?? propertiesByName.compactMapValues { $0 as? RelationshipDescription }
    }

    /// Fetched properties by name, inherited included.
    public var fetchedPropertiesByName: [String: FetchedPropertyDescription] {
        frozen?.fetchedPropertiesByName ?? propertiesByName.compactMapValues { $0 as? FetchedPropertyDescription }
    }

    /// Relationships whose destination is exactly `entity` (ED-22).
    public func relationships(forDestination entity: EntityDescription) -> [RelationshipDescription] {
        properties.compactMap { $0 as? RelationshipDescription }.filter { $0.destinationEntity === entity }
    }

    /// Iterates the properties in `properties` order (ED-23).
    public func makeIterator() -> IndexingIterator<[PropertyDescription]> { properties.makeIterator() }

    // MARK: - Versioning

    /// The persistence-relevant identity of the entity (ED-26); see `VersionHasher`.
    public var versionHash: Data { frozen?.versionHash ?? VersionHasher.hash(of: self) }

    /// Computes the lookups once; called when the model freezes (MOM-00d).
    func freezeLookups() {
        let all = properties
        let byName = propertiesByName
        frozen = FrozenLookups(
            properties: all,
            propertiesByName: byName,
            attributesByName: byName.compactMapValues { $0 as? AttributeDescription },
            relationshipsByName: byName.compactMapValues { $0 as? RelationshipDescription },
            fetchedPropertiesByName: byName.compactMapValues { $0 as? FetchedPropertyDescription },
            versionHash: VersionHasher.hash(of: self))
        frozenLayout = EntityLayout(entity: self)
    }

    // MARK: - Copying

    /// A distinct, editable entity with the same name, flags and copies of its
    /// own properties, in no model and with no parent or children (ED-31).
    /// Relationships still point at the original destinations; copying a
    /// whole model re-points them.
    public func copy() -> EntityDescription {
        let c = EntityDescription(name: name)
        c.managedObjectClassName = managedObjectClassName
        c.isAbstract = isAbstract
        c.userInfo = userInfo
        c.versionHashModifier = versionHashModifier
        c.storedRenamingIdentifier = storedRenamingIdentifier
        c.uniquenessConstraints = uniquenessConstraints
        c.sourceLine = sourceLine
        c.properties = ownProperties.map { $0.copy() }
        c.indexes = indexes.map { $0.copy() }
        return c
    }

    /// Field-by-field differences from another entity, for model comparison.
    func differences(from other: EntityDescription) -> [String] {
        var out: [String] = []
        func check<T: Equatable>(_ label: String, _ a: T, _ b: T) {
            if a != b { out.append("\(label): \(String(describing: a)) vs \(String(describing: b))") }
        }
        check("managedObjectClassName", managedObjectClassName, other.managedObjectClassName)
        check("abstract", isAbstract, other.isAbstract)
        check("parent", superentity?.name, other.superentity?.name)
        check("subentities", children.map(\.name).sorted(), other.children.map(\.name).sorted())
        check("userInfo", userInfo, other.userInfo)
        check("versionHashModifier", versionHashModifier, other.versionHashModifier)
        check("renamingIdentifier", storedRenamingIdentifier, other.storedRenamingIdentifier)
        check("uniquenessConstraints", uniquenessConstraints, other.uniquenessConstraints)
        check("indexes", indexes.map(\.description), other.indexes.map(\.description))
        check("properties", ownProperties.map(\.name).sorted(), other.ownProperties.map(\.name).sorted())
        let theirs = Dictionary(other.ownProperties.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for mine in ownProperties {
            guard let match = theirs[mine.name] else { continue }
            out += mine.differences(from: match).map { "\(mine.name).\($0)" }
        }
        return out
    }

    /// Traps when the owning model is in use (X-01, MOM-00d).
    func ensureEditable(_ field: String) {
        EntityLayout.modelWillChange()
        guard let model = managedObjectModel, !model.isEditable else { return }
        // Trap kept (issue 28 audit): editing a model in use, which Core Data raises on.
        fatalError("ObjectGraph: cannot set \(field) of entity '\(name)': its managed object model is in use by a persistent store coordinator; copy() the model to edit it (X-01)")
    }

    public var description: String { "EntityDescription(\(name))" }
}
