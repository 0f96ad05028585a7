import Foundation
import Testing
@testable import ObjectGraph

/// Mapping models: inference (MM-02, PD-20), files (MM-01, MM-03, Xcode's
/// `.xcmappingmodel`), entity mappings (EM-*), bad input.
@Suite(.serialized) struct MappingModelTests {
    static func v2() -> ManagedObjectModel {
        let model = SmallModel.make()
        model.entitiesByName["Person"]!.properties += [AttributeDescription(name: "email", type: .string)]
        return model
    }

    // MARK: - Inference (MM-02)

    /// MM-02 (a): an added optional attribute gives a transform mapping whose
    /// new attribute has no source; unchanged entities get copy mappings;
    /// every mapping records both entities' version hashes.
    @Test func inferredMappingOfAnAddedAttribute() throws {
        let v1 = SmallModel.make(), v2 = Self.v2()
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
        #expect(mapping.isInferred)
        let byName = mapping.entityMappingsByName   // MM-06
        #expect(byName.count == mapping.entityMappings.count)
        let person = try #require(byName["Person->Person"])
        #expect(person.mappingType == .transform)
        #expect(person.attributeMappings.map(\.name) == ["name", "age", "nickname", "email"])
        #expect(person.attributeMappings.map { $0.valueExpression?.expressionFormat ?? "nil" } == ["$source.name", "$source.age", "$source.nickname", "nil"])
        #expect(person.relationshipMappings.map { $0.valueExpression?.expressionFormat ?? "nil" } == [
            "FUNCTION($manager, \"destinationInstancesForSourceRelationshipNamed:sourceInstances:\", \"department\", $source.department)",
            "FUNCTION($manager, \"destinationInstancesForSourceRelationshipNamed:sourceInstances:\", \"tags\", $source.tags)",
        ])
        #expect(byName["Note->Note"]?.mappingType == .copy)
        #expect(person.sourceEntityVersionHash == v1.entitiesByName["Person"]!.versionHash)
        #expect(person.destinationEntityVersionHash == v2.entitiesByName["Person"]!.versionHash)
        #expect(mapping.problems(sourceModel: v1, destinationModel: v2).isEmpty)
    }

    /// MM-02 (c) and the other changes that cannot be inferred: 134190 with
    /// `reason`, `entity` and `property` in userInfo.
    @Test(arguments: [
        ("required attribute without default", "Person", "badge"),
        ("type change", "Person", "name"),
        ("to-many made to-one", "Department", "people"),
        ("abstract destination", "Note", nil),
    ] as [(String, String, String?)])
    func changesThatCannotBeInferred(_ change: String, entity: String, property: String?) throws {
        let v2 = SmallModel.make()
        switch change {
        case "required attribute without default":
            let badge = AttributeDescription(name: "badge", type: .integer32)
            badge.isOptional = false
            v2.entitiesByName["Person"]!.properties += [badge]
        case "type change":
            v2.entitiesByName["Person"]!.attributesByName["name"]!.attributeType = .date
        case "to-many made to-one":
            v2.entitiesByName["Department"]!.relationshipsByName["people"]!.maxCount = 1
        default:
            v2.entitiesByName["Note"]!.isAbstract = true
        }
        let error = #expect(throws: CoreDataError.self) { try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: v2) }
        #expect(error?.code == .inferredMappingModel)
        #expect(error?.userInfo[CoreDataError.inferredMappingEntityKey] as? String == entity)
        #expect(error?.userInfo[CoreDataError.inferredMappingPropertyKey] as? String == property)
        #expect((error?.userInfo[CoreDataError.inferredMappingReasonKey] as? String)?.isEmpty == false)
    }

    /// PD-20 (a), (c): the renaming identifier defaults to the name, and
    /// setting nil restores that; ED-08 likewise for entities.
    @Test func renamingIdentifierDefaultsToTheName() {
        let attribute = AttributeDescription(name: "x", type: .string)
        #expect(attribute.renamingIdentifier == "x")
        attribute.renamingIdentifier = "old"
        #expect(attribute.renamingIdentifier == "old")
        attribute.renamingIdentifier = nil
        #expect(attribute.renamingIdentifier == "x")
    }

    // MARK: - Files (MM-01, MM-03)

    /// MM-03: a mapping written as an ObjectGraph JSON file reads back equal.
    @Test func jsonFileRoundTrip() throws {
        let mapping = try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: Self.v2())
        mapping.entityMappings[0].userInfo = ["note": "kept"]
        mapping.entityMappings[0].entityMigrationPolicyClassName = "NSEntityMigrationPolicy"
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Mapping.json")
        try mapping.write(to: url)
        let read = try MappingModel(contentsOf: url)
        #expect(read.entityMappings.map(\.description) == mapping.entityMappings.map(\.description))
        for (a, b) in zip(read.entityMappings, mapping.entityMappings) {
            #expect(a.propertyMappings.map(\.description) == b.propertyMappings.map(\.description))
            #expect(a.sourceEntityVersionHash == b.sourceEntityVersionHash)
            #expect(a.destinationEntityVersionHash == b.destinationEntityVersionHash)
            #expect(a.entityMigrationPolicyClassName == b.entityMigrationPolicyClassName)
        }
        #expect(read.entityMappings[0].userInfo["note"] as? String == "kept")
    }

    /// MM-01: among files, the one for the two models (by version names and
    /// hashes); none for other models or an empty list.
    @Test func findingAMappingFileForTwoModels() throws {
        let directory = try TestPaths.temporaryDirectory()
        let v1 = SmallModel.make(), v2 = Self.v2()
        let right = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
        right.sourceModelVersionName = "Small.xcdatamodel"
        try right.write(to: directory.appendingPathComponent("b-right.json"))
        let other = Self.v2()
        other.entitiesByName["Tag"]!.versionHashModifier = "2"
        try MappingModel.inferredMappingModel(forSourceModel: SmallModel.make(), destinationModel: other).write(to: directory.appendingPathComponent("a-other.json"))
        let found = MappingModel.mappingModel(from: [directory], forSourceModel: v1, destinationModel: v2)
        #expect(found?.sourceModelVersionName == "Small.xcdatamodel")
        #expect(MappingModel.mappingModel(from: [directory], forSourceModel: v1, destinationModel: other) != nil)
        #expect(MappingModel.mappingModel(from: [directory], forSourceModel: v2, destinationModel: v1) == nil)
        #expect(MappingModel.mappingModel(from: [], forSourceModel: v1, destinationModel: v2) == nil)
    }

    /// Xcode's `.xcmappingmodel` (xcmapping.xml): version names, entity
    /// mappings in their order with names, types (Undefined resolved) and
    /// policies, archived value expressions decoded, auto-generated ones
    /// filled in from the models; it migrates a store.
    @Test func xcodeMappingModelIsRead() throws {
        final class ShoutingPolicy: EntityMigrationPolicy {
            override func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
                if selector == "shout:" { return (arguments[0] as? String)?.uppercased() }
                return try super.evaluateFunction(selector, arguments: arguments)
            }
        }
        EntityMigrationPolicy.register(ShoutingPolicy.self, as: "Small.PersonPolicy")
        let file = MigrationFixtures.directory.appendingPathComponent("SmallToSmall2.xcmappingmodel")
        let v1 = SmallModel.make(), v2 = Self.v2()
        let mapping = try MappingModel(contentsOf: file, sourceModel: v1, destinationModel: v2)
        #expect(mapping.sourceModelVersionName == "Small.xcdatamodel")
        #expect(mapping.destinationModelVersionName == "Small 2.xcdatamodel")
        #expect(mapping.entityMappings.map { "\($0.name) \($0.mappingType)" } == ["PersonToPerson custom", "DepartmentToDepartment copy", "TagToTag copy", "NoteTo remove"])
        let person = mapping.entityMappings[0]
        #expect(person.entityMigrationPolicyClassName == "Small.PersonPolicy")
        #expect(Dictionary(uniqueKeysWithValues: person.attributeMappings.map { ($0.name, $0.valueExpression?.expressionFormat ?? "nil") }) == [
            "name": "FUNCTION($entityPolicy, \"shout:\", $source.name)", "email": "$source.nickname", "age": "$source.age", "nickname": "$source.nickname",
        ])
        #expect(person.relationshipMappings.map(\.name).sorted() == ["department", "tags"])
        #expect(person.sourceEntityVersionHash == v1.entitiesByName["Person"]!.versionHash)

        let url = try SmallModel.store(SmallModel.make())
        try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: MigrationManager(sourceModel: v1, destinationModel: v2))
        let people = try SmallModel.read(url, Self.v2(), "Person", keys: ["name", "email", "department.title"])
        #expect(people.count == 30)
        #expect(people.first { $0["name"] == "PERSON 5" }?["email"] == "nick5")
        #expect(people.allSatisfy { $0["department.title"] != "nil" })
        // Note's mapping removes its instances (the entity stays in v2, empty).
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZNOTE").first?.first?.int == 0)
    }

    // MARK: - Bad input

    /// A value expression that does not parse: 134110 with the column, a
    /// caret under it, and the position in userInfo; from a JSON file, the
    /// file and mapping are named too.
    @Test func unparseableValueExpressionsShowWhere() throws {
        let error = #expect(throws: CoreDataError.self) {
            try PropertyMapping(name: "total", valueExpressionFormat: "$source.price * (1 + $source.tax")
        }
        #expect(error?.code == .migration)
        #expect(error?.message.contains("column 33") == true)
        #expect(error?.message.hasSuffix("$source.price * (1 + $source.tax\n                                ^") == true)
        #expect(error?.userInfo[CoreDataError.expressionPositionErrorKey] as? Int == 32)
        #expect(error?.userInfo[CoreDataError.underlyingErrorKey] is PredicateSyntaxError)

        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Bad.json")
        try Data(#"{"entityMappings": [{"name": "P", "source": "Person", "destination": "Person", "attributes": [{"name": "name", "value": "$source.name +"}]}]}"#.utf8).write(to: url)
        let fromFile = #expect(throws: CoreDataError.self) { try MappingModel(contentsOf: url) }
        #expect(fromFile?.code == .migration)
        #expect(fromFile?.message.hasPrefix(url.path + ": the value expression of P.name does not parse at column 15") == true)
    }

    /// A mapping naming entities or properties the models lack, or a policy
    /// nobody registered: the migration fails before writing anything
    /// (134110), listing every problem.
    @Test func mappingNamingMissingEntitiesAndProperties() throws {
        let v1 = SmallModel.make(), v2 = Self.v2()
        let mapping = MappingModel(entityMappings: [
            EntityMapping(sourceEntityName: "Persons", destinationEntityName: "Person", type: .transform),
            EntityMapping(name: "People", sourceEntityName: "Person", destinationEntityName: "Person", type: .transform,
                          attributeMappings: [try PropertyMapping(name: "mail", valueExpressionFormat: "$source.email"),
                                              try PropertyMapping(name: "email", valueExpressionFormat: "$source.mail")],
                          relationshipMappings: [PropertyMapping(name: "friends")],
                          entityMigrationPolicyClassName: "NobodyRegisteredThis"),
            EntityMapping(sourceEntityName: "Tag", destinationEntityName: "Tags", type: .copy),
            EntityMapping(sourceEntityName: "Note", destinationEntityName: nil, type: .custom),
        ])
        let url = try SmallModel.store(SmallModel.make())
        let before = try Data(contentsOf: url)
        let error = #expect(throws: CoreDataError.self) {
            try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: MigrationManager(sourceModel: v1, destinationModel: v2))
        }
        #expect(error?.code == .migration)
        let problems = error?.userInfo[MappingModel.problemsErrorKey] as? [String] ?? []
        #expect(problems == [
            "entity mapping Persons->Person: the source model has no entity Persons",
            "entity mapping People: no entity migration policy is registered as 'NobodyRegisteredThis' (EntityMigrationPolicy.register)",
            "entity mapping People: the destination entity Person has no attribute mail",
            "entity mapping People: the value expression of mail reads $source.email, which the source entity Person does not have",
            "entity mapping People: the value expression of email reads $source.mail, which the source entity Person does not have",
            "entity mapping People: the destination entity Person has no relationship friends",
            "entity mapping Tag->Tags: the destination model has no entity Tags",
            "entity mapping Note->: a custom mapping needs an entity migration policy class name (EM-07)",
        ])
        #expect(try Data(contentsOf: url) == before)
    }
}
