import Foundation
import Testing
@testable import ObjectGraph

/// Adding a store made with another model version (PC-37…39, CONST-PS-11,
/// CONST-MG-10, PS-18): refused with 134100 unless migration is asked for,
/// then migrated with a mapping file, an inferred mapping, or not at all
/// (134130, 134140, 134190), the file unchanged on failure.
@Suite(.serialized) struct AutomaticMigrationTests {
    static let sqlite = PersistentStoreCoordinator.sqliteStoreType
    static let both: [String: Any] = [PersistentStore.migratePersistentStoresAutomaticallyOption: true,
                                      PersistentStore.inferMappingModelAutomaticallyOption: true]

    /// v2: Person gains an optional `email`.
    static func v2() -> ManagedObjectModel {
        let model = SmallModel.make()
        model.entitiesByName["Person"]!.properties += [AttributeDescription(name: "email", type: .string)]
        return model
    }

    /// A v1 Xcode model file in a new folder, as an application ships it.
    static func v1ModelFolder() throws -> URL {
        let folder = try TestPaths.temporaryDirectory().appendingPathComponent("Small.xcdatamodeld")
        try XcodeModelWriter.write(SmallModel.make(), to: folder.appendingPathComponent("Small.xcdatamodel"))
        return folder
    }

    /// CONST-PS-11, PC-39 (b): without the options, or with only the
    /// inference option, the add fails with 134100 naming the entity whose
    /// hash differs; the file is unchanged.
    @Test func anotherModelIsRefusedWithoutMigration() throws {
        let url = try SmallModel.store(SmallModel.make())
        let before = try Data(contentsOf: url)
        for options: [String: Any] in [[:], [PersistentStore.inferMappingModelAutomaticallyOption: true]] {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.v2())
            let error = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: Self.sqlite, at: url, options: options) }
            #expect(error?.code == .persistentStoreIncompatibleVersionHash)
            #expect(error?.message.contains("version hashes differ for Person") == true)
            #expect((error?.userInfo[CoreDataError.mismatchedVersionHashesErrorKey] as? [String: [String]])?[""] == ["Person"])
        }
        #expect(try Data(contentsOf: url) == before)
    }

    /// PC-38, PC-39 (a): with both options the store is migrated (in place:
    /// an optional attribute was added) and added; the source model is
    /// found among the search URLs, or, without any, in the store's cached
    /// model.
    @Test(arguments: [true, false])
    func bothOptionsMigrateAnInferableChange(withSearchURLs: Bool) throws {
        let url = try SmallModel.store(SmallModel.make())
        let keys = try RawSQLite.query(url.path, "SELECT Z_PK FROM ZPERSON ORDER BY Z_PK")
        var options = Self.both
        if withSearchURLs { options[PersistentStore.migrationSearchURLsOption] = [try Self.v1ModelFolder()] }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.v2())
        let store = try coordinator.addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        #expect(coordinator.persistentStores.count == 1)
        #expect(store.model.isConfiguration(nil, compatibleWithStoreMetadata: store.metadata))
        #expect(try RawSQLite.query(url.path, "SELECT Z_PK FROM ZPERSON ORDER BY Z_PK") == keys)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let person = try #require(context.fetch(FetchRequest(entityName: "Person")).first)
            #expect(try person.value(forKey: "email") == nil)
            try person.setValue("ada@example.org", forKey: "email")
            try context.save()
        }
        // Adding it again finds it compatible: no second migration.
        try coordinator.remove(store)
        let again = try PersistentStoreCoordinator(managedObjectModel: Self.v2())
        try again.addPersistentStore(ofType: Self.sqlite, at: url)
    }

    /// PC-38 (a): a mapping file among the search URLs is used before inference.
    @Test func aMappingFileAmongTheSearchURLsIsUsed() throws {
        let url = try SmallModel.store(SmallModel.make())
        let folder = try Self.v1ModelFolder()
        let v2 = Self.v2()
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: v2)
        let people = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Person" })
        people.attributeMappings.removeAll { $0.name == "email" }
        people.attributeMappings.append(try PropertyMapping(name: "email", valueExpressionFormat: "FUNCTION($source.name, 'uppercase:')"))
        mapping.sourceModelVersionName = "Small.xcdatamodel"
        let mappings = try TestPaths.temporaryDirectory()
        try mapping.write(to: mappings.appendingPathComponent("SmallToV2.json"))
        var options = Self.both
        options[PersistentStore.migrationSearchURLsOption] = [folder, mappings]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: v2)
        try coordinator.addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        #expect(try RawSQLite.query(url.path, "SELECT ZEMAIL FROM ZPERSON WHERE ZNAME = 'person 3'").first?.first?.text == "PERSON 3")
    }

    /// PC-38 (b), CONST-MG-10: no model made the store (its cache row is
    /// gone and the search URLs hold another model) → 134130 with the
    /// hashes that did not match; PC-38 (c): no mapping and no inference →
    /// 134140; a change that cannot be inferred → 134140 with the 134190
    /// underneath, as Core Data reports it (PC-39 (c)). The file is
    /// unchanged each time.
    @Test func eachWayAutomaticMigrationFails() throws {
        let url = try SmallModel.store(SmallModel.make())
        _ = try RawSQLite.query(url.path, "DELETE FROM Z_MODELCACHE", readWrite: true)
        let before = try Data(contentsOf: url)
        let other = try TestPaths.temporaryDirectory().appendingPathComponent("Other.xcdatamodeld")
        let otherModel = SmallModel.make()
        otherModel.entitiesByName["Tag"]!.versionHashModifier = "other"
        try XcodeModelWriter.write(otherModel, to: other.appendingPathComponent("Other.xcdatamodel"))

        var options = Self.both
        options[PersistentStore.migrationSearchURLsOption] = [other]
        let noSource = #expect(throws: CoreDataError.self) {
            try PersistentStoreCoordinator(managedObjectModel: Self.v2()).addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        }
        #expect(noSource?.code == .migrationMissingSourceModel)
        #expect((noSource?.userInfo[CoreDataError.mismatchedVersionHashesErrorKey] as? [String: [String]])?["Other.xcdatamodel"] == ["Tag"])
        #expect(noSource?.message.contains("Other.xcdatamodel: Tag") == true)

        options[PersistentStore.migrationSearchURLsOption] = [try Self.v1ModelFolder()]
        options[PersistentStore.inferMappingModelAutomaticallyOption] = nil
        let noMapping = #expect(throws: CoreDataError.self) {
            try PersistentStoreCoordinator(managedObjectModel: Self.v2()).addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        }
        #expect(noMapping?.code == .migrationMissingMappingModel)

        options[PersistentStore.inferMappingModelAutomaticallyOption] = true
        let typeChange = SmallModel.make()
        typeChange.entitiesByName["Person"]!.attributesByName["name"]!.attributeType = .date
        let notInferable = #expect(throws: CoreDataError.self) {
            try PersistentStoreCoordinator(managedObjectModel: typeChange).addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        }
        #expect(notInferable?.code == .migrationMissingMappingModel)
        #expect(notInferable?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.cannotInferMappingModel)
        let inference = notInferable?.userInfo[CoreDataError.underlyingErrorKey] as? CoreDataError
        #expect(inference?.code == .inferredMappingModel)
        #expect(inference?.userInfo[CoreDataError.inferredMappingEntityKey] as? String == "Person")
        #expect(inference?.userInfo[CoreDataError.inferredMappingPropertyKey] as? String == "name")
        #expect(try Data(contentsOf: url) == before)
    }

    /// An Apple-written store (XCServerCoreData 2.0.1) added with the
    /// bundle's current version (2.0.3) and both options: found by schema
    /// and cached model among the bundle's versions, migrated in place.
    @Test func appleStoreIsMigratedWhenAddedWithTheCurrentVersion() throws {
        let url = try SQLiteFixtures.copy("XCServerCoreData_2.0.1.sqlite")
        let issues = try RawSQLite.query(url.path, "SELECT Z_PK, ZIDENTIFIER FROM ZISSUE ORDER BY Z_PK")
        let current = try XcodeModelBundle(url: TestPaths.xcServerBundle).currentModel()
        let plain = #expect(throws: CoreDataError.self) {
            try PersistentStoreCoordinator(managedObjectModel: current).addPersistentStore(ofType: Self.sqlite, at: url)
        }
        #expect(plain?.code == .persistentStoreIncompatibleVersionHash)
        var options = Self.both
        options[PersistentStore.migrationSearchURLsOption] = [TestPaths.xcServerBundle]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: current)
        try coordinator.addPersistentStore(ofType: Self.sqlite, at: url, options: options)
        #expect(try RawSQLite.query(url.path, "SELECT Z_PK, ZIDENTIFIER FROM ZISSUE ORDER BY Z_PK") == issues)
        let context = ManagedObjectContext(coordinator: coordinator)
        #expect(try context.performAndWait { try context.count(for: FetchRequest(entityName: "Issue")) } == issues.count)
    }

    /// PS-18: a store class's migration manager class is the one automatic
    /// migration instantiates.
    @Test func aStoreClassChoosesItsMigrationManager() throws {
        final class CountingManager: MigrationManager {
            nonisolated(unsafe) static var made = 0
            required init(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) {
                Self.made += 1
                super.init(sourceModel: sourceModel, destinationModel: destinationModel)
            }
        }
        final class CountingXMLStore: PropertyListAtomicStore {
            override class var storeType: String { "CountingXML" }
            override class var migrationManagerType: MigrationManager.Type { CountingManager.self }
        }
        PersistentStoreCoordinator.registerStoreClass(CountingXMLStore.self, forStoreType: "CountingXML")
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Small.xml")
        let first = try PersistentStoreCoordinator(managedObjectModel: SmallModel.make())
        try first.addPersistentStore(ofType: "CountingXML", at: url)
        let context = ManagedObjectContext(coordinator: first)
        try context.performAndWait {
            let p = try context.insertNewObject(forEntityName: "Person")
            try p.setValue("Ada", forKey: "name")
            try context.save()
        }
        for store in first.persistentStores { try first.remove(store) }
        var options = Self.both
        options[PersistentStore.migrationSearchURLsOption] = [try Self.v1ModelFolder()]
        CountingManager.made = 0
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.v2())
        try coordinator.addPersistentStore(ofType: "CountingXML", at: url, options: options)
        #expect(CountingManager.made == 1)
        let reader = ManagedObjectContext(coordinator: coordinator)
        #expect(try reader.performAndWait { try reader.fetch(FetchRequest(entityName: "Person")).map { try $0.value(forKey: "name") as? String } } == ["Ada"])
    }
}
