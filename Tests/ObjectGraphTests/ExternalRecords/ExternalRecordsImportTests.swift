import Foundation
import Testing
@testable import ObjectGraph

/// Building a new store from a records directory (PC-41) and its refusals
/// (NSExternalRecordImportError 134200, naming the file).
@Suite struct ExternalRecordsImportTests {
    typealias C = PersistentStoreCoordinator

    /// Saves three notes in two folders with tags into a store writing `format` records.
    static func export(_ directory: URL, format: ExternalRecordFormat = .json, name: String = "Source.sqlite",
                       history: Bool = false) throws -> RecordsModel.Stack {
        var options: [String: Any] = [C.externalRecordsFileFormatOption: format.rawValue, C.externalRecordsPlainTextOption: true]
        if history { options[PersistentStore.persistentHistoryTrackingKey] = true }
        let s = try RecordsModel.stack(directory, name: name, options: options)
        try s.context.performAndWait {
            let inbox = try s.context.insertNewObject(forEntityName: "Folder")
            try inbox.setValue("Inbox", forKey: "name")
            try inbox.setValue(Int16(1), forKey: "position")
            let red = try s.context.insertNewObject(forEntityName: "Tag")
            try red.setValue("red", forKey: "label")
            let blue = try s.context.insertNewObject(forEntityName: "Tag")
            try blue.setValue("blue", forKey: "label")
            try RecordsModel.note(s.context, "first", count: 1, folder: inbox, tags: [red, blue])
            try RecordsModel.note(s.context, "second", count: 2, folder: inbox, tags: [red])
            let lone = try RecordsModel.note(s.context, "third", count: 3)
            try lone.setValue(nil, forKey: "body")
            try s.context.save()
        }
        return s
    }

    /// Each object as entity name and its exported values, plus relationships by a value of the destination.
    static func contents(_ context: ManagedObjectContext, store: PersistentStore) throws -> [String] {
        try context.performAndWait {
            var out: [String] = []
            for entity in ["Note", "Folder", "Tag"] {
                // The coordinators here hold one store each: `store`.
                for object in try context.fetch(FetchRequest(entityName: entity)) where object.objectID.storeIdentifier == store.identifier {
                    var parts: [String] = [entity]
                    for key in object.entity.properties.map(\.name).sorted() where !["secret", "scratch", "notes"].contains(key) {
                        let value = try object.value(forKey: key)
                        switch value {
                        case let target as ManagedObject: parts.append("\(key)=\(try target.value(forKey: target.entity.name == "Folder" ? "name" : "label") ?? "")")
                        case let set as Set<ManagedObject>: parts.append("\(key)=\(try set.map { "\(try $0.value(forKey: "label") ?? "")" }.sorted())")
                        default: parts.append("\(key)=\(value.map { "\($0)" } ?? "nil")")
                        }
                    }
                    out.append(parts.joined(separator: " "))
                }
            }
            return out.sorted()
        }
    }

