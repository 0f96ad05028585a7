import Foundation
import Testing
@testable import ObjectGraph

/// A single-store save finds conflicts through the write itself (UPDATE …
/// AND Z_OPT = ?), resolves them with the merge policy, and writes once more
/// (MOC-MP-04…MOC-MP-08, MOC-SV-06 steps 7–9). A save by another writer while
/// the policy resolves is looked up and resolved too before the second write.
@Suite(.serialized) struct ContextSaveRetryTests {
    /// Runs `onMergeAwake` when the merge policy has just resolved it, that
    /// is between the failed first write and the second.
    final class RacingItem: ManagedObject {
        nonisolated(unsafe) static var onMergeAwake: (() -> Void)?
        override func awake(fromSnapshotEvents events: SnapshotEventType) {
            super.awake(fromSnapshotEvents: events)
            if events.contains(.mergePolicy) { Self.onMergeAwake?() }
        }
    }

    static func model() -> ManagedObjectModel {
        let item = EntityDescription(name: "RacingItem")
        item.managedObjectClassName = "RacingItem"
        item.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "count", type: .integer64)]
        let model = ManagedObjectModel()
        model.entities = [item]
        return model
    }

    /// Two coordinators on one file, one saved item, and a context on each
    /// with the item loaded.
    static func twoWriters() throws -> (ManagedObjectContext, ManagedObjectContext, ManagedObject, ManagedObject, URL) {
        ManagedObjectClassRegistry.shared.register(RacingItem.self)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("retry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let mine = try context(on: directory), theirs = try context(on: directory)
        let id: ManagedObjectID = try mine.performAndWait {
            let item = try mine.insertNewObject(forEntityName: "RacingItem")
            try item.setValue("first", forKey: "name")
            try item.setValue(Int64(1), forKey: "count")
            try mine.save()
            return item.objectID
        }
        let myItem = try mine.performAndWait { try mine.existingObject(with: id) }
        let theirItem = try theirs.performAndWait {
            try theirs.existingObject(with: try #require(theirs.persistentStoreCoordinator.managedObjectID(forURIRepresentation: id.uriRepresentation)))
        }
        return (mine, theirs, myItem, theirItem, directory)
    }

    /// A context on its own coordinator over the test's store file.
    static func context(on directory: URL) throws -> ManagedObjectContext {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("R.sqlite"))
        return ManagedObjectContext(coordinator: coordinator)
    }

    /// The item's stored values, read through a coordinator of its own.
    static func storedRow(in directory: URL) throws -> (name: String?, count: Int64?) {
        let reader = try context(on: directory)
        return try reader.performAndWait {
            let row = try #require(try reader.fetch(FetchRequest(entityName: "RacingItem")).first)
            return (try row.value(forKey: "name") as? String, try row.value(forKey: "count") as? Int64)
        }
    }

    @Test func aConflictFoundByTheWriteIsResolvedAndWrittenAgain() throws {
        let (mine, theirs, myItem, theirItem, directory) = try Self.twoWriters()
        defer { try? FileManager.default.removeItem(at: directory) }
        try theirs.performAndWait {
            try theirItem.setValue("theirs", forKey: "name")
            try theirs.save()
        }
        try mine.performAndWait {
            mine.mergePolicy = .mergeByPropertyObjectTrump
            try myItem.setValue(Int64(2), forKey: "count")
            try mine.save()
            // Their name (a property this side did not change) and this side's count.
            #expect(try myItem.value(forKey: "name") as? String == "theirs")
            #expect(try myItem.value(forKey: "count") as? Int64 == 2)
            #expect(!mine.hasChanges)
        }
        // What the file holds, read by a third coordinator.
        let stored = try Self.storedRow(in: directory)
        #expect(stored.name == "theirs")
        #expect(stored.count == 2)
    }

    @Test func aWriteDuringResolutionIsResolvedBeforeTheSecondWrite() throws {
        let (mine, theirs, myItem, theirItem, directory) = try Self.twoWriters()
        defer { try? FileManager.default.removeItem(at: directory) }
        defer { RacingItem.onMergeAwake = nil }
        try theirs.performAndWait {
            try theirItem.setValue("theirs", forKey: "name")
            try theirs.save()
        }
        // While the merge policy resolves the first conflict, the other
        // writer saves again: conflicts are looked up again until none are
        // left, so the second write starts from the newest row.
        var hookSaved = false
        RacingItem.onMergeAwake = {
            RacingItem.onMergeAwake = nil
            do {
                try theirs.performAndWait { () throws -> Void in
                    try theirItem.setValue("again", forKey: "name")
                    try theirItem.setValue(Int64(99), forKey: "count")
                    try theirs.save()
                }
                hookSaved = true
            } catch {
                Issue.record("the other writer's save failed: \(error)")
            }
        }
        try mine.performAndWait {
            mine.mergePolicy = .mergeByPropertyObjectTrump
            try myItem.setValue(Int64(2), forKey: "count")
            try mine.save()
            #expect(try myItem.value(forKey: "name") as? String == "again")
            #expect(try myItem.value(forKey: "count") as? Int64 == 2)
        }
        #expect(hookSaved)
        let stored = try Self.storedRow(in: directory)
        #expect(stored.name == "again")   // their later name
        #expect(stored.count == 2)        // object trump: this side's count
    }

    @Test func theErrorPolicyReportsAConflictFoundByTheWrite() throws {
        let (mine, theirs, myItem, theirItem, directory) = try Self.twoWriters()
        defer { try? FileManager.default.removeItem(at: directory) }
        try theirs.performAndWait {
            try theirItem.setValue("theirs", forKey: "name")
            try theirs.save()
        }
        try mine.performAndWait {
            try myItem.setValue(Int64(2), forKey: "count")
            let error = #expect(throws: CoreDataError.self) { try mine.save() }
            #expect(error?.code == .managedObjectContextMerge)
            let conflicts = error?.userInfo[MergeConflict.conflictListKey] as? [MergeConflict]
            #expect(conflicts?.count == 1)
            #expect(conflicts?.first?.object === myItem)
            #expect(mine.hasChanges)   // nothing of the failed save was committed
        }
    }
}
