import Foundation

/// Core Data's check that a migration gives every destination object the
/// values its model requires: a required attribute (without a default), a
/// required to-one relationship, members for a to-many with a minimum count.
/// A new required relationship or attribute is inferred (MappingModel
/// inference); the migration fails only when the store holds objects that
/// would lack it, with 134110 and Core Data's reason ("Validation error
/// missing attribute values on mandatory destination attribute" or
/// "… relationship"), naming the entity and the property, before anything
/// is written.
extension MigrationManager {
    /// The 134110 for objects of `entity` that would have no value for
    /// `property`. In place (SQLite), Core Data reports it under an outer
    /// 134110 whose reason begins "Cannot migrate store in-place: ".
    ///
    /// ```swift
    /// catch let error as CoreDataError where error.code == .migration {
    ///     let detail = error.userInfo[CoreDataError.underlyingErrorKey] as? CoreDataError ?? error
    ///     print(detail.userInfo[CoreDataError.reasonErrorKey] ?? "", detail.userInfo[CoreDataError.inferredMappingEntityKey] ?? "")
    /// }
    /// ```
    public static func mandatoryValueError(entity: String, property: PropertyDescription, sourceURL: URL?, destinationURL: URL?, inPlace: Bool) -> CoreDataError {
        let isRelationship = property is RelationshipDescription
        let reason = isRelationship ? CoreDataError.MigrationReason.missingMandatoryRelationship : CoreDataError.MigrationReason.missingMandatoryAttribute
        var info: [String: Any] = [CoreDataError.reasonErrorKey: reason, CoreDataError.inferredMappingEntityKey: entity,
                                   isRelationship ? CoreDataError.relationshipErrorKey : CoreDataError.attributeErrorKey: property.name]
        var locations: [String: Any] = [:]
        if let sourceURL { locations[CoreDataError.sourceURLErrorKey] = sourceURL; locations[CoreDataError.filePathErrorKey] = sourceURL.path }
        if let destinationURL { locations[CoreDataError.destinationURLErrorKey] = destinationURL }
        let what = "\(entity).\(property.name) is required, and objects of the store would have no \(isRelationship ? "destination" : "value") for it"
        guard inPlace else {
            info.merge(locations) { first, _ in first }
            return CoreDataError(.migration, "The store cannot be migrated: \(what) (\(reason))", userInfo: info)
        }
        let detail = CoreDataError(.migration, "\(what) (\(reason))", userInfo: info)
        locations[CoreDataError.reasonErrorKey] = CoreDataError.MigrationReason.cannotMigrateInPlacePrefix + reason
        locations[CoreDataError.underlyingErrorKey] = detail
        return CoreDataError(.migration, "The store cannot be migrated in place: \(what) (\(reason))", userInfo: locations)
    }

    /// The first required value a destination object of this migration
    /// lacks, as the error Core Data gives; checked before the save, whose
    /// validation would otherwise report it as 1570.
    func checkMandatoryDestinationValues(_ context: ManagedObjectContext, sourceURL: URL, destinationURL: URL) throws {
        for object in context.insertedInOrder {
            if let property = Self.missingMandatoryProperty(of: object) {
                throw Self.mandatoryValueError(entity: object.entity.name, property: property, sourceURL: sourceURL, destinationURL: destinationURL, inPlace: false)
            }
        }
    }

    /// The first property `object` must have a value for and has none:
    /// a required attribute without a default, a required to-one, or a
    /// to-many below its minimum count (RD-06: an empty optional one passes).
    static func missingMandatoryProperty(of object: ManagedObject) -> PropertyDescription? {
        for property in object.layout.slotProperties where !property.isTransient {
            if let attribute = property as? AttributeDescription {
                if !attribute.isOptional && object.storage[attribute.name] == nil { return attribute }
            } else if let rel = property as? RelationshipDescription {
                if rel.isToMany {
                    let count = (object.storage[rel.name] as? [ManagedObject])?.count ?? 0
                    if (count > 0 || !rel.isOptional) && count < rel.minCount { return rel }
                } else if !rel.isOptional && object.storage[rel.name] == nil {
                    return rel
                }
            }
        }
        return nil
    }
}
