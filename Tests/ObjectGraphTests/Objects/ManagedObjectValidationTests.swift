import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ManagedObjectValidationTests {
    func model() -> ManagedObjectModel {
        let model = ReferenceModel.make()
        let dept = model.entitiesByName["Department"]!
        let code = AttributeDescription(name: "code", type: .string)
        code.regularExpression = "[A-Z]{3}"
        code.maxLength = 3
        let opened = AttributeDescription(name: "opened", type: .date)
        opened.minDate = Date(timeIntervalSince1970: 0)
        opened.maxDate = Date(timeIntervalSince1970: 1_000_000)
        dept.properties = dept.directProperties + [code, opened]
        return model
    }

    func code(_ d: ManagedObject, _ value: Any?, _ key: String) -> CoreDataError.Code? {
        var v = value
        do { try d.validateValue(&v, forKey: key); return nil } catch { return (error as? CoreDataError)?.code }
    }

    @Test func modelConstraintsUseCoreDataCodes() throws {
        // VAL-01, VAL-04, KVC-10, PROP-01, PROP-04, ATTR-09, REL-02, REL-03, CONST-VC codes 1570, 1580, 1590, 1610, 1620, 1630, 1640, 1660, 1670, 1680, ATTR-07…09
        let (_, context) = try Company.stack(model: model())
        try context.performAndWait {
            let d = try context.insertNewObject(forEntityName: "Department")
            #expect(code(d, nil, "name") == .validationMissingMandatoryProperty)
            #expect(code(d, "S", "name") == .validationStringTooShort)
            #expect(code(d, "ABCD", "code") == .validationStringTooLong)
            #expect(code(d, "abc", "code") == .validationStringPatternMatching)
            #expect(code(d, "ABC", "code") == nil)
            #expect(code(d, Decimal(-1), "budget") == .validationNumberTooSmall)
            #expect(code(d, Decimal(2_000_000_000), "budget") == .validationNumberTooLarge)
            #expect(code(d, Date(timeIntervalSince1970: -5), "opened") == .validationDateTooSoon)
            #expect(code(d, Date(timeIntervalSince1970: 2_000_000), "opened") == .validationDateTooLate)
            let many = (0..<1000).map { _ in ManagedObject(entity: context.persistentStoreCoordinator.managedObjectModel.entitiesByName["Employee"]!, insertInto: nil) }
            #expect(code(d, Set(many), "employees") == .validationRelationshipExceedsMaximumCount)
            var v: Any? = "abc"
            let error = #expect(throws: CoreDataError.self) { try d.validateValue(&v, forKey: "code") }
            #expect(error?.userInfo[CoreDataError.validationPredicateErrorKey] != nil)
        }
    }

    @Test func minimumCountIs1580() throws {
        // RD-06 (b): a non-empty optional to-many below its minimum; an empty
        // optional one is exempt (Apple's cardinality rule, ToManyCountValidationTests).
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.relationshipsByName["employees"]!.minCount = 2
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            _ = try Company.employee(context, "Ada", "Lovelace", in: d)
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationRelationshipLacksMinimumCount)
        }
    }

    @Test func customValidatorRunsAfterModelConstraints() throws {
        // VAL-03, VAL-06, VAL-08
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let e = try Company.employee(context, "Ada", "Lovelace", in: nil) as EmployeeMO
            var v: Any? = "A"
            #expect(throws: CoreDataError.self) { try e.validateValue(&v, forKey: "firstName") }
            v = "Forbidden"
            let error = #expect(throws: CoreDataError.self) { try e.validateValue(&v, forKey: "lastName") }
            #expect(error?.message.contains("Forbidden") == true)
        }
    }

    @Test func objectLevelOverridesCombineErrors() throws {
        // VAL-10, VAL-11, VAL-12, VAL-14, PROP-05, SUB-03
        final class Strict: ManagedObject {
            override func validateForInsert() throws {
                var errors: [Error] = []
                do { try super.validateForInsert() } catch { errors.append(error) }
                if (try? value(forKey: "budget")) as? Decimal == 13 {
                    errors.append(CoreDataError(.managedObjectValidation, "unlucky budget"))
                }
                if let error = CoreDataError.combining(errors) { throw error }
            }
        }
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.managedObjectClassName = "StrictDepartment"
        ManagedObjectClassRegistry.shared.register(Strict.self, forClassName: "StrictDepartment")
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let d = try context.insertNewObject(forEntityName: "Department")
            try d.setValue(Decimal(13), forKey: "budget")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationMultipleErrors)
            #expect(error?.detailedErrors.map(\.code).sorted { $0.rawValue < $1.rawValue } == [.managedObjectValidation, .validationMissingMandatoryProperty])
        }
    }

    @Test func abstractEntityCannotBeInserted() throws {
        // MOD-05, MOC-MO-03; bad input: inserting an abstract entity
        let model = ReferenceModel.make()
        let person = EntityDescription(name: "Person")
        person.isAbstract = true
        model.entities = model.entities + [person]
        let (_, context) = try Company.stack(model: model)
        context.performAndWait {
            let error = #expect(throws: CoreDataError.self) { try context.insertNewObject(forEntityName: "Person") }
            #expect(error?.message.contains("abstract") == true)
            #expect(throws: CoreDataError.self) { try context.insertNewObject(forEntityName: "Nobody") }
        }
    }

    @Test func insertingAbstractEntityDirectlyTraps() async {
        // MOD-05, OBJ-05: the initializer traps like Core Data raises
        await #expect(processExitsWith: .failure) {
            let model = ReferenceModel.make()
            model.entitiesByName["Department"]!.isAbstract = true
            let coordinator = try! PersistentStoreCoordinator(managedObjectModel: model)
            let context = ManagedObjectContext(coordinator: coordinator)
            context.performAndWait { _ = ManagedObject(entity: model.entitiesByName["Department"]!, insertInto: context) }
        }
    }

    @Test func usingAContextOffItsQueueTraps() async {
        // MOC confinement (debug builds)
        await #expect(processExitsWith: .failure) {
            let coordinator = try! PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
            let context = ManagedObjectContext(coordinator: coordinator)
            _ = try? context.insertNewObject(forEntityName: "Department")
        }
    }
}
