import Foundation
import Testing
@testable import ObjectGraph

/// Configurations, fetch request templates, merging and version identifiers
/// (MOM-EN-*, MOM-FT-*, MOM-IN-04, MOM-VR-03, MOD-08).
@Suite struct ModelCompositionTests {
    @Test func newModelIsEmpty() {
        let model = ManagedObjectModel()
        #expect(model.entities.isEmpty && model.configurations.isEmpty)   // MOM-EN-01, MOM-EN-04, MOD-08
        #expect(model.versionIdentifiers.isEmpty)                         // MOM-VR-03
        #expect(model.fetchRequestTemplatesByName.isEmpty)
        #expect(throws: Never.self) { try model.validate() }
    }

    @Test func configurationsMayOverlap() throws {
        // MOM-EN-05, MOM-EN-06
        let model = ManagedObjectModel()
        let a = EntityDescription(name: "A"), b = EntityDescription(name: "B"), c = EntityDescription(name: "C")
        model.entities = [a, b, c]
        model.setEntities([a, b], forConfiguration: "Admin")
        model.setEntities([b, c], forConfiguration: "Public")
        #expect(model.configurations == ["Admin", "Public"])
        #expect(model.entities(forConfiguration: "Admin")?.map(\.name) == ["A", "B"])
        #expect(model.entities(forConfiguration: nil)?.count == 3)
        #expect(model.entities(forConfiguration: "Nope") == nil)
        model.setEntities([c], forConfiguration: "Admin")
        #expect(model.configurations == ["Admin", "Public"])
        #expect(model.entities(forConfiguration: "Admin")?.map(\.name) == ["C"])
    }

    @Test func configurationNamingAForeignEntityIsAProblem() {
        let model = ManagedObjectModel()
        model.entities = [EntityDescription(name: "A")]
        model.setEntities([EntityDescription(name: "Stranger")], forConfiguration: "X")
        #expect(model.problems().contains { $0.message.contains("configuration 'X' names entity 'Stranger'") })
    }

    @Test func templatesSetReplaceAndRemove() throws {
        // MOM-FT-01, MOM-FT-02, MOM-FT-04, MOM-FT-05
        let model = ReferenceModel.make()
        #expect(model.fetchRequestTemplate(forName: "EmployeesEarningMoreThan")?.predicate?.predicateFormat == "salary > $MIN")
        #expect(model.fetchRequestTemplate(forName: "Unknown") == nil)
        let replacement = FetchRequest(entityName: "Department")
        replacement.predicate = try FetchPredicate(format: "budget > $MIN")
        model.setFetchRequestTemplate(replacement, forName: "EmployeesEarningMoreThan")
        #expect(model.fetchRequestTemplate(forName: "EmployeesEarningMoreThan") === replacement)
        model.setFetchRequestTemplate(nil, forName: "EmployeesEarningMoreThan")
        #expect(model.fetchRequestTemplatesByName.isEmpty)
        model.setFetchRequestTemplate(FetchRequest(entityName: "Ghost"), forName: "Haunt")
        #expect(model.problems().contains { $0.message.contains("fetch request template 'Haunt' fetches entity 'Ghost'") })
    }

    @Test func templatesAndConfigurationsLoadFromXML() throws {
        let model = try ManagedObjectModel(contentsOf: TestPaths.companyModel)
        #expect(model.fetchRequestTemplate(forName: "EmployeesEarningMoreThan")?.entityName == "Employee")
        #expect(model.fetchRequestTemplate(forName: "EmployeesEarningMoreThan")?.predicate?.predicateFormat == "salary > $MIN")
        #expect(model.entities(forConfiguration: "Directory")?.map(\.name) == ["Department", "Employee"])
        #expect(model.versionIdentifiers == ["1.0"])
    }

    @Test func mergingTakesTheUnion() throws {
        // MOM-IN-04, MOM-VR-03
        let app = ManagedObjectModel()
        app.entities = [EntityDescription(name: "A"), EntityDescription(name: "B")]
        app.versionIdentifiers = ["1.0"]
        app.setEntities(app.entities, forConfiguration: "App")
        let library = ManagedObjectModel()
        library.entities = [EntityDescription(name: "C")]
        library.versionIdentifiers = ["lib-3"]
        library.setFetchRequestTemplate(FetchRequest(entityName: "C"), forName: "AllC")
        let merged = try ManagedObjectModel(byMerging: [app, library])
        #expect(merged.entities.map(\.name) == ["A", "B", "C"])
        #expect(merged.versionIdentifiers == ["1.0", "lib-3"])
        #expect(merged.configurations == ["App"])
        #expect(merged.entities(forConfiguration: "App")?.allSatisfy { e in merged.entities.contains { $0 === e } } == true)
        #expect(merged.fetchRequestTemplate(forName: "AllC")?.entityName == "C")
        #expect(merged.entitiesByName["A"] !== app.entitiesByName["A"])
        #expect(app.entities.count == 2)   // inputs unchanged
    }

    @Test func mergingTwoDefinitionsOfOneEntityFails() {
        let first = ManagedObjectModel(), second = ManagedObjectModel()
        first.entities = [EntityDescription(name: "A")]
        second.entities = [EntityDescription(name: "A")]
        #expect {
            try ManagedObjectModel(byMerging: [first, second])
        } throws: { error in
            (error as? CoreDataError)?.message == "cannot merge models: entity 'A' is defined in model 0 and model 1"
        }
    }

    @Test func mergedRelationshipsPointIntoTheMergedModel() throws {
        let merged = try ManagedObjectModel(byMerging: [ReferenceModel.make()])
        let employees = try #require(merged.entitiesByName["Department"]?.relationshipsByName["employees"])
        #expect(employees.destinationEntity === merged.entitiesByName["Employee"])
        try merged.validate()
    }

    @Test func versionIdentifiersDoNotAffectCompatibility() {
        let model = ReferenceModel.make()
        let metadata: [String: Any] = [ManagedObjectModel.storeModelVersionHashesKey: model.entityVersionHashesByName]
        model.versionIdentifiers = ["9.9"]
        #expect(model.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
    }
}
