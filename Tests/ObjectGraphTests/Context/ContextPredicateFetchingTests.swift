import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextPredicateFetchingTests {
    func seed(_ context: ManagedObjectContext) throws {
        let sales = try Company.department(context, "Sales")
        let research = try Company.department(context, "Research")
        let grace = try Company.employee(context, "Grace", "Hopper", in: research, salary: 900)
        for (i, name) in ["Ann", "Ben", "Cat"].enumerated() {
            try Company.employee(context, name, "Smith", in: sales, salary: Decimal(100 * (i + 1))).manager = grace
        }
        try context.save()
    }

    @Test func predicatesSortAndKeyPathsAcrossRelationships() throws {
        // MOC-FE-01, MOC-FE-03, MOC-FE-05, FR-06
        let (_, context) = try Company.stack()
        try context.performAndWait {
            try seed(context)
            let request = Company.request("Employee", where: "department.name == %@ AND salary >= 200", "Sales")
            request.sortDescriptors = [FetchSortDescriptor(key: "salary", ascending: false)]
            let names = try context.fetch(request).map { try $0.value(forKey: "firstName") as? String }
            #expect(names == ["Cat", "Ben"])
            let depts = try context.fetch(Company.request("Department", where: "ANY employees.salary > 250", sortedBy: "name"))
            #expect(try depts.map { try $0.value(forKey: "name") as? String } == ["Research", "Sales"])
            let managed = try context.count(for: Company.request("Employee", where: "manager.firstName == 'Grace'"))
            #expect(managed == 3)
            // In-memory values win, both ways (MOC-FE-05).
            let ann = try #require(try context.fetch(Company.request("Employee", where: "firstName == 'Ann'")).first)
            try ann.setValue(Decimal(5000), forKey: "salary")
            #expect(try context.count(for: Company.request("Employee", where: "salary > 1000")) == 1)
            #expect(try context.count(for: Company.request("Employee", where: "salary < 150")) == 0)
        }
    }

    @Test func unknownKeyInPredicateFails() throws {
        let (_, context) = try Company.stack()
        try context.performAndWait {
            try seed(context)
            #expect(throws: (any Error).self) { try context.fetch(Company.request("Employee", where: "shoeSize > 3")) }
        }
    }

    @Test func templatesWithSubstitutionVariables() throws {
        // MOM-FT-03 (a)(b)(c)(e)(f)
        let (coordinator, context) = try Company.stack()
        let model = coordinator.managedObjectModel
        try context.performAndWait {
            try seed(context)
            let rich = try #require(try model.fetchRequestFromTemplate(withName: "EmployeesEarningMoreThan", substitutionVariables: ["MIN": Decimal(250), "UNUSED": 1]))
            #expect(try context.count(for: rich) == 2)
            let all = try #require(try model.fetchRequestFromTemplate(withName: "EmployeesEarningMoreThan", substitutionVariables: ["MIN": Decimal(5)]))
            #expect(try context.count(for: all) == 4)
            #expect(model.fetchRequestTemplate(forName: "EmployeesEarningMoreThan")?.predicate?.predicateFormat == "salary > $MIN")
            #expect(throws: (any Error).self) { try model.fetchRequestFromTemplate(withName: "EmployeesEarningMoreThan", substitutionVariables: [:]) }
            #expect(try model.fetchRequestFromTemplate(withName: "Nope", substitutionVariables: [:]) == nil)
        }
    }

    @Test func validationPredicatesReportWarningAndPredicate() throws {
        // VAL-18 (predicate key), PROP validation predicates
        let model = ReferenceModel.make()
        let lastName = model.entitiesByName["Employee"]!.attributesByName["lastName"]!
        lastName.setValidationPredicates(["SELF BEGINSWITH[c] 's' OR SELF BEGINSWITH 'H'"], withValidationWarnings: ["Last names start with S or H here"])
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let dept = try Company.department(context, "Sales")
            _ = try Company.employee(context, "Ann", "smith", in: dept)
            try context.save()
            _ = try Company.employee(context, "Bob", "Jones", in: dept)
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .managedObjectValidation)
            #expect(error?.message == "Last names start with S or H here")
            #expect(error?.userInfo[CoreDataError.validationPredicateErrorKey] is FetchPredicate)
        }
    }

    @Test func fetchExpressionRunsInTheContext() throws {
        // FE via FetchRequestExecuting: the context runs FETCH(...) requests
        let (_, context) = try Company.stack()
        try context.performAndWait {
            try seed(context)
            let executor: FetchRequestExecuting = context
            #expect(try executor.count(for: Company.request("Department")) == 2)
            #expect(try executor.execute(Company.request("Department")).count == 2)
            #expect(throws: CoreDataError.self) { try executor.execute("not a request") }
        }
    }
}
