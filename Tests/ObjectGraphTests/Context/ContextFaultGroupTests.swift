import Foundation
import Testing
@testable import ObjectGraph

/// FLT-01/FLT-08 with batching: the members of a fired to-many fault are
/// faults, and each fires on its own (Core Data's semantics), but the rows
/// behind them are read 500 at a time, so walking a relationship of n
/// members costs about n/500 queries instead of n.
@Suite struct ContextFaultGroupTests {
    static let members = 1_203

    /// Group(title, items ↔ Item.group), Item(name).
    static func model() -> ManagedObjectModel {
        let group = EntityDescription(name: "Group")
        let item = EntityDescription(name: "Item")
        let items = RelationshipDescription(name: "items", destination: item, toMany: true)
        let owner = RelationshipDescription(name: "group", destination: group)
        items.inverseRelationship = owner
        owner.inverseRelationship = items
        group.properties = [AttributeDescription(name: "title", type: .string), items]
        item.properties = [AttributeDescription(name: "name", type: .string), owner]
        let model = ManagedObjectModel()
        model.entities = [group, item]
        return model
    }

    /// A saved store with one group of `members` items, and a fresh context on it.
    static func savedGroup() throws -> (ManagedObjectContext, SQLiteStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("faultgroup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("G.sqlite"))
        let writer = ManagedObjectContext(coordinator: coordinator)
        try writer.performAndWait {
            let group = try writer.insertNewObject(forEntityName: "Group")
            try group.setValue("g", forKey: "title")
            let items = try group.mutableSetValue(forKey: "items")
            for i in 0..<members {
                let item = try writer.insertNewObject(forEntityName: "Item")
                try item.setValue("item\(i)", forKey: "name")
                try items.insert(item)
            }
            try writer.save()
        }
        // A second coordinator: its row cache is empty, so every row must be read.
        let readerCoordinator = try PersistentStoreCoordinator(managedObjectModel: model())
        let readerStore = try #require(try readerCoordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                                                at: directory.appendingPathComponent("G.sqlite")) as? SQLiteStore)
        return (ManagedObjectContext(coordinator: readerCoordinator), readerStore, directory)
    }

    @Test func walkingAToManyReadsRowsInBatchesAndMembersStayFaults() throws {
        let (context, store, directory) = try Self.savedGroup()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            let group = try #require(try context.fetch(FetchRequest(entityName: "Group")).first)
            let items = try #require(try group.value(forKey: "items") as? Set<ManagedObject>)
            #expect(items.count == Self.members)
            #expect(items.allSatisfy { $0.isFault })

            let before = store.executedStatementCount
            var names = Set<String>()
            for (n, item) in items.enumerated() {
                names.insert(try #require(try item.value(forKey: "name") as? String))
                if n == 0 {
                    // One member fired: its neighbours are still faults (FLT-01).
                    #expect(items.filter { !$0.isFault }.count == 1)
                }
            }
            let queries = store.executedStatementCount - before
            #expect(names == Set((0..<Self.members).map { "item\($0)" }))
            // ceil(1203 / 500) = 3 batches; never one query per member.
            #expect(queries <= 3, "walking \(Self.members) members ran \(queries) queries")
            #expect(items.allSatisfy { !$0.isFault })
        }
    }

    @Test func zeroStalenessFiresEachFaultFromTheStore() throws {
        let (context, store, directory) = try Self.savedGroup()
        defer { try? FileManager.default.removeItem(at: directory) }
        try context.performAndWait {
            context.stalenessInterval = 0
            let group = try #require(try context.fetch(FetchRequest(entityName: "Group")).first)
            let items = Array(try #require(try group.value(forKey: "items") as? Set<ManagedObject>).prefix(10))
            let before = store.executedStatementCount
            for item in items { _ = try item.value(forKey: "name") }
            // MOC-ST: staleness 0 always refetches; no batch is read ahead.
            #expect(store.executedStatementCount - before == items.count)
        }
    }

    @Test func aMemberDeletedMeanwhileStillReports133000() throws {
        let (context, _, directory) = try Self.savedGroup()
        defer { try? FileManager.default.removeItem(at: directory) }
        let doomedName: String = try context.performAndWait {
            let group = try #require(try context.fetch(FetchRequest(entityName: "Group")).first)
            let items = try #require(try group.value(forKey: "items") as? Set<ManagedObject>)
            // Another coordinator deletes one member before any member fires.
            let other = try PersistentStoreCoordinator(managedObjectModel: Self.model())
            try other.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("G.sqlite"))
            let deleter = ManagedObjectContext(coordinator: other)
            let victim = try #require(items.first)
            let name: String = try deleter.performAndWait {
                let id = try #require(other.managedObjectID(forURIRepresentation: victim.objectID.uriRepresentation))
                let doomed = try deleter.existingObject(with: id)
                let name = try #require(try doomed.value(forKey: "name") as? String)
                deleter.delete(doomed)
                try deleter.save()
                return name
            }
            let error = #expect(throws: CoreDataError.self) { try victim.value(forKey: "name") }
            #expect(error?.code == .managedObjectContextReferentialIntegrity)
            for item in items.dropFirst() { #expect(try item.value(forKey: "name") is String) }
            return name
        }
        #expect(doomedName.hasPrefix("item"))
    }
}
