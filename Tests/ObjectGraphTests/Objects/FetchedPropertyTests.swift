import Foundation
import Testing
@testable import ObjectGraph

@Suite struct FetchedPropertyTests {
    /// Department gets `wellPaid`: its employees earning more than 150 whose
    /// last name is not the property's userInfo "exclude", by first name.
    static func model() -> ManagedObjectModel {
        let model = ReferenceModel.make()
        let request = FetchRequest(entityName: "Employee")
        request.predicate = try! FetchPredicate(format: "department == $FETCH_SOURCE AND salary > 150 AND lastName != $FETCHED_PROPERTY.userInfo.exclude")
        request.sortDescriptors = [FetchSortDescriptor(key: "firstName")]
        let wellPaid = FetchedPropertyDescription(name: "wellPaid", fetchRequest: request)
        wellPaid.userInfo = ["exclude": "Dd"]
        let dept = model.entitiesByName["Department"]!
        dept.properties = dept.directProperties + [wellPaid]
        return model
    }

    @Test func lazyCachedSortedAndRefreshed() throws {
        // FP-01, FP-02, FP-03, FP-04, FP-05, FP-06, FP-07, FP-08
        let (_, context) = try Company.stack(model: Self.model())
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let other = try Company.department(context, "Other")
            _ = try Company.employee(context, "Cleo", "Aa", in: sales, salary: 300)
            _ = try Company.employee(context, "Ada", "Bb", in: sales, salary: 200)
            _ = try Company.employee(context, "Bob", "Cc", in: sales, salary: 100)
            _ = try Company.employee(context, "Dan", "Dd", in: other, salary: 900)
            try context.save()
            let value = try #require(try sales.value(forKey: "wellPaid") as? [ManagedObject])
            #expect(try value.map { try $0.value(forKey: "firstName") as? String } == ["Ada", "Cleo"])
            // Static until refreshed.
            _ = try Company.employee(context, "Abe", "Ee", in: sales, salary: 500)
            #expect((try sales.value(forKey: "wellPaid") as? [ManagedObject])?.count == 2)
            context.refresh(sales, mergeChanges: true)
            #expect((try sales.value(forKey: "wellPaid") as? [ManagedObject])?.count == 3)
            // Read-only; never stored.
            #expect(throws: CoreDataError.self) { try sales.setValue([], forKey: "wellPaid") }
            #expect(throws: CoreDataError.self) { try sales.mutableSetValue(forKey: "wellPaid") }
            #expect(context.storedValues(of: sales, { $0.objectID })["wellPaid"] == nil)
            #expect(sales.layout.slotIndex["wellPaid"] == nil)
        }
    }
}
