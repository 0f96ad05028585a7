import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ManagedPropertyWrapperTests {
    class Person: ManagedObject {
        @Managed var firstName: String?
        @Managed var lastName: String?
    }
    final class Staff: Person {
        @Managed("department") var team: DepartmentMO?
        @Managed var salary: Decimal
        @Managed var directReports: Set<ManagedObject>
    }

    @Test func inheritedAndExplicitKeys() throws {
        // ACC-01, ACC-12, ACC-16, OBJ-06
        let model = ReferenceModel.make()
        model.entitiesByName["Employee"]!.managedObjectClassName = "WrapperStaff"
        ManagedObjectClassRegistry.shared.register(Staff.self, forClassName: "WrapperStaff")
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            let e = try #require(try context.insertNewObject(forEntityName: "Employee") as? Staff)
            e.firstName = "Ada"
            e.lastName = "Lovelace"
            e.team = dept
            e.salary = 12
            #expect(try e.value(forKey: "firstName") as? String == "Ada")
            #expect(try e.value(forKey: "department") as? ManagedObject === dept)
            #expect((try dept.value(forKey: "employees") as? Set<ManagedObject>) == [e])
            #expect(e.salary == 12)
            #expect(e.directReports.isEmpty)
            try context.save()
            #expect(e.changedValues().isEmpty)
        }
    }
}
