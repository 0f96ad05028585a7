import Foundation
import Testing
@testable import ObjectGraph

/// Dictionary results with expression descriptions, grouping, having and
/// distinct rows, and counts (FR-11c, FR-13, FR-17, FR-18, FR-19, MOC-FE-08,
/// XD-01, XD-04, XD-05), on the in-memory store (computed from objects) and
/// on SQLite (computed in SQL when no unsaved change can alter the answer).
@Suite struct ContextDictionaryFetchingTests {
    enum StoreKind: CaseIterable, CustomStringConvertible {
        case inMemory, sqlite
        var description: String { self == .inMemory ? "in-memory" : "SQLite" }
    }

    /// Department(name, budget); Employee(name, salary, rating, hired, city,
    /// department ->, skills ->>); Skill(title, owner ->).
    static func makeModel() -> ManagedObjectModel {
        let model = ManagedObjectModel()
        let department = EntityDescription(name: "Department")
        let employee = EntityDescription(name: "Employee")
        let skill = EntityDescription(name: "Skill")
        let works = RelationshipDescription(name: "department", destination: department)
        let staff = RelationshipDescription(name: "staff", destination: employee, toMany: true)
        works.inverseRelationship = staff
        staff.inverseRelationship = works
        let skills = RelationshipDescription(name: "skills", destination: skill, toMany: true)
        let owner = RelationshipDescription(name: "owner", destination: employee)
        skills.inverseRelationship = owner
        owner.inverseRelationship = skills
        department.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "budget", type: .integer64), staff]
        employee.properties = [
            AttributeDescription(name: "name", type: .string), AttributeDescription(name: "salary", type: .integer64),
            AttributeDescription(name: "rating", type: .double), AttributeDescription(name: "hired", type: .date),
            AttributeDescription(name: "city", type: .string), works, skills,
        ]
        skill.properties = [AttributeDescription(name: "title", type: .string), owner]
        model.entities = [department, employee, skill]
        return model
    }

    struct Stack {
        let coordinator: PersistentStoreCoordinator
        let context: ManagedObjectContext
        let store: PersistentStore
        var departments: [String: ManagedObjectID] = [:]
    }

    /// Sales: Ann 1000 (Oslo), Bob 2000 (Oslo), Cid 3000 (Rome); Ops: Dee 500
    /// (Rome), Eve without salary or city; Fay without department, 700 (Oslo).
    static func stack(_ kind: StoreKind) throws -> Stack {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: makeModel())
        let store = kind == .inMemory
            ? try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
            : try coordinator.addPersistentStore(ofType: SQLiteStore.storeType, at: try TestPaths.temporaryDirectory().appendingPathComponent("Dict.sqlite"))
        let context = ManagedObjectContext(coordinator: coordinator)
        var stack = Stack(coordinator: coordinator, context: context, store: store)
        try context.performAndWait {
            var departments: [String: ManagedObject] = [:]
            for (name, budget) in [("Sales", Int64(9000)), ("Ops", Int64(4000))] {
                let d = try context.insertNewObject(forEntityName: "Department")
                try d.setValue(name, forKey: "name")
                try d.setValue(budget, forKey: "budget")
                departments[name] = d
            }
            let people: [(String, Int64?, Double, String?, String?)] = [
                ("Ann", 1000, 4.5, "Oslo", "Sales"), ("Bob", 2000, 3.0, "Oslo", "Sales"), ("Cid", 3000, 4.0, "Rome", "Sales"),
                ("Dee", 500, 2.5, "Rome", "Ops"), ("Eve", nil, 5.0, nil, "Ops"), ("Fay", 700, 1.0, "Oslo", nil),
            ]
            for (i, (name, salary, rating, city, department)) in people.enumerated() {
                let e = try context.insertNewObject(forEntityName: "Employee")
                try e.setValue(name, forKey: "name")
                try e.setValue(salary, forKey: "salary")
                try e.setValue(rating, forKey: "rating")
                try e.setValue(Date(timeIntervalSinceReferenceDate: Double(i) * 86_400), forKey: "hired")
                try e.setValue(city, forKey: "city")
                try e.setValue(department.flatMap { departments[$0] }, forKey: "department")
            }
            try context.save()
            stack.departments = departments.mapValues(\.objectID)
        }
        return stack
    }

    static func aggregate(_ name: String, _ format: String, _ type: ExpressionResultType = .undefined) throws -> ExpressionDescription {
        ExpressionDescription(name: name, expression: try FetchExpression(format: format), expressionResultType: type)
    }

    static func dictionaries(_ context: ManagedObjectContext, _ request: AnyFetchRequest) throws -> [[String: Any]] {
        try context.performAndWait { try context.execute(request) as! [[String: Any]] }
    }

    /// The same request with the store's SQL turned off must give the same rows.
    static func checkInMemoryAgrees(_ stack: Stack, _ request: AnyFetchRequest, _ rows: [[String: Any]]) throws {
        let other = ManagedObjectContext(coordinator: stack.coordinator)
        other.allowsFetchPushdown = false
        let expected = try dictionaries(other, request)
        #expect(SQLiteDictionaryFetchDifferentialTests.same(rows, expected), "pushdown \(rows) vs in memory \(expected)")
    }

    @Test(arguments: StoreKind.allCases) func aggregatesWithoutGroupingGiveOneRow(_ kind: StoreKind) throws {
        // XD-01, XD-04 (an Integer64 result is an Int64), XD-05 (keyed by name)
        let stack = try Self.stack(kind)
        let request = FetchRequest(entityName: "Employee")
        request.resultType = .dictionary
        request.propertiesToFetch = [
            try Self.aggregate("total", "sum:(salary)", .integer64), try Self.aggregate("mean", "average:(salary)", .double),
            try Self.aggregate("least", "min:(salary)"), try Self.aggregate("most", "max:(hired)", .date),
            try Self.aggregate("paid", "count:(salary)", .integer64), try Self.aggregate("first", "min:(name)", .string),
            try Self.aggregate("budgets", "sum:(department.budget)", .integer64),
        ]
        let rows = try Self.dictionaries(stack.context, request)
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row["total"] as? Int64 == 7200)
        #expect(row["mean"] as? Double == 1440)
        #expect(row["least"] as? Int == 500)
        #expect(row["most"] as? Date == Date(timeIntervalSinceReferenceDate: 5 * 86_400))
        #expect(row["paid"] as? Int64 == 5, "count: counts non-nil values")
        #expect(row["first"] as? String == "Ann")
        #expect(row["budgets"] as? Int64 == Int64(35_000))
        #expect(row.count == 7)
        try Self.checkInMemoryAgrees(stack, request, rows)
        if kind == .sqlite {
            let inSQL = try #require(try stack.store.fetchDictionaries(request), "aggregates run in SQL")
            #expect(SQLiteDictionaryFetchDifferentialTests.same(inSQL, rows))
        }

        // Over no objects: sum and count are 0, the others nil and left out.
        request.predicate = .falsePredicate
        let empty = try Self.dictionaries(stack.context, request)
        #expect(empty.count == 1)
        #expect(empty.first?["total"] as? Int64 == 0)
        #expect(empty.first?["paid"] as? Int64 == 0)
        #expect(empty.first?.keys.sorted() == ["budgets", "paid", "total"])
        try Self.checkInMemoryAgrees(stack, request, empty)
    }

    @Test(arguments: StoreKind.allCases) func groupByGivesOneRowPerGroupWithRelationshipsAsIDs(_ kind: StoreKind) throws {
        let stack = try Self.stack(kind)
        let request = FetchRequest(entityName: "Employee")
        request.resultType = .dictionary
        request.propertiesToFetch = ["department", try Self.aggregate("total", "sum:(salary)", .integer64), try Self.aggregate("n", "count:(name)")]
        request.propertiesToGroupBy = ["department"]
        request.sortDescriptors = [FetchSortDescriptor(key: "department.name")]
        let rows = try Self.dictionaries(stack.context, request)
        // nil department first ascending (Fay), then Ops, then Sales.
        #expect(rows.count == 3)
        #expect(rows[0]["department"] == nil)
        #expect(rows[0]["total"] as? Int64 == 700)
        #expect(rows[1]["department"] as? ManagedObjectID == stack.departments["Ops"])
        #expect(rows[1]["total"] as? Int64 == 500)
        #expect(rows[1]["n"] as? Int == 2)
        #expect(rows[2]["department"] as? ManagedObjectID == stack.departments["Sales"])
        #expect(rows[2]["total"] as? Int64 == 6000)
        try Self.checkInMemoryAgrees(stack, request, rows)

        // A key path through the to-one, given as a property name and as an expression description.
        let byName = FetchRequest(entityName: "Employee")
        byName.resultType = .dictionary
        byName.propertiesToFetch = ["department.name", try Self.aggregate("best", "max:(rating)", .double)]
        byName.propertiesToGroupBy = [ExpressionDescription(name: "d", expression: .keyPath(["department", "name"]))]
        byName.sortDescriptors = [FetchSortDescriptor(key: "department.name", ascending: false)]
        let named = try Self.dictionaries(stack.context, byName)
        #expect(named.map { $0["department.name"] as? String } == ["Sales", "Ops", nil])
        #expect(named.map { $0["best"] as? Double } == [4.5, 5.0, 1.0])
        try Self.checkInMemoryAgrees(stack, byName, named)
    }

    @Test(arguments: StoreKind.allCases) func havingFiltersGroups(_ kind: StoreKind) throws {
        let stack = try Self.stack(kind)
        let request = FetchRequest(entityName: "Employee")
        request.resultType = .dictionary
        let city = try #require(stack.coordinator.managedObjectModel.entitiesByName["Employee"]?.propertiesByName["city"])
        request.propertiesToFetch = [city, try Self.aggregate("total", "sum:(salary)", .integer64)]
        request.propertiesToGroupBy = [city]
        request.havingPredicate = try FetchPredicate(format: "total > 1000")
        request.sortDescriptors = [FetchSortDescriptor(key: "city")]
        let rows = try Self.dictionaries(stack.context, request)
        #expect(rows.map { $0["city"] as? String } == ["Oslo", "Rome"])
        #expect(rows.map { $0["total"] as? Int64 } == [3700, 3500])
        try Self.checkInMemoryAgrees(stack, request, rows)

        request.havingPredicate = try FetchPredicate(format: "city == nil OR total < 100")
        let nilGroup = try Self.dictionaries(stack.context, request)
        #expect(nilGroup.count == 1)
        #expect(nilGroup.first?["city"] == nil)
        #expect(nilGroup.first?["total"] as? Int64 == 0, "Eve's group sums no salaries to 0")
        try Self.checkInMemoryAgrees(stack, request, nilGroup)
        if kind == .sqlite {
            #expect(try stack.store.fetchDictionaries(request) != nil, "grouping with HAVING runs in SQL")
        }
    }

    @Test(arguments: StoreKind.allCases) func distinctResultsAndNilValuesLeftOut(_ kind: StoreKind) throws {
        // FR-18
        let stack = try Self.stack(kind)
        let request = FetchRequest(entityName: "Employee")
        request.resultType = .dictionary
        request.propertiesToFetch = ["city"]
        request.returnsDistinctResults = true
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        let rows = try Self.dictionaries(stack.context, request)
        // First appearance in name order: Ann Oslo, Cid Rome, Eve nil.
        #expect(rows.count == 3)
        #expect(rows.map { $0["city"] as? String } == ["Oslo", "Rome", nil])
        #expect(rows[2].isEmpty, "a nil value is left out of the dictionary")
        try Self.checkInMemoryAgrees(stack, request, rows)

        request.fetchOffset = 1
        request.fetchLimit = 1
        #expect(try Self.dictionaries(stack.context, request).map { $0["city"] as? String } == ["Rome"], "offset and limit count distinct rows")

        // Without propertiesToFetch the flag has no effect: every attribute, one row per object.
        let all = FetchRequest(entityName: "Employee")
        all.resultType = .dictionary
        all.returnsDistinctResults = true
        let everyone = try Self.dictionaries(stack.context, all)
        #expect(everyone.count == 6)
        #expect(Set(everyone.compactMap { $0["name"] as? String }) == ["Ann", "Bob", "Cid", "Dee", "Eve", "Fay"])
        #expect(everyone.first { $0["name"] as? String == "Eve" }?.keys.sorted() == ["hired", "name", "rating"])
    }

    @Test(arguments: StoreKind.allCases) func countsHonourOffsetLimitAndPendingChanges(_ kind: StoreKind) throws {
        // MOC-FE-08, FR-13
        let stack = try Self.stack(kind)
        let context = stack.context
        try context.performAndWait {
            let oslo = FetchRequest(entityName: "Employee")
            oslo.predicate = try FetchPredicate(format: "city == 'Oslo'")
            #expect(try context.count(for: oslo) == 3)
            oslo.resultType = .count
            #expect(try context.execute(oslo) as? [Int] == [3])
            oslo.fetchOffset = 1
            oslo.fetchLimit = 1
            #expect(try context.count(for: oslo) == 1)
            oslo.fetchOffset = 5
            #expect(try context.count(for: oslo) == 0)
            oslo.fetchOffset = 0
            oslo.fetchLimit = 0
            if kind == .sqlite { #expect(try stack.store.countObjects(oslo) == 3) }

            // An unsaved insert is counted (in memory), and not without pending changes.
            let gus = try context.insertNewObject(forEntityName: "Employee")
            try gus.setValue("Gus", forKey: "name")
            try gus.setValue("Oslo", forKey: "city")
            #expect(try context.count(for: oslo) == 4)
            oslo.includesPendingChanges = false
            #expect(try context.count(for: oslo) == 3)
            oslo.includesPendingChanges = true

            // An unsaved update changes a sum; an unsaved delete leaves a row out.
            let total = FetchRequest(entityName: "Employee")
            total.resultType = .dictionary
            total.propertiesToFetch = [try Self.aggregate("total", "sum:(salary)", .integer64)]
            try gus.setValue(Int64(100), forKey: "salary")
            #expect((try context.execute(total) as! [[String: Any]]).first?["total"] as? Int64 == 7300)
            let ann = try #require(try context.fetch(Company.request("Employee", where: "name == 'Ann'")).first)
            context.delete(ann)
            #expect((try context.execute(total) as! [[String: Any]]).first?["total"] as? Int64 == 6300)
            #expect(try context.count(for: oslo) == 3)
            total.includesPendingChanges = false
            #expect((try context.execute(total) as! [[String: Any]]).first?["total"] as? Int64 == 7200)
        }
    }

    @Test(arguments: StoreKind.allCases) func pendingChangeToARelatedObjectIsSeen(_ kind: StoreKind) throws {
        // A department renamed but not saved: rows grouped by department.name follow the new name.
        let stack = try Self.stack(kind)
        let context = stack.context
        try context.performAndWait {
            let ops = try context.existingObject(with: stack.departments["Ops"]!)
            try ops.setValue("Operations", forKey: "name")
            let request = FetchRequest(entityName: "Employee")
            request.resultType = .dictionary
            request.propertiesToFetch = ["department.name"]
            request.returnsDistinctResults = true
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let rows = try context.execute(request) as! [[String: Any]]
            #expect(rows.map { $0["department.name"] as? String } == ["Sales", "Operations", nil])
        }
    }

    @Test(arguments: StoreKind.allCases) func invalidColumnsThrowNamingTheProperty(_ kind: StoreKind) throws {
        // FR-17: unknown names and to-many relationships are refused; so are
        // other element types, aggregates outside dictionary results and
        // ungrouped plain columns next to aggregates.
        let stack = try Self.stack(kind)
        func failure(_ configure: (AnyFetchRequest) throws -> Void) throws -> CoreDataError? {
            let request = FetchRequest(entityName: "Employee")
            request.resultType = .dictionary
            try configure(request)
            do {
                _ = try stack.context.performAndWait { try stack.context.execute(request) }
                return nil
            } catch let error as CoreDataError {
                return error
            }
        }
        let cases: [(String, (AnyFetchRequest) throws -> Void)] = [
            ("nickname", { $0.propertiesToFetch = ["nickname"] }),
            ("department.title", { $0.propertiesToFetch = ["department.title"] }),
            ("skills", { $0.propertiesToFetch = ["skills"] }),
            ("skills.title", { $0.propertiesToFetch = ["skills.title"] }),
            ("42", { $0.propertiesToFetch = [42] }),
            ("budget", { $0.propertiesToFetch = [AttributeDescription(name: "budget", type: .integer64)] }),
            ("total", { $0.propertiesToFetch = [try Self.aggregate("total", "sum:(salary)")]; $0.resultType = .managedObject }),
            ("total", { $0.propertiesToFetch = [try Self.aggregate("total", "sum:(salary)")]; $0.resultType = .count }),
            ("city", { $0.propertiesToFetch = ["name"]; $0.propertiesToGroupBy = ["city"]; $0.resultType = .managedObjectID }),
            ("name", { $0.propertiesToFetch = ["name", try Self.aggregate("total", "sum:(salary)")] }),
            ("name", { $0.propertiesToFetch = ["name", "city"]; $0.propertiesToGroupBy = ["city"] }),
            ("total", { $0.propertiesToFetch = [try Self.aggregate("total", "median:(salary)")] }),
            ("mean", { $0.propertiesToFetch = [try Self.aggregate("mean", "average:(department)")] }),
            ("n", { $0.propertiesToFetch = [try Self.aggregate("n", "count:(skills)")] }),
            ("x", { $0.propertiesToFetch = [try Self.aggregate("x", "salary * 2")] }),
            ("city", { $0.propertiesToFetch = ["city", "city"] }),
            ("total", { $0.propertiesToFetch = ["city"]; $0.propertiesToGroupBy = [try Self.aggregate("total", "sum:(salary)")] }),
        ]
        let batched = FetchRequest(entityName: "Employee")
        batched.propertiesToFetch = [try Self.aggregate("total", "sum:(salary)")]
        #expect(throws: CoreDataError.self) { try stack.context.performAndWait { _ = try stack.context.fetchBatched(batched) } }
        for (property, configure) in cases {
            let error = try failure(configure)
            #expect(error?.code == .coreData, "\(property): expected 134060, got \(String(describing: error))")
            #expect(error?.userInfo[CoreDataError.propertyNameErrorKey] as? String == property, "\(String(describing: error))")
            #expect(error?.message.contains(property) == true, "\(String(describing: error?.message))")
        }
    }

    @Test func copyKeepsTheNewFields() throws {
        // FR-19
        let request = FetchRequest(entityName: "Employee")
        request.propertiesToFetch = ["city", try Self.aggregate("total", "sum:(salary)")]
        request.propertiesToGroupBy = ["city"]
        request.havingPredicate = try FetchPredicate(format: "total > 5")
        let copy = request.copy()
        #expect(copy.propertiesToFetch?.count == 2)
        #expect(copy.propertiesToGroupBy?.first as? String == "city")
        #expect(copy.havingPredicate == request.havingPredicate)
        copy.havingPredicate = nil
        #expect(request.havingPredicate != nil)
    }
}
