import Foundation
import Testing
@testable import ObjectGraph

/// MOC-MP-03…07 and MOC-MP-09 on one SQLite file with two writers: another
/// coordinator in this process, or another process (an exit test child with
/// its own coordinator). The other writer saves first; this context saves
/// second under each policy. The final row is read back through a fresh
/// coordinator and through SQLite's C API (`RawSQLite`).
@Suite struct SQLiteConflictMatrixTests {
    /// Both writers change `name` (overlapping), or the other writer changes
    /// `budget` while this one changes `name` (disjoint).
    enum Variant: String, CaseIterable, Codable, Sendable {
        case overlapping, disjoint
    }

    static let policies: [MergePolicy] = [.error, .mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump, .overwrite, .rollback]
    static let seedName = "seed", mine = "mine", theirs = "theirs"
    static let seedBudget: Decimal = 1, theirBudget: Decimal = 2

    /// MOC-MP-09's table for this setup: the row after the second save.
    static func expectedRow(_ policy: MergePolicy, _ variant: Variant) -> (name: String, budget: Decimal) {
        switch (policy, variant) {
        case (.error, .overlapping), (.rollback, .overlapping), (.mergeByPropertyStoreTrump, .overlapping): return (theirs, seedBudget)
        case (.error, .disjoint), (.rollback, .disjoint): return (seedName, theirBudget)
        case (.mergeByPropertyObjectTrump, .overlapping), (.overwrite, .overlapping), (.overwrite, .disjoint): return (mine, seedBudget)
        case (.mergeByPropertyStoreTrump, .disjoint), (.mergeByPropertyObjectTrump, .disjoint): return (mine, theirBudget)
        }
    }

    /// `Z_OPT` after both saves: the other save makes it 2; the second save
    /// writes (3) only when the merged object differs from the stored row.
    static func expectedVersion(_ policy: MergePolicy, _ variant: Variant) -> Int64 {
        switch (policy, variant) {
        case (.error, _), (.rollback, _), (.mergeByPropertyStoreTrump, .overlapping): return 2
        default: return 3
        }
    }

    /// A new store file holding one Department (seed, budget 1).
    static func seededStore() throws -> URL {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("matrix.sqlite")
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try context.performAndWait {
            _ = try Company.department(context, seedName, budget: seedBudget)
            try context.save()
        }
        return url
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The other writer: its own coordinator on the file; fetches the
    /// department, changes it and saves. Runs in this process or in a child.
    static func otherWriter(path: String, variant: Variant) throws {
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: URL(fileURLWithPath: path))
        try context.performAndWait {
            guard let department = try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first else {
                throw Failure(description: "no department in \(path)")
            }
            switch variant {
            case .overlapping: department.name = theirs
            case .disjoint: department.budget = theirBudget
            }
            try context.save()
        }
    }

