import Foundation
import Testing
@testable import ObjectGraph

/// ObjectGraph's additions for Linux indexers: the plain-text rendering
/// beside each record (Recoll, Tracker, omindex) and the NDJSON change feed
/// (Meilisearch, Typesense loaders).
@Suite struct ExternalRecordsFeedTests {
    /// The change feed's lines, each parsed.
    static func feed(_ storeFolder: URL) throws -> [[String: Any]] {
        let text = try String(contentsOf: storeFolder.appendingPathComponent("changes.ndjson"), encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    @Test func plainTextRenderingsSitBesideRecordsAndGoWithThem() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStoreCoordinator.externalRecordsPlainTextOption: true])
        var note: ManagedObject!
        try s.context.performAndWait {
            note = try RecordsModel.note(s.context, "Shopping list")
            try s.context.save()
        }
        let pk = note.objectID.primaryKey!
        let text = try String(contentsOf: s.storeFolder.appendingPathComponent("Note/\(pk).txt"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "Shopping list")
        #expect(lines.contains("body: Body of Shopping list second line"))
        #expect(lines.contains("amount: 12.34"))
        #expect(lines.contains("entity: Note"))
        #expect(lines.contains("uri: \(note.objectID.uriRepresentation.absoluteString)"))
        #expect(!text.contains("do not export") && !text.contains("scratch value"))
        try s.context.performAndWait {
            s.context.delete(note)
            try s.context.save()
        }
        #expect(RecordsModel.files(under: s.storeFolder) == ["model.mom", "store-file"])
    }

    @Test func theChangeFeedNumbersEveryUpsertAndDeleteAcrossReopening() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let options: [String: Any] = [PersistentStoreCoordinator.externalRecordsChangeFeedOption: true]
        var first: ManagedObject!
        var storeFolder: URL!
        do {
            let s = try RecordsModel.stack(directory, options: options)
            storeFolder = s.storeFolder
            try s.context.performAndWait {
                first = try RecordsModel.note(s.context, "one")
                try RecordsModel.note(s.context, "two")
                try s.context.save()
                try first.setValue("one, changed", forKey: "title")
                try s.context.save()
                s.context.delete(first)
                try s.context.save()
            }
        }
        // A new coordinator goes on numbering where the file ends.
        let s = try RecordsModel.stack(directory, options: options)
        try s.context.performAndWait {
            try RecordsModel.note(s.context, "three")
            try s.context.save()
        }
        let lines = try Self.feed(storeFolder)
        #expect(lines.map { ($0["seq"] as? NSNumber)?.intValue } == [1, 2, 3, 4, 5])
        #expect(lines.map { $0["op"] as? String } == ["upsert", "upsert", "upsert", "delete", "upsert"])
        let firstID = "\(s.store.identifier)_Note_\(first.objectID.primaryKey!)"
        #expect(lines[2]["id"] as? String == firstID && lines[3]["id"] as? String == firstID)
        #expect(lines[3]["path"] == nil && lines[2]["path"] as? String == "Note/\(first.objectID.primaryKey!).json")
        #expect(lines.allSatisfy { $0["entity"] as? String == "Note" && ($0["uri"] as? String)?.hasPrefix("x-coredata://") == true })
        // The lines of live objects point at their records.
        for index in [1, 4] {
            let path = try #require(lines[index]["path"] as? String)
            #expect(FileManager.default.fileExists(atPath: storeFolder.appendingPathComponent(path).path))
        }
    }
}
