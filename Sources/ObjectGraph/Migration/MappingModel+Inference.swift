import Foundation

/// Inferring a mapping model from two models (MM-02, Core Data's lightweight
/// migration): entities and properties are matched by renaming identifier
/// (which defaults to the name, PD-20, ED-08).
extension MappingModel {
    /// A mapping model built from the differences between two models, when
    /// every change is one Core Data infers (MM-02):
    ///
    /// - entities added (`add`), removed (`remove`), renamed through the
    ///   destination entity's `renamingIdentifier` (a `copy`/`transform`, not
    ///   add and remove), moved in or out of a hierarchy (properties are
    ///   matched over inherited ones too, so attributes moving up into a new
    ///   parent keep their values);
    /// - attributes added (optional, or required with a default value),
    ///   removed, renamed (`renamingIdentifier`), made optional, made
    ///   required when they have a default value (nil values become the
    ///   default), or widened: Integer 16 → 32 → 64, integers → Double or
    ///   Decimal, Integer 16 → Float, Float → Double;
    /// - relationships added (optional or required: objects without a value
    ///   for a required one fail the migration, not the inference), removed,
    ///   renamed, made to-many from
    ///   to-one, made ordered or unordered, pointed at an entity whose
    ///   instances come from the old destination's (or a sub- or
    ///   super-entity of it).
    ///
    /// Entities whose version hashes are equal get `copy` mappings, the
    /// others `transform`; attribute mappings are `$source.<name>`,
    /// relationship mappings
    /// `FUNCTION($manager, "destinationInstancesForSourceRelationshipNamed:sourceInstances:", "<name>", $source.<name>)`.
    ///
    /// ```swift
    /// let mapping = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
    /// ```
    /// A relationship that became an attribute of the same name (or the
    /// reverse) is the old property removed and a new one added, as Core
    /// Data maps attributes only from attributes.
    ///
    /// - Throws: `CoreDataError` 134190 (`NSInferredMappingModelError`) with
    ///   `reason`, `entity` and `property` in userInfo, for the first change
    ///   that cannot be inferred (a type change that is not a widening, with
    ///   Core Data's reason "Source and destination attribute types are
    ///   incompatible"; a new required attribute without a default; a
    ///   to-many made to-one; an instantiable entity mapped onto an abstract one).
    public static func inferredMappingModel(forSourceModel source: ManagedObjectModel, destinationModel destination: ManagedObjectModel) throws -> MappingModel {
        /// `reason` goes to userInfo as given (Core Data's string where it has
        /// one); `description` to the message, when it says more.
        func fail(_ reason: String, entity: String, property: String? = nil, description: String? = nil) -> CoreDataError {
            var info: [String: Any] = [CoreDataError.inferredMappingReasonKey: reason, CoreDataError.inferredMappingEntityKey: entity]
            if let property { info[CoreDataError.inferredMappingPropertyKey] = property }
            return CoreDataError(.inferredMappingModel,
                                 "Can't infer a mapping model: \(description ?? reason) (entity \(entity)\(property.map { ", property \($0)" } ?? ""))",
                                 userInfo: info)
        }
        func key(_ entity: EntityDescription) -> String { entity.renamingIdentifier ?? entity.name }
        func key(_ property: PropertyDescription) -> String { property.renamingIdentifier ?? property.name }

        // Destination entity → its source entity.
        var sourceFor: [String: EntityDescription] = [:]
        var destinationFor: [String: EntityDescription] = [:]
        let sourcesByKey = Dictionary(source.entities.map { (key($0), $0) }, uniquingKeysWith: { first, _ in first })
        for entity in destination.entities {
            // An explicit renaming identifier names the old entity; otherwise the same name.
            let match = sourcesByKey[key(entity)] ?? source.entitiesByName[entity.name]
            guard let match, destinationFor[match.name] == nil else { continue }
            sourceFor[entity.name] = match
            destinationFor[match.name] = entity
        }

        var mappings: [EntityMapping] = []
        for sourceEntity in source.entities {
            guard let destinationEntity = destinationFor[sourceEntity.name] else {
                let removal = EntityMapping(sourceEntityName: sourceEntity.name, destinationEntityName: nil, type: .remove)
                removal.sourceEntityVersionHash = sourceEntity.versionHash
                mappings.append(removal)
                continue
            }
            if destinationEntity.isAbstract && !sourceEntity.isAbstract {
                throw fail("the destination entity is abstract, so the source entity's instances cannot be migrated", entity: destinationEntity.name)
            }
            let same = sourceEntity.versionHash == destinationEntity.versionHash && sourceEntity.name == destinationEntity.name
            let mapping = EntityMapping(sourceEntityName: sourceEntity.name, destinationEntityName: destinationEntity.name, type: same ? .copy : .transform)
            mapping.sourceEntityVersionHash = sourceEntity.versionHash
            mapping.destinationEntityVersionHash = destinationEntity.versionHash
            let sourceProperties = sourceEntity.properties.filter { !$0.isTransient }
            let sourceByKey = Dictionary(sourceProperties.map { (key($0), $0) }, uniquingKeysWith: { first, _ in first })
            for property in destinationEntity.properties where !property.isTransient {
                let match = sourceByKey[key(property)]
                    ?? sourceEntity.propertiesByName[property.name].flatMap { $0.isTransient ? nil : $0 }
                if let attribute = property as? AttributeDescription {
                    // A source relationship of that name is not this attribute's
                    // source: Core Data maps attributes from attributes, so the
                    // relationship is dropped and the attribute is new.
                    guard let old = match as? AttributeDescription else {
                        if !attribute.isOptional && attribute.defaultValue == nil {
                            throw fail("a required attribute was added without a default value", entity: destinationEntity.name, property: attribute.name)
                        }
                        mapping.attributeMappings.append(PropertyMapping(name: attribute.name))
                        continue
                    }
                    guard Self.canWiden(old.attributeType, to: attribute.attributeType) else {
                        throw fail(CoreDataError.MigrationReason.incompatibleAttributeTypes, entity: destinationEntity.name, property: attribute.name,
                                   description: "source and destination attribute types are incompatible (\(old.attributeType.xcodeName) to \(attribute.attributeType.xcodeName))")
                    }
                    if old.isOptional && !attribute.isOptional && attribute.defaultValue == nil {
                        throw fail("an optional attribute became required without a default value", entity: destinationEntity.name, property: attribute.name)
                    }
                    mapping.attributeMappings.append(PropertyMapping(name: attribute.name, valueExpression: PropertyMapping.sourceKeyExpression(old.name)))
                } else if let relationship = property as? RelationshipDescription {
                    // As for attributes: a source attribute of that name is
                    // dropped and the relationship is new. A new relationship
                    // is inferred even when required, as Core Data infers it:
                    // the migration then fails (134110, "mandatory destination
                    // relationship") only if the store has objects that would
                    // lack it (`MigrationManager.mandatoryValueError`).
                    guard let old = match as? RelationshipDescription else {
                        mapping.relationshipMappings.append(PropertyMapping(name: relationship.name))
                        continue
                    }
                    if old.isToMany && !relationship.isToMany {
                        throw fail("a to-many relationship became to-one", entity: destinationEntity.name, property: relationship.name)
                    }
                    if let oldDestination = old.destinationEntity, let newDestination = relationship.destinationEntity {
                        guard let migrated = destinationFor[oldDestination.name],
                              migrated.isKindOf(entity: newDestination) || newDestination.isKindOf(entity: migrated) else {
                            throw fail("the relationship's destination \(newDestination.name) does not receive the instances of its old destination \(oldDestination.name)",
                                       entity: destinationEntity.name, property: relationship.name)
                        }
                    }
                    mapping.relationshipMappings.append(PropertyMapping(name: relationship.name, valueExpression: PropertyMapping.relationshipLookupExpression(old.name)))
                }
            }
            mappings.append(mapping)
        }
        for entity in destination.entities where sourceFor[entity.name] == nil {
            let addition = EntityMapping(sourceEntityName: nil, destinationEntityName: entity.name, type: .add)
            addition.destinationEntityVersionHash = entity.versionHash
            mappings.append(addition)
        }
        let model = MappingModel(entityMappings: mappings)
        model.isInferred = true
        model.sourceModelVersionName = source.versionName
        model.destinationModelVersionName = destination.versionName
        return model
    }

    /// Attribute type changes an inferred mapping converts values for.
    static func canWiden(_ from: AttributeType, to: AttributeType) -> Bool {
        if from == to { return true }
        switch (from, to) {
        case (.integer16, .integer32), (.integer16, .integer64), (.integer32, .integer64),
             (.integer16, .double), (.integer32, .double), (.integer16, .float),
             (.integer16, .decimal), (.integer32, .decimal), (.integer64, .decimal),
             (.float, .double):
            return true
        default:
            return false
        }
    }
}
