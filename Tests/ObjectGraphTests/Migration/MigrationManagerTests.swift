import Foundation
import Testing
@testable import ObjectGraph

/// `MigrationManager` (MG-*), entity mappings (EM-*), policies' hooks (MP-*)
/// and property mappings' value expressions (PM-*), on small stores.
@Suite(.serialized) struct MigrationManagerTests {
    static let sqlite = PersistentStoreCoordinator.sqliteStoreType

    /// Records every hook call, and every value expression that asks it to.
    final class RecordingPolicy: EntityMigrationPolicy {
        nonisolated(unsafe) static var log: [String] = []
        private func note(_ call: String, _ mapping: EntityMapping) { Self.log.append("\(call) \(mapping.name)") }
        override func begin(_ mapping: EntityMapping, with manager: MigrationManager) throws { note("begin", mapping) }
        override func createDestinationInstances(forSource source: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
            note("create", mapping)
            try super.createDestinationInstances(forSource: source, in: mapping, manager: manager)
        }
        override func endInstanceCreation(forMapping mapping: EntityMapping, manager: MigrationManager) throws { note("endCreate", mapping) }
        override func createRelationships(forDestination destination: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
            note("relate", mapping)
            try super.createRelationships(forDestination: destination, in: mapping, manager: manager)
        }
        override func endRelationshipCreation(forMapping mapping: EntityMapping, manager: MigrationManager) throws { note("endRelate", mapping) }
        override func performCustomValidation(forMapping mapping: EntityMapping, manager: MigrationManager) throws { note("validate", mapping) }
        override func end(_ mapping: EntityMapping, manager: MigrationManager) throws { note("end", mapping) }
        override func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
            if selector == "record:" { Self.log.append("expression \(arguments[0] ?? "nil")"); return arguments[0] }
            if selector == "describe:" { return (arguments[0] as? ManagedObject)?.entity.name }
            return try super.evaluateFunction(selector, arguments: arguments)
        }
    }

    /// v1: Department(title, people) and Person(name, department); two
    /// departments, four people.
    static func store() throws -> (URL, ManagedObjectModel) {
        let model = SmallModel.make()
        return (try SmallModel.store(model, people: 4), SmallModel.make())
    }

    static func recordingMapping(_ source: ManagedObjectModel, _ destination: ManagedObjectModel) throws -> MappingModel {
        EntityMigrationPolicy.register(RecordingPolicy.self, as: "RecordingPolicy")
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        mapping.entityMappings = mapping.entityMappings.filter { ["Department", "Person"].contains($0.sourceEntityName ?? "") }
        for m in mapping.entityMappings {
            m.entityMigrationPolicyClassName = "RecordingPolicy"
            m.name = "\(m.sourceEntityName!)Mapping"
        }
        // Person's tags are not mapped here (Tag is left out).
        mapping.entityMappings[1].relationshipMappings.removeAll { $0.name == "tags" }
        return mapping
    }

    /// MG-09, MP-01: each stage runs over every mapping before the next
    /// stage; within a mapping the hooks come in Core Data's order. MG-10:
    /// the mapping being processed follows the mapping model's order (MM-04).
    @Test func stagesRunOverEveryMappingInOrder() throws {
        let (url, _) = try Self.store()
        let source = SmallModel.make(), destination = SmallModel.make()
        let mapping = try Self.recordingMapping(source, destination)
        let manager = MigrationManager(sourceModel: source, destinationModel: destination)
        var seen: [String] = []
        let token = manager.observeProgress { event in
            let entry = "\(event.stage.rawValue) \(event.entityMappingName ?? "-")"
            if seen.last != entry { seen.append(entry) }
        }
        RecordingPolicy.log = []
        let target = try TestPaths.temporaryDirectory().appendingPathComponent("Target.sqlite")
        try manager.migrateStore(from: url, sourceType: Self.sqlite, with: mapping, toDestinationURL: target, destinationType: Self.sqlite)
        token.cancel()
        let log = RecordingPolicy.log.reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } }
        #expect(log == ["begin DepartmentMapping", "create DepartmentMapping", "endCreate DepartmentMapping",
                        "begin PersonMapping", "create PersonMapping", "endCreate PersonMapping",
                        "relate DepartmentMapping", "endRelate DepartmentMapping",
                        "relate PersonMapping", "endRelate PersonMapping",
                        "validate DepartmentMapping", "validate PersonMapping", "end DepartmentMapping", "end PersonMapping"])
        #expect(RecordingPolicy.log.filter { $0 == "create PersonMapping" }.count == 4)
        #expect(seen == ["create destination instances DepartmentMapping", "create destination instances PersonMapping",
                         "create relationships DepartmentMapping", "create relationships PersonMapping",
                         "validate DepartmentMapping", "validate PersonMapping", "save -"])
        // The people kept their departments in the new store.
        let people = try SmallModel.read(target, SmallModel.make(), "Person", keys: ["name", "department.title"])
        #expect(people.map { $0["department.title"]! } == ["Sales", "Research", "Sales", "Research"])
    }

    /// MG-11: 1 before any migration, never going down while one runs, 1
    /// after; MG-04, MG-06: nil before the first migration.
    @Test func progressGoesFromZeroToOne() throws {
        let (url, _) = try Self.store()
        let source = SmallModel.make(), destination = SmallModel.make()
        let manager = MigrationManager(sourceModel: source, destinationModel: destination)
        #expect(manager.migrationProgress == 1)
        #expect(manager.mappingModel == nil && manager.sourceContext == nil && manager.destinationContext == nil)
        var fractions: [Double] = []
        var during: [Double] = []
        let token = manager.observeProgress { event in
            fractions.append(event.fraction)
            during.append(manager.migrationProgress)
        }
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        try manager.migrateStore(from: url, sourceType: Self.sqlite, with: mapping,
                                 toDestinationURL: try TestPaths.temporaryDirectory().appendingPathComponent("T.sqlite"), destinationType: Self.sqlite)
        _ = token
        #expect(fractions.count > 5)
        #expect(fractions.first! < 0.5)
        #expect(zip(fractions, fractions.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(fractions.last == 1)
        #expect(during.dropLast().allSatisfy { $0 < 1 })
        #expect(manager.migrationProgress == 1)
        #expect(manager.mappingModel === mapping)
        #expect(manager.sourceContext != nil && manager.destinationContext != nil)
    }

    /// MG-12: cancelling from a progress observer in stage 1 makes the
    /// migrate call throw the very error given (134120 here); the
    /// destination store it created is deleted; progress is 1 again.
    @Test func cancellingThrowsTheGivenErrorAndDeletesTheNewStore() throws {
        let (url, _) = try Self.store()
        let source = SmallModel.make(), destination = SmallModel.make()
        let manager = MigrationManager(sourceModel: source, destinationModel: destination)
        let reason = CoreDataError(.migrationCancelled, "the user pressed Stop")
        let token = manager.observeProgress { event in
            if event.stage == .createDestinationInstances && event.fraction > 0.1 { manager.cancelMigration(with: reason) }
        }
        let target = try TestPaths.temporaryDirectory().appendingPathComponent("Cancelled.sqlite")
        let error = #expect(throws: CoreDataError.self) {
            try manager.migrateStore(from: url, sourceType: Self.sqlite,
                                     with: try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination),
                                     toDestinationURL: target, destinationType: Self.sqlite)
        }
        _ = token
        #expect(error?.code == .migrationCancelled)
        #expect(error?.message == "the user pressed Stop")
        #expect(!FileManager.default.fileExists(atPath: target.path))
        #expect(manager.migrationProgress == 1)
    }

    /// MG-13…16: associations one-to-many, lookups both ways, nil for every
    /// instance, reset; an unknown mapping name throws (MG-15).
    @Test func associationsAndLookups() throws {
        let (url, _) = try Self.store()
        let model = SmallModel.make()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: Self.sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let manager = MigrationManager(sourceModel: SmallModel.make(), destinationModel: SmallModel.make())
        let m = EntityMapping(sourceEntityName: "Person", destinationEntityName: "Person", type: .transform)
        #expect(m.name == "Person->Person")   // EM-06
        try context.performAndWait {
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            let (s, d1, d2, other) = (people[0], people[1], people[2], people[3])
            manager.associate(sourceInstance: s, withDestinationInstance: d1, for: m)
            manager.associate(sourceInstance: s, withDestinationInstance: d2, for: m)
            manager.associate(sourceInstance: other, withDestinationInstance: other, for: m)
            #expect(try manager.destinationInstances(forEntityMappingName: m.name, sourceInstances: [s]) == [d1, d2])
            #expect(try manager.sourceInstances(forEntityMappingName: m.name, destinationInstances: [d2]) == [s])
            #expect(try manager.destinationInstances(forEntityMappingName: m.name, sourceInstances: nil) == [d1, d2, other])
            #expect(try manager.sourceInstances(forEntityMappingName: m.name, destinationInstances: nil) == [s, other])
            #expect(manager.destinationInstances(forSourceInstances: [other, s]) == [other, d1, d2])
            manager.reset()
            #expect(try manager.destinationInstances(forEntityMappingName: m.name, sourceInstances: nil).isEmpty)
            #expect(context.registeredObjects.contains(d1))
        }
        // MG-05: entities by name, nil for the side an add mapping lacks.
        let add = EntityMapping(sourceEntityName: nil, destinationEntityName: "Tag", type: .add)
        #expect(manager.sourceEntity(for: add) == nil)
        #expect(manager.destinationEntity(for: add) === manager.destinationModel.entitiesByName["Tag"])
        // MG-15: a name the running mapping model does not have.
        let (url2, _) = try Self.store()
        let source = SmallModel.make(), destination = SmallModel.make()
        final class Probe: EntityMigrationPolicy {
            nonisolated(unsafe) static var thrown: Error?
            override func begin(_ mapping: EntityMapping, with manager: MigrationManager) throws {
                do { _ = try manager.destinationInstances(forEntityMappingName: "NoSuchMapping", sourceInstances: nil) } catch { Self.thrown = error }
            }
        }
        EntityMigrationPolicy.register(Probe.self, as: "Probe")
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        mapping.entityMappings[0].entityMigrationPolicyClassName = "Probe"
        try MigrationManager(sourceModel: source, destinationModel: destination)
            .migrateStore(from: url2, sourceType: Self.sqlite, with: mapping,
                          toDestinationURL: try TestPaths.temporaryDirectory().appendingPathComponent("P.sqlite"), destinationType: Self.sqlite)
        #expect((Probe.thrown as? CoreDataError)?.code == .migration)
    }

    /// MP-10, PM-02, EM-09: a value expression can use every migration
    /// variable; attribute mappings run in array order; a constant sets the
    /// constant everywhere.
    @Test func valueExpressionsSeeEveryVariableInOrder() throws {
        let (url, _) = try Self.store()
        let source = SmallModel.make()
        let destination = SmallModel.make()
        let person = destination.entitiesByName["Person"]!
        person.properties += ["a", "b", "c", "d", "e"].map { AttributeDescription(name: $0, type: .string) }
        EntityMigrationPolicy.register(RecordingPolicy.self, as: "RecordingPolicy")
        let people = EntityMapping(name: "People", sourceEntityName: "Person", destinationEntityName: "Person", type: .transform,
                                   entityMigrationPolicyClassName: "RecordingPolicy")
        people.attributeMappings = [
            try PropertyMapping(name: "name", valueExpressionFormat: "FUNCTION($entityPolicy, 'record:', $source.name)"),
            try PropertyMapping(name: "a", valueExpressionFormat: "FUNCTION($entityPolicy, 'record:', $entityMapping.name)"),
            try PropertyMapping(name: "b", valueExpressionFormat: "FUNCTION($entityPolicy, 'record:', $propertyMapping.name)"),
            try PropertyMapping(name: "c", valueExpressionFormat: "FUNCTION($entityPolicy, 'describe:', $destination)"),
            try PropertyMapping(name: "d", valueExpressionFormat: "$manager.currentEntityMapping.name"),
            try PropertyMapping(name: "e", valueExpressionFormat: "'constant'"),
        ]
        let mapping = MappingModel(entityMappings: [people])
        RecordingPolicy.log = []
        let target = try TestPaths.temporaryDirectory().appendingPathComponent("V.sqlite")
        try MigrationManager(sourceModel: source, destinationModel: destination)
            .migrateStore(from: url, sourceType: Self.sqlite, with: mapping, toDestinationURL: target, destinationType: Self.sqlite)
        let expressions = RecordingPolicy.log.filter { $0.hasPrefix("expression") }
        #expect(expressions.prefix(3) == ["expression person 0", "expression People", "expression b"])
        let rows = try RawSQLite.query(target.path, "SELECT ZNAME, ZA, ZB, ZC, ZD, ZE FROM ZPERSON ORDER BY ZNAME").map { $0.map { $0.text ?? "nil" } }
        #expect(rows.count == 4)
        #expect(rows.allSatisfy { $0[1...] == ["People", "b", "Person", "People", "constant"] })
    }

    /// MG-08: a missing source fails (134150); migrating twice into the same
    /// destination appends (duplicates); a mapping for other models fails
    /// before the destination is written (no file); the destination's
    /// metadata records the destination model's hashes.
    @Test func migrateStoreRules() throws {
        let source = SmallModel.make(), destination = SmallModel.make()
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        let missing = try TestPaths.temporaryDirectory().appendingPathComponent("Missing.sqlite")
        let target = try TestPaths.temporaryDirectory().appendingPathComponent("Twice.sqlite")
        let manager = MigrationManager(sourceModel: source, destinationModel: destination)
        let error = #expect(throws: CoreDataError.self) {
            try manager.migrateStore(from: missing, sourceType: Self.sqlite, with: mapping, toDestinationURL: target, destinationType: Self.sqlite)
        }
        #expect(error?.code == .migrationManagerSourceStore)
        #expect(!FileManager.default.fileExists(atPath: target.path))

        let (url, _) = try Self.store()
        try manager.migrateStore(from: url, sourceType: Self.sqlite, with: mapping, toDestinationURL: target, destinationType: Self.sqlite)
        try MigrationManager(sourceModel: SmallModel.make(), destinationModel: SmallModel.make())
            .migrateStore(from: url, sourceType: Self.sqlite, with: mapping, toDestinationURL: target, destinationType: Self.sqlite)
        #expect(try RawSQLite.query(target.path, "SELECT count(*) FROM ZPERSON").first?.first?.int == 8)
        #expect(destination.isConfiguration(nil, compatibleWithStoreMetadata: try SQLiteStore.metadataForStore(at: target)))

        let otherDestination = SmallModel.make()
        otherDestination.entitiesByName["Person"]!.properties += [AttributeDescription(name: "x", type: .string)]
        let stale = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: otherDestination)
        let never = try TestPaths.temporaryDirectory().appendingPathComponent("Never.sqlite")
        let mismatch = #expect(throws: CoreDataError.self) {
            try MigrationManager(sourceModel: SmallModel.make(), destinationModel: SmallModel.make())
                .migrateStore(from: url, sourceType: Self.sqlite, with: stale, toDestinationURL: never, destinationType: Self.sqlite)
        }
        #expect(mismatch?.code == .migration)
        #expect(mismatch?.message.contains("version hash differs") == true)
        #expect(!FileManager.default.fileExists(atPath: never.path))
    }

    /// MG-08 with another store type: an in-memory source is not possible
    /// (it has no file), but SQLite → XML works and the XML store opens.
    @Test func migratesIntoAnotherStoreType() throws {
        let (url, _) = try Self.store()
        let source = SmallModel.make(), destination = SmallModel.make()
        let target = try TestPaths.temporaryDirectory().appendingPathComponent("Small.xml")
        try MigrationManager(sourceModel: source, destinationModel: destination)
            .migrateStore(from: url, sourceType: Self.sqlite, with: try MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination),
                          toDestinationURL: target, destinationType: PersistentStoreCoordinator.xmlStoreType)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: SmallModel.make())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.xmlStoreType, at: target)
        let context = ManagedObjectContext(coordinator: coordinator)
        let titles = try context.performAndWait {
            try context.fetch(FetchRequest(entityName: "Person")).map { try ($0.value(forKeyPath: "department.title") as? String) ?? "nil" }.sorted()
        }
        #expect(titles == ["Research", "Research", "Sales", "Sales"])
    }
}
