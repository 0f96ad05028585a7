import Foundation
import Testing
@testable import ObjectGraph

/// Lightweight migration of the two changes issue 28 item 9 found refused
/// with 134190, matched with what Core Data's inference does (MM-02, PC-39):
///
/// - a required relationship added: Core Data infers the mapping; the
///   migration fails with 134110 ("Validation error missing attribute
///   values on mandatory destination relationship", in place under "Cannot
///   migrate store in-place: …") only when the store holds objects that
///   would lack it, and a store without such objects migrates;
/// - a relationship that became an attribute of the same name (or the
///   reverse): Core Data maps attributes from attributes only, so the old
///   property is dropped and the new one added.
///
/// Migration works on files: SQLite (in place, and by copying into an XML
/// store, the other path) rather than the in-memory store.
@Suite struct InferredPropertyKindChangeTests {
    /// v2: every Person needs a Badge.
    static func requiredBadge() -> ManagedObjectModel {
        let model = SmallModel.make()
        let badge = EntityDescription(name: "Badge")
        let holder = RelationshipDescription(name: "holder", destination: model.entitiesByName["Person"]!)
        badge.properties = [AttributeDescription(name: "number", type: .integer32), holder]
        let toBadge = RelationshipDescription(name: "badge", destination: badge)
        toBadge.isOptional = false
        toBadge.inverseRelationship = holder
        holder.inverseRelationship = toBadge
        model.entitiesByName["Person"]!.properties += [toBadge]
        model.entities = model.entities + [badge]
        return model
    }

    @Test func aRequiredRelationshipAddedIsInferred() throws {
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: Self.requiredBadge())
        let person = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Person" })
        let badge = try #require(person.relationshipMappings.first { $0.name == "badge" })
        #expect(badge.valueExpression == nil)
        #expect(mapping.entityMappings.contains { $0.destinationEntityName == "Badge" && $0.mappingType == .add })
    }

    @Test func objectsLackingTheRequiredRelationshipFailTheMigrationInPlace() throws {
        let url = try SmallModel.store(SmallModel.make(), people: 3)
        let before = try Data(contentsOf: url)
        let error = #expect(throws: CoreDataError.self) { try SmallModel.migrate(url, from: SmallModel.make(), to: Self.requiredBadge()) }
        #expect(error?.code == .migration)
        #expect(error?.userInfo[CoreDataError.reasonErrorKey] as? String
                == CoreDataError.MigrationReason.cannotMigrateInPlacePrefix + CoreDataError.MigrationReason.missingMandatoryRelationship)
        #expect(error?.userInfo[CoreDataError.sourceURLErrorKey] as? URL == url)
        let detail = error?.userInfo[CoreDataError.underlyingErrorKey] as? CoreDataError
        #expect(detail?.code == .migration)
        #expect(detail?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.missingMandatoryRelationship)
        #expect(detail?.userInfo[CoreDataError.inferredMappingEntityKey] as? String == "Person")
        #expect(detail?.userInfo[CoreDataError.relationshipErrorKey] as? String == "badge")
        #expect(try Data(contentsOf: url) == before)
    }

    @Test func objectsLackingTheRequiredRelationshipFailACopyingMigration() throws {
        let url = try SmallModel.store(SmallModel.make(), people: 3)
        let destination = try TestPaths.temporaryDirectory().appendingPathComponent("Small.xml")
        let manager = MigrationManager(sourceModel: SmallModel.make(), destinationModel: Self.requiredBadge())
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: Self.requiredBadge())
        let error = #expect(throws: CoreDataError.self) {
            try manager.migrateStore(from: url, sourceType: PersistentStoreCoordinator.sqliteStoreType, with: mapping,
                                     toDestinationURL: destination, destinationType: PersistentStoreCoordinator.xmlStoreType)
        }
        #expect(error?.code == .migration)
        #expect(error?.userInfo[CoreDataError.reasonErrorKey] as? String == CoreDataError.MigrationReason.missingMandatoryRelationship)
        #expect(error?.userInfo[CoreDataError.inferredMappingEntityKey] as? String == "Person")
        #expect(error?.userInfo[CoreDataError.relationshipErrorKey] as? String == "badge")
        #expect(error?.userInfo[CoreDataError.destinationURLErrorKey] as? URL == destination)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func aStoreWithoutSuchObjectsMigrates() throws {
        let url = try SmallModel.store(SmallModel.make(), people: 0)
        try SmallModel.migrate(url, from: SmallModel.make(), to: Self.requiredBadge())
        #expect(try SmallModel.read(url, Self.requiredBadge(), "Department", keys: ["title"]).map { $0["title"] } == ["Research", "Sales"])
        // And automatically, as addPersistentStore does it with both options.
        let again = try SmallModel.store(SmallModel.make(), people: 0)
        var options = AutomaticMigrationTests.both
        options[PersistentStore.migrationSearchURLsOption] = [try AutomaticMigrationTests.v1ModelFolder()]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.requiredBadge())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: again, options: options)
    }

    /// v2: Person.department, a to-one to Department, is now a string
    /// attribute; Department lost the inverse.
    static func departmentAsText() -> ManagedObjectModel {
        let model = SmallModel.make()
        let person = model.entitiesByName["Person"]!, department = model.entitiesByName["Department"]!
        person.properties = person.directProperties.filter { $0.name != "department" } + [AttributeDescription(name: "department", type: .string)]
        department.properties = department.directProperties.filter { $0.name != "people" }
        return model
    }

    @Test func aRelationshipThatBecameAnAttributeIsDroppedAndAdded() throws {
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: Self.departmentAsText())
        let person = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Person" })
        #expect(person.attributeMappings.first { $0.name == "department" }?.valueExpression == nil)
        #expect(!person.relationshipMappings.contains { $0.name == "department" })

        let url = try SmallModel.store(SmallModel.make(), people: 4)
        try SmallModel.migrate(url, from: SmallModel.make(), to: Self.departmentAsText(), mapping: mapping)
        let people = try SmallModel.read(url, Self.departmentAsText(), "Person", keys: ["name", "department", "age"])
        #expect(people.map { $0["name"] } == ["person 0", "person 1", "person 2", "person 3"])
        #expect(people.allSatisfy { $0["department"] == "nil" })
        #expect(people.map { $0["age"] } == ["20", "21", "22", "23"])
    }

    @Test func anAttributeThatBecameARelationshipIsDroppedAndAdded() throws {
        // v2: Note.text, a string, is now an optional to-one to Tag.
        let v2 = SmallModel.make()
        let note = v2.entitiesByName["Note"]!
        note.properties = [RelationshipDescription(name: "text", destination: v2.entitiesByName["Tag"]!)]
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: v2)
        let notes = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Note" })
        #expect(notes.relationshipMappings.first { $0.name == "text" }?.valueExpression == nil)
        #expect(notes.attributeMappings.isEmpty)

        let url = try SmallModel.store(SmallModel.make(), people: 3)
        try SmallModel.migrate(url, from: SmallModel.make(), to: v2, mapping: mapping)
        let migrated = try SmallModel.read(url, v2, "Note", keys: ["text"])
        #expect(migrated.count == 3 && migrated.allSatisfy { $0["text"] == "nil" })
    }
}
