import Foundation
import Testing
@testable import ObjectGraph

/// A migration that fails half-way leaves the source store untouched and
/// openable with its old model (issue 14's acceptance; MP-02, MG-17). The
/// file's bytes are compared, and it is opened and read through a
/// coordinator afterwards. (A full disk and SIGKILL in a second process are
/// tested through `storesyncctl migrate`, in MigrateCommandTests.)
@Suite(.serialized) struct MigrationFailureTests {
    static func assertUntouched(_ url: URL, bytes: Data, rows: Int) throws {
        #expect(try Data(contentsOf: url) == bytes)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-journal"))
        let temporaries = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path).filter { $0.contains("migrating") }
        #expect(temporaries.isEmpty)
        let people = try SmallModel.read(url, SmallModel.make(), "Person", keys: ["name", "department.title"])
        #expect(people.count == rows)
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
    }

    /// Fails in a chosen stage.
    final class FailingPolicy: EntityMigrationPolicy {
        struct Failure: Error, CustomStringConvertible { let stage: String; var description: String { "the policy refused in \(stage)" } }
        nonisolated(unsafe) static var failIn = "relationships"
        override func createDestinationInstances(forSource source: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
            if Self.failIn == "create", try source.value(forKey: "name") as? String == "person 20" { throw Failure(stage: "create") }
            try super.createDestinationInstances(forSource: source, in: mapping, manager: manager)
        }
        override func createRelationships(forDestination destination: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
            if Self.failIn == "relationships" { throw Failure(stage: "relationships") }
            try super.createRelationships(forDestination: destination, in: mapping, manager: manager)
        }
        override func performCustomValidation(forMapping mapping: EntityMapping, manager: MigrationManager) throws {
            if Self.failIn == "validate" { throw CoreDataError(.entityMigrationPolicy, "custom validation failed") }
        }
    }

    /// MP-02: an error a policy throws in any stage stops the migration; it
    /// comes back as 134170 with the policy's error underneath (a Core Data
    /// error as it is), naming the mapping and stage.
    @Test(arguments: ["create", "relationships", "validate"])
    func policyErrorLeavesTheSourceUntouched(_ stage: String) throws {
        let url = try SmallModel.store(SmallModel.make())
        let bytes = try Data(contentsOf: url)
        EntityMigrationPolicy.register(FailingPolicy.self, as: "FailingPolicy")
        FailingPolicy.failIn = stage
        let source = SmallModel.make(), destination = SmallModel.make()
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        let people = try #require(mapping.entityMappings.first { $0.sourceEntityName == "Person" })
        people.entityMigrationPolicyClassName = "FailingPolicy"
        let error = #expect(throws: CoreDataError.self) {
            try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: MigrationManager(sourceModel: source, destinationModel: destination))
        }
        #expect(error?.code == .entityMigrationPolicy)
        #expect(error?.userInfo[CoreDataError.entityMappingErrorKey] as? String == "Person->Person")
        if stage != "validate" {
            #expect((error?.userInfo[CoreDataError.underlyingErrorKey] as? FailingPolicy.Failure)?.stage == stage)
            #expect(error?.userInfo[CoreDataError.migrationStageErrorKey] as? String == (stage == "create" ? "create destination instances" : "create relationships"))
        }
        try Self.assertUntouched(url, bytes: bytes, rows: 30)
    }

    /// The SQL of an in-place migration fails part-way (a trigger in the
    /// store refuses the `UPDATE` that fills a new default): the whole
    /// transaction rolls back, 134110 with SQLite's error underneath.
    @Test func sqlFailingPartWayRollsBack() throws {
        let url = try SmallModel.store(SmallModel.make())
        _ = try RawSQLite.query(url.path, "CREATE TRIGGER refuse BEFORE UPDATE ON ZPERSON BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END", readWrite: true)
        let bytes = try Data(contentsOf: url)
        let v2 = SmallModel.make()
        let level = AttributeDescription(name: "level", type: .integer32)
        level.isOptional = false
        level.defaultValue = Int32(3)
        v2.entitiesByName["Person"]!.properties += [level]
        let preview = try SQLiteStore.migrationPreview(at: url, sourceModel: SmallModel.make(), destinationModel: v2,
                                                       mappingModel: try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: v2))
        #expect(preview.inPlace)
        #expect(preview.statements.contains("UPDATE ZPERSON SET ZLEVEL = 3"))
        let error = #expect(throws: CoreDataError.self) { try SmallModel.migrate(url, from: SmallModel.make(), to: v2) }
        #expect(error?.code == .migration)
        #expect(error?.message.contains("refused by a trigger") == true)
        try Self.assertUntouched(url, bytes: bytes, rows: 30)
        #expect(try RawSQLite.tableColumns(url.path)["ZPERSON"]?.contains { $0.hasPrefix("ZLEVEL") } == false)
    }

    /// Another writer commits to the store while it is being copied: the
    /// migrated copy is not swapped in (134150), the other writer's row is
    /// kept, and the store still opens with its old model.
    @Test func aWriteDuringACopyingMigrationIsNotLost() throws {
        final class InterferingPolicy: EntityMigrationPolicy {
            nonisolated(unsafe) static var path = ""
            override func begin(_ mapping: EntityMapping, with manager: MigrationManager) throws {
                _ = try RawSQLite.query(Self.path, "UPDATE ZDEPARTMENT SET ZTITLE = 'Renamed meanwhile' WHERE ZTITLE = 'Sales'", readWrite: true)
            }
        }
        let url = try SmallModel.store(SmallModel.make())
        InterferingPolicy.path = url.path
        EntityMigrationPolicy.register(InterferingPolicy.self, as: "InterferingPolicy")
        let v2 = SmallModel.make()
        v2.entitiesByName["Person"]!.relationshipsByName["department"]!.maxCount = 0   // copies (storage changes)
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: v2)
        mapping.entityMappings[0].entityMigrationPolicyClassName = "InterferingPolicy"
        let error = #expect(throws: CoreDataError.self) {
            try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: MigrationManager(sourceModel: SmallModel.make(), destinationModel: v2))
        }
        #expect(error?.code == .migrationManagerSourceStore)
        let titles = try SmallModel.read(url, SmallModel.make(), "Department", keys: ["title"]).map { $0["title"]! }.sorted()
        #expect(titles == ["Renamed meanwhile", "Research"])
        #expect(!SmallModel.make().isConfiguration(nil, compatibleWithStoreMetadata: [:]))
        #expect(SmallModel.make().isConfiguration(nil, compatibleWithStoreMetadata: try SQLiteStore.metadataForStore(at: url)))
    }
}
