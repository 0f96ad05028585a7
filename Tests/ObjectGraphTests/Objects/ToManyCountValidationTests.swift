import Foundation
import Testing
@testable import ObjectGraph

/// Counts of to-many relationships at save (RD-04, RD-06, CONST-VC-04/05),
/// as Apple's NSRelationshipDescription documents them ("Cardinality"): "The
/// counts are only enforced if the relationship value in the containing
/// object is not nil. That is, optional relationships may have zero objects
/// in the relationship, which might be less than the minimum count." A
/// to-many's value is a set, never nil, so being non-optional asks for no
/// member by itself: only `minCount` does.
@Suite struct ToManyCountValidationTests {
    /// Saves a department with `members` employees, its `employees`
    /// relationship set up as given; nil when the save succeeds, else the
    /// code (or the 1560's detailed codes).
    func saveCode(_ type: String, optional: Bool, minCount: Int, maxCount: Int = 0, members: Int) throws -> [CoreDataError.Code] {
        let model = ReferenceModel.make()
        let employees = model.entitiesByName["Department"]!.relationshipsByName["employees"]!
        employees.isOptional = optional
        employees.minCount = minCount
        employees.maxCount = maxCount
        Company.registerClasses()
        let context = ManagedObjectContext(coordinator: try TestStores.coordinator(model, type: type))
        return try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            for i in 0..<members { _ = try Company.employee(context, "Em\(i)", "Ployee", in: sales) }
            do {
                try context.save()
                return []
            } catch let error as CoreDataError {
                return error.code == .validationMultipleErrors ? error.detailedErrors.map(\.code) : [error.code]
            }
        }
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func emptyNonOptionalToManyWithMinimumZeroSaves(_ type: String) throws {
        // Issue 28 item 2 ("1560 … must have at least one member" on Apple-valid saves); RD-06 decision.
        #expect(try saveCode(type, optional: false, minCount: 0, members: 0) == [])
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func countsFollowAppleCardinalityRule(_ type: String) throws {
        // RD-06 (a): optional, min 2, no member: saves (zero objects below the minimum).
        #expect(try saveCode(type, optional: true, minCount: 2, members: 0) == [])
        // RD-06 (b): the same with one member: 1580.
        #expect(try saveCode(type, optional: true, minCount: 2, members: 1) == [.validationRelationshipLacksMinimumCount])
        // RD-06 (c): max 3 with 4 members: 1590.
        #expect(try saveCode(type, optional: true, minCount: 0, maxCount: 3, members: 4) == [.validationRelationshipExceedsMaximumCount])
        // RD-06 (d): non-optional, min 2, no member: 1580 (not 1570: the set is there, too small).
        #expect(try saveCode(type, optional: false, minCount: 2, members: 0) == [.validationRelationshipLacksMinimumCount])
        #expect(try saveCode(type, optional: false, minCount: 1, members: 0) == [.validationRelationshipLacksMinimumCount])
        #expect(try saveCode(type, optional: false, minCount: 1, members: 1) == [])
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func emptyNonOptionalToManyStaysValidAfterFetch(_ type: String) throws {
        // The same rule for an update of a fetched object, whose to-many is loaded empty from the store.
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.relationshipsByName["employees"]!.isOptional = false
        Company.registerClasses()
        let coordinator = try TestStores.coordinator(model, type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            _ = try Company.department(context, "Sales")
            try context.save()
        }
        let other = ManagedObjectContext(coordinator: coordinator)
        try other.performAndWait {
            let sales = try other.fetch(FetchRequest(entityName: "Department"))[0]
            #expect((try sales.value(forKey: "employees") as? Set<ManagedObject>)?.isEmpty == true)
            try sales.setValue(Decimal(5), forKey: "budget")
            try other.save()
        }
    }
}
