import Foundation

/// The userInfo keys and `reason` strings of Core Data's store-version and
/// migration errors (134100, 134110, 134130, 134140, 134190), spelled as
/// Core Data spells them: apps recover from a failed migration by comparing
/// the code and the `reason`. docs/MIGRATION.md ("Errors apps match on")
/// lists which error carries which.
///
/// ```swift
/// catch let error as CoreDataError where error.code == .migrationMissingMappingModel {
///     if error.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.cannotInferMappingModel {
///         // lightweight migration is not enough: ship a mapping model
///     }
/// }
/// ```
extension CoreDataError {
    /// `reason`: why a migration or a version check failed (Core Data's key).
    public static let reasonErrorKey = "reason"
    /// `URL`: the store a 134130 is about (a `URL`).
    public static let storeURLErrorKey = "URL"
    /// `sourceURL`, `destinationURL`: the stores of a failed migration (134110).
    public static let sourceURLErrorKey = "sourceURL"
    public static let destinationURLErrorKey = "destinationURL"
    /// `sourceModel`, `destinationModel`: the models of a 134140.
    public static let sourceModelErrorKey = "sourceModel"
    public static let destinationModelErrorKey = "destinationModel"
    /// `attribute`, `relationship`: the destination property whose values a
    /// migration could not give (134110, with `entity`).
    public static let attributeErrorKey = "attribute"
    public static let relationshipErrorKey = "relationship"

    /// Core Data's `reason` strings, word for word.
    public enum MigrationReason {
        /// 134100: the store's version hashes do not fit the model.
        public static let incompatibleModel = "The model used to open the store is incompatible with the one used to create the store"
        /// 134130: no model made the store.
        public static let missingSourceModel = "Can't find model for source store"
        /// 134140: no mapping model, and inference was not asked for.
        public static let missingMappingModel = "Can't find mapping model for migration"
        /// 134140: no mapping model, and inference failed (its 134190 underneath).
        public static let cannotInferMappingModel = "Can't find or automatically infer mapping model for migration"
        /// 134190: an attribute's type changed in a way inference cannot convert.
        public static let incompatibleAttributeTypes = "Source and destination attribute types are incompatible"
        /// 134110 (underlying): objects would lack a required attribute's value.
        public static let missingMandatoryAttribute = "Validation error missing attribute values on mandatory destination attribute"
        /// 134110 (underlying): objects would lack a required relationship's destination.
        public static let missingMandatoryRelationship = "Validation error missing attribute values on mandatory destination relationship"
        /// 134110: the prefix of the outer reason when an in-place (SQLite) migration is refused.
        public static let cannotMigrateInPlacePrefix = "Cannot migrate store in-place: "
    }
}
