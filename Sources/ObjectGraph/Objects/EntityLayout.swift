import Foundation

/// A frozen, precomputed view of an entity's properties. `EntityDescription`
/// rebuilds its name tables on every call (it must stay editable until a
/// coordinator uses the model); managed objects look keys up on every access,
/// so they use this cache instead, built once per entity of a frozen model.
final class EntityLayout {
    /// Unowned: the entity keeps its layout (`cachedLayout`), and everything
    /// holding a layout also holds the entity.
    unowned let entity: EntityDescription
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
    /// True when some attribute or relationship is transient.
    let hasTransientProperties: Bool
    /// Attributes with a default value, set on insert.
    let attributesWithDefaults: [AttributeDescription]
    /// Transient attributes with a default value and their slots: a row
    /// holds no transient value, so loading one gives them their defaults,
    /// as inserting does (Core Data applies a transient's default on fetch).
    let transientDefaults: [(slot: Int, value: Any)]
    /// Stored to-one relationships: the keys a snapshot holds object IDs under.
    let toOneRelationships: [RelationshipDescription]

    /// Where each property's value lives in `PropertyValues` and
    /// `StoreSnapshot`: stored attributes and stored to-one relationships
    /// first, in the entity's order (the snapshot's slots, `snapshotSlotCount`
    /// of them), then stored to-manys, then transient properties. Fetched
    /// properties have no slot.
    let slotProperties: [PropertyDescription]
    let slotIndex: SlotIndex
    let snapshotSlotCount: Int
    /// The slots of `toOneRelationships`, ascending.
    let toOneSlots: [Int]
    var hasToOnes: Bool { !toOneSlots.isEmpty }
    /// The relationship in each slot (nil for attributes), read without a cast.
    let slotRelationships: [RelationshipDescription?]
    /// The attribute in each slot (nil for relationships).
    let slotAttributes: [AttributeDescription?]
    /// Per slot, what validation has to look at, read once from the model:
    /// reading a description's settable properties costs a dynamic
    /// exclusivity check each time, and most properties have no constraint.
    let slotIsOptional: [Bool]
    let slotHasValueConstraints: [Bool]
    let slotHasValidationPredicates: [Bool]
    /// The Swift type an attribute's values have once coerced (nil for
    /// relationships and types without one): a value already of it needs
    /// no coercion.
    let slotExactTypes: [Any.Type?]
    /// Slots whose model checks cannot fail for a value of their exact type
    /// (or nil): optional, without constraints or validation predicates;
    /// to-ones need no value at all. Validation of a plain object skips them
    /// after that one check.
    let slotNeedsOnlyTypeCheck: [Bool]

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
        hasTransientProperties = props.contains { $0.isTransient && !($0 is FetchedPropertyDescription) }
        attributesWithDefaults = attributes.filter { $0.defaultValue != nil }

        let stored = props.filter { !$0.isTransient && !($0 is FetchedPropertyDescription) }
        let snapshotPart = stored.filter { ($0 as? RelationshipDescription)?.isToMany != true }
        let toManyPart = stored.filter { ($0 as? RelationshipDescription)?.isToMany == true }
        let transientPart = props.filter { $0.isTransient && !($0 is FetchedPropertyDescription) }
        slotProperties = snapshotPart + toManyPart + transientPart
        var index: [String: Int] = [:]
        for (i, p) in slotProperties.enumerated() { index[p.name] = i }
        slotIndex = SlotIndex(names: slotProperties.map(\.name))
        snapshotSlotCount = snapshotPart.count
        toOneSlots = toOneRelationships.compactMap { index[$0.name] }.sorted()
        slotRelationships = slotProperties.map { $0 as? RelationshipDescription }
        slotAttributes = slotProperties.map { $0 as? AttributeDescription }
        slotIsOptional = slotProperties.map(\.isOptional)
        slotHasValueConstraints = slotAttributes.map { a in
            guard let a else { return false }
            return a.minValue != nil || a.maxValue != nil || a.minDate != nil || a.maxDate != nil
                || a.minLength != nil || a.maxLength != nil || a.regularExpression != nil
        }
        slotHasValidationPredicates = slotProperties.map { !$0.validationPredicates.isEmpty }
        slotExactTypes = slotAttributes.map { $0.flatMap { ModelValue.exactSwiftType($0.attributeType) } }
        var onlyTypeCheck: [Bool] = []
        for i in slotProperties.indices {
            guard slotIsOptional[i] && !slotHasValidationPredicates[i] && !slotHasValueConstraints[i] else { onlyTypeCheck.append(false); continue }
            if let rel = slotRelationships[i] { onlyTypeCheck.append(!rel.isToMany) } else { onlyTypeCheck.append(slotExactTypes[i] != nil) }
        }
        slotNeedsOnlyTypeCheck = onlyTypeCheck
        transientDefaults = attributesWithDefaults.compactMap { attribute in
            guard attribute.isTransient, let slot = index[attribute.name], let value = attribute.defaultValue else { return nil }
            return (slot, value)
        }
    }

    private static let lock = NSLock()
    /// Bumped by every edit of any model object (each `ensureEditable`), so
    /// layouts of editable entities are rebuilt only after an edit. Entities
    /// of a frozen model never change; theirs are built once.
    nonisolated(unsafe) private static var editGeneration: UInt64 = 0

    static func modelWillChange() {
        lock.lock(); editGeneration &+= 1; lock.unlock()
    }

    /// The layout of `entity`, kept on the entity itself (so it lives and
    /// dies with it) and rebuilt when a model was edited since.
    static func of(_ entity: EntityDescription) -> EntityLayout {
        if let layout = entity.frozenLayout { return layout }
        let frozen = entity.managedObjectModel.map { !$0.isEditable } ?? false
        lock.lock(); defer { lock.unlock() }
        if let hit = entity.cachedLayout, frozen || entity.cachedLayoutGeneration == editGeneration { return hit }
        let layout = EntityLayout(entity: entity)
        entity.cachedLayout = layout
        entity.cachedLayoutGeneration = editGeneration
        return layout
    }
}
