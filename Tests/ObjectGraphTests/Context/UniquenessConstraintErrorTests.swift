import Foundation
import Testing
@testable import ObjectGraph

/// Uniqueness constraints under the error merge policy (MOC-MP-01, MOC-MP-03):
/// a save that would leave two objects with one constraint's values fails
/// with 133021 `NSManagedObjectConstraintMergeError`, its `conflictList`
/// holding `NSConstraintConflict`s as Apple's NSMergePolicy.h describes them
/// (a conflict within the save has no database object and two or more
/// conflicting objects; one against the store has the database object, its
/// row and one conflicting object), and nothing is written or changed.
/// Issue 28 item 1: three users, two sharing (userID, domain), were all saved.
@Suite struct UniquenessConstraintErrorTests {
    @Test(arguments: TestStores.sqliteAndInMemory)
    func duplicatesWithinOneSaveFailWith133021(_ type: String) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let first = try ConstraintModel.user(context, "1", "a.example", ["displayName": "First"])
            let second = try ConstraintModel.user(context, "1", "a.example", ["displayName": "Second"])
            try ConstraintModel.user(context, "2", "a.example")
            let status = try ConstraintModel.status(context, "hello")
            try status.setValue(second, forKey: "author")

            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .managedObjectConstraintMerge)
            #expect((error as NSError?)?.code == 133021 && (error as NSError?)?.domain == NSCocoaErrorDomain)
            let list = error?.userInfo[ConstraintConflict.conflictListKey] as? [ConstraintConflict] ?? []
            #expect(list.count == 1)
            let conflict = try #require(list.first)
            #expect(conflict.constraint == ["userID", "domain"])
            #expect(conflict.constraintValues["userID"] as? String == "1" && conflict.constraintValues["domain"] as? String == "a.example")
            #expect(conflict.databaseObject == nil && conflict.databaseSnapshot == nil)
            #expect(conflict.conflictingObjects.count == 2 && conflict.conflictingObjects[0] === first && conflict.conflictingObjects[1] === second)
            #expect(conflict.conflictingSnapshots.count == 2 && conflict.conflictingSnapshots.allSatisfy(\.isEmpty))
            // In memory, nothing changed: all four objects are still inserted, related as before.
            #expect(context.insertedObjects.count == 4)
            #expect(try status.value(forKey: "author") as? ManagedObject === second)
        }
        #expect(try ConstraintModel.storedUsers(coordinator).isEmpty)
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func aDuplicateOfAStoredRowFailsWith133021(_ type: String) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let writer = ManagedObjectContext(coordinator: coordinator)
        let storedID = try writer.performAndWait { () throws -> ManagedObjectID in
            let user = try ConstraintModel.user(writer, "1", "a.example", ["displayName": "Stored"])
            try writer.save()
            return user.objectID
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let fresh = try ConstraintModel.user(context, "1", "a.example", ["displayName": "Fresh"])
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .managedObjectConstraintMerge)
            let list = error?.userInfo[ConstraintConflict.conflictListKey] as? [ConstraintConflict] ?? []
            #expect(list.count == 1)
            let conflict = try #require(list.first)
            #expect(conflict.databaseObject?.objectID == storedID)
            #expect(conflict.databaseSnapshot?["displayName"] as? String == "Stored")
            #expect(conflict.conflictingObjects.count == 1 && conflict.conflictingObjects[0] === fresh)
            #expect(context.insertedObjects == [fresh])
        }
        let stored = try ConstraintModel.storedUsers(coordinator)
        #expect(stored.count == 1 && stored["1@a.example"]?.map(\.displayName) == ["Stored"])
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func anUpdateIntoAStoredObjectsValuesFails(_ type: String) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let one = try ConstraintModel.user(context, "1")
            let two = try ConstraintModel.user(context, "2")
            try context.save()
            try two.setValue("1", forKey: "userID")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            let conflict = (error?.userInfo[ConstraintConflict.conflictListKey] as? [ConstraintConflict])?.first
            #expect(conflict?.databaseObject === one && conflict?.conflictingObjects.first === two)
            // The stored object's snapshot is its stored values.
            #expect(conflict?.conflictingSnapshots.first?["userID"] as? String == "2")
        }
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func whatTheSaveDeletesOrChangesIsNoDuplicate(_ type: String) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let one = try ConstraintModel.user(context, "1")
            let two = try ConstraintModel.user(context, "2")
            try context.save()
            // The stored "1" is deleted and the stored "2" moves away: new ones may take their values.
            context.delete(one)
            try two.setValue("3", forKey: "userID")
            try ConstraintModel.user(context, "1")
            try ConstraintModel.user(context, "2")
            // A nil value never conflicts (as NULL in a unique index).
            try ConstraintModel.user(context, nil)
            try ConstraintModel.user(context, nil)
            // Other domains are other values.
            try ConstraintModel.user(context, "1", "b.example")
            try context.save()
        }
        let stored = try ConstraintModel.storedUsers(coordinator)
        #expect(stored.mapValues(\.count) == ["1@a.example": 1, "2@a.example": 1, "3@a.example": 1, "nil@a.example": 2, "1@b.example": 1])
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func aConstraintHoldsAcrossSubentitiesAndIsReportedOnce(_ type: String) throws {
        // Apple's NSMergePolicy.h: "if an entity hierarchy has a constraint which is extended in
        // subentities, all constraint violations for that constraint will be collapsed into a single report".
        let model = ManagedObjectModel()
        let account = EntityDescription(name: "Account")
        account.isAbstract = true
        account.properties = [AttributeDescription(name: "handle", type: .string)]
        account.uniquenessConstraints = [["handle"]]
        let person = EntityDescription(name: "PersonAccount")
        let bot = EntityDescription(name: "BotAccount")
        bot.uniquenessConstraints = [["handle"]]
        account.subentities = [person, bot]
        model.entities = [account, person, bot]
        let coordinator = try TestStores.coordinator(model, type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let human = try context.insertNewObject(forEntityName: "PersonAccount")
            try human.setValue("ada", forKey: "handle")
            let machine = try context.insertNewObject(forEntityName: "BotAccount")
            try machine.setValue("ada", forKey: "handle")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            let list = error?.userInfo[ConstraintConflict.conflictListKey] as? [ConstraintConflict] ?? []
            #expect(list.count == 1 && list.first?.conflictingObjects.count == 2)
            context.mergePolicy = .mergeByPropertyObjectTrump
            try context.save()
            #expect(human.managedObjectContext === context && machine.managedObjectContext == nil)
        }
        #expect(try context.performAndWait { try context.count(for: FetchRequest(entityName: "Account")) } == 1)
    }

    @Test func aConstraintOnAPropertyTheEntityLacksIsAModelError() throws {
        let model = ConstraintModel.make()
        model.entitiesByName["User"]!.uniquenessConstraints = [["userID", "handle"], ["statuses"]]
        let error = #expect(throws: CoreDataError.self) { try model.validate() }
        #expect(error?.detailedErrors.count == 2)
        #expect(error?.message.contains("'handle', which the entity does not have") == true)
        #expect(error?.message.contains("'statuses', which is not stored") == true)
    }
}
