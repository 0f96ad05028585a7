import Foundation
import Testing
@testable import ObjectGraph

/// `BatchUpdateRequest` (BU-01, BU-02): attributes set in SQL with versions
/// moved, one history transaction, result types, and contexts told.
@Suite struct BatchUpdateRequestTests {
    static func stack() throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let (coordinator, context) = try HistoryModel.stack(try TestPaths.temporaryDirectory().appendingPathComponent("Update.sqlite"))
        try BatchDeleteRequestTests.populate(context)
        return (coordinator, context)
    }

    // BU-01, BU-02
    @Test func setsTheAttributesOfTheMatchingRowsInOneRecordedTransaction() throws {
        let (coordinator, context) = try Self.stack()
        context.transactionAuthor = "marker"
        let result = try context.performAndWait {
            let update = BatchUpdateRequest(entityName: "Item")
            update.predicate = try FetchPredicate(format: "title BEGINSWITH 'a'")
            update.propertiesToUpdate = ["title": "done", "count32": Int32(7)]
            update.resultType = .updatedObjectIDs
            return try context.execute(update)
        }
        let ids = try #require(result.result as? [ManagedObjectID])
        #expect(Set(ids.map(\.entityName)) == ["Item", "SpecialItem"] && ids.count == 3)
        #expect(try BatchDeleteRequestTests.titles(coordinator) == ["b1", "b2", "done", "done", "done"])
        let reader = ManagedObjectContext(coordinator: coordinator)
        try reader.performAndWait {
            let last = try #require(try reader.execute(.fetchHistory(after: nil)).transactions.last)
            #expect(last.author == "marker")
            #expect(last.changes.filter { $0.changeType == .update }.count == 3)
            let counts = try reader.fetch(FetchRequest(entityName: "Item")).compactMap { try $0.value(forKey: "count32") as? Int32 }
            #expect(counts == [7, 7, 7])
        }
        let count = try context.performAndWait {
            let clear = BatchUpdateRequest(entityName: "Item")
            clear.propertiesToUpdate = ["count32": nil]
            clear.resultType = .updatedObjectsCount
            return try context.execute(clear)
        }
        #expect(count.result as? Int == 5)
    }

    // BU-01: a context holding an old copy is told (mergeChanges), or gets a
    // conflict when it saves over the batch's change (the version moved).
    @Test func contextsHoldingOldCopiesAreToldOrConflict() throws {
        let (coordinator, context) = try Self.stack()
        let viewer = ManagedObjectContext(coordinator: coordinator)
        let (held, heldID) = try viewer.performAndWait {
            let item = try #require(try viewer.fetch(FetchRequest(entityName: "Item")).first { try $0.value(forKey: "title") as? String == "b1" })
            return (item, item.objectID)
        }
        let writer = ManagedObjectContext(coordinator: coordinator)
        let stale = try writer.performAndWait { try writer.existingObject(with: heldID) }
        let ids = try context.performAndWait {
            let update = BatchUpdateRequest(entityName: "Item")
            update.predicate = try FetchPredicate(format: "title == 'b1'")
            update.propertiesToUpdate = ["title": "b1 (batch)"]
            update.resultType = .updatedObjectIDs
            return try #require(try context.execute(update).result as? [ManagedObjectID])
        }
        ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.updatedObjectsKey: ids], into: [viewer])
        viewer.performAndWait { #expect((try? held.value(forKey: "title")) as? String == "b1 (batch)") }
        try writer.performAndWait {
            try stale.setValue("b1 (writer)", forKey: "title")
            let error = #expect(throws: CoreDataError.self) { try writer.save() }
            #expect(error?.code == .managedObjectContextMerge)
        }
    }

    /// Bad requests are refused before anything is written.
    @Test func badRequestsAreRefused() throws {
        let (coordinator, context) = try Self.stack()
        context.performAndWait {
            let relationship = BatchUpdateRequest(entityName: "Item")
            relationship.propertiesToUpdate = ["owner": nil]
            let error = #expect(throws: CoreDataError.self) { try context.execute(relationship) }
            #expect(error?.message.contains("not 'owner'") == true)
            let empty = BatchUpdateRequest(entityName: "Item")
            #expect(throws: CoreDataError.self) { try context.execute(empty) }
        }
        #expect(try BatchDeleteRequestTests.titles(coordinator) == ["a1", "a2", "a3", "b1", "b2"])
        let (_, memory) = try Company.stack()
        let unsupported = #expect(throws: CoreDataError.self) {
            try memory.performAndWait {
                let update = BatchUpdateRequest(entityName: "Department")
                update.propertiesToUpdate = ["name": "Everyone"]
                _ = try memory.execute(update)
            }
        }
        #expect(unsupported?.code == .persistentStoreUnsupportedRequestType)
    }
}
