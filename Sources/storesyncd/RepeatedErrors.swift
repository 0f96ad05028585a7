import Foundation

/// Rate limit for errors that repeat round after round (a store that stays
/// corrupt, a hub that cannot be written): the first failure of an episode
/// is logged, then at most one line per `interval` saying how many failures
/// there were since the last line and the latest reason, and one line when
/// the episode ends. Keyed by what fails (a store, the group's round).
struct RepeatedErrors {
    enum Event: Equatable {
        /// The first failure: log it with its reason.
        case started
        /// Still failing after `interval`: `failures` since the last line,
        /// of `reasons` distinct reasons.
        case repeating(failures: Int, reasons: Int)
        /// Repeats within the interval: nothing to log.
        case suppressed
    }

    struct Episode {
        var started: Date
        var lastLine: Date
        var failures = 1
        var sinceLine = 0
        var reasonsSinceLine: Set<String> = []
        var lastReason: String
    }

    /// How an episode ended, for its closing line.
    struct Ended: Equatable {
        var failures: Int
        var duration: TimeInterval
    }

    let interval: TimeInterval
    private(set) var episodes: [String: Episode] = [:]

    init(interval: TimeInterval = 60) { self.interval = interval }

    mutating func failed(_ key: String, reason: String, now: Date = Date()) -> Event {
        guard var episode = episodes[key] else {
            episodes[key] = Episode(started: now, lastLine: now, lastReason: reason)
            return .started
        }
        episode.failures += 1
        episode.sinceLine += 1
        episode.reasonsSinceLine.insert(reason)
        episode.lastReason = reason
        defer { episodes[key] = episode }
        guard now.timeIntervalSince(episode.lastLine) >= interval else { return .suppressed }
        let event = Event.repeating(failures: episode.sinceLine, reasons: episode.reasonsSinceLine.count)
        episode.lastLine = now
        episode.sinceLine = 0
        episode.reasonsSinceLine = []
        return event
    }

    /// The key succeeded: the episode it ends, if one was open.
    mutating func succeeded(_ key: String, now: Date = Date()) -> Ended? {
        guard let episode = episodes.removeValue(forKey: key) else { return nil }
        return Ended(failures: episode.failures, duration: now.timeIntervalSince(episode.started))
    }

    func isFailing(_ key: String) -> Bool { episodes[key] != nil }
}

/// Core Data's names for its error codes (CoreDataErrors.h), so a log line
/// names the error an operator can look up, not only its number.
enum CoreDataErrorNames {
    static let names: [Int: String] = [
        4: "NSFileNoSuchFileError", 256: "NSFileReadUnknownError", 259: "NSFileReadCorruptFileError",
        260: "NSFileReadNoSuchFileError", 512: "NSFileWriteUnknownError",
        1550: "NSManagedObjectValidationError", 1560: "NSValidationMultipleErrorsError",
        1570: "NSValidationMissingMandatoryPropertyError", 1580: "NSValidationRelationshipLacksMinimumCountError",
        1590: "NSValidationRelationshipExceedsMaximumCountError", 1600: "NSValidationRelationshipDeniedDeleteError",
        1610: "NSValidationNumberTooLargeError", 1620: "NSValidationNumberTooSmallError", 1630: "NSValidationDateTooLateError",
        1640: "NSValidationDateTooSoonError", 1650: "NSValidationInvalidDateError", 1660: "NSValidationStringTooLongError",
        1670: "NSValidationStringTooShortError", 1680: "NSValidationStringPatternMatchingError",
        132000: "NSManagedObjectContextLockingError", 132010: "NSPersistentStoreCoordinatorLockingError",
        133000: "NSManagedObjectReferentialIntegrityError", 133010: "NSManagedObjectExternalRelationshipError",
        133020: "NSManagedObjectMergeError",
        134000: "NSPersistentStoreInvalidTypeError", 134010: "NSPersistentStoreTypeMismatchError",
        134020: "NSPersistentStoreIncompatibleSchemaError", 134030: "NSPersistentStoreSaveError",
        134040: "NSPersistentStoreIncompleteSaveError", 134060: "NSCoreDataError", 134070: "NSPersistentStoreOperationError",
        134080: "NSPersistentStoreOpenError", 134090: "NSPersistentStoreTimeoutError",
        134100: "NSPersistentStoreIncompatibleVersionHashError",
        134110: "NSMigrationError", 134120: "NSMigrationCancelledError", 134130: "NSMigrationMissingSourceModelError",
        134140: "NSMigrationMissingMappingModelError", 134150: "NSMigrationManagerSourceStoreError",
        134160: "NSMigrationManagerDestinationStoreError", 134170: "NSEntityMigrationPolicyError", 134180: "NSSQLiteError",
        134190: "NSInferredMappingModelError", 134200: "NSExternalRecordImportError",
        134301: "NSPersistentHistoryTokenExpiredError",
    ]

    /// `error_code` and `error_name` for a message that starts with a Core
    /// Data error ("NSCocoaErrorDomain 134100: …"), as the engine reports them.
    static func metadata(for message: String) -> [String: String] {
        guard let range = message.range(of: #"NSCocoaErrorDomain (\d+):"#, options: .regularExpression) else { return [:] }
        let digits = message[range].dropFirst("NSCocoaErrorDomain ".count).dropLast()
        guard let code = Int(digits) else { return [:] }
        var out = ["error_code": "\(code)"]
        if let name = names[code] { out["error_name"] = name }
        return out
    }
}
