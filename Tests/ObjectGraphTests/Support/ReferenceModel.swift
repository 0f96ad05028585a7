import Foundation
@testable import ObjectGraph

/// The Employee/Department model of the reference (managed-objects.md 17.1),
/// built in code exactly as `examples/Company.xcdatamodeld` declares it.
enum ReferenceModel {
    static func make() -> ManagedObjectModel {
        let department = EntityDescription(name: "Department")
        department.managedObjectClassName = "Department"
        let employee = EntityDescription(name: "Employee")
        employee.managedObjectClassName = "Employee"

        let budget = AttributeDescription(name: "budget", type: .decimal)
        budget.isOptional = false
        budget.minValue = 0
        budget.maxValue = 1_000_000_000
        budget.defaultValue = Decimal(0)
        let departmentName = AttributeDescription(name: "name", type: .string)
        departmentName.isOptional = false
        departmentName.minLength = 2
        departmentName.isIndexed = true
        let employees = RelationshipDescription(name: "employees", destination: employee, toMany: true)
        employees.maxCount = 999
        employees.deleteRule = .deny

        let employeeID = AttributeDescription(name: "employeeID", type: .integer32)
        employeeID.defaultValue = Int32(0)
        employeeID.usesScalarValueType = true
        let firstName = AttributeDescription(name: "firstName", type: .string)
        firstName.isOptional = false
        firstName.minLength = 2
        let lastName = AttributeDescription(name: "lastName", type: .string)
        lastName.isOptional = false
        lastName.minLength = 2
        let salary = AttributeDescription(name: "salary", type: .decimal)
        salary.isOptional = false
        salary.minValue = 0
        salary.maxValue = 1_000_000
        salary.defaultValue = Decimal(0)
        let departmentRel = RelationshipDescription(name: "department", destination: department, toMany: false)
        departmentRel.isOptional = false
        let directReports = RelationshipDescription(name: "directReports", destination: employee, toMany: true)
        let manager = RelationshipDescription(name: "manager", destination: employee, toMany: false)

        employees.inverseRelationship = departmentRel
        departmentRel.inverseRelationship = employees
        directReports.inverseRelationship = manager
        manager.inverseRelationship = directReports

        department.properties = [budget, departmentName, employees]
        employee.properties = [employeeID, firstName, lastName, salary, departmentRel, directReports, manager]

        let model = ManagedObjectModel()
        model.entities = [department, employee]
        model.versionIdentifiers = ["1.0"]
        let template = FetchRequest(entityName: "Employee")
        template.predicate = try! FetchPredicate(format: "salary > $MIN")
        model.setFetchRequestTemplate(template, forName: "EmployeesEarningMoreThan")
        model.setEntities([department, employee], forConfiguration: "Directory")
        return model
    }
}
