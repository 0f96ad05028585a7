import Foundation
import Testing
@testable import ObjectGraph

/// Every Core Data error code keeps Apple's number (framework-classes-2a.md,
/// "Complete error-code list"; CONST-VC-*, CONST-OG-*, CONST-PS-*, CONST-MG-*, CONST-GE-*).
@Suite struct CoreDataErrorTests {
    @Test func codesMatchCoreDataErrorsH() {
        let table: [(CoreDataError.Code, Int)] = [
            (.managedObjectValidation, 1550), (.validationMultipleErrors, 1560), (.validationMissingMandatoryProperty, 1570),
            (.validationRelationshipLacksMinimumCount, 1580), (.validationRelationshipExceedsMaximumCount, 1590),
            (.validationRelationshipDeniedDelete, 1600), (.validationNumberTooLarge, 1610), (.validationNumberTooSmall, 1620),
            (.validationDateTooLate, 1630), (.validationDateTooSoon, 1640), (.validationInvalidDate, 1650),
            (.validationStringTooLong, 1660), (.validationStringTooShort, 1670), (.validationStringPatternMatching, 1680),
            (.managedObjectContextLocking, 132000), (.persistentStoreCoordinatorLocking, 132010),
            (.managedObjectContextReferentialIntegrity, 133000), (.managedObjectContextExternalRelationship, 133010),
            (.managedObjectContextMerge, 133020), (.managedObjectConstraintMerge, 133021), (.persistentStoreInvalidType, 134000), (.persistentStoreTypeMismatch, 134010),
            (.persistentStoreIncompatibleSchema, 134020), (.persistentStoreSave, 134030), (.persistentStoreIncompleteSave, 134040),
            (.coreData, 134060), (.persistentStoreOperation, 134070), (.persistentStoreOpen, 134080),
            (.persistentStoreTimeout, 134090), (.persistentStoreUnsupportedRequestType, 134091), (.persistentStoreIncompatibleVersionHash, 134100), (.migration, 134110),
            (.migrationCancelled, 134120), (.migrationMissingSourceModel, 134130), (.migrationMissingMappingModel, 134140),
            (.migrationManagerSourceStore, 134150), (.migrationManagerDestinationStore, 134160),
            (.entityMigrationPolicy, 134170), (.sqlite, 134180), (.inferredMappingModel, 134190), (.externalRecordImport, 134200),
        ]
        #expect(table.count == 41)
        for (code, number) in table { #expect(code.rawValue == number, "\(code)") }
        // CONST-PS-00: 134050 stays reserved.
        #expect(CoreDataError.Code(rawValue: 134050) == nil)
    }

    @Test func bridgesToNSErrorInTheCocoaDomain() {
        let error = CoreDataError(.validationMissingMandatoryProperty, "name is required",
                                  userInfo: [CoreDataError.validationKeyErrorKey: "name"])
        let ns = error as NSError
        #expect(ns.domain == NSCocoaErrorDomain)
        #expect(ns.code == 1570)
        #expect(ns.userInfo[CoreDataError.validationKeyErrorKey] as? String == "name")
        #expect(ns.localizedDescription == "name is required")
        #expect(error.code.isValidationError && !CoreDataError.Code.coreData.isValidationError)
    }
}
