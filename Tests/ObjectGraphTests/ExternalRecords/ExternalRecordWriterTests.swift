import Foundation
import Testing
@testable import ObjectGraph

/// The writer as the daemon uses it, on its own: the store folder it makes,
/// records written and removed on request, and a rebuild that brings a
/// damaged folder back in step (docs/EXTERNAL-RECORDS.md).
@Suite struct ExternalRecordWriterTests {
    @Test func aWriterMakesTheStoreFolderAndWritesAndRemovesRecords() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // A store that writes no records itself.
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("D.sqlite"))
        #expect(store.externalRecordWriter == nil)
        let context = ManagedObjectContext(coordinator: coordinator)
        let records = directory.appendingPathComponent("records")
        let writer = try ExternalRecordWriter(configuration: .init(directory: records, format: .xml), model: coordinator.managedObjectModel,
                                              storeIdentifier: store.identifier, storeURL: store.url)
        #expect(RecordsModel.files(under: records) == ["\(store.identifier)/model.mom", "\(store.identifier)/store-file"])
        try context.performAndWait {
            let note = try RecordsModel.note(context, "by hand")
            let log = try context.insertNewObject(forEntityName: "Log")
            // Not saved yet: a temporary ID has no record.
            #expect(throws: CoreDataError.self) { try writer.writeRecord(for: note) }
            try context.save()
            #expect(try writer.writeRecord(for: note))
            #expect(try !writer.writeRecord(for: log))   // nothing to export
            let url = writer.recordURL(for: note.objectID)
            #expect(url == records.appendingPathComponent("\(store.identifier)/Note/\(note.objectID.primaryKey!).xml"))
            #expect(try RecordsModel.values(url)["title"] as? String == "by hand")
            #expect(try RecordsModel.read(url).format == .xml)
            try writer.removeRecord(for: note.objectID)
            #expect(!FileManager.default.fileExists(atPath: url.path))
            try writer.removeRecord(for: note.objectID)   // a missing file is not an error
        }
        // An object of another store is refused.
        let other = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        try other.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType)
        let otherContext = ManagedObjectContext(coordinator: other)
        try otherContext.performAndWait {
            let stranger = try RecordsModel.note(otherContext, "stranger")
            try otherContext.save()
            let error = try #require(throws: CoreDataError.self) { try writer.writeRecord(for: stranger) }
            #expect(error.message.contains(store.identifier))
        }
    }

    @Test func rebuildRewritesTheFolderFromTheStoreAndLeavesOtherFilesAlone() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStoreCoordinator.externalRecordsPlainTextOption: true,
                                                            PersistentStoreCoordinator.externalRecordsChangeFeedOption: true])
        var notes: [ManagedObject] = []
        try s.context.performAndWait {
            for i in 0..<4 { notes.append(try RecordsModel.note(s.context, "r\(i)")) }
            try s.context.save()
        }
        let writer = try #require(s.store.externalRecordWriter)
        let noteFolder = s.storeFolder.appendingPathComponent("Note")
        // Damage: a record lost, one stale (no object), one torn by hand, a crashed writer's temporary file; and files of the user's.
        try FileManager.default.removeItem(at: writer.recordURL(for: notes[0].objectID))
        try Data("{}".utf8).write(to: noteFolder.appendingPathComponent("9999.json"))
        try Data("stale".utf8).write(to: noteFolder.appendingPathComponent("9999.txt"))
        try Data("{\"torn".utf8).write(to: writer.recordURL(for: notes[1].objectID))
        try Data("{".utf8).write(to: noteFolder.appendingPathComponent(".5.json.1-2.tmp"))
        try Data("mine".utf8).write(to: noteFolder.appendingPathComponent("README.txt"))
        try Data("mine".utf8).write(to: s.storeFolder.appendingPathComponent("NOTES.md"))
        let count = try writer.rebuild(from: s.context)
        #expect(count == 4)
        let expected = notes.flatMap { ["Note/\($0.objectID.primaryKey!).json", "Note/\($0.objectID.primaryKey!).txt"] }
            + ["NOTES.md", "Note/README.txt", "changes.ndjson", "model.mom", "store-file"]
        #expect(RecordsModel.files(under: s.storeFolder) == expected.sorted())
        #expect(try notes.map { try RecordsModel.values(writer.recordURL(for: $0.objectID))["title"] as? String } == ["r0", "r1", "r2", "r3"])
        // The feed tells loaders of the stale record's removal.
        let feed = try ExternalRecordsFeedTests.feed(s.storeFolder)
        #expect(feed.last?["op"] as? String == "delete" && feed.last?["uri"] as? String == "x-coredata://\(s.store.identifier)/Note/p9999")
        // A context of another coordinator on the same store can drive it too; one without the store cannot.
        let lone = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        #expect(throws: CoreDataError.self) { try writer.rebuild(from: ManagedObjectContext(coordinator: lone)) }
    }

    /// An ID read from persistent history names no open store; the record of
    /// an object reached through it still carries the global identifier
    /// (PC-43: the record holds the global identifier when the store keeps history).
    @Test func aRecordOfAnObjectReachedThroughHistoryHasTheGlobalIdentifier() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: directory.appendingPathComponent("D.sqlite"),
                                                       options: [PersistentStore.persistentHistoryTrackingKey: true])
        let writer = try ExternalRecordWriter(configuration: .init(directory: directory.appendingPathComponent("records")),
                                              model: coordinator.managedObjectModel, storeIdentifier: store.identifier, storeURL: store.url)
        let saving = ManagedObjectContext(coordinator: coordinator)
        try saving.performAndWait {
            try RecordsModel.note(saving, "from history")
            try saving.save()
        }
        let reading = ManagedObjectContext(coordinator: coordinator)
        try reading.performAndWait {
            let transactions = try reading.execute(.fetchHistory(after: nil)).transactions
            let change = try #require(transactions.flatMap(\.changes).first { $0.changedObjectID.entity.name == "Note" })
            let id = change.changedObjectID
            #expect(id.persistentStore == nil, "the case under test: a history ID without its store")
            let note = try reading.existingObject(with: id)
            #expect(note.objectID.persistentStore == nil, "the object keeps the store-less ID it was reached through")
            #expect(try writer.writeRecord(for: note))
            let gid = try #require(try coordinator.globalIdentifiers(for: [id])[id])
            let url = writer.recordURL(for: id)
            #expect(try RecordsModel.read(url).record["globalIdentifier"] as? String == gid.uuidString)
            #expect(try RecordsModel.values(url)["title"] as? String == "from history")
        }
    }
}
