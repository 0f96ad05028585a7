import Foundation
import Testing
@testable import ObjectGraph

/// Smaller contract items of managed-objects.md, one behaviour per test.
@Suite struct ManagedObjectContractTests {
    final class Rich: ManagedObject {
        var nickname: String? { willSet { willChangeValue(forKey: "nickname") } didSet { didChangeValue(forKey: "nickname") } }
        var faultingStateInWillTurn = -1
        var nameSeenInAwakeFromFetch: String?
        var fetchedInAwakeFromInsert: Int?
        var willSaveRounds = 0
        override class var contextShouldIgnoreUnmodeledPropertyChanges: Bool { Rich.ignoreUnmodeled }
        nonisolated(unsafe) static var ignoreUnmodeled = true
        override func value(forUndefinedKey key: String) throws -> Any? {
            key == "nickname" ? nickname : try super.value(forUndefinedKey: key)
        }
        override func setValue(_ value: Any?, forUndefinedKey key: String) throws {
            if key == "nickname" { nickname = value as? String } else { try super.setValue(value, forUndefinedKey: key) }
        }
        override func willTurnIntoFault() { faultingStateInWillTurn = faultingState }
        override func awakeFromFetch() { super.awakeFromFetch(); nameSeenInAwakeFromFetch = try? value(forKey: "name") as? String }
        override func awakeFromInsert() {
            super.awakeFromInsert()
            fetchedInAwakeFromInsert = try? managedObjectContext?.count(for: FetchRequest(entityName: "Department"))
        }
        override func willSave() { willSaveRounds += 1; try? setPrimitiveValue("primitive", forKey: "name") }
    }

