import Foundation
import Testing
@testable import ObjectGraph

/// `BatchDeleteRequest` (BD-01…04) on the history model: rows deleted in
/// SQL with their delete rules, one history transaction, result types, and
/// contexts told with `mergeChanges(fromRemoteContextSave:into:)`.
@Suite struct BatchDeleteRequestTests {
    static func url() throws -> URL { try TestPaths.temporaryDirectory().appendingPathComponent("Batch.sqlite") }

    /// Owner o1 with items a1, a2, b1, b2 and special item a3; tag t1 on a1
    /// and b1; owner o2 with one part.
    static func populate(_ context: ManagedObjectContext) throws {
        try context.performAndWait {
            let o1 = try context.insertNewObject(forEntityName: "Owner")
            try o1.setValue("o1", forKey: "name")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try tag.setValue("t1", forKey: "name")
            for (title, entity) in [("a1", "Item"), ("a2", "Item"), ("b1", "Item"), ("b2", "Item"), ("a3", "SpecialItem")] {
                let item = try context.insertNewObject(forEntityName: entity)
                try item.setValue(title, forKey: "title")
                try item.setValue(o1, forKey: "owner")
                if title == "a1" || title == "b1" { try item.mutableSetValue(forKey: "tags").insert(tag) }
            }
            let o2 = try context.insertNewObject(forEntityName: "Owner")
            try o2.setValue("o2", forKey: "name")
            let part = try context.insertNewObject(forEntityName: "Part")
            try part.setValue("p1", forKey: "name")
            try part.setValue(o2, forKey: "owner")
            try context.save()
        }
    }

