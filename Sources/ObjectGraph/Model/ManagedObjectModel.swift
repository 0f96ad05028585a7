import Foundation

/// A schema: the entities of an object graph, their configurations and
/// stored fetch request templates (MOM-*). Build one in code or read an Xcode
/// model with `init(contentsOf:)`.
///
/// A model is editable until a coordinator uses it; from then on every
/// mutation of it or its entities and properties traps (MOM-00d). `copy()`
/// gives an editable deep copy.
///
/// ```swift
/// let department = EntityDescription(name: "Department")
/// department.properties = [AttributeDescription(name: "name", type: .string)]
/// let model = ManagedObjectModel()
/// model.entities = [department]
/// try model.validate()
/// let hashes = model.entityVersionHashesByName   // ["Department": 32 bytes]
/// ```
public final class ManagedObjectModel: CustomStringConvertible, Sequence {
    private var storedEntities: [EntityDescription] = []
    private var configurationEntities: [String: [EntityDescription]] = [:]
    private var configurationOrder: [String] = []
    private var templates: [String: AnyFetchRequest] = [:]

    /// Developer-defined version labels (MOM-VR-03); no effect on hashes.
    public var versionIdentifiers: Set<String> = [] { willSet { ensureEditable("versionIdentifiers") } }
    /// Localized names of entities and properties (MOM-LO-*).
    public var localizationDictionary: [String: String] = [:] { willSet { ensureEditable("localizationDictionary") } }
    /// False once a coordinator uses the model (MOM-00d).
    public private(set) var isEditable = true
    /// The file the model was read from, for error messages.
    public internal(set) var sourceURL: URL?

    /// An empty, editable model (MOM-EN-01).
    public init() {}

    deinit {
        // Entities refer back here without retaining (see `Unretained`).
        for entity in storedEntities where entity.managedObjectModelReference.refers(to: self) { entity.managedObjectModel = nil }
    }

    // MARK: - Entities

    /// The model's entities, sub-entities included (MOM-EN-01, MOM-EN-03).
    public var entities: [EntityDescription] {
        get { storedEntities }
        set {
            ensureEditable("entities")
            for old in storedEntities where !newValue.contains(where: { $0 === old }) { old.managedObjectModel = nil }
            for entity in newValue { entity.managedObjectModel = self }
            storedEntities = newValue
        }
    }

