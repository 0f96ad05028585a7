import Foundation
import Testing
@testable import ObjectGraph

@Suite struct RowPredicateFilterTests {
    static let predicates = [
        "salary > 250", "salary <= 250 OR employeeID == 3", "firstName BEGINSWITH[c] 'a'", "NOT (lastName == nil)",
        "lastName == nil", "employeeID IN {1, 2, 5}", "salary BETWEEN {100, 400}", "firstName LIKE '*n*' AND salary != 300",
        "TRUEPREDICATE", "FALSEPREDICATE",
    ]

    func seed(_ context: ManagedObjectContext) throws -> [ManagedObjectID] {
        let dept = try Company.department(context, "Sales")
        var ids: [ManagedObjectID] = []
        for i in 0..<12 {
            let e = try Company.employee(context, ["Ann", "ben", "Cat", "Dan"][i % 4] + "\(i)", "Smith", in: dept, salary: Decimal(50 * i), id: Int32(i))
            ids.append(e.objectID)
        }
        try context.save()
        return ids
    }

    @Test(arguments: predicates)
    func rowAndObjectEvaluationAgree(format: String) throws {
        let model = ReferenceModel.make()
        model.entitiesByName["Employee"]!.attributesByName["lastName"]!.isOptional = true
        let (coordinator, writer) = try Company.stack(model: model)
        try writer.performAndWait {
            _ = try seed(writer)
            // Some rows without a last name (absent from the stored row).
            for e in try writer.fetch(Company.request("Employee", where: "employeeID < 4")) { try e.setValue(nil, forKey: "lastName") }
            try writer.save()
        }
        let predicate = try FetchPredicate(format: format)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            #expect(RowPredicateFilter(predicate, entity: model.entitiesByName["Employee"]!) != nil)
            let request = FetchRequest(entityName: "Employee")
            request.predicate = predicate
            let viaRows = Set(try context.fetch(request).map(\.objectID))
            let all = try context.fetch(FetchRequest(entityName: "Employee"))
            let viaObjects = Set(try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            #expect(viaRows == viaObjects)
        }
    }

    @Test func nonMatchingRowsMakeNoObjects() throws {
        let (coordinator, writer) = try Company.stack()
        try writer.performAndWait { _ = try seed(writer) }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let found = try context.fetch(Company.request("Employee", where: "employeeID == 7"))
            #expect(found.count == 1)
            #expect(found[0].isFault)                      // matched on its row, not fired
            #expect(context.registeredObjects.count == 1)  // no fault for the other rows
        }
    }

    @Test func relationshipAndObjectPredicatesUseObjects() throws {
        let model = ReferenceModel.make()
        let employee = model.entitiesByName["Employee"]!
        #expect(RowPredicateFilter(try FetchPredicate(format: "department.name == 'x'"), entity: employee) == nil)
        #expect(RowPredicateFilter(try FetchPredicate(format: "SELF == %@", NSObject()), entity: employee) == nil)
        #expect(RowPredicateFilter(try FetchPredicate(format: "salary > $MIN"), entity: employee) == nil)
        #expect(RowPredicateFilter(try FetchPredicate(format: "ANY directReports.salary > 1"), entity: employee) == nil)
    }
}
