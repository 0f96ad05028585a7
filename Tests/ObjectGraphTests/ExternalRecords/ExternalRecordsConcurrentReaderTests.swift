import Foundation
import Testing
@testable import ObjectGraph

/// A crawler reading the directory while saves rewrite records never sees
/// part of a file: every file it opens parses whole (temp name + rename).
@Suite struct ExternalRecordsConcurrentReaderTests {
    final class Reader: @unchecked Sendable {
        private let lock = NSLock()
        private var stopped = false
        private(set) var reads = 0
        private(set) var problems: [String] = []
        let folder: URL

        init(folder: URL) { self.folder = folder }

        var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }
        func stop() { lock.lock(); stopped = true; lock.unlock() }
        func note(_ problem: String) { lock.lock(); problems.append(problem); lock.unlock() }
        func count() { lock.lock(); reads += 1; lock.unlock() }

        /// Reads every visible file of the store folder, as a crawler does, until stopped.
        func run() {
            let fileManager = FileManager.default
            while !isStopped {
                for entity in ["Note", "Folder"] {
                    let entityFolder = folder.appendingPathComponent(entity)
                    for name in (try? fileManager.contentsOfDirectory(atPath: entityFolder.path)) ?? [] where !name.hasPrefix(".") {
                        // A record removed between listing and reading is gone, not torn.
                        guard let data = fileManager.contents(atPath: entityFolder.appendingPathComponent(name).path) else { continue }
                        count()
                        if name.hasSuffix(".txt") {
                            let text = String(decoding: data, as: UTF8.self)
                            if !(text.hasSuffix("\n") && text.contains("\nuri: x-coredata://")) { note("\(entity)/\(name): a partial rendering of \(data.count) bytes") }
                        } else if let record = try? ExternalRecordContent.parse(data).record {
                            if (record["values"] as? [String: Any])?.isEmpty != false { note("\(entity)/\(name): no values") }
                        } else {
                            note("\(entity)/\(name): \(data.count) bytes that do not parse")
                        }
                    }
                }
                // The change feed: every line but a cut last one parses.
                if let feed = fileManager.contents(atPath: folder.appendingPathComponent("changes.ndjson").path) {
                    let lines = feed.split(separator: 0x0A, omittingEmptySubsequences: true)
                    let complete = feed.last == 0x0A ? lines : lines.dropLast()
                    for line in complete where (try? JSONSerialization.jsonObject(with: Data(line))) == nil { note("changes.ndjson: a torn line") }
                }
            }
        }
    }

    @Test(arguments: [ExternalRecordFormat.json, .binary])
    func aConcurrentReaderNeverSeesAPartialRecord(format: ExternalRecordFormat) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [PersistentStoreCoordinator.externalRecordsFileFormatOption: format.rawValue,
                                                            PersistentStoreCoordinator.externalRecordsPlainTextOption: true,
                                                            PersistentStoreCoordinator.externalRecordsChangeFeedOption: true])
        // Large bodies: a record written in place would be caught half-way.
        let body = String(repeating: "lorem ipsum dolor sit amet ", count: 600)
        var notes: [ManagedObject] = []
        try s.context.performAndWait {
            for i in 0..<20 {
                let note = try RecordsModel.note(s.context, "note \(i)")
                try note.setValue(body, forKey: "body")
                notes.append(note)
            }
            try s.context.save()
        }
        let reader = Reader(folder: s.storeFolder)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            reader.run()
            done.signal()
        }
        try s.context.performAndWait {
            for round in 0..<12 {
                for (i, note) in notes.enumerated() {
                    try note.setValue("\(body) round \(round) note \(i)", forKey: "body")
                }
                // Some objects come and go too.
                let extra = try RecordsModel.note(s.context, "extra \(round)")
                try s.context.save()
                s.context.delete(extra)
                try s.context.save()
            }
        }
        reader.stop()
        done.wait()
        #expect(reader.problems == [])
        #expect(reader.reads > 100)
        #expect(s.store.lastExternalRecordsError == nil)
        // No temporary file is left behind.
        #expect(!RecordsModel.files(under: s.storeFolder).contains { $0.hasSuffix(".tmp") })
        let last = try RecordsModel.values(s.storeFolder.appendingPathComponent("Note/\(notes[19].objectID.primaryKey!).\(format.defaultFileExtension)"))
        #expect((last["body"] as? String)?.hasSuffix("round 11 note 19") == true)
    }
}
