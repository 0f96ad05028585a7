import Foundation
import Testing
@testable import ObjectGraph

/// A records directory that cannot be written never fails or loses a save:
/// the error is kept and announced, and the records catch up once the
/// directory is back. (Tests run as root, so permissions do not stop
/// writes: folders are replaced by regular files instead.)
@Suite struct ExternalRecordsFailureTests {
    final class Failures: @unchecked Sendable {
        var errors: [Error] = []
    }

    /// Replaces `folder` by a regular file until the returned closure puts it back.
    static func block(_ folder: URL) throws -> () throws -> Void {
        let aside = folder.deletingLastPathComponent().appendingPathComponent(".aside-\(UUID().uuidString)")
        try FileManager.default.moveItem(at: folder, to: aside)
        try Data("in the way".utf8).write(to: folder)
        return {
            try FileManager.default.removeItem(at: folder)
            try FileManager.default.moveItem(at: aside, to: folder)
        }
    }

    static func titles(_ s: RecordsModel.Stack) throws -> [String] {
        try RecordsModel.files(under: s.storeFolder.appendingPathComponent("Note")).filter { $0.hasSuffix(".json") }.map {
            try RecordsModel.values(s.storeFolder.appendingPathComponent("Note/\($0)"))["title"] as? String ?? "?"
        }.sorted()
    }

    @Test(arguments: ["store folder", "entity folder"])
    func savesSucceedWhileTheFolderIsBlockedAndRecordsCatchUpAfter(blocked: String) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStoreCoordinator.externalRecordsPlainTextOption: true])
        var notes: [ManagedObject] = []
        try s.context.performAndWait {
            for i in 0..<3 { notes.append(try RecordsModel.note(s.context, "n\(i)")) }
            try s.context.save()
        }
        let failures = Failures()
        let observer = NotificationCenter.default.addObserver(forName: PersistentStore.externalRecordsDidFailNotification, object: s.store, queue: nil) {
            failures.errors.append($0.userInfo?[NSUnderlyingErrorKey] as? Error ?? CocoaError(.featureUnsupported))
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let folder = blocked == "store folder" ? s.storeFolder : s.storeFolder.appendingPathComponent("Note")
        let unblock = try Self.block(folder)
        try s.context.performAndWait {
            try RecordsModel.note(s.context, "added while blocked")
            try notes[0].setValue("n0 changed while blocked", forKey: "title")
            s.context.delete(notes[1])
            try s.context.save()   // does not throw
            try RecordsModel.note(s.context, "added later while blocked")
            try s.context.save()
        }
        let error = try #require(s.store.lastExternalRecordsError as? CoreDataError)
        #expect(error.code == .fileWriteUnknown)
        let path = try #require(error.userInfo[CoreDataError.filePathErrorKey] as? String)
        #expect(path.hasPrefix(folder.path))
        #expect(error.message.contains(path))
        #expect(failures.errors.count == 2)
        let writer = try #require(s.store.externalRecordWriter)
        #expect(writer.needsCatchUp && writer.pendingObjectCount == 4)
        // The saves stand: another coordinator reads them from the file.
        let check = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        try check.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: s.store.url!)
        let checkContext = ManagedObjectContext(coordinator: check)
        #expect(try checkContext.performAndWait { try checkContext.count(for: FetchRequest(entityName: "Note")) } == 4)

        try unblock()
        try s.context.performAndWait {
            try notes[2].setValue("n2 after", forKey: "title")
            try s.context.save()
        }
        #expect(s.store.lastExternalRecordsError == nil)
        #expect(!writer.needsCatchUp)
        #expect(try Self.titles(s) == ["added later while blocked", "added while blocked", "n0 changed while blocked", "n2 after"])
        #expect(!FileManager.default.fileExists(atPath: s.storeFolder.appendingPathComponent("Note/\(notes[1].objectID.primaryKey!).json").path))
        #expect(!FileManager.default.fileExists(atPath: s.storeFolder.appendingPathComponent("Note/\(notes[1].objectID.primaryKey!).txt").path))
        #expect(RecordsModel.files(under: s.storeFolder).filter { $0.hasSuffix(".txt") }.count == 4)
        #expect(FileManager.default.fileExists(atPath: s.storeFolder.appendingPathComponent("store-file").path))
    }

    // A records directory that cannot be made when the store is added: the
    // store opens, and its objects are exported once the directory can be written.
    @Test func aDirectoryUnwritableWhenTheStoreIsAddedIsFilledLater() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let records = directory.appendingPathComponent("records")
        try Data("not a directory".utf8).write(to: records)
        let s = try RecordsModel.stack(directory, records: records)
        #expect(s.store.lastExternalRecordsError is CoreDataError)
        try s.context.performAndWait {
            try RecordsModel.note(s.context, "early")
            try s.context.save()
        }
        #expect(s.store.lastExternalRecordsError != nil)
        try FileManager.default.removeItem(at: records)
        try s.context.performAndWait {
            try RecordsModel.note(s.context, "later")
            try s.context.save()
        }
        #expect(s.store.lastExternalRecordsError == nil)
        #expect(try Self.titles(s) == ["early", "later"])
        #expect(FileManager.default.fileExists(atPath: s.storeFolder.appendingPathComponent("model.mom").path))
    }

    // The writer's own calls throw a file-write error naming the path and leave the old record whole.
    @Test func aWriterCallOnABlockedFolderThrowsNamingThePath() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory)
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "kept")
            try s.context.save()
        }
        let writer = try #require(s.store.externalRecordWriter)
        let url = writer.recordURL(for: note.objectID)
        let before = try Data(contentsOf: url)
        // The record's directory is replaced by a file: creating the temporary file fails.
        let unblock = try Self.block(url.deletingLastPathComponent())
        try s.context.performAndWait {
            try note.setValue("changed", forKey: "title")
            let error = try #require(throws: CoreDataError.self) { try writer.writeRecord(for: note) }
            #expect(error.userInfo[CoreDataError.filePathErrorKey] as? String == url.path)
            #expect([CoreDataError.Code.fileWriteUnknown, .fileWriteNoPermission].contains(error.code))
            #expect(throws: CoreDataError.self) { try writer.removeRecord(for: note.objectID) }
            s.context.rollback()
        }
        try unblock()
        #expect(try Data(contentsOf: url) == before)
    }
}