    static func titles(_ coordinator: PersistentStoreCoordinator, _ entity: String = "Item", key: String = "title") throws -> [String] {
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            try context.fetch(FetchRequest(entityName: entity)).compactMap { try $0.value(forKey: key) as? String }.sorted()
        }
    }

    // BD-01, BD-02: sub-entities included, the count of matched objects,
    // many-to-many rows gone, one history transaction of deletes by the
    // context's author.
    @Test func deletesWhatTheRequestMatchesInOneRecordedTransaction() throws {
        let (coordinator, context) = try HistoryModel.stack(try Self.url())
        try Self.populate(context)
        context.transactionAuthor = "cleaner"
        context.name = "batch"
        let result = try context.performAndWait {
            let request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "title BEGINSWITH 'a'")
            let delete = BatchDeleteRequest(fetchRequest: request)
            delete.resultType = .count
            return try context.execute(delete)
        }
        #expect(result.resultType == .count && result.result as? Int == 3)
        #expect(try Self.titles(coordinator) == ["b1", "b2"])
        let reader = ManagedObjectContext(coordinator: coordinator)
        try reader.performAndWait {
            let tag = try #require(try reader.fetch(FetchRequest(entityName: "Tag")).first)
            #expect(try tag.mutableSetValue(forKey: "items").allObjects().compactMap { try $0.value(forKey: "title") as? String } == ["b1"])
            let owner = try #require(try reader.fetch(FetchRequest(entityName: "Owner")).first { try $0.value(forKey: "name") as? String == "o1" })
            #expect(try owner.mutableSetValue(forKey: "items").count == 2)
            let last = try #require(try reader.execute(.fetchHistory(after: nil)).transactions.last)
            #expect(last.author == "cleaner" && last.contextName == "batch")
            #expect(last.changes.filter { $0.changeType == .delete }.count == 3)
            #expect(Set(last.changes.filter { $0.changeType == .delete }.map(\.changedObjectID.entityName)) == ["Item", "SpecialItem"])
        }
    }

    // BD-03: cascade takes the destinations along; the ones that stay lose
    // their references (nullify); BD-02: object IDs of everything deleted.
    @Test func cascadeAndNullifyRulesApplyInSQL() throws {
        let model = HistoryModel.make()
        model.entitiesByName["Owner"]!.relationshipsByName["items"]!.deleteRule = .cascade
        let (coordinator, context) = try HistoryModel.stack(try Self.url(), model: model)
        try Self.populate(context)
        let result = try context.performAndWait {
            let request = FetchRequest(entityName: "Owner")
            request.predicate = try FetchPredicate(format: "name == 'o1'")
            let delete = BatchDeleteRequest(fetchRequest: request)
            delete.resultType = .objectIDs
            return try context.execute(delete)
        }
        let ids = try #require(result.result as? [ManagedObjectID])
        #expect(ids.map(\.entityName).sorted() == ["Item", "Item", "Item", "Item", "Owner", "SpecialItem"])
        #expect(try Self.titles(coordinator).isEmpty)
        #expect(try Self.titles(coordinator, "Owner", key: "name") == ["o2"])
        // Nullify: o2's part loses nothing; deleting o2 (parts: nullify) keeps the part, owner cleared.
        try context.performAndWait {
            let request = FetchRequest(entityName: "Owner")
            _ = try context.execute(BatchDeleteRequest(fetchRequest: request))
        }
        let reader = ManagedObjectContext(coordinator: coordinator)
        try reader.performAndWait {
            let part = try #require(try reader.fetch(FetchRequest(entityName: "Part")).first)
            #expect(try part.value(forKey: "owner") == nil)
            #expect(try reader.count(for: FetchRequest(entityName: "Tag")) == 1)
        }
    }

    // BD-03: a deny rule with a destination left refuses the whole request.
    @Test func aDenyRuleRefusesAndNothingIsDeleted() throws {
        let model = HistoryModel.make()
        model.entitiesByName["Owner"]!.relationshipsByName["parts"]!.deleteRule = .deny
        let (coordinator, context) = try HistoryModel.stack(try Self.url(), model: model)
        try Self.populate(context)
        let error = #expect(throws: CoreDataError.self) {
            try context.performAndWait { _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Owner"))) }
        }
        #expect(error?.code == .validationRelationshipDeniedDelete && error?.message.contains("'parts'") == true)
        #expect(try Self.titles(coordinator, "Owner", key: "name") == ["o1", "o2"])
        #expect(try Self.titles(coordinator).count == 5)
        // With the part deleted too, the same request goes through.
        try context.performAndWait {
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Part")))
            let status = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Owner")))
            #expect(status.resultType == .statusOnly && status.result as? Bool == true)
        }
        #expect(try Self.titles(coordinator, "Owner", key: "name").isEmpty)
    }

    // BD-01: by object IDs of one entity; mixing entities, or a store that
    // is not SQLite, is an error.
    @Test func objectIDsAndUnsupportedStores() throws {
        let (coordinator, context) = try HistoryModel.stack(try Self.url())
        try Self.populate(context)
        try context.performAndWait {
            let items = try context.fetch(FetchRequest(entityName: "Item")).filter { try $0.value(forKey: "title") as? String == "b2" }
            let delete = BatchDeleteRequest(objectIDs: items.map(\.objectID))
            delete.resultType = .count
            #expect(try context.execute(delete).result as? Int == 1)
            let owner = try #require(try context.fetch(FetchRequest(entityName: "Owner")).first)
            let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag")).first)
            let mixed = #expect(throws: CoreDataError.self) { try context.execute(BatchDeleteRequest(objectIDs: [owner.objectID, tag.objectID])) }
            #expect(mixed?.message.contains("one entity") == true)
        }
        #expect(try Self.titles(coordinator) == ["a1", "a2", "a3", "b1"])

        let (_, memory) = try Company.stack()
        let unsupported = #expect(throws: CoreDataError.self) {
            try memory.performAndWait { _ = try memory.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Department"))) }
        }
        #expect(unsupported?.code == .persistentStoreUnsupportedRequestType)
    }

    // BD-04: a context keeps its objects until told; told, it forgets them
    // and posts objects-did-change. A new context never sees a deleted row.
    @Test func contextsAreToldWithMergeChangesFromRemoteContextSave() throws {
        let (coordinator, context) = try HistoryModel.stack(try Self.url())
        try Self.populate(context)
        let viewer = ManagedObjectContext(coordinator: coordinator)
        let held = try viewer.performAndWait { try viewer.fetch(FetchRequest(entityName: "Item")) }
        let result = try context.performAndWait {
            let delete = BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Item"))
            delete.resultType = .objectIDs
            return try context.execute(delete)
        }
        let ids = try #require(result.result as? [ManagedObjectID])
        #expect(ids.count == 5)
        viewer.performAndWait { #expect(viewer.registeredObjects.count >= 5) }
        let fresh = ManagedObjectContext(coordinator: coordinator)
        fresh.performAndWait {
            #expect(throws: CoreDataError.self) { try fresh.existingObject(with: ids[0]) }
        }
        var deletedSeen = 0
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification, object: viewer, queue: nil) { note in
            deletedSeen += (note.userInfo?[ManagedObjectContext.deletedObjectsKey] as? Set<ManagedObject>)?.count ?? 0
        }
        defer { NotificationCenter.default.removeObserver(token) }
        ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["NSDeletedObjectsKey": ids.map(\.uriRepresentation)], into: [viewer])
        #expect(deletedSeen == 5)
        viewer.performAndWait {
            #expect(!viewer.registeredObjects.contains { held.contains($0) })
        }
    }

    // BD-01, BD-02: an entity no relationship touches is deleted with one
    // statement; the count and the history are the same as on the general path.
    @Test func anEntityWithoutRelationshipsIsDeletedWithOneStatement() throws {
        let row = EntityDescription(name: "Row")
        row.properties = [AttributeDescription(name: "n", type: .integer64)]
        let model = ManagedObjectModel()
        model.entities = [row]
        let (coordinator, context) = try HistoryModel.stack(try Self.url(), model: model)
        let five = try context.performAndWait {
            for n in 0..<10 { try context.insertNewObject(forEntityName: "Row").setValue(Int64(n), forKey: "n") }
            try context.save()
            // Read through the coordinator, so its row is cached.
            return try #require(try context.fetch(FetchRequest(entityName: "Row")).first { try $0.value(forKey: "n") as? Int64 == 5 }).objectID
        }
        try context.performAndWait {
            let request = FetchRequest(entityName: "Row")
            request.predicate = try FetchPredicate(format: "n >= 4 AND n < 9")
            let delete = BatchDeleteRequest(fetchRequest: request)
            delete.resultType = .count
            #expect(try context.execute(delete).result as? Int == 5)
        }
        let reader = ManagedObjectContext(coordinator: coordinator)
        try reader.performAndWait {
            let left = try reader.fetch(FetchRequest(entityName: "Row")).compactMap { try $0.value(forKey: "n") as? Int64 }.sorted()
            #expect(left == [0, 1, 2, 3, 9])
            // The one-statement path lists no IDs, yet no deleted row is served from the coordinator's cache.
            #expect(throws: CoreDataError.self) { try reader.existingObject(with: five) }
            let last = try #require(try reader.execute(.fetchHistory(after: nil)).transactions.last)
            #expect(last.changes.filter { $0.changeType == .delete }.count == 5)
        }
    }
}