    /// What the file holds, through a fresh coordinator and through the C API.
    static func finalRow(_ url: URL) throws -> (name: String?, budget: Decimal?, raw: [RawSQLite.Value]) {
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let (name, budget) = try context.performAndWait {
            let all = try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self)
            guard all.count == 1 else { throw Failure(description: "expected one department, found \(all.count)") }
            return (all[0].name, all[0].budget)
        }
        let raw = try RawSQLite.query(url.path, "SELECT ZNAME, CAST(ZBUDGET AS TEXT), Z_OPT FROM ZDEPARTMENT")
        guard raw.count == 1 else { throw Failure(description: "expected one ZDEPARTMENT row, found \(raw.count)") }
        return (name, budget, raw[0])
    }

    /// Runs one cell: this context reads the row, the other writer saves,
    /// this context changes `name` and saves under `policy`.
    func run(_ policy: MergePolicy, _ variant: Variant, otherWrite: (URL) async throws -> Void) async throws {
        let url = try Self.seededStore()
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let department = try context.performAndWait {
            let d = try #require(try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
            #expect(d.name == Self.seedName)   // realized: the coordinator caches version 1
            return d
        }
        try await otherWrite(url)
        let result: Result<Void, Error> = context.performAndWait {
            context.mergePolicy = policy
            department.name = Self.mine
            return Result { try context.save() }
        }
        let expected = Self.expectedRow(policy, variant)
        let row = try Self.finalRow(url)
        #expect(row.name == expected.name, "\(policy) \(variant): name")
        #expect(row.budget == expected.budget, "\(policy) \(variant): budget")
        #expect(row.raw == [.text(expected.name), .text("\(expected.budget)"), .integer(Self.expectedVersion(policy, variant))], "\(policy) \(variant): raw row")

        if policy == .error {
            // MOC-MP-03, MOC-CR-01…08, E2E-02: two coordinators, so the
            // record pairs the coordinator's cached row with the database row.
            let error = try #require(result.failureError as? CoreDataError)
            #expect(error.code == .managedObjectContextMerge)
            #expect(error.code.rawValue == 133020)
            let list = try #require(error.userInfo[MergeConflict.conflictListKey] as? [MergeConflict])
            try #require(list.count == 1)
            let record = list[0]
            #expect(record.object === department)
            #expect(record.snapshot == nil)
            #expect(record.cachedRow?["name"] as? String == Self.seedName)
            #expect(record.cachedRow?["budget"] as? Decimal == Self.seedBudget)
            let databaseRow = try #require(record.databaseRow)
            #expect(databaseRow["name"] as? String == (variant == .overlapping ? Self.theirs : Self.seedName))
            #expect(databaseRow["budget"] as? Decimal == (variant == .overlapping ? Self.seedBudget : Self.theirBudget))
            #expect(record.oldVersion == 1 && record.newVersion == 2)
            context.performAndWait {
                // MOC-MP-09 Error row: memory untouched and still dirty.
                #expect(department.name == Self.mine && department.budget == Self.seedBudget)
                #expect(context.hasChanges)
            }
        } else {
            #expect(result.failureError == nil, "\(policy) \(variant): \(String(describing: result.failureError))")
            try context.performAndWait {
                // MOC-MP-09: memory holds what the store holds, and is clean.
                #expect(department.name == expected.name && department.budget == expected.budget)
                #expect(!context.hasChanges)
                // MOC-MP-11: the resolved version is current, a next save has no conflict.
                department.budget = 5
                try context.save()
            }
            #expect(try Self.finalRow(url).budget == 5)
        }
    }

    @Test(arguments: policies, Variant.allCases)
    func twoCoordinatorsInThisProcess(_ policy: MergePolicy, _ variant: Variant) async throws {
        // MOC-MP-03…07, MOC-MP-09, MOC-MP-11, MOC-CR-02 (coordinator vs store), E2E-02
        try await run(policy, variant) { url in try Self.otherWriter(path: url.path, variant: variant) }
    }

    @Test(arguments: policies, Variant.allCases)
    func otherProcessWritesFirst(_ policy: MergePolicy, _ variant: Variant) async throws {
        // MOC-MP-03…07, MOC-MP-09, MOC-CR-02, E2E-02 with the other writer in another process
        try await run(policy, variant) { url in
            let path = url.path
            await #expect(processExitsWith: .success) { [path = path as String, variant = variant as Variant] in
                try SQLiteConflictMatrixTests.otherWriter(path: path, variant: variant)
            }
        }
    }

    // MARK: - To-one relationship (MOC-MP-09 "also for relationships")

    /// Sales, Ops and Marketing, with Ada in Sales.
    static func seededStaffStore() throws -> URL {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("staff.sqlite")
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            for name in ["Ops", "Marketing"] { _ = try Company.department(context, name) }
            _ = try Company.employee(context, "Ada", "Lovelace", in: sales)
            try context.save()
        }
        return url
    }

    /// Moves Ada to the department named `target` and saves, with its own coordinator.
    static func moveAda(path: String, to target: String) throws {
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: URL(fileURLWithPath: path))
        try context.performAndWait {
            let ada = try context.fetch(FetchRequest(entityName: "Employee"), as: EmployeeMO.self)
            let department = try context.fetch(Company.request("Department", where: "name == %@", target), as: DepartmentMO.self)
            guard ada.count == 1, department.count == 1 else { throw Failure(description: "seed missing in \(path)") }
            ada[0].department = department[0]
            try context.save()
        }
    }

    @Test(arguments: policies, [false, true])
    func toOneRelationshipChangedByBothWriters(_ policy: MergePolicy, _ inOtherProcess: Bool) async throws {
        // MOC-MP-09 (relationships), MOC-MP-03…07: the other writer moves Ada to Ops, this one to Marketing
        let url = try Self.seededStaffStore()
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let (ada, departments) = try context.performAndWait {
            let ada = try #require(try context.fetch(FetchRequest(entityName: "Employee"), as: EmployeeMO.self).first)
            #expect(ada.department?.name == "Sales")
            var byName: [String: DepartmentMO] = [:]
            for d in try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self) { byName[d.name!] = d; _ = d.employees.count }
            return (ada, byName)
        }
        if inOtherProcess {
            let path = url.path
            await #expect(processExitsWith: .success) { [path = path as String] in
                try SQLiteConflictMatrixTests.moveAda(path: path, to: "Ops")
            }
        } else {
            try Self.moveAda(path: url.path, to: "Ops")
        }
        let result: Result<Void, Error> = context.performAndWait {
            context.mergePolicy = policy
            ada.department = departments["Marketing"]
            return Result { try context.save() }
        }
        let expected: String
        switch policy {
        case .error, .mergeByPropertyStoreTrump, .rollback: expected = "Ops"
        case .mergeByPropertyObjectTrump, .overwrite: expected = "Marketing"
        }
        let (_, check) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try check.performAndWait {
            let reread = try #require(try check.fetch(FetchRequest(entityName: "Employee"), as: EmployeeMO.self).first)
            #expect(reread.department?.name == expected, "\(policy)")
        }
        let raw = try RawSQLite.query(url.path, "SELECT d.ZNAME FROM ZEMPLOYEE e JOIN ZDEPARTMENT d ON d.Z_PK = e.ZDEPARTMENT")
        #expect(raw == [[RawSQLite.Value.text(expected)]], "\(policy)")
        if policy == .error {
            let error = try #require(result.failureError as? CoreDataError)
            #expect(error.code == .managedObjectContextMerge)
            // Both saves changed Ada and Sales (its employees); Marketing and
            // Ops changed on one side only, so they are not conflicts.
            let list = try #require(error.userInfo[MergeConflict.conflictListKey] as? [MergeConflict])
            #expect(Set(list.map { ObjectIdentifier($0.object) }) == [ObjectIdentifier(ada), ObjectIdentifier(departments["Sales"]!)])
            let record = try #require(list.first { $0.object === ada })
            #expect(record.snapshot == nil && record.oldVersion == 1 && record.newVersion == 2)
            #expect((record.cachedRow?["department"] as? ManagedObjectID) == departments["Sales"]!.objectID)
            #expect((record.databaseRow?["department"] as? ManagedObjectID) == departments["Ops"]!.objectID)
        } else {
            #expect(result.failureError == nil, "\(policy): \(String(describing: result.failureError))")
            context.performAndWait {
                // The inverse to-manys follow the merged to-one in memory.
                #expect(ada.department === departments[expected])
                #expect(departments[expected]!.employees.contains(ada))
                for (name, d) in departments where name != expected { #expect(!d.employees.contains(ada), "\(policy): \(name)") }
            }
        }
    }

    /// How this process notices another process's commit: a fetch always
    /// reads the store (and refreshes the coordinator's row cache); objects
    /// not yet realized in the context come back with the new values; a
    /// realized object keeps its values (MOC-FE-07, E2E-11) until refreshed,
    /// and a refresh after that fetch shows the new values even with the
    /// default infinite staleness. Without a fetch, `stalenessInterval = 0`
    /// makes a refresh read the store (MOC-RF-04, MOC-ST-02, MOC-ST-05).
    @Test func fetchAfterAnotherProcessSavesSeesItsValue() async throws {
        let url = try Self.seededStore()
        let (coordinator, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        let department = try context.performAndWait {
            let d = try #require(try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self).first)
            #expect(d.name == Self.seedName)   // realized before the other process writes
            return d
        }
        let seenVersion = try store.dataVersion()
        let path = url.path
        await #expect(processExitsWith: .success) { [path = path as String] in
            try SQLiteConflictMatrixTests.otherWriter(path: path, variant: .overlapping)
        }
        #expect(try store.dataVersion() != seenVersion)   // PRAGMA data_version moved

        // A context with nothing realized: the next fetch sees the new value.
        let fresh = ManagedObjectContext(coordinator: coordinator)
        try fresh.performAndWait {
            let found = try fresh.fetch(Company.request("Department", where: "name == %@", Self.theirs), as: DepartmentMO.self)
            #expect(found.map(\.objectID) == [department.objectID])
            #expect(found.first?.name == Self.theirs)
        }
        try context.performAndWait {
            #expect(context.stalenessInterval < 0)
            let again = try context.fetch(FetchRequest(entityName: "Department"), as: DepartmentMO.self)
            #expect(again.first === department && department.name == Self.seedName)   // realized: not overwritten
            context.refresh(department, mergeChanges: false)
            #expect(department.name == Self.theirs)   // the fetch refreshed the row cache
        }

        // Without a fetch in between: staleness 0 reads the store at refresh.
        await #expect(processExitsWith: .success) { [path = path as String] in
            try SQLiteConflictMatrixTests.otherWriter(path: path, variant: .disjoint)
        }
        context.performAndWait {
            context.refresh(department, mergeChanges: false)
            #expect(department.budget == Self.seedBudget)   // infinite staleness: the cached row
            context.stalenessInterval = 0
            context.refresh(department, mergeChanges: false)
            #expect(department.budget == Self.theirBudget)
        }
    }
}
