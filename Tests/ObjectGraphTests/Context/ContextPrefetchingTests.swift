import Foundation
import Testing
@testable import ObjectGraph

/// FR-16: `relationshipKeyPathsForPrefetching` loads related objects with a
/// few store trips per level of the key path, never one per object.
@Suite struct ContextPrefetchingTests {
    /// Department(name, employees ↔ Employee.department, manager ↔
    /// Employee.managedDepartment, tasks ordered ↔ Task.department),
    /// Employee(name, projects ↔ Project.members: many-to-many), Project(title), Task(title).
    static func model() -> ManagedObjectModel {
        let department = EntityDescription(name: "Department")
        let employee = EntityDescription(name: "Employee")
        let project = EntityDescription(name: "Project")
        let task = EntityDescription(name: "Task")
        let employees = RelationshipDescription(name: "employees", destination: employee, toMany: true)
        let worksIn = RelationshipDescription(name: "department", destination: department, toMany: false)
        let manager = RelationshipDescription(name: "manager", destination: employee, toMany: false)
        let manages = RelationshipDescription(name: "managedDepartment", destination: department, toMany: false)
        let tasks = RelationshipDescription(name: "tasks", destination: task, toMany: true)
        tasks.isOrdered = true
        let taskDepartment = RelationshipDescription(name: "department", destination: department, toMany: false)
        let projects = RelationshipDescription(name: "projects", destination: project, toMany: true)
        let members = RelationshipDescription(name: "members", destination: employee, toMany: true)
        for (a, b) in [(employees, worksIn), (manager, manages), (tasks, taskDepartment), (projects, members)] {
            a.inverseRelationship = b
            b.inverseRelationship = a
        }
        department.properties = [AttributeDescription(name: "name", type: .string), employees, manager, tasks]
        employee.properties = [AttributeDescription(name: "name", type: .string), worksIn, manages, projects]
        project.properties = [AttributeDescription(name: "title", type: .string), members]
        task.properties = [AttributeDescription(name: "title", type: .string), taskDepartment]
        let model = ManagedObjectModel()
        model.entities = [department, employee, project, task]
        return model
    }

    static let departments = 12
    static let employeesPerDepartment = 5
    static let projects = 7

    /// A saved store: every department has employees, a manager among them
    /// and three ordered tasks; each employee works on two projects.
    static func populate(_ context: ManagedObjectContext) throws {
        try context.performAndWait {
            var projectObjects: [ManagedObject] = []
            for p in 0..<projects {
                let project = try context.insertNewObject(forEntityName: "Project")
                try project.setValue("P\(p)", forKey: "title")
                projectObjects.append(project)
            }
            for d in 0..<departments {
                let department = try context.insertNewObject(forEntityName: "Department")
                try department.setValue("D\(d)", forKey: "name")
                for e in 0..<employeesPerDepartment {
                    let employee = try context.insertNewObject(forEntityName: "Employee")
                    try employee.setValue("E\(d)-\(e)", forKey: "name")
                    try employee.setValue(department, forKey: "department")
                    if e == 0 { try department.setValue(employee, forKey: "manager") }
                    let mine = try employee.mutableSetValue(forKey: "projects")
                    try mine.insert(projectObjects[(d + e) % projects])
                    try mine.insert(projectObjects[(d + 2 * e + 1) % projects])
                }
                let ordered = try department.mutableOrderedSetValue(forKey: "tasks")
                // Inserted out of name order, so a sorted result would not pass for the stored order.
                for t in [2, 0, 1] {
                    let task = try context.insertNewObject(forEntityName: "Task")
                    try task.setValue("T\(d)-\(t)", forKey: "title")
                    try ordered.insert(task)
                }
            }
            try context.save()
        }
    }