    // PC-41 (a): export, delete the store, import → the same objects and values.
    @Test(arguments: ExternalRecordsSaveTests.formats)
    func importingARecordsDirectoryGivesTheSameObjectsAndValues(format: ExternalRecordFormat) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try Self.export(directory, format: format)
        var expected = try Self.contents(s.context, store: s.store)
        if format == .xml {
            // XML property lists keep dates to the second.
            expected = expected.map { $0.replacingOccurrences(of: "\(RecordsModel.created)", with: "\(Date(timeIntervalSinceReferenceDate: RecordsModel.created.timeIntervalSinceReferenceDate.rounded(.down)))") }
        }
        try s.coordinator.remove(s.store)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: s.store.url!.path + suffix) }

        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let destination = directory.appendingPathComponent("Imported.sqlite")
        let imported = try coordinator.importStore(identifier: s.store.identifier, fromExternalRecordsDirectory: s.records,
                                                   to: destination, type: C.sqliteStoreType)
        #expect(coordinator.persistentStores.contains { $0 === imported })
        #expect(imported.identifier != s.store.identifier)
        let actual = try Self.contents(ManagedObjectContext(coordinator: coordinator), store: imported)
        #expect(actual == expected)
        #expect(actual.count == 6)
        #expect(actual.contains { $0.hasPrefix("Note amount=12.34 blob=4 bytes body=nil count=3") })
    }

    // PC-41: global identifiers survive an import into a store that records history.
    @Test func importingIntoAHistoryStoreKeepsGlobalIdentifiers() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try Self.export(directory, history: true)
        let ids = try s.context.performAndWait { try s.context.fetch(FetchRequest(entityName: "Note")).map(\.objectID) }
        let before = Set(try s.coordinator.globalIdentifiers(for: ids).values)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let imported = try coordinator.importStore(identifier: nil, fromExternalRecordsDirectory: s.records,
                                                   to: directory.appendingPathComponent("Copy.sqlite"),
                                                   options: [PersistentStore.persistentHistoryTrackingKey: true], type: C.sqliteStoreType)
        let context = ManagedObjectContext(coordinator: coordinator)
        let copies = try context.performAndWait { try context.fetch(FetchRequest(entityName: "Note")).map(\.objectID) }
        #expect(before.count == 3)
        #expect(Set(try coordinator.globalIdentifiers(for: copies).values) == before)
        #expect(imported.recordsPersistentHistory)
    }

    // PC-41 (b): an existing destination is refused and left untouched.
    @Test func anExistingDestinationIsRefusedAndUntouched() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try Self.export(directory)
        let destination = directory.appendingPathComponent("Existing.sqlite")
        let original = Data("not to be touched".utf8)
        try original.write(to: destination)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let error = try #require(throws: CoreDataError.self) {
            try coordinator.importStore(identifier: nil, fromExternalRecordsDirectory: s.records, to: destination, type: C.sqliteStoreType)
        }
        #expect(error.code == .externalRecordImport && error.errorCode == 134200)
        #expect(error.userInfo[CoreDataError.filePathErrorKey] as? String == destination.path)
        #expect(try Data(contentsOf: destination) == original)
        #expect(coordinator.persistentStores.isEmpty)
    }

    // PC-41 (c), (d): nil picks the first store folder in sorted order; an unknown identifier is an error.
    @Test func aNilIdentifierTakesTheFirstStoreInSortedOrderAndAnUnknownOneIsRefused() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try Self.export(directory, name: "A.sqlite")
        let records = a.records
        let b = try RecordsModel.stack(directory, name: "B.sqlite", records: records)
        try b.context.performAndWait {
            let tag = try b.context.insertNewObject(forEntityName: "Tag")
            try tag.setValue("only in B", forKey: "label")
            try b.context.save()
        }
        let first = [a.store.identifier, b.store.identifier].sorted()[0]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let imported = try coordinator.importStore(identifier: nil, fromExternalRecordsDirectory: records,
                                                   to: directory.appendingPathComponent("First.sqlite"), type: C.sqliteStoreType)
        let context = ManagedObjectContext(coordinator: coordinator)
        let count = try context.performAndWait { try context.count(for: FetchRequest(entityName: "Tag")) }
        #expect(imported.url?.lastPathComponent == "First.sqlite")
        #expect(count == (first == b.store.identifier ? 1 : 2))

        let unknown = UUID().uuidString
        let error = try #require(throws: CoreDataError.self) {
            try coordinator.importStore(identifier: unknown, fromExternalRecordsDirectory: records,
                                        to: directory.appendingPathComponent("Unknown.sqlite"), type: C.sqliteStoreType)
        }
        #expect(error.code == .externalRecordImport)
        #expect(error.message.contains(unknown) && error.message.contains(a.store.identifier) && error.message.contains(b.store.identifier))
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("Unknown.sqlite").path))
    }

    // Bad input: files that are not records are ignored; a record that
    // cannot be read, or belongs to another store, is refused naming it, and
    // nothing is left at the destination.
    @Test func nonRecordFilesAreIgnoredAndBadRecordsAreRefusedNamingTheFile() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try Self.export(directory)
        let noteFolder = s.storeFolder.appendingPathComponent("Note")
        try Data("notes about the notes".utf8).write(to: s.storeFolder.appendingPathComponent("README.txt"))
        try Data("readme".utf8).write(to: noteFolder.appendingPathComponent("README.txt"))
        try Data("{half".utf8).write(to: noteFolder.appendingPathComponent(".77.json.1-2.tmp"))
        try Data("{half".utf8).write(to: noteFolder.appendingPathComponent("77.json.tmp"))
        try FileManager.default.createDirectory(at: s.storeFolder.appendingPathComponent("notes-by-hand"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: s.storeFolder.appendingPathComponent("notes-by-hand/todo.md"))
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let imported = try coordinator.importStore(identifier: nil, fromExternalRecordsDirectory: s.records,
                                                   to: directory.appendingPathComponent("Ok.sqlite"), type: C.sqliteStoreType)
        #expect(try Self.contents(ManagedObjectContext(coordinator: coordinator), store: imported).count == 6)

        func refusal(_ destinationName: String) throws -> CoreDataError {
            let destination = directory.appendingPathComponent(destinationName)
            let error = try #require(throws: CoreDataError.self) {
                try coordinator.importStore(identifier: s.store.identifier, fromExternalRecordsDirectory: s.records, to: destination, type: C.sqliteStoreType)
            }
            #expect(error.code == .externalRecordImport)
            #expect(!FileManager.default.fileExists(atPath: destination.path))
            return error
        }
        // A record that cannot be read.
        let broken = noteFolder.appendingPathComponent("9999.json")
        try Data("{\"entity\": \"Note\", ".utf8).write(to: broken)
        var error = try refusal("Broken.sqlite")
        #expect(error.userInfo[CoreDataError.filePathErrorKey] as? String == broken.path)
        #expect(error.message.contains(broken.path))
        try FileManager.default.removeItem(at: broken)
        // A record of another store, copied into this store's folder.
        let other = try Self.export(directory.appendingPathComponent("other-\(UUID().uuidString)").creatingDirectory(), name: "Other.sqlite")
        let foreign = try #require(RecordsModel.files(under: other.storeFolder.appendingPathComponent("Note")).first { $0.hasSuffix(".json") })
        let misplaced = noteFolder.appendingPathComponent("8888.json")
        try FileManager.default.copyItem(at: other.storeFolder.appendingPathComponent("Note/\(foreign)"), to: misplaced)
        error = try refusal("Foreign.sqlite")
        #expect(error.userInfo[CoreDataError.filePathErrorKey] as? String == misplaced.path)
        #expect(error.message.contains(other.store.identifier))
        try FileManager.default.removeItem(at: misplaced)
        // A value of the wrong form names the file and the property.
        let wrong = noteFolder.appendingPathComponent("7777.json")
        try Data(#"{"entity":"Note","store":"\#(s.store.identifier)","uri":"x-coredata://\#(s.store.identifier)/Note/p7777","values":{"count":"many"}}"#.utf8).write(to: wrong)
        error = try refusal("Wrong.sqlite")
        #expect(error.userInfo[CoreDataError.filePathErrorKey] as? String == wrong.path)
        #expect(error.message.contains("'count'"))
        try FileManager.default.removeItem(at: wrong)
        // A directory that holds no store folder.
        let empty = try directory.appendingPathComponent("empty").creatingDirectory()
        #expect(throws: CoreDataError.self) {
            try coordinator.importStore(identifier: nil, fromExternalRecordsDirectory: empty, to: directory.appendingPathComponent("None.sqlite"), type: C.sqliteStoreType)
        }
    }
}

extension URL {
    /// Creates the directory and returns it.
    func creatingDirectory() throws -> URL {
        try FileManager.default.createDirectory(at: self, withIntermediateDirectories: true)
        return self
    }
}
