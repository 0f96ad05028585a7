import Foundation
import Testing
@testable import ObjectGraph

/// Version hashes cover exactly the documented inputs (ED-26, ED-27, ED-29,
/// ED-30, AD-13, MOM-00h, MOM-VR-02).
@Suite struct VersionHashTests {
    /// A one-entity model whose every hash-relevant field a test can poke.
    struct Fixture {
        let model = ManagedObjectModel()
        let parent = EntityDescription(name: "Party")
        let entity = EntityDescription(name: "Person")
        let other = EntityDescription(name: "Pet")
        let name = AttributeDescription(name: "name", type: .string)
        let pets = RelationshipDescription(name: "pets", toMany: true)
        let owner = RelationshipDescription(name: "owner")

        init() {
            pets.destinationEntity = other
            owner.destinationEntity = entity
            pets.inverseRelationship = owner
            owner.inverseRelationship = pets
            entity.properties = [name, pets]
            other.properties = [owner]
            parent.subentities = [entity]
            model.entities = [parent, entity, other]
        }

        var hash: Data { entity.versionHash }
    }

    static let included: [(String, (Fixture) -> Void)] = [
        ("entity name", { $0.entity.name = "Human" }),
        ("abstract flag", { $0.entity.isAbstract = true }),
        ("entity modifier", { $0.entity.versionHashModifier = "v2" }),
        ("superentity's hash", { $0.parent.properties = [AttributeDescription(name: "since", type: .date)] }),
        ("added attribute", { $0.entity.properties += [AttributeDescription(name: "age", type: .integer16)] }),
        ("property name", { $0.name.name = "fullName" }),
        ("property optional", { $0.name.isOptional = false }),
        ("property transient", { $0.name.isTransient = true }),
        ("property read-only", { $0.name.isReadOnly = true }),
        ("property modifier", { $0.name.versionHashModifier = "x" }),
        ("attribute type", { $0.name.attributeType = .binaryData }),
        ("relationship destination", { $0.pets.destinationEntity = $0.parent }),
        ("relationship inverse", { $0.pets.inverseRelationship = nil }),
        ("relationship min count", { $0.pets.minCount = 1 }),
        ("relationship max count", { $0.pets.maxCount = 10 }),
    ]

    static let excluded: [(String, (Fixture) -> Void)] = [
        ("class name", { $0.entity.managedObjectClassName = "Person" }),
        ("entity user info", { $0.entity.userInfo = ["k": "v"] }),
        ("entity renaming identifier", { $0.entity.renamingIdentifier = "Human" }),
        ("property user info", { $0.name.userInfo = ["k": "v"] }),
        ("validation predicates", { $0.name.setValidationPredicates(["length > 1"], withValidationWarnings: ["too short"]) }),
        ("default value", { $0.name.defaultValue = "anonymous" }),
        ("min/max constraints", { $0.name.minLength = 3; $0.name.maxLength = 9 }),
        ("delete rule", { $0.pets.deleteRule = .cascade }),
        ("ordered flag", { $0.pets.isOrdered = false }),
        ("indexed", { $0.name.isIndexed = true }),
        ("property order", { $0.entity.properties = [$0.pets, $0.name] }),
        ("a new sub-entity", { let child = EntityDescription(name: "Child"); $0.entity.subentities = [child] }),
        ("version identifiers", { $0.model.versionIdentifiers = ["2.0"] }),
    ]

    @Test(arguments: included.map(\.0))
    func documentedInputChangesTheHash(_ label: String) throws {
        let change = try #require(Self.included.first { $0.0 == label }).1
        let fixture = Fixture()
        let before = fixture.hash
        change(fixture)
        #expect(fixture.hash != before, "\(label) must change the entity's version hash")
    }

    @Test(arguments: excluded.map(\.0))
    func excludedInputLeavesTheHashAlone(_ label: String) throws {
        let change = try #require(Self.excluded.first { $0.0 == label }).1
        let fixture = Fixture()
        let before = fixture.hash
        let parentBefore = fixture.parent.versionHash
        change(fixture)
        #expect(fixture.hash == before, "\(label) must not change the entity's version hash")
        #expect(fixture.parent.versionHash == parentBefore)
    }

    @Test func hashesAre32BytesAndEqualForEqualModels() {
        let a = ReferenceModel.make(), b = ReferenceModel.make()
        #expect(a.entityVersionHashesByName == b.entityVersionHashesByName)
        #expect(a.entityVersionHashesByName.values.allSatisfy { $0.count == 32 })
        #expect(Set(a.entityVersionHashesByName.keys) == Set(a.entitiesByName.keys))  // MOM-VR-02
    }

    @Test func addingAnEntityLeavesOtherHashesAlone() {
        let model = ReferenceModel.make()
        let before = model.entityVersionHashesByName
        model.entities += [EntityDescription(name: "Project")]
        #expect(model.entityVersionHashesByName["Employee"] == before["Employee"])
        #expect(model.entityVersionHashesByName["Department"] == before["Department"])
    }

    /// ED-29: the algorithm is fixed (see `VersionHasher`), so a hash computed
    /// today on this machine is the hash on every machine, in every process.
    @Test func hashesArePinnedAcrossMachines() throws {
        let model = try ManagedObjectModel(contentsOf: TestPaths.companyModel)
        #expect(model.entityVersionHashesByName["Department"]?.base64EncodedString() == "opzQaVwZnbCd83o9dgPA3+SuEikda2MY3LEjHtzw9FQ=")
        #expect(model.entityVersionHashesByName["Employee"]?.base64EncodedString() == "wlDlQMrJmZ6uCbQ4ST2V+eNPxY6AfsNESqyWk/Y8rmc=")
    }

    @Test func storeMetadataCompatibility() throws {
        // MOM-VR-01 (a)…(d)
        let model = ReferenceModel.make()
        let metadata: [String: Any] = [ManagedObjectModel.storeModelVersionHashesKey: model.entityVersionHashesByName]
        #expect(model.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        let withAttribute = model.copy()
        withAttribute.entitiesByName["Employee"]!.properties += [AttributeDescription(name: "nickname", type: .string)]
        #expect(!withAttribute.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        let newDefault = model.copy()
        newDefault.entitiesByName["Employee"]!.attributesByName["salary"]!.defaultValue = Decimal(100)
        #expect(newDefault.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        let departmentOnly = withAttribute.copy()
        departmentOnly.setEntities([departmentOnly.entitiesByName["Department"]!], forConfiguration: "Public")
        #expect(departmentOnly.isConfiguration("Public", compatibleWithStoreMetadata: metadata))
        #expect(!model.isConfiguration(nil, compatibleWithStoreMetadata: [:]))
        var extra = model.entityVersionHashesByName
        extra["Ghost"] = Data(count: 32)
        #expect(!model.isConfiguration(nil, compatibleWithStoreMetadata: [ManagedObjectModel.storeModelVersionHashesKey: extra]))
        #expect(model.isConfiguration("Directory", compatibleWithStoreMetadata: [ManagedObjectModel.storeModelVersionHashesKey: extra]))
    }
}
