import Foundation
import Testing
@testable import ObjectGraph

/// Uniqueness constraints under the four merging policies (MOC-MP-04…07;
/// Apple's NSMergePolicy resolves constraint conflicts after optimistic
/// locking, `resolveConstraintConflicts`): the duplicates of a save are
/// merged into one object, and the save goes on. The survivor is the object
/// already stored when there is one (its identity and what refers to it
/// stay), else the save's first. Values follow the policy, property by
/// property; every relationship of a merged-away duplicate (to-one, to-many,
/// many-to-many) ends up on the survivor, with both sides in the store.
/// Issue 28 item 1: `mergeByPropertyObjectTrump` left two identical rows.
@Suite struct UniquenessConstraintMergeTests {
    static let policies: [MergePolicy] = [.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite, .rollback]
    static let cases = TestStores.sqliteAndInMemory.flatMap { type in policies.map { (type, $0) } }

    // MARK: - Against a row already in the store

    /// A stored user, then a new one with its (userID, domain) from another
    /// context, each with statuses, bookmarks and an instance.
    func mergeAgainstStore(_ type: String, _ policy: MergePolicy) throws -> (PersistentStoreCoordinator, ManagedObjectID) {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let writer = ManagedObjectContext(coordinator: coordinator)
        let storedID = try writer.performAndWait { () throws -> ManagedObjectID in
            let user = try ConstraintModel.user(writer, "1", "a.example", ["displayName": "Stored", "note": "stored note", "followersCount": Int64(5)])
            try user.setValue(ConstraintModel.instance(writer, "old.example"), forKey: "instance")
            try ConstraintModel.status(writer, "s0").setValue(user, forKey: "author")
            try user.mutableSetValue(forKey: "bookmarks").insert(ConstraintModel.status(writer, "b0"))
            try writer.save()
            return user.objectID
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = policy
        try context.performAndWait {
            let fresh = try ConstraintModel.user(context, "1", "a.example", ["displayName": "Fresh", "followersCount": Int64(7)])
            try fresh.setValue(ConstraintModel.instance(context, "new.example"), forKey: "instance")
            try ConstraintModel.status(context, "s1").setValue(fresh, forKey: "author")
            try fresh.mutableSetValue(forKey: "bookmarks").insert(ConstraintModel.status(context, "b1"))
            try ConstraintModel.user(context, "2", "a.example")
            try context.save()
            // In memory the duplicate is gone and the survivor is the stored object.
            #expect(!context.hasChanges)
            #expect(fresh.managedObjectContext == nil)
            let survivor = try context.existingObject(with: storedID)
            #expect((try survivor.value(forKey: "statuses") as? Set<ManagedObject>)?.count == 2)
        }
        return (coordinator, storedID)
    }

    @Test(arguments: cases)
    func aDuplicateOfAStoredRowMergesIntoIt(_ type: String, _ policy: MergePolicy) throws {
        let (coordinator, storedID) = try mergeAgainstStore(type, policy)
        let users = try ConstraintModel.storedUsers(coordinator)
        #expect(users.mapValues(\.count) == ["1@a.example": 1, "2@a.example": 1])
        let user = try #require(users["1@a.example"]?.first)
        #expect(user.objectID == storedID)
        // Relationships of both: under every policy (the duplicate's statuses and bookmarks are other objects).
        #expect(user.statuses == ["s0", "s1"])
        #expect(user.bookmarks == ["b0", "b1"])
        switch policy {
        case .mergeByPropertyObjectTrump:
            // What the new object set wins; what it did not set stays.
            #expect(user.displayName == "Fresh" && user.followersCount == 7 && user.note == "stored note" && user.instance == "new.example")
        case .mergeByPropertyStoreTrump:
            // The stored values win; the new object only fills what the row lacks (nothing here).
            #expect(user.displayName == "Stored" && user.followersCount == 5 && user.note == "stored note" && user.instance == "old.example")
        case .overwrite:
            // The whole new object, its nil note included.
            #expect(user.displayName == "Fresh" && user.followersCount == 7 && user.note == nil && user.instance == "new.example")
        case .rollback:
            #expect(user.displayName == "Stored" && user.followersCount == 5 && user.note == "stored note" && user.instance == "old.example")
        case .error:
            Issue.record("not a merging policy")
        }
        // Both sides of every relationship agree in the store.
        let inverses = try ConstraintModel.storedInverses(coordinator)
        #expect(inverses.authors == ["s0": "1@a.example", "s1": "1@a.example", "b0": "nil", "b1": "nil"])
        #expect(inverses.bookmarkedBy == ["s0": [], "s1": [], "b0": ["1@a.example"], "b1": ["1@a.example"]])
        let winner = user.instance!, loser = winner == "old.example" ? "new.example" : "old.example"
        #expect(inverses.instanceUsers == [winner: ["1@a.example"], loser: []])
    }

    // MARK: - Within one save

    @Test(arguments: cases)
    func duplicatesWithinOneSaveMergeIntoTheFirst(_ type: String, _ policy: MergePolicy) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = policy
        try context.performAndWait {
            let first = try ConstraintModel.user(context, "1", "a.example", ["displayName": "First", "followersCount": Int64(10)])
            try first.setValue(ConstraintModel.instance(context, "one.example"), forKey: "instance")
            try ConstraintModel.status(context, "s1").setValue(first, forKey: "author")
            let second = try ConstraintModel.user(context, "1", "a.example", ["displayName": "Second", "note": "n2"])
            try second.setValue(ConstraintModel.instance(context, "two.example"), forKey: "instance")
            try ConstraintModel.status(context, "s2").setValue(second, forKey: "author")
            try second.mutableSetValue(forKey: "bookmarks").insert(ConstraintModel.status(context, "b2"))
            try ConstraintModel.user(context, "2", "a.example")
            try context.save()
            #expect(second.managedObjectContext == nil && first.managedObjectContext === context)
        }
        let users = try ConstraintModel.storedUsers(coordinator)
        #expect(users.mapValues(\.count) == ["1@a.example": 1, "2@a.example": 1])
        let user = try #require(users["1@a.example"]?.first)
        #expect(user.statuses == ["s1", "s2"] && user.bookmarks == ["b2"])
        switch policy {
        case .mergeByPropertyObjectTrump:
            // The later object's changes win over the earlier one's.
            #expect(user.displayName == "Second" && user.note == "n2" && user.followersCount == 10 && user.instance == "two.example")
        case .mergeByPropertyStoreTrump:
            // The earlier object keeps its values; the later one fills its gaps.
            #expect(user.displayName == "First" && user.note == "n2" && user.followersCount == 10 && user.instance == "one.example")
        case .overwrite:
            // The later object whole: its default follower count too.
            #expect(user.displayName == "Second" && user.note == "n2" && user.followersCount == 0 && user.instance == "two.example")
        case .rollback:
            #expect(user.displayName == "First" && user.note == nil && user.followersCount == 10 && user.instance == "one.example")
        case .error:
            Issue.record("not a merging policy")
        }
        let inverses = try ConstraintModel.storedInverses(coordinator)
        #expect(inverses.authors["s1"] == "1@a.example" && inverses.authors["s2"] == "1@a.example")
        #expect(inverses.bookmarkedBy["b2"] == ["1@a.example"])
        let winner = user.instance!, loser = winner == "one.example" ? "two.example" : "one.example"
        #expect(inverses.instanceUsers == [winner: ["1@a.example"], loser: []])
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func threeDuplicatesAndAStoredRowBecomeOne(_ type: String) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let writer = ManagedObjectContext(coordinator: coordinator)
        try writer.performAndWait {
            try ConstraintModel.user(writer, "1", "a.example", ["displayName": "Stored"])
            try writer.save()
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .mergeByPropertyObjectTrump
        try context.performAndWait {
            for name in ["A", "B", "C"] {
                let user = try ConstraintModel.user(context, "1", "a.example", ["displayName": name])
                try ConstraintModel.status(context, "by \(name)").setValue(user, forKey: "author")
            }
            try context.save()
            // An upsert again finds nothing more to merge: a second save is clean.
            try ConstraintModel.user(context, "1", "a.example", ["note": "again"])
            try context.save()
        }
        let users = try ConstraintModel.storedUsers(coordinator)
        #expect(users["1@a.example"]?.count == 1)
        let user = try #require(users["1@a.example"]?.first)
        #expect(user.displayName == "C" && user.note == "again" && user.statuses == ["by A", "by B", "by C"])
    }

    // MARK: - An update into another object's values

    @Test(arguments: cases)
    func anUpdatedObjectTakingStoredValues(_ type: String, _ policy: MergePolicy) throws {
        let coordinator = try TestStores.coordinator(ConstraintModel.make(), type: type)
        let context = ManagedObjectContext(coordinator: coordinator)
        let (oneID, twoID) = try context.performAndWait { () throws -> (ManagedObjectID, ManagedObjectID) in
            let one = try ConstraintModel.user(context, "1", "a.example", ["displayName": "One"])
            let two = try ConstraintModel.user(context, "2", "a.example", ["displayName": "Two"])
            try ConstraintModel.status(context, "by two").setValue(two, forKey: "author")
            try context.save()
            context.mergePolicy = policy
            try two.setValue("1", forKey: "userID")
            try context.save()
            return (one.objectID, two.objectID)
        }
        let users = try ConstraintModel.storedUsers(coordinator)
        if policy == .rollback {
            // Rollback discards the conflicting change (MOC-MP-07): both stay.
            #expect(users.mapValues(\.count) == ["1@a.example": 1, "2@a.example": 1])
            #expect(users["2@a.example"]?.first?.objectID == twoID && users["2@a.example"]?.first?.statuses == ["by two"])
        } else {
            // The stored "1" survives; the object that moved onto its values is merged into it and deleted.
            #expect(users.mapValues(\.count) == ["1@a.example": 1])
            let user = try #require(users["1@a.example"]?.first)
            #expect(user.objectID == oneID && user.statuses == ["by two"])
            #expect(user.displayName == (policy == .mergeByPropertyStoreTrump ? "One" : policy == .overwrite ? "Two" : "One"))
        }
    }
}