    /// Entities keyed by name (MOM-EN-02). With duplicate names (which
    /// `validate()` rejects) the first wins.
    public var entitiesByName: [String: EntityDescription] {
        if let frozenEntitiesByName { return frozenEntitiesByName }
        return Dictionary(storedEntities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Iterates the entities in `entities` order (MOM-00g).
    public func makeIterator() -> IndexingIterator<[EntityDescription]> { storedEntities.makeIterator() }

    // MARK: - Configurations

    /// The names of the model's configurations, in the order they were added (MOM-EN-04).
    public var configurations: [String] { configurationOrder }

    /// The entities of a configuration; nil configuration means every entity;
    /// an unknown name gives nil (MOM-EN-05).
    public func entities(forConfiguration name: String?) -> [EntityDescription]? {
        guard let name else { return storedEntities }
        return configurationEntities[name]
    }

    /// Creates or replaces a configuration (MOM-EN-06). Configurations may overlap.
    public func setEntities(_ entities: [EntityDescription], forConfiguration name: String) {
        ensureEditable("configuration '\(name)'")
        if configurationEntities[name] == nil { configurationOrder.append(name) }
        configurationEntities[name] = entities
    }

    // MARK: - Fetch request templates

    /// Stored fetch requests keyed by name (MOM-FT-01).
    public var fetchRequestTemplatesByName: [String: AnyFetchRequest] { templates }

    /// The stored template with that name, or nil (MOM-FT-02).
    public func fetchRequestTemplate(forName name: String) -> AnyFetchRequest? { templates[name] }

    /// Stores, replaces or (with nil) removes a template (MOM-FT-04).
    public func setFetchRequestTemplate(_ request: AnyFetchRequest?, forName name: String) {
        ensureEditable("fetch request template '\(name)'")
        templates[name] = request
    }

    // MARK: - Versioning

    /// Each entity's version hash by entity name (MOM-VR-02).
    public var entityVersionHashesByName: [String: Data] {
        Dictionary(storedEntities.map { ($0.name, $0.versionHash) }, uniquingKeysWith: { first, _ in first })
    }

    /// The metadata key under which stores record entity version hashes.
    public static let storeModelVersionHashesKey = "NSStoreModelVersionHashes"

    /// True when a store whose metadata is given can be opened with this model
    /// (MOM-VR-01): every entity of the configuration has a byte-equal hash
    /// under `NSStoreModelVersionHashes`. For the whole model (nil) the store
    /// may not hold entities the model lacks; a named configuration ignores them.
    public func isConfiguration(_ name: String?, compatibleWithStoreMetadata metadata: [String: Any]) -> Bool {
        guard let stored = metadata[ManagedObjectModel.storeModelVersionHashesKey] as? [String: Data],
              let entities = entities(forConfiguration: name) else { return false }
        for entity in entities where stored[entity.name] != entity.versionHash { return false }
        if name == nil {
            let names = Set(entities.map(\.name))
            if stored.keys.contains(where: { !names.contains($0) }) { return false }
        }
        return true
    }

    // MARK: - Merging and copying

    /// One model holding the entities, configurations, templates and version
    /// identifiers of several (MOM-IN-04). Two models defining the same entity
    /// or template name fail with an error naming it. The inputs are unchanged.
    public convenience init(byMerging models: [ManagedObjectModel]) throws {
        self.init()
        var seen: [String: Int] = [:]
        var merged: [EntityDescription] = []
        for (index, model) in models.enumerated() {
            let copy = model.copy()
            for entity in copy.storedEntities {
                if let first = seen[entity.name] {
                    throw CoreDataError(.coreData, "cannot merge models: entity '\(entity.name)' is defined in model \(first) and model \(index)",
                                        userInfo: [CoreDataError.entityNameErrorKey: entity.name])
                }
                seen[entity.name] = index
                merged.append(entity)
            }
            for name in copy.configurationOrder {
                let entities = copy.configurationEntities[name] ?? []
                if configurationEntities[name] == nil { configurationOrder.append(name) }
                configurationEntities[name, default: []].append(contentsOf: entities)
            }
            for (name, template) in copy.templates {
                if templates[name] != nil {
                    throw CoreDataError(.coreData, "cannot merge models: fetch request template '\(name)' is defined twice")
                }
                templates[name] = template
            }
            versionIdentifiers.formUnion(copy.versionIdentifiers)
            localizationDictionary.merge(copy.localizationDictionary, uniquingKeysWith: { first, _ in first })
        }
        entities = merged
    }

    /// A deep, editable copy (MOM-00e, X-02): new entity and property objects,
    /// relationships and inheritance re-pointed at the copies.
    public func copy() -> ManagedObjectModel {
        let c = ManagedObjectModel()
        var map: [ObjectIdentifier: EntityDescription] = [:]
        let copies = storedEntities.map { original -> EntityDescription in
            let copy = original.copy()
            map[ObjectIdentifier(original)] = copy
            return copy
        }
        // Re-point inheritance, then relationships (their inverses are found by
        // name on the copied destination).
        for (original, copy) in zip(storedEntities, copies) {
            copy.subentities = original.subentities.compactMap { map[ObjectIdentifier($0)] }
        }
        for copy in copies {
            for case let relationship as RelationshipDescription in copy.directProperties {
                if let dest = relationship.destinationEntity, let mapped = map[ObjectIdentifier(dest)] {
                    relationship.destinationEntity = mapped
                }
            }
        }
        for copy in copies {
            for case let relationship as RelationshipDescription in copy.directProperties {
                if let inverseName = relationship.inverseRelationship?.name ?? relationship.inverseRelationshipName,
                   let dest = relationship.destinationEntity,
                   let inverse = dest.relationshipsByName[inverseName] {
                    relationship.inverseRelationship = inverse
                }
            }
        }
        c.entities = copies
        for name in configurationOrder {
            c.setEntities((configurationEntities[name] ?? []).compactMap { map[ObjectIdentifier($0)] }, forConfiguration: name)
        }
        for (name, template) in templates { c.setFetchRequestTemplate(template.copy(), forName: name) }
        c.versionIdentifiers = versionIdentifiers
        c.localizationDictionary = localizationDictionary
        c.sourceURL = sourceURL
        return c
    }

    // MARK: - Comparison

    /// Every difference between two models, one line each, empty when they
    /// describe the same schema. Entities and properties match by name.
    public func differences(from other: ManagedObjectModel) -> [String] {
        var out: [String] = []
        let mine = entitiesByName, theirs = other.entitiesByName
        for name in Set(mine.keys).symmetricDifference(theirs.keys).sorted() {
            out.append("entity \(name): only in \(mine[name] != nil ? "this" : "other") model")
        }
        for (name, entity) in mine.sorted(by: { $0.key < $1.key }) {
            guard let match = theirs[name] else { continue }
            out += entity.differences(from: match).map { "\(name).\($0)" }
        }
        if configurationOrder.sorted() != other.configurationOrder.sorted() {
            out.append("configurations: \(configurationOrder.sorted()) vs \(other.configurationOrder.sorted())")
        } else {
            for name in configurationOrder {
                let a = (configurationEntities[name] ?? []).map(\.name).sorted()
                let b = (other.configurationEntities[name] ?? []).map(\.name).sorted()
                if a != b { out.append("configuration \(name): \(a) vs \(b)") }
            }
        }
        for name in Set(templates.keys).union(other.templates.keys).sorted() {
            out += AnyFetchRequest.differences(templates[name], other.templates[name]).map { "template \(name).\($0)" }
        }
        if versionIdentifiers != other.versionIdentifiers {
            out.append("versionIdentifiers: \(versionIdentifiers.sorted()) vs \(other.versionIdentifiers.sorted())")
        }
        return out
    }

    /// True when `differences(from:)` is empty.
    public func isEquivalent(to other: ManagedObjectModel) -> Bool { differences(from: other).isEmpty }

    // MARK: - Use by a coordinator

    /// Freezes the model: called when a coordinator starts using it. Validates
    /// first, so a coordinator never works from a broken schema.
    func markInUse() throws {
        guard isEditable else { return }
        try validate()
        isEditable = false
        frozenEntitiesByName = Dictionary(storedEntities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        storedEntities.forEach { $0.freezeLookups() }
    }

    /// Entity lookup computed once at freeze; see `EntityDescription.freezeLookups()`.
    private var frozenEntitiesByName: [String: EntityDescription]?

    /// Traps when the model is in use (X-01, MOM-00d).
    func ensureEditable(_ field: String) {
        EntityLayout.modelWillChange()
        guard !isEditable else { return }
        // Trap kept (issue 28 audit): editing a model in use, which Core Data raises on (MOM-00d).
        fatalError("ObjectGraph: cannot change \(field) of a managed object model in use by a persistent store coordinator; copy() the model to edit it (MOM-00d)")
    }

    public var description: String {
        "ManagedObjectModel(\(storedEntities.map(\.name).joined(separator: ", ")))"
    }
}