    static func stack() throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let model = ReferenceModel.make()
        let dept = model.entitiesByName["Department"]!
        dept.managedObjectClassName = "RichDepartment"
        let scratch = AttributeDescription(name: "scratch", type: .string)
        scratch.isTransient = true
        dept.properties = dept.directProperties + [scratch]
        ManagedObjectClassRegistry.shared.register(Rich.self, forClassName: "RichDepartment")
        Company.registerClasses()
        return try Company.stack(model: model)
    }

    func insertRich(_ context: ManagedObjectContext, _ name: String) throws -> Rich {
        let d = try #require(try context.insertNewObject(forEntityName: "Department") as? Rich)
        try d.setValue(name, forKey: "name")
        return d
    }

    @Test func unmodeledKeysAndChangeTrackingFlag() throws {
        // KVC-05, KVO-02, KVO-04, CHG-11, SUB-05
        let (_, context) = try Self.stack()
        try context.performAndWait {
            let d = try insertRich(context, "Sales")
            try context.save()
            try d.setValue("Bob", forKey: "nickname")
            #expect(try d.value(forKey: "nickname") as? String == "Bob")
            #expect(!d.isUpdated)
            Rich.ignoreUnmodeled = false
            defer { Rich.ignoreUnmodeled = true }
            d.nickname = "Robert"
            #expect(d.isUpdated)
            #expect(d.changedValues().isEmpty) // CHG-07: unmodeled keys never appear
            #expect(ManagedObject.automaticallyNotifiesObservers(forKey: "nickname"))
        }
    }

    @Test func faultTransitionsAndLoading() throws {
        // FLT-05, FLT-09, KVO-08, LIFE-08, PRIM-07, FLT-10, MOC-RF-02, LIFE-27
        let (coordinator, writer) = try Self.stack()
        try writer.performAndWait { _ = try insertRich(writer, "Sales"); try writer.save() }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let d = try #require(try context.fetch(FetchRequest(entityName: "Department")).first as? Rich)
            var notes = 0
            let token = d.addObserver(forKey: "name") { _ in notes += 1 }
            #expect(try d.value(forKey: "name") as? String == "primitive") // set by willSave at the writer's save
            #expect(notes == 0)                               // loading is primitive (PRIM-07)
            #expect(d.nameSeenInAwakeFromFetch == "primitive") // LIFE-08
            try d.setValue("temp", forKey: "scratch")
            try d.setValue("Marketing", forKey: "name")
            _ = d.changedValues()
            #expect(d.hasFaultForRelationshipNamed("employees")) // FLT-10
            context.refresh(d, mergeChanges: false)
            #expect(d.faultingStateInWillTurn != 0)           // FLT-09, KVO-08
            #expect(d.faultingState == 0)
            #expect(try d.value(forKey: "scratch") == nil)    // MOC-RF-02: transients released
            _ = token
        }
    }

    @Test func relationshipChangesInAwakeFromFetchSkipInverses() throws {
        // LIFE-10
        final class Meddler: ManagedObject {
            nonisolated(unsafe) static var target: ManagedObject?
            override func awakeFromFetch() { super.awakeFromFetch(); if let t = Meddler.target { try? setValue(t, forKey: "manager") } }
        }
        let model = ReferenceModel.make()
        model.entitiesByName["Employee"]!.managedObjectClassName = "MeddlerEmployee"
        ManagedObjectClassRegistry.shared.register(Meddler.self, forClassName: "MeddlerEmployee")
        let (coordinator, writer) = try Company.stack(model: model)
        let id = try writer.performAndWait {
            let dept = try Company.department(writer, "Sales")
            let e = try writer.insertNewObject(forEntityName: "Employee")
            try e.setValuesForKeys(["firstName": "Ada", "lastName": "Lovelace", "department": dept])
            try writer.save()
            return e.objectID
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let boss = try context.insertNewObject(forEntityName: "Employee")
            Meddler.target = boss
            defer { Meddler.target = nil }
            let e = try context.existingObject(with: id)
            #expect(try e.value(forKey: "manager") as? ManagedObject === boss)
            #expect((try boss.value(forKey: "directReports") as? Set<ManagedObject>)?.isEmpty == true)
        }
    }

    @Test func fetchInsideAwakeFromInsertAndPrimitiveChangesInWillSave() throws {
        // LIFE-06, LIFE-21
        let (_, context) = try Self.stack()
        try context.performAndWait {
            let d = try insertRich(context, "Sales")
            #expect(d.fetchedInAwakeFromInsert == 1)
            try context.save()
            #expect(d.willSaveRounds == 1)
            #expect(try d.value(forKey: "name") as? String == "primitive")
        }
    }

    @Test func primitiveRelationshipsAndIntersect() throws {
        // PRIM-04, PRIM-06, PRIM-09, PRIM-10, TM-09, TM-04, TM-07
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d1 = try Company.department(context, "One")
            let d2 = try Company.department(context, "Two")
            let a = try Company.employee(context, "Ada", "Lovelace", in: d1)
            let b = try Company.employee(context, "Bob", "Smith", in: d1)
            try a.setPrimitiveValue(d2, forKey: "department")
            #expect(a.department === d2)
            #expect(d1.employees.contains(a) && !d2.employees.contains(a))  // this side only
            // The documented pattern: copy, change, set back.
            var members = try #require(try d2.primitiveValue(forKey: "employees") as? Set<ManagedObject>)
            members.insert(a)
            try d2.setPrimitiveValue(members, forKey: "employees")
            #expect(d2.employees == [a])
            try d1.mutableSetValue(forKey: "employees").intersect([b])
            #expect(d1.employees == [b])
        }
    }

    @Test func denyWithNoDestinationsAllowsDelete() throws {
        // DEL-03
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d = try Company.department(context, "Empty")
            try context.save()
            context.delete(d)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 0)
        }
    }

    @Test func deleteUpdateConflicts() throws {
        // MOC-MP-10: (i) deleted here / updated there; (ii) updated here / deleted there
        func setUp(_ policy: MergePolicy, deleteHere: Bool) throws -> (ManagedObjectContext, DepartmentMO, Result<Void, Error>) {
            let (coordinator, context) = try Company.stack()
            let other = ManagedObjectContext(coordinator: coordinator)
            let d = try context.performAndWait { () throws -> DepartmentMO in
                let d = try Company.department(context, "Sales")
                try context.save()
                return d
            }
            try other.performAndWait {
                let copy = try other.existingObject(with: d.objectID)
                if deleteHere { try copy.setValue("Remote", forKey: "name") } else { other.delete(copy) }
                try other.save()
            }
            let result = context.performAndWait { () -> Result<Void, Error> in
                context.mergePolicy = policy
                if deleteHere { context.delete(d) } else { d.name = "Local" }
                return Result { try context.save() }
            }
            return (context, d, result)
        }
        // (i) StoreTrump cancels the local delete; ObjectTrump deletes.
        let (c1, d1, r1) = try setUp(.mergeByPropertyStoreTrump, deleteHere: true)
        #expect(r1.failureError == nil)
        #expect(c1.performAndWait { d1.name } == "Remote")
        let (c2, _, r2) = try setUp(.mergeByPropertyObjectTrump, deleteHere: true)
        #expect(r2.failureError == nil)
        #expect(try c2.performAndWait { try c2.count(for: FetchRequest(entityName: "Department")) } == 0)
        // (ii) StoreTrump deletes locally; ObjectTrump fails with 133000; Error fails with 133020.
        let (c3, d3, r3) = try setUp(.mergeByPropertyStoreTrump, deleteHere: false)
        #expect(r3.failureError == nil)
        #expect(c3.performAndWait { c3.registeredObject(for: d3.objectID) } == nil)
        let (_, _, r4) = try setUp(.mergeByPropertyObjectTrump, deleteHere: false)
        #expect((r4.failureError as? CoreDataError)?.code == .managedObjectContextReferentialIntegrity)
        let (_, _, r5) = try setUp(.error, deleteHere: false)
        #expect((r5.failureError as? CoreDataError)?.code == .managedObjectContextMerge)
    }
}
