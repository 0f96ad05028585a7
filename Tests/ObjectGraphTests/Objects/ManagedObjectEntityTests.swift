import Foundation
import Testing
@testable import ObjectGraph

/// `entity()` and `fetchRequest()` on a class (MO-EN-01, MO-EN-02) and the
/// context's `userInfo` (MOC-UI-01).
@Suite struct ManagedObjectEntityTests {
    /// A class of its own, registered under an entity name it does not
    /// share, so the lookup cannot fall back on the name.
    final class Division: ManagedObject {
        @Managed var name: String?
    }

    static func model() -> ManagedObjectModel {
        let entity = EntityDescription(name: "OrgUnit")
        entity.managedObjectClassName = "DivisionForEntityTests"
        entity.properties = [AttributeDescription(name: "name", type: .string)]
        let model = ManagedObjectModel()
        model.entities = [entity]
        return model
    }

    // MO-EN-01, MO-EN-02
    @Test func aClassFindsItsEntityInTheModelInUse() throws {
        ManagedObjectClassRegistry.shared.register(Division.self, forClassName: "DivisionForEntityTests")
        let model = Self.model()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
        #expect(Division.entity() === model.entitiesByName["OrgUnit"])
        let request = Division.fetchRequest()
        #expect(request.entityName == "OrgUnit" && request.entity === model.entitiesByName["OrgUnit"])
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let division = try #require(try context.insertNewObject(forEntityName: "OrgUnit") as? Division)
            division.name = "North"
            #expect(try context.fetch(Division.fetchRequest(), as: Division.self).map(\.name) == ["North"])
        }
        // Found by the class registered for it, then by name (DepartmentMO is
        // registered for "Department" in the reference model).
        let (reference, _) = try Company.stack()
        // Other tests make reference models at the same time: any of them may be newest.
        #expect(DepartmentMO.entity().name == "Department")
        #expect(reference.managedObjectModel.entitiesByName["Department"] != nil)
        withExtendedLifetime((coordinator, reference)) {}
    }

    // MOC-UI-01
    @Test func aContextKeepsTheAppsValues() throws {
        let (_, context) = try Company.stack()
        #expect(context.userInfo.isEmpty)
        context.userInfo["importBatch"] = 12
        #expect(context.userInfo["importBatch"] as? Int == 12)
    }

    // MO-EN-03: init(context:) makes an object of the class's entity in
    // that context's model and inserts it.
    @Test func initWithContextInsertsAnObjectOfTheClassesEntity() throws {
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let department = DepartmentMO(context: context)
            department.name = "Sales"
            #expect(department.entity.name == "Department" && department.managedObjectContext === context)
            #expect(context.insertedObjects.contains(department))
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 1)
        }
    }

    // MO-EN-04: the static spellings of older Core Data code.
    @Test func entityDescriptionsStaticLookupAndInsert() throws {
        let (_, context) = try Company.stack()
        context.performAndWait {
            #expect(EntityDescription.entity(forEntityName: "Employee", in: context)?.name == "Employee")
            #expect(EntityDescription.entity(forEntityName: "Nope", in: context) == nil)
            let employee = EntityDescription.insertNewObject(forEntityName: "Employee", into: context)
            #expect(employee is EmployeeMO && context.insertedObjects.contains(employee))
        }
    }
}

