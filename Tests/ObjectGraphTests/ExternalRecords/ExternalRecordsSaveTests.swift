import Foundation
import Testing
@testable import ObjectGraph

/// What saves write into the records directory, per format (PC-35d–g,
/// PC-43, PD-11, PD-12, PD-12a): each file's path and contents after
/// insert, update and delete.
@Suite struct ExternalRecordsSaveTests {
    static let formats: [ExternalRecordFormat] = [.json, .xml, .binary]

    // PC-35d, PC-35f, PC-35g, PC-43 (a)–(c), PD-11, PD-12, PD-12a
    @Test(arguments: formats)
    func saveUpdateAndDeleteWriteReplaceAndRemoveRecords(format: ExternalRecordFormat) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStoreCoordinator.externalRecordsFileFormatOption: format.rawValue])
        let ext = format.defaultFileExtension
        var note: ManagedObject!
        var folder: ManagedObject!
        var tags: [ManagedObject] = []
        try s.context.performAndWait {
            folder = try s.context.insertNewObject(forEntityName: "Folder")
            try folder.setValue("Inbox", forKey: "name")
            try folder.setValue(Int16(3), forKey: "position")
            for label in ["red", "blue"] {
                let tag = try s.context.insertNewObject(forEntityName: "Tag")
                try tag.setValue(label, forKey: "label")
                tags.append(tag)
            }
            note = try RecordsModel.note(s.context, "Alpha", folder: folder, tags: tags)
            _ = try s.context.insertNewObject(forEntityName: "Log")
            try s.context.save()
        }
        func pk(_ object: ManagedObject) -> Int64 { object.objectID.primaryKey! }
        let expectedFiles = ["Folder/\(pk(folder)).\(ext)", "Note/\(pk(note)).\(ext)", "Tag/\(pk(tags[0])).\(ext)", "Tag/\(pk(tags[1])).\(ext)",
                             "model.mom", "store-file"].sorted()
        // Log has nothing to export: no folder, no file.
        #expect(RecordsModel.files(under: s.storeFolder) == expectedFiles)
        #expect(try String(contentsOf: s.storeFolder.appendingPathComponent("store-file"), encoding: .utf8) == s.store.url!.absoluteString + "\n")

        let noteURL = s.storeFolder.appendingPathComponent("Note/\(pk(note)).\(ext)")
        let (record, parsedFormat) = try RecordsModel.read(noteURL)
        #expect(parsedFormat == format)   // PC-35g: a binary record parses as a binary property list
        #expect(Set(record.keys) == ["entity", "uri", "store", "id", "modified", "indexed", "values"])
        #expect(record["entity"] as? String == "Note")
        #expect(record["uri"] as? String == note.objectID.uriRepresentation.absoluteString)
        #expect(record["store"] as? String == s.store.identifier)
        #expect(record["id"] as? String == "\(s.store.identifier)_Note_\(pk(note))")
        #expect(record["indexed"] as? [String] == ["title"])   // PD-11
        let values = try #require(record["values"] as? [String: Any])
        // PC-43 (a), PD-12, PD-12a: exactly the flagged stored properties; not `secret`, not the transient `scratch`.
        #expect(values.keys.sorted() == RecordsModel.noteExported)
        #expect(values["title"] as? String == "Alpha")
        #expect(values["body"] as? String == "Body of Alpha\nsecond line")
        #expect((values["count"] as? NSNumber)?.intValue == 7)
        #expect((values["rating"] as? NSNumber)?.doubleValue == 2.5)
        #expect(values["uid"] as? String == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        #expect(values["link"] as? String == "https://example.com/notes?id=1")
        #expect(values["amount"] as? String == "12.34")
        #expect(values["folder"] as? String == folder.objectID.uriRepresentation.absoluteString)
        #expect(values["tags"] as? [String] == tags.map(\.objectID.uriRepresentation.absoluteString).sorted())
        switch format {
        case .json:
            #expect(values["created"] as? String == "2026-05-09T06:13:20.250000Z")
            #expect(values["blob"] as? String == "AAEC/w==")
        case .xml:
            // XML property lists keep dates to the second.
            #expect((values["created"] as? Date).map { abs($0.timeIntervalSince(RecordsModel.created)) < 1 } == true)
            #expect(values["blob"] as? Data == Data([0, 1, 2, 255]))
        case .binary:
            #expect(values["created"] as? Date == RecordsModel.created)
            #expect(values["blob"] as? Data == Data([0, 1, 2, 255]))
        }
        // An entity flagging nothing exports every stored attribute, all indexed.
        let folderRecord = try RecordsModel.read(s.storeFolder.appendingPathComponent("Folder/\(pk(folder)).\(ext)")).record
        #expect((folderRecord["values"] as? [String: Any])?.keys.sorted() == ["name", "position"])
        #expect(folderRecord["indexed"] as? [String] == ["name", "position"])

        // PC-43 (b): an update rewrites the record.
        try s.context.performAndWait {
            try note.setValue("Beta", forKey: "title")
            try s.context.save()
        }
        #expect(try RecordsModel.values(noteURL)["title"] as? String == "Beta")
        // A change to a property the record does not hold leaves the file alone.
        let before = try Data(contentsOf: noteURL)
        try s.context.performAndWait {
            try note.setValue("still secret", forKey: "secret")
            try s.context.save()
        }
        #expect(try Data(contentsOf: noteURL) == before)

        // PC-43 (c): a delete removes it, and only it.
        try s.context.performAndWait {
            s.context.delete(note)
            try s.context.save()
        }
        #expect(RecordsModel.files(under: s.storeFolder) == expectedFiles.filter { !$0.hasPrefix("Note/") })
        // The folder's record is rewritten without the note only if it exported the relationship; it does not.
        #expect(s.store.lastExternalRecordsError == nil)
    }

    // PC-43 (d): records are written after the save commits; a save that fails writes none.
    @Test func recordsAreWrittenOnlyAfterTheSaveCommits() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory)
        var seenAtWillSave: [String]?
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.willSaveNotification, object: s.context, queue: nil) { _ in
            seenAtWillSave = RecordsModel.files(under: s.storeFolder)
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try s.context.performAndWait {
            let bad = try RecordsModel.note(s.context, "Bad", count: -1)
            #expect(throws: CoreDataError.self) { try s.context.save() }
            s.context.delete(bad)
            try s.context.save()
        }
        #expect(RecordsModel.files(under: s.storeFolder) == ["model.mom", "store-file"])
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "Good")
            try s.context.save()
        }
        #expect(seenAtWillSave == ["model.mom", "store-file"])
        #expect(RecordsModel.files(under: s.storeFolder) == ["Note/\(note.objectID.primaryKey!).json", "model.mom", "store-file"])
    }

    // PC-35e: with extension "rec", every record file ends in .rec.
    @Test func theExtensionOptionNamesEveryRecordFile() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStoreCoordinator.externalRecordExtensionOption: "rec",
                                                            PersistentStoreCoordinator.externalRecordsFileFormatOption: "xml"])
        try s.context.performAndWait {
            for i in 0..<3 { try RecordsModel.note(s.context, "n\(i)") }
            let folder = try s.context.insertNewObject(forEntityName: "Folder")
            try folder.setValue("f", forKey: "name")
            try s.context.save()
        }
        let records = RecordsModel.files(under: s.storeFolder).filter { $0.contains("/") }
        #expect(records.count == 4)
        for path in records {
            #expect(path.hasSuffix(".rec"))
            #expect(try RecordsModel.read(s.storeFolder.appendingPathComponent(path)).format == .xml)
        }
    }

    // Every store type writes records (docs/EXTERNAL-RECORDS.md, "Which stores").
    @Test(arguments: [PersistentStoreCoordinator.inMemoryStoreType, PersistentStoreCoordinator.xmlStoreType,
                      PersistentStoreCoordinator.binaryStoreType, PersistentStoreCoordinator.sqliteStoreType])
    func everyStoreTypeWritesRecords(type: String) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, type: type, name: "Notes.store")
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "Typed")
            try s.context.save()
        }
        let url = s.storeFolder.appendingPathComponent("Note/\(note.objectID.primaryKey!).json")
        #expect(try RecordsModel.values(url)["title"] as? String == "Typed")
        try s.context.performAndWait {
            s.context.delete(note)
            try s.context.save()
        }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    // With history, the record carries the global identifier and uses it as its id.
    @Test func aStoreWithHistoryGivesRecordsTheGlobalIdentifier() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStore.persistentHistoryTrackingKey: true,
                                                            PersistentStoreCoordinator.externalRecordsChangeFeedOption: true])
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "Tracked")
            try s.context.save()
        }
        let gid = try #require(try s.coordinator.globalIdentifiers(for: [note.objectID])[note.objectID])
        let record = try RecordsModel.read(s.storeFolder.appendingPathComponent("Note/\(note.objectID.primaryKey!).json")).record
        #expect(record["globalIdentifier"] as? String == gid.uuidString)
        #expect(record["id"] as? String == gid.uuidString)
        try s.context.performAndWait {
            s.context.delete(note)
            try s.context.save()
        }
        let lines = try ExternalRecordsFeedTests.feed(s.storeFolder)
        #expect(lines.map { $0["op"] as? String } == ["upsert", "delete"])
        #expect(lines.map { $0["id"] as? String } == [gid.uuidString, gid.uuidString])
    }

    // A store added to a records directory for the first time exports what it already holds.
    @Test func addingAStoreToANewDirectoryExportsItsObjects() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("Old.sqlite")
        do {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
            let context = ManagedObjectContext(coordinator: coordinator)
            try context.performAndWait {
                for i in 0..<5 { try RecordsModel.note(context, "old \(i)") }
                try context.save()
            }
        }
        let s = try RecordsModel.stack(directory, name: "Old.sqlite")
        let notes = RecordsModel.files(under: s.storeFolder.appendingPathComponent("Note"))
        #expect(notes.count == 5)
        #expect(try notes.map { try RecordsModel.values(s.storeFolder.appendingPathComponent("Note/\($0)"))["title"] as? String }.compactMap { $0 }.sorted()
                == (0..<5).map { "old \($0)" })
    }

    // An exported to-many changed from the other side of a many-to-many rewrites the record.
    @Test func aMembershipChangedFromTheOtherSideRewritesTheRecord() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory)
        var note: ManagedObject!
        var tag: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "tagged later")
            tag = try s.context.insertNewObject(forEntityName: "Tag")
            try tag.setValue("green", forKey: "label")
            try s.context.save()
        }
        let url = try #require(s.store.externalRecordWriter).recordURL(for: note.objectID)
        #expect(try RecordsModel.values(url)["tags"] as? [String] == [])
        try s.context.performAndWait {
            try tag.setValue(Set([note!]), forKey: "notes")
            try s.context.save()
        }
        #expect(try RecordsModel.values(url)["tags"] as? [String] == [tag.objectID.uriRepresentation.absoluteString])
    }
}
