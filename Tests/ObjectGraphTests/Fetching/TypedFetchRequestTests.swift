import Foundation
import Testing
@testable import ObjectGraph

/// `FetchRequest<Result>` (FR-TY-01, MO-EN-02): a fetch returns `[Result]`
/// for objects of a class, object IDs, dictionaries and counts; a request
/// without a type is one for `ManagedObject`s.
@Suite struct TypedFetchRequestTests {
    static func stack() throws -> ManagedObjectContext {
        let (_, context) = try Company.stack()
        try context.performAndWait {
            _ = try Company.department(context, "Sales", budget: 1000)
            _ = try Company.department(context, "Research", budget: 2000)
            try context.save()
        }
        return context
    }

    // FR-TY-01
    @Test func aTypedRequestReturnsItsType() throws {
        let context = try Self.stack()
        try context.performAndWait {
            let untyped = FetchRequest(entityName: "Department")
            #expect(type(of: untyped) == FetchRequest<ManagedObject>.self)
            let objects: [ManagedObject] = try context.fetch(untyped)
            #expect(objects.count == 2)

            let request = FetchRequest<DepartmentMO>(entityName: "Department")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let departments: [DepartmentMO] = try context.fetch(request)
            #expect(departments.map(\.name) == ["Research", "Sales"])
            // A copy keeps the type and the criteria.
            let copy: FetchRequest<DepartmentMO> = request.copy()
            #expect(try context.fetch(copy).map(\.name) == ["Research", "Sales"])

            // The erased spelling of NSFetchRequest<NSFetchRequestResult>.
            let erased = FetchRequest<any FetchRequestResult>(entityName: "Department")
            #expect(try context.fetch(erased).count == 2)
        }
    }

    // MO-EN-02: the class's own request is typed by it.
    @Test func aClassesFetchRequestIsTypedByIt() throws {
        let context = try Self.stack()
        try context.performAndWait {
            let request = DepartmentMO.fetchRequest()
            #expect(type(of: request) == FetchRequest<DepartmentMO>.self)
            request.predicate = try FetchPredicate(format: "budget > 1500")
            let found: [DepartmentMO] = try context.fetch(request)
            #expect(found.map(\.name) == ["Research"])
        }
    }

    // FR-TY-01: object IDs, dictionaries and counts, by the result type.
    @Test func otherResultTypesAreTypedToo() throws {
        let context = try Self.stack()
        try context.performAndWait {
            let ids = try context.fetch(FetchRequest<ManagedObjectID>(entityName: "Department", resultType: .managedObjectID))
            #expect(ids.count == 2 && ids.allSatisfy { $0.entityName == "Department" })

            let rows = FetchRequest<NSDictionary>(entityName: "Department", resultType: .dictionary)
            rows.propertiesToFetch = ["name"]
            rows.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let dictionaries = try context.fetch(rows)
            #expect(dictionaries.compactMap { $0["name"] as? String } == ["Research", "Sales"])

            let swiftRows = FetchRequest<[String: Any]>(entityName: "Department", resultType: .dictionary)
            swiftRows.propertiesToFetch = ["name"]
            #expect(try context.fetch(swiftRows).count == 2)

            let count = try context.fetch(FetchRequest<NSNumber>(entityName: "Department", resultType: .count))
            #expect(count.map(\.intValue) == [2])
        }
    }

    /// A result that is not of the request's type is an error naming both.
    @Test func aResultOfAnotherTypeIsAnError() throws {
        let context = try Self.stack()
        context.performAndWait {
            let wrong = FetchRequest<EmployeeMO>(entityName: "Department")
            let error = #expect(throws: CoreDataError.self) { try context.fetch(wrong) }
            #expect(error?.code == .coreData)
            #expect(error?.message.contains("FetchRequest<EmployeeMO> for entity Department fetched a DepartmentMO") == true)
        }
    }
}
