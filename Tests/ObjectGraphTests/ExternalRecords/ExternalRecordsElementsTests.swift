import Foundation
import Testing
@testable import ObjectGraph

/// The elements of a record read from its location (PC-40, PC-42).
@Suite struct ExternalRecordsElementsTests {
    typealias C = PersistentStoreCoordinator

    @Test(arguments: ExternalRecordsSaveTests.formats)
    func elementsOfARecordNameItsEntityStoreModelAndObject(format: ExternalRecordFormat) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [C.externalRecordsFileFormatOption: format.rawValue])
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "Located")
            try s.context.save()
        }
        let url = try #require(s.store.externalRecordWriter).recordURL(for: note.objectID)
        #expect(url.path.hasSuffix("/\(s.store.identifier)/Note/\(note.objectID.primaryKey!).\(format.defaultFileExtension)"))
        let elements = try #require(C.elementsDerived(fromExternalRecordAt: url))
        #expect(Set(elements.keys) == [C.entityNameInPathKey, C.storeUUIDInPathKey, C.storePathKey, C.modelPathKey, C.objectURIKey])
        #expect(elements[C.entityNameInPathKey] as? String == "Note")
        #expect(elements[C.storeUUIDInPathKey] as? String == s.store.identifier)
        // The object URI resolves back to the object on a coordinator that has the store.
        let uri = try #require(elements[C.objectURIKey] as? URL)
        #expect(uri == note.objectID.uriRepresentation)
        #expect(s.coordinator.managedObjectID(forURIRepresentation: uri) == note.objectID)
        // The store path leads to the real store; the model path loads as the store's model.
        let storeFile = try #require(elements[C.storePathKey] as? URL)
        #expect(storeFile.lastPathComponent == "store-file")
        #expect(try C.storeURL(fromExternalRecordsStoreFile: storeFile)?.standardizedFileURL == s.store.url?.standardizedFileURL)
        let modelURL = try #require(elements[C.modelPathKey] as? URL)
        #expect(modelURL.lastPathComponent == "model.mom")
        let model = try CompiledModelBundle.read(contentsOf: modelURL)
        #expect(model.entityVersionHashesByName == s.coordinator.managedObjectModel.entityVersionHashesByName)
        // The instance method answers the same.
        #expect((s.coordinator.elementsDerived(fromExternalRecordAt: url)?[C.objectURIKey] as? URL) == uri)
    }

    // PC-40: nil for a URL outside a valid records layout.
    @Test func aURLOutsideARecordsLayoutHasNoElements() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [C.externalRecordsPlainTextOption: true])
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "x")
            try s.context.save()
        }
        let pk = note.objectID.primaryKey!
        let noteFolder = s.storeFolder.appendingPathComponent("Note")
        // A record's URL still parses after the record is gone (an indexer told of the deletion).
        #expect(C.elementsDerived(fromExternalRecordAt: noteFolder.appendingPathComponent("999.json")) != nil)
        // Not records: the rendering, other names, temporary files, the layout's own files.
        for name in ["\(pk).txt", "README.txt", ".\(pk).json.123-abc.tmp", "\(pk).json.tmp", "notes.json", "0.json", "-3.json", "\(pk)"] {
            #expect(C.elementsDerived(fromExternalRecordAt: noteFolder.appendingPathComponent(name)) == nil, "\(name)")
        }
        #expect(C.elementsDerived(fromExternalRecordAt: s.storeFolder.appendingPathComponent("store-file")) == nil)
        // A folder with no store-file is not a store folder.
        let stray = directory.appendingPathComponent("elsewhere/ABC/Note/1.json")
        try FileManager.default.createDirectory(at: stray.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: stray)
        #expect(C.elementsDerived(fromExternalRecordAt: stray) == nil)
        #expect(C.elementsDerived(fromExternalRecordAt: URL(string: "https://example.com/\(s.store.identifier)/Note/1.json")!) == nil)
        #expect(C.elementsDerived(fromExternalRecordAt: URL(fileURLWithPath: "/1.json")) == nil)
    }
}
