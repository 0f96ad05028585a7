import Foundation

/// A frozen, precomputed view of an entity's properties. `EntityDescription`
/// rebuilds its name tables on every call (it must stay editable until a
/// coordinator uses the model); managed objects look keys up on every access,
/// so they use this cache instead, built once per entity of a frozen model.
final class EntityLayout {
    let entity: EntityDescription
    let propertiesByName: [String: PropertyDescription]
    let attributesByName: [String: AttributeDescription]
    let relationshipsByName: [String: RelationshipDescription]
    let fetchedPropertiesByName: [String: FetchedPropertyDescription]
    /// Stored (non-transient) attributes and relationships: the keys a
    /// snapshot, `changedValues()` and `committedValues(forKeys:)` deal in.
    let persistentKeys: [String]
    let persistentKeySet: Set<String>
    let toManyNames: [String]
    let attributes: [AttributeDescription]
    let relationships: [RelationshipDescription]
    /// Keys an object's storage may hold that a snapshot does not: transient
    /// properties and to-many relationships.
    let nonSnapshotKeys: [String]
    /// True when some attribute or relationship is transient.
    let hasTransientProperties: Bool
    /// Attributes with a default value, set on insert.
    let attributesWithDefaults: [AttributeDescription]
    /// Stored to-one relationships: the keys a snapshot holds object IDs under.
    let toOneRelationships: [RelationshipDescription]

    init(entity: EntityDescription) {
        self.entity = entity
        let props = entity.properties
        var byName: [String: PropertyDescription] = [:]
        for p in props { byName[p.name] = p }
        propertiesByName = byName
        attributesByName = byName.compactMapValues { $0 as? AttributeDescription }
        relationshipsByName = byName.compactMapValues { $0 as? RelationshipDescription }
        fetchedPropertiesByName = byName.compactMapValues { $0 as? FetchedPropertyDescription }
        attributes = props.compactMap { $0 as? AttributeDescription }
        relationships = props.compactMap { $0 as? RelationshipDescription }
        persistentKeys = props.filter { !$0.isTransient && !($0 is FetchedPropertyDescription) }.map(\.name)
        persistentKeySet = Set(persistentKeys)
        toManyNames = relationships.filter(\.isToMany).map(\.name)
        toOneRelationships = relationships.filter { !$0.isToMany && !$0.isTransient }
        nonSnapshotKeys = props.filter { $0.isTransient || ($0 as? RelationshipDescription)?.isToMany == true }.map(\.name)
        hasTransientProperties = props.contains { $0.isTransient && !($0 is FetchedPropertyDescription) }
        attributesWithDefaults = attributes.filter { $0.defaultValue != nil }
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cache: [ObjectIdentifier: EntityLayout] = [:]

    /// The layout of `entity`; cached only once its model is frozen, since an
    /// editable entity may still change.
    static func of(_ entity: EntityDescription) -> EntityLayout {
        guard let model = entity.managedObjectModel, !model.isEditable else { return EntityLayout(entity: entity) }
        lock.lock(); defer { lock.unlock() }
        if let hit = cache[ObjectIdentifier(entity)], hit.entity === entity { return hit }
        let layout = EntityLayout(entity: entity)
        cache[ObjectIdentifier(entity)] = layout
        return layout
    }
}
