import Foundation

/// An error in Core Data's error domain (`NSCocoaErrorDomain`) with Core Data's
/// codes and userInfo keys, so code ported from Apple's platforms can match on
/// the same numbers it always has.
///
/// ```swift
/// do { try context.save() }
/// catch let error as CoreDataError where error.code == .validationMultipleErrors {
///     let details = error.userInfo[CoreDataError.detailedErrorsKey] as? [CoreDataError]
/// }
/// ```
public struct CoreDataError: Error, CustomNSError, CustomStringConvertible, @unchecked Sendable {
    /// Core Data's error codes, numbered exactly as in CoreDataErrors.h.
    public enum Code: Int, CaseIterable, Sendable {
        // Foundation file errors Core Data reports for model and store files.
        case fileNoSuchFile = 4
        case fileReadUnknown = 256
        case fileReadCorruptFile = 259
        case fileReadNoSuchFile = 260
        case fileWriteUnknown = 512
        case fileWriteNoPermission = 513
        case fileWriteOutOfSpace = 640
        case fileWriteVolumeReadOnly = 642

        // Validation (1550–1680).
        case managedObjectValidation = 1550
        case validationMultipleErrors = 1560
        case validationMissingMandatoryProperty = 1570
        case validationRelationshipLacksMinimumCount = 1580
        case validationRelationshipExceedsMaximumCount = 1590
        case validationRelationshipDeniedDelete = 1600
        case validationNumberTooLarge = 1610
        case validationNumberTooSmall = 1620
        case validationDateTooLate = 1630
        case validationDateTooSoon = 1640
        case validationInvalidDate = 1650
        case validationStringTooLong = 1660
        case validationStringTooShort = 1670
        case validationStringPatternMatching = 1680

        // Object graph management (132000–133021).
        case managedObjectContextLocking = 132000
        case persistentStoreCoordinatorLocking = 132010
        case managedObjectContextReferentialIntegrity = 133000
        case managedObjectContextExternalRelationship = 133010
        case managedObjectContextMerge = 133020
        /// `NSManagedObjectConstraintMergeError`: a save broke a uniqueness
        /// constraint under the error merge policy (`conflictList` holds
        /// `ConstraintConflict`s).
        case managedObjectConstraintMerge = 133021

        // Persistent stores (134000–134100).
        case persistentStoreInvalidType = 134000
        case persistentStoreTypeMismatch = 134010
        case persistentStoreIncompatibleSchema = 134020
        case persistentStoreSave = 134030
        case persistentStoreIncompleteSave = 134040
        case coreData = 134060
        case persistentStoreOperation = 134070
        case persistentStoreOpen = 134080
        case persistentStoreTimeout = 134090
        /// `NSPersistentStoreUnsupportedRequestTypeError`: the store cannot run this request (a batch request on a store that is not SQLite).
        case persistentStoreUnsupportedRequestType = 134091
        case persistentStoreIncompatibleVersionHash = 134100

        // Migration (134110–134200).
        case migration = 134110
        case migrationCancelled = 134120
        case migrationMissingSourceModel = 134130
        case migrationMissingMappingModel = 134140
        case migrationManagerSourceStore = 134150
        case migrationManagerDestinationStore = 134160
        case entityMigrationPolicy = 134170
        case sqlite = 134180
        case inferredMappingModel = 134190
        case externalRecordImport = 134200
        /// `NSPersistentHistoryTokenExpiredError`: the history after a token
        /// was deleted, so what followed it can no longer be read.
        case persistentHistoryTokenExpired = 134301

        /// True for Foundation's validation range (1024...2047).
        public var isValidationError: Bool { (1024...2047).contains(rawValue) }
    }

    // MARK: - userInfo keys (Core Data's names)

    public static let detailedErrorsKey = "NSDetailedErrors"
    public static let validationObjectErrorKey = "NSValidationErrorObject"
    public static let validationKeyErrorKey = "NSValidationErrorKey"
    public static let validationPredicateErrorKey = "NSValidationErrorPredicate"
    public static let validationValueErrorKey = "NSValidationErrorValue"
    public static let affectedStoresErrorKey = "NSAffectedStoresErrorKey"
    public static let affectedObjectsErrorKey = "NSAffectedObjectsErrorKey"
    public static let persistentStoreSaveConflictsErrorKey = "NSPersistentStoreSaveConflictsErrorKey"
    public static let filePathErrorKey = NSFilePathErrorKey
    public static let underlyingErrorKey = NSUnderlyingErrorKey
    public static let localizedDescriptionKey = NSLocalizedDescriptionKey
    /// ObjectGraph's own keys for where in a model file a problem is.
    public static let lineNumberErrorKey = "ObjectGraphLineNumber"
    public static let entityNameErrorKey = "ObjectGraphEntityName"
    public static let propertyNameErrorKey = "ObjectGraphPropertyName"
    /// Where in a value expression's text parsing failed (0-based, Unicode scalars).
    public static let expressionPositionErrorKey = "ObjectGraphExpressionPosition"
    /// `NSInferredMappingModelError` (134190) userInfo keys, as Core Data
    /// names them (MM-02): why inference failed, and where.
    public static let inferredMappingReasonKey = "reason"
    public static let inferredMappingEntityKey = "entity"
    public static let inferredMappingPropertyKey = "property"
    /// The store metadata a migration error is about (134130, 134100).
    public static let storeMetadataErrorKey = "metadata"
    /// 134130/134100: per candidate model (its version name), the entities
    /// whose version hashes did not match the store's, as `[String: [String]]`.
    public static let mismatchedVersionHashesErrorKey = "ObjectGraphMismatchedVersionHashes"
    /// The migration stage an error happened in (`MigrationStage` raw value).
    public static let migrationStageErrorKey = "ObjectGraphMigrationStage"
    /// The entity mapping an error happened in (its name).
    public static let entityMappingErrorKey = "ObjectGraphEntityMapping"

    public static let errorDomain = NSCocoaErrorDomain
    /// The domain for raw SQLite result codes.
    public static let sqliteErrorDomain = "NSSQLiteErrorDomain"

    public let code: Code
    public var userInfo: [String: Any]

    public init(_ code: Code, _ message: String, userInfo: [String: Any] = [:]) {
        self.code = code
        var info = userInfo
        info[NSLocalizedDescriptionKey] = message
        self.userInfo = info
    }

    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { userInfo }

    /// The human-readable reason, as given to the initializer.
    public var message: String { userInfo[NSLocalizedDescriptionKey] as? String ?? "" }

    /// Errors gathered under `NSDetailedErrors` (code 1560).
    public var detailedErrors: [CoreDataError] {
        userInfo[CoreDataError.detailedErrorsKey] as? [CoreDataError] ?? []
    }

    public var description: String {
        "\(CoreDataError.errorDomain) \(code.rawValue): \(message)"
    }
}
