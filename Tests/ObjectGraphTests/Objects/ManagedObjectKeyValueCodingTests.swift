import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ManagedObjectKeyValueCodingTests {
    @Test func genericInstanceReadsAndWritesByKey() throws {
        // KVC-01, KVC-02, ACC-02, OBJ-03, MOD-01, MOD-04, MOD-09, ATTR-10, OBJ-01
        let model = ReferenceModel.make()
        for entity in model.entities { entity.managedObjectClassName = "NSManagedObject" }
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let dept = try context.insertNewObject(forEntityName: "Department")
            #expect(type(of: dept) == ManagedObject.self)
            try dept.setValue("Sales", forKey: "name")
            #expect(try dept.value(forKey: "name") as? String == "Sales")
            #expect(try dept.value(forKey: "budget") as? Decimal == 0) // ATTR-06 default
        }
    }

    @Test func subclassIsInstantiatedForEntityClassName() throws {
        // OBJ-06, OBJ-11, ACC-01, ACC-12
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let e = try context.insertNewObject(forEntityName: "Employee")
            #expect(e is EmployeeMO)
            let employee = e as! EmployeeMO
            employee.firstName = "Ada"
            #expect(try employee.value(forKey: "firstName") as? String == "Ada")
            try employee.setValue("Lovelace", forKey: "lastName")
            #expect(employee.lastName == "Lovelace")
        }
    }

    @Test func registryStripsLeadingDotAndModule() {
        // OBJ-11: Xcode's module-relative class names
        let registry = ManagedObjectClassRegistry()
        registry.register(EmployeeMO.self, forClassName: "Employee")
        let entity = EntityDescription(name: "Employee")
        entity.managedObjectClassName = ".Employee"
        #expect(registry.objectClass(for: entity) == EmployeeMO.self)
        entity.managedObjectClassName = "MyApp.Employee"
        #expect(registry.objectClass(for: entity) == EmployeeMO.self)
        entity.managedObjectClassName = "Unknown"
        #expect(registry.objectClass(for: entity) == ManagedObject.self)
    }

    @Test func unknownKeyThrowsNamingEntityAndKey() throws {
        // KVC-03, TM-02, PRIM-03
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            let error = #expect(throws: CoreDataError.self) { try dept.value(forKey: "colour") }
            #expect(error?.message.contains("Department") == true)
            #expect(error?.message.contains("colour") == true)
            #expect(throws: CoreDataError.self) { try dept.setValue(1, forKey: "colour") }
            #expect(throws: CoreDataError.self) { try dept.mutableSetValue(forKey: "colour") }
            #expect(throws: CoreDataError.self) { try dept.primitiveValue(forKey: "colour") }
            #expect(throws: CoreDataError.self) { try dept.setPrimitiveValue(1, forKey: "colour") }
        }
    }

    @Test func wrongTypeThrowsAndExactNumbersAreConverted() throws {
        // KVC-06, VAL-02, ATTR-01, ATTR-02, KVC-09 (public final); bad input: wrong Swift type
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let e = try Company.employee(context, "Ada", "Lovelace", in: nil)
            let error = #expect(throws: CoreDataError.self) { try e.setValue("seven", forKey: "employeeID") }
            #expect(error?.message.contains("Employee.employeeID") == true)
            #expect(throws: CoreDataError.self) { try e.setValue(Int(Int64(Int32.max) + 1), forKey: "employeeID") }
            try e.setValue(7, forKey: "employeeID")
            #expect(e.employeeID == 7)
            let dept = try Company.department(context, "Sales")
            #expect(throws: CoreDataError.self) { try e.setValue(e, forKey: "department") }   // an Employee is not a Department
            #expect(throws: CoreDataError.self) { try dept.setValue("x", forKey: "employees") }
        }
    }

    @Test func inverseRelationshipsKeptInStep() throws {
        // REL-05, REL-07, REL-08, REL-09, REL-11, KVC-02, TM-01, ACC-03, ACC-10, OBJ-02
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let research = try Company.department(context, "Research")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            #expect(sales.employees == [ada])
            ada.department = research
            #expect(sales.employees.isEmpty)
            #expect(research.employees == [ada])
            let bob = try Company.employee(context, "Bob", "Smith", in: nil)
            try research.mutableSetValue(forKey: "employees").insert(bob)
            #expect(bob.department === research)
            try research.mutableSetValue(forKey: "employees").remove(ada)
            #expect(ada.department == nil)
            // to-one ↔ to-many on the same entity
            bob.manager = ada
            #expect(ada.directReports == [bob])
            research.employees = [ada]
            #expect(bob.department == nil)
            #expect(ada.department === research)
        }
    }

    @Test func primitiveAccessDoesNotNotifyTrackOrMaintainInverse() throws {
        // PRIM-01, PRIM-02, PRIM-05, KVO-07
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let other = try Company.department(context, "Other")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: other)
            try context.save()
            var notes = 0
            let token = sales.addObserver(forKey: "name") { _ in notes += 1 }
            try sales.setPrimitiveValue("Y", forKey: "name")
            #expect(notes == 0)
            #expect(!sales.isUpdated)
            sales.name = "X"
            #expect(notes == 1)
            #expect(sales.isUpdated)
            try ada.setPrimitiveValue(sales, forKey: "department")
            #expect(try sales.primitiveValue(forKey: "employees") as? Set<ManagedObject> == [])
            token.cancel()
        }
    }

    @Test func keyPathsAndBulkAccess() throws {
        // KVC-08, FLT-04, CPY-02
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            _ = try Company.employee(context, "Bob", "Smith", in: sales)
            #expect(try ada.value(forKeyPath: "department.name") as? String == "Sales")
            let names = try sales.value(forKeyPath: "employees.firstName") as? [Any]
            #expect(Set(names?.compactMap { $0 as? String } ?? []) == ["Ada", "Bob"])
            try ada.setValue("Marketing", forKeyPath: "department.name")
            #expect(sales.name == "Marketing")
            let copy = try context.insertNewObject(forEntityName: "Employee")
            try copy.setValuesForKeys(try ada.dictionaryWithValues(forKeys: ["firstName", "lastName", "salary"]))
            #expect(try copy.value(forKey: "lastName") as? String == "Lovelace")
            #expect(try copy.value(forKey: "department") == nil)
        }
    }
}
