import Foundation
import Testing
@testable import ObjectGraph

/// The errors apps match on when a store does not open or migrate keep
/// Core Data's codes, userInfo keys and `reason` strings (CONST-PS-11,
/// CONST-MG-10, PC-38, PC-39; as Core Data reports them: 134100 `reason`
/// "The model used to open the store is incompatible with the one used to
/// create the store"; 134130 `URL`, `metadata`, "Can't find model for source
/// store"; 134140 `sourceModel`, `destinationModel`, "Can't find mapping
/// model for migration", or "Can't find or automatically infer mapping model
/// for migration" over the 134190). Issue 28 item 8.
@Suite struct MigrationErrorReasonTests {
    static let sqlite = PersistentStoreCoordinator.sqliteStoreType

    func addFails(_ url: URL, _ model: ManagedObjectModel, _ options: [String: Any]) -> CoreDataError? {
        #expect(throws: CoreDataError.self) {
            try PersistentStoreCoordinator(managedObjectModel: model).addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        }
    }

    @Test func eachRefusalCarriesCoreDatasReason() throws {
        let url = try SmallModel.store(SmallModel.make(), people: 2)
        let v2 = AutomaticMigrationTests.v2()

        let incompatible = addFails(url, v2, [:])
        #expect(incompatible?.code == .persistentStoreIncompatibleVersionHash)
        #expect(incompatible?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.incompatibleModel)

        // No source model: the cached model is gone and nothing else is searched.
        _ = try RawSQLite.query(url.path, "DELETE FROM Z_MODELCACHE", readWrite: true)
        let noSource = addFails(url, v2, AutomaticMigrationTests.both)
        #expect(noSource?.code == .migrationMissingSourceModel)
        #expect(noSource?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.missingSourceModel)
        #expect(noSource?.userInfo[CoreDataError.storeURLErrorKey] as? URL == url)
        #expect(noSource?.userInfo[CoreDataError.storeMetadataErrorKey] as? [String: Any] != nil)

        var options: [String: Any] = [PersistentStore.migratePersistentStoresAutomaticallyOption: true,
                                      PersistentStore.migrationSearchURLsOption: [try AutomaticMigrationTests.v1ModelFolder()]]
        let noMapping = addFails(url, v2, options)
        #expect(noMapping?.code == .migrationMissingMappingModel)
        #expect(noMapping?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.missingMappingModel)
        #expect(noMapping?.userInfo[CoreDataError.sourceModelErrorKey] is ManagedObjectModel)
        #expect(noMapping?.userInfo[CoreDataError.destinationModelErrorKey] as? ManagedObjectModel === v2)

        options[PersistentStore.inferMappingModelAutomaticallyOption] = true
        let typeChange = SmallModel.make()
        typeChange.entitiesByName["Person"]!.attributesByName["age"]!.attributeType = .date
        let notInferable = addFails(url, typeChange, options)
        #expect(notInferable?.code == .migrationMissingMappingModel)
        #expect(notInferable?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.cannotInferMappingModel)
        let inference = notInferable?.userInfo[CoreDataError.underlyingErrorKey] as? CoreDataError
        #expect(inference?.code == .inferredMappingModel)
        #expect(inference?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.incompatibleAttributeTypes)
        #expect(inference?.userInfo[CoreDataError.inferredMappingEntityKey] as? String == "Person")
        #expect(inference?.userInfo[CoreDataError.inferredMappingPropertyKey] as? String == "age")
        // The detail stays in the message, not in the reason apps compare.
        #expect(inference?.message.contains("Integer 16 to Date") == true)
    }

    @Test func keysAreSpelledAsCoreDataSpellsThem() {
        #expect(CoreDataError.reasonErrorKey == "reason" && CoreDataError.storeURLErrorKey == "URL")
        #expect(CoreDataError.sourceURLErrorKey == "sourceURL" && CoreDataError.destinationURLErrorKey == "destinationURL")
        #expect(CoreDataError.sourceModelErrorKey == "sourceModel" && CoreDataError.destinationModelErrorKey == "destinationModel")
        #expect(CoreDataError.attributeErrorKey == "attribute" && CoreDataError.inferredMappingEntityKey == "entity")
        #expect(CoreDataError.storeMetadataErrorKey == "metadata" && CoreDataError.inferredMappingPropertyKey == "property")
    }
}