    /// A new coordinator over the same file: nothing cached, every object a fault.
    static func freshSQLite(_ url: URL) throws -> (ManagedObjectContext, SQLiteStore) {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model())
        let store = try #require(try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url) as? SQLiteStore)
        return (ManagedObjectContext(coordinator: coordinator), store)
    }

    static func sqliteFile() throws -> URL {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("prefetch.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        try populate(ManagedObjectContext(coordinator: coordinator))
        return url
    }

    /// Everything a key path reaches, read through KVC as names, per fetched object.
    static func reached(_ objects: [ManagedObject], _ path: String) throws -> [String] {
        func names(_ value: Any?) -> [String] {
            switch value {
            case let object as ManagedObject: return [(try? object.value(forKey: object.entity.name == "Project" || object.entity.name == "Task" ? "title" : "name")) as? String ?? "?"]
            case let set as Set<ManagedObject>: return set.flatMap { names($0) }.sorted()
            case let array as [ManagedObject]: return array.flatMap { names($0) }
            case let values as [Any]: return values.flatMap { names($0) }.sorted()
            default: return ["nil"]
            }
        }
        // A dotted path through a set comes back as an array in set order: sort it.
        return try objects.map { object in
            let found = names(try object.value(forKeyPath: path))
            return (path.contains(".") ? found.sorted() : found).joined(separator: ",")
        }
    }

    /// FR-16 applies to fetched objects only: a count, dictionaries or
    /// object IDs computed in memory (here: an unsaved department forces the
    /// in-memory path) read the matching rows and nothing the paths name.
    @Test func countsDictionariesAndIDsDoNotPrefetch() throws {
        let url = try Self.sqliteFile()
        let (context, store) = try Self.freshSQLite(url)
        try context.performAndWait {
            let pending = try context.insertNewObject(forEntityName: "Department")
            try pending.setValue("Unsaved", forKey: "name")
            for resultType in [AnyFetchRequest.ResultType.count, .dictionary, .managedObjectID] {
                let request = FetchRequest(entityName: "Department")
                request.resultType = resultType
                request.relationshipKeyPathsForPrefetching = ["employees", "employees.projects"]
                let before = store.executedStatementCount
                let result = try context.execute(request)
                #expect(store.executedStatementCount - before == 1, "\(resultType) ran \(store.executedStatementCount - before) statements")
                #expect(resultType == .count ? result.first as? Int == Self.departments + 1 : result.count == Self.departments + 1)
            }
            let counting = FetchRequest(entityName: "Department")
            counting.relationshipKeyPathsForPrefetching = ["employees"]
            let before = store.executedStatementCount
            #expect(try context.count(for: counting) == Self.departments + 1)
            #expect(store.executedStatementCount - before == 1)
        }
    }

    /// Statements one fetch with `paths` prefetched runs, and what the
    /// paths then read (with no further statement).
    static func fetchCounting(_ url: URL, entity: String, prefetching paths: [String], read: String) throws -> (fetchStatements: Int, readStatements: Int, values: [String]) {
        let (context, store) = try freshSQLite(url)
        return try context.performAndWait {
            let request = FetchRequest(entityName: entity)
            request.sortDescriptors = [FetchSortDescriptor(key: entity == "Project" ? "title" : "name")]
            request.relationshipKeyPathsForPrefetching = paths
            let before = store.executedStatementCount
            let objects = try context.fetch(request)
            let afterFetch = store.executedStatementCount
            let values = try reached(objects, read)
            return (afterFetch - before, store.executedStatementCount - afterFetch, values)
        }
    }

    @Test(arguments: [
        ("Employee", "department"),              // to-one
        ("Department", "employees"),             // to-many through the inverse foreign key
        ("Employee", "projects"),                // many-to-many through the join table
        ("Department", "tasks"),                 // ordered to-many
        ("Employee", "department.manager"),      // two to-one levels
        ("Department", "employees.projects"),    // two to-many levels
        ("Project", "members.department"),       // many-to-many then to-one
    ])
    func prefetchRunsAFewQueriesPerLevelOnSQLite(entity: String, path: String) throws {
        // FR-16: O(levels) statements, and the same values as unprefetched faulting.
        let url = try Self.sqliteFile()
        let plain = try Self.fetchCounting(url, entity: entity, prefetching: [], read: path)
        let prefetched = try Self.fetchCounting(url, entity: entity, prefetching: [path], read: path)
        #expect(prefetched.values == plain.values)
        #expect(!plain.values.contains("?"))
        let levels = path.split(separator: ".").count
        // The fetch itself, then per level at most: one membership query and
        // one row query (the first level of a to-one needs no membership query).
        #expect(prefetched.fetchStatements <= 1 + 2 * levels, "\(prefetched.fetchStatements) statements")
        #expect(prefetched.readStatements == 0, "reading after prefetching ran \(prefetched.readStatements) statements")
        // Without prefetching, reading fires one fault per object at least.
        #expect(plain.readStatements >= min(Self.departments, Self.projects))
    }

    @Test func prefetchOfManyOwnersChunksTheInList() throws {
        // 1,203 departments → three `IN (…)` lists of at most 500 owners.
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("many.sqlite")
        do {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
            let context = ManagedObjectContext(coordinator: coordinator)
            try context.performAndWait {
                for d in 0..<1_203 {
                    let department = try context.insertNewObject(forEntityName: "Department")
                    try department.setValue("D\(d)", forKey: "name")
                    let employee = try context.insertNewObject(forEntityName: "Employee")
                    try employee.setValue("E\(d)", forKey: "name")
                    try employee.setValue(department, forKey: "department")
                }
                try context.save()
            }
        }
        let result = try Self.fetchCounting(url, entity: "Department", prefetching: ["employees"], read: "employees")
        #expect(result.values.count == 1_203)
        #expect(result.values.allSatisfy { $0.hasPrefix("E") && !$0.contains(",") })
        // fetch + 3 membership chunks + 3 row chunks
        #expect(result.fetchStatements == 7)
        #expect(result.readStatements == 0)
    }

    @Test func storeAnswersMembershipForAllOwnersInOrder() throws {
        // relatedObjectIDs(for:ofAll:) equals the per-owner answer, owner by owner, order kept.
        let url = try Self.sqliteFile()
        let (_, store) = try Self.freshSQLite(url)
        let departments = try store.fetchSnapshots(FetchRequest(entityName: "Department")).snapshots.map(\.objectID)
        let employees = try store.fetchSnapshots(FetchRequest(entityName: "Employee")).snapshots.map(\.objectID)
        let departmentEntity = Self.entity(store, "Department"), employeeEntity = Self.entity(store, "Employee")
        for (relationship, owners) in [(departmentEntity.relationshipsByName["employees"]!, departments),
                                       (departmentEntity.relationshipsByName["tasks"]!, departments),
                                       (employeeEntity.relationshipsByName["projects"]!, employees)] {
            let before = store.executedStatementCount
            let all = try store.relatedObjectIDs(for: relationship, ofAll: owners)
            #expect(store.executedStatementCount - before == 1, "\(relationship.name)")
            #expect(Set(all.keys) == Set(owners))
            for owner in owners {
                let one = try store.relatedObjectIDs(for: relationship, of: owner)
                if relationship.isOrdered {
                    #expect(all[owner] == one)
                } else {
                    #expect(Set(all[owner] ?? []) == Set(one))
                }
            }
        }
    }

    static func entity(_ store: PersistentStore, _ name: String) -> EntityDescription { store.model.entitiesByName[name]! }

    @Test func prefetchWorksOnTheInMemoryStore() throws {
        // FR-16 on a store without SQL: the default per-owner loop, same values, no faults left.
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
        let writer = ManagedObjectContext(coordinator: coordinator)
        try Self.populate(writer)
        for (entity, path) in [("Employee", "department.manager"), ("Department", "employees.projects"), ("Department", "tasks")] {
            let context = ManagedObjectContext(coordinator: coordinator)
            try context.performAndWait {
                let plainRequest = FetchRequest(entityName: entity)
                plainRequest.sortDescriptors = [FetchSortDescriptor(key: "name")]
                let request = plainRequest.copy()
                request.relationshipKeyPathsForPrefetching = [path]
                let objects = try context.fetch(request)
                let steps = path.split(separator: ".").map(String.init)
                // Walk the path without KVC (which would fire faults) and check nothing is left to load.
                var level = objects
                for step in steps {
                    var next: [ManagedObject] = []
                    for owner in level {
                        #expect(!owner.isFault)
                        #expect(!owner.hasFaultForRelationshipNamed(step))
                        let value = owner.storage[step]
                        if let one = value as? ManagedObject { next.append(one) } else { next += value as? [ManagedObject] ?? [] }
                    }
                    level = next
                }
                #expect(!level.isEmpty)
                #expect(level.allSatisfy { !$0.isFault })
                let other = ManagedObjectContext(coordinator: coordinator)
                let expected = try other.performAndWait { try Self.reached(try other.fetch(plainRequest), path) }
                #expect(try Self.reached(objects, path) == expected)
            }
        }
    }

    @Test func invalidKeyPathsThrowNamingThePath() throws {
        // FR-16: unknown key, attribute in the path, empty step → 134060 naming the path.
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
        let context = ManagedObjectContext(coordinator: coordinator)
        try Self.populate(context)
        try context.performAndWait {
            for path in ["department.nonsense", "name", "department.name.length", "department..manager", "colleagues"] {
                let request = FetchRequest(entityName: "Employee")
                request.relationshipKeyPathsForPrefetching = ["projects", path]
                let error = #expect(throws: CoreDataError.self) { try context.fetch(request) }
                #expect(error?.code == .coreData)
                #expect(error?.message.contains("'\(path)'") == true, "\(error?.message ?? "")")
                request.fetchBatchSize = 10
                #expect(throws: CoreDataError.self) { try context.fetchBatched(request) }
            }
        }
    }

    @Test func prefetchKeepsPendingChangesAndMarksNothingChanged() throws {
        // Loaded objects with unsaved changes are not reloaded; loading is not a change.
        let url = try Self.sqliteFile()
        let (context, _) = try Self.freshSQLite(url)
        try context.performAndWait {
            let request = FetchRequest(entityName: "Employee")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let staff = try context.fetch(request)
            let first = staff[0]
            let department = try #require(try first.value(forKey: "department") as? ManagedObject)
            try department.setValue("Renamed", forKey: "name")
            let newProject = try context.insertNewObject(forEntityName: "Project")
            try newProject.setValue("New", forKey: "title")
            try first.mutableSetValue(forKey: "projects").insert(newProject)
            let changedBefore = Set(context.updatedObjects.map(ObjectIdentifier.init))

            try context.prefetch(["department.employees", "projects.members"], for: staff)

            #expect(try department.value(forKey: "name") as? String == "Renamed")
            #expect((try first.value(forKey: "projects") as? Set<ManagedObject>)?.contains(newProject) == true)
            #expect(Set(context.updatedObjects.map(ObjectIdentifier.init)) == changedBefore)
            #expect(context.insertedObjects.count == 1)
            try context.save()
        }
    }

    @Test func prefetchLeavesAGoneRowAFault() throws {
        // A destination deleted by another coordinator stays a fault and reports 133000 when fired.
        let url = try Self.sqliteFile()
        let (context, _) = try Self.freshSQLite(url)
        try context.performAndWait {
            let request = FetchRequest(entityName: "Employee")
            request.predicate = try FetchPredicate(format: "name == 'E0-1'")
            let employee = try #require(try context.fetch(request).first)
            let (other, _) = try Self.freshSQLite(url)
            try other.performAndWait {
                let victim = try #require(try other.fetch(request).first)
                // Detach the department's manager and employees so nothing else needs it, then delete it.
                let department = try #require(try victim.value(forKey: "department") as? ManagedObject)
                for member in (try department.value(forKey: "employees") as? Set<ManagedObject>) ?? [] { try member.setValue(nil, forKey: "department") }
                try department.setValue(nil, forKey: "manager")
                for task in (try department.value(forKey: "tasks") as? [ManagedObject]) ?? [] { other.delete(task) }
                other.delete(department)
                try other.save()
            }
            try context.prefetch(["department"], for: [employee])
            let department = try #require(employee.storage["department"] as? ManagedObject)
            #expect(department.isFault)
            let error = #expect(throws: CoreDataError.self) { try department.value(forKey: "name") }
            #expect(error?.code == .managedObjectContextReferentialIntegrity)
        }
    }
}
