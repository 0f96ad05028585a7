import Foundation
import Testing
@testable import ObjectGraph

/// `length` of a string in key paths, and collection operators after a
/// to-many, resolved as key-value coding resolves them on Apple's platforms
/// (KVC-01; Foundation: `NSString.length` counts UTF-16 code units,
/// `NSData.length` bytes; "Using Collection Operators" for `@count`, `@sum`…).
/// Issue 28 item 5: `name.length > 0` failed with "unknown key 'length'".
@Suite struct StringLengthKeyPathTests {
    func stack(_ type: String) throws -> ManagedObjectContext {
        Company.registerClasses()
        let context = ManagedObjectContext(coordinator: try TestStores.coordinator(ReferenceModel.make(), type: type))
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            _ = try Company.employee(context, "Ada", "Lovelace", in: sales, salary: 300)
            _ = try Company.employee(context, "Zoë", "Éclair", in: sales, salary: 200)
            _ = try Company.department(context, "Operations")
            try context.save()
        }
        return context
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func stringLengthInFetchPredicates(_ type: String) throws {
        let context = try stack(type)
        try context.performAndWait {
            func names(_ format: String, _ args: Any...) throws -> [String] {
                let request = FetchRequest(entityName: "Employee")
                request.predicate = try FetchPredicate(format: format, argumentArray: args)
                return try context.fetch(request).compactMap { try $0.value(forKey: "firstName") as? String }.sorted()
            }
            #expect(try names("firstName.length > 0") == ["Ada", "Zoë"])
            #expect(try names("lastName.length == 8") == ["Ada"])
            // UTF-16 code units, as NSString counts: "Éclair" is 6.
            #expect(try names("lastName.length == %d", 6) == ["Zoë"])
            let departments = FetchRequest(entityName: "Department")
            departments.predicate = try FetchPredicate(format: "name.length > 5 AND employees.@count == 0")
            #expect(try context.fetch(departments).map { try $0.value(forKey: "name") as? String } == ["Operations"])
            // Unsaved changes are judged in memory the same way.
            _ = try Company.employee(context, "Bo", "Li", in: nil)
            #expect(try names("lastName.length == 2") == ["Bo"])
            context.rollback()
        }
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func keyValueCodingResolvesLengthAndCollectionOperators(_ type: String) throws {
        let context = try stack(type)
        try context.performAndWait {
            let request = FetchRequest(entityName: "Department")
            request.predicate = try FetchPredicate(format: "name == 'Sales'")
            let sales = try context.fetch(request)[0]
            #expect(try sales.value(forKeyPath: "name.length") as? Int == 5)
            #expect(try sales.value(forKeyPath: "employees.@count") as? Int == 2)
            #expect(try sales.value(forKeyPath: "employees.@max.salary") as? Decimal == 300)
            let lengths = try sales.value(forKeyPath: "employees.lastName.length") as? [Any]
            #expect(Set(lengths?.compactMap { $0 as? Int } ?? []) == [8, 6])
            // Still an unknown key (KVC-03, 1550) where Foundation has none.
            let error = #expect(throws: CoreDataError.self) { try sales.value(forKeyPath: "name.width") }
            #expect(error?.code == .managedObjectValidation)
            #expect(throws: CoreDataError.self) { try sales.value(forKeyPath: "employees.@median.salary") }
            // In predicates evaluated on a plain value too.
            #expect(try FetchPredicate(format: "length == 3").evaluate(with: "abc"))
        }
    }
}
