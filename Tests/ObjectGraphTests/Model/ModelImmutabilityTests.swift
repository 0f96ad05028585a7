import Foundation
import Testing
@testable import ObjectGraph

/// A model in use by a coordinator is frozen; mutations trap, as Core Data
/// raises (X-01, X-02, X-04, MOM-00d, MOM-00e). Each trap runs in a child
/// process through Swift Testing's exit tests.
@Suite struct ModelImmutabilityTests {
    static func frozenReferenceModel() -> ManagedObjectModel {
        let model = ReferenceModel.make()
        _ = try! PersistentStoreCoordinator(managedObjectModel: model)   // PC-04: the coordinator freezes it
        return model
    }

    /// Runs `body` on a frozen model kept alive for the whole call: entities
    /// reach their model through a weak reference, as Core Data's do.
    static func whileInUse(_ body: (ManagedObjectModel) -> Void) {
        let model = frozenReferenceModel()
        withExtendedLifetime(model) { body(model) }
    }

    @Test func inUseModelReportsNotEditable() throws {
        let model = ReferenceModel.make()
        #expect(model.isEditable)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        #expect(!model.isEditable)
        #expect(coordinator.managedObjectModel === model)
    }

    @Test func frozenLookupsAnswerAsBefore() throws {
        let model = ReferenceModel.make()
        let employee = try #require(model.entitiesByName["Employee"])
        let before = (employee.properties.map(\.name), employee.attributesByName.keys.sorted(),
                      employee.relationshipsByName.keys.sorted(), model.entityVersionHashesByName)
        try model.markInUse()
        #expect(model.entitiesByName["Employee"] === employee)
        #expect(employee.properties.map(\.name) == before.0)
        #expect(employee.attributesByName.keys.sorted() == before.1)
        #expect(employee.relationshipsByName.keys.sorted() == before.2)
        #expect(model.entityVersionHashesByName == before.3)
    }

    @Test func aBrokenModelCannotBeUsed() {
        let model = ManagedObjectModel()
        model.entities = [EntityDescription(name: "A"), EntityDescription(name: "A")]
        #expect(throws: CoreDataError.self) { try PersistentStoreCoordinator(managedObjectModel: model) }
        #expect(model.isEditable)
    }

    @Test func settingEntitiesTraps() async {
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.frozenReferenceModel().entities = []
        }
    }

    @Test func settingAConfigurationTraps() async {
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.frozenReferenceModel().setEntities([], forConfiguration: "X")
        }
    }

    @Test func settingATemplateTraps() async {
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.frozenReferenceModel().setFetchRequestTemplate(nil, forName: "EmployeesEarningMoreThan")
        }
    }

    @Test func settingVersionIdentifiersTraps() async {
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.frozenReferenceModel().versionIdentifiers = ["2"]
        }
    }

    @Test func entitySettersTrap() async {
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.name = "Worker" }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.isAbstract = true }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.properties = [] }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.subentities = [] }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.userInfo = ["a": "b"] }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.managedObjectClassName = "X" }
        }
    }

    @Test func propertySettersTrap() async {
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.attributesByName["salary"]!.attributeType = .double }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.attributesByName["salary"]!.defaultValue = Decimal(1) }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.attributesByName["salary"]!.renamingIdentifier = "pay" }
        }
        await #expect(processExitsWith: .failure) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.relationshipsByName["manager"]!.deleteRule = .cascade }
        }
    }

    @Test func theTrapMessageSaysWhatAndWhy() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ModelImmutabilityTests.whileInUse { model in model.entitiesByName["Employee"]!.name = "Worker" }
        }
        let text = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(text.contains("cannot set name of entity 'Employee'"))
        #expect(text.contains("copy() the model to edit it"))
    }

    @Test func aCopyOfAnInUseModelIsEditableAndIndependent() throws {
        let original = Self.frozenReferenceModel()
        let copy = original.copy()
        #expect(copy.isEditable)
        #expect(copy.entitiesByName["Employee"] !== original.entitiesByName["Employee"])
        #expect(copy.entityVersionHashesByName == original.entityVersionHashesByName)  // MOM-00e
        #expect(copy.differences(from: original) == [])
        copy.entitiesByName["Employee"]!.name = "Worker"
        #expect(original.entitiesByName["Employee"]?.name == "Employee")
        // Relationships in the copy point at the copy's entities.
        let manager = copy.entitiesByName["Department"]!.relationshipsByName["employees"]!
        #expect(manager.destinationEntity === copy.entitiesByName["Worker"])
        #expect(manager.inverseRelationship === copy.entitiesByName["Worker"]!.relationshipsByName["department"])
    }

    @Test func entityCopyIsDistinctAndEditable() {
        // ED-31
        let entity = Self.frozenReferenceModel().entitiesByName["Department"]!
        let copy = entity.copy()
        #expect(copy !== entity)
        #expect(copy.name == entity.name && copy.isAbstract == entity.isAbstract)
        #expect(copy.directProperties.map(\.name) == entity.directProperties.map(\.name))
        copy.name = "Division"
        #expect(copy.managedObjectModel == nil)
    }
}
