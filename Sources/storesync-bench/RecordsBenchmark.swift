import ArgumentParser
import Foundation
import ObjectGraph

/// `storesync-bench records [--count N] [--batch B] [--runs R] [--format F] [--directory D] [--json]`:
/// the cost of external records (docs/EXTERNAL-RECORDS.md, docs/benchmarks/records.md;
/// issue 18's target: exporting 100,000 objects in JSON takes at most 2x the
/// time of the save that produced them).
///
/// Per run, on fresh files: N `Note` objects (title, body of ~200
/// characters, count, created, flag; every attribute exported) inserted and
/// saved in batches of B through a context into a SQLite store, once
/// without `NSExternalRecordsDirectoryOption` and once with it. Timed: the
/// inserts and saves (the records are written inside each save, after its
/// commit). Checked after each run with records: one record file per object,
/// none left over, no records error. The figure is the median; the ratio is
/// median with records over median without.
struct RecordsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "records",
        abstract: "Save N objects with and without external records (JSON by default); the ratio against issue 18's 2x target."
    )

    static let target = 2.0

    @Option(help: "Objects saved per run.")
    var count = 100_000

    @Option(help: "Objects per save.")
    var batch = 10_000

    @Option(help: "Repetitions on fresh files; the figures are medians.")
    var runs = 3

    @Option(help: "Record format: json, xml or binary.")
    var format = "json"

    @Option(help: "Where the stores and records go (default: the temporary directory); e.g. a tmpfs to leave the disk's file-system cost out.")
    var directory: String?

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    static func model() -> ManagedObjectModel {
        let note = EntityDescription(name: "Note")
        note.properties = [AttributeDescription(name: "title", type: .string), AttributeDescription(name: "body", type: .string),
                           AttributeDescription(name: "count", type: .integer64), AttributeDescription(name: "created", type: .date),
                           AttributeDescription(name: "flag", type: .boolean)]
        let model = ManagedObjectModel()
        model.entities = [note]
        return model
    }

    func run() throws {
        guard let recordFormat = ExternalRecordFormat(rawValue: format) else {
            throw ValidationError("--format must be json, xml or binary")
        }
        guard count > 0, batch > 0 else { throw ValidationError("--count and --batch must be positive") }
        var plain: [Double] = []
        var withRecords: [Double] = []
        for run in 1...max(1, runs) {
            plain.append(try measure(records: nil, run: run))
            withRecords.append(try measure(records: recordFormat, run: run))
        }
        let plainMedian = plain.sorted()[plain.count / 2]
        let recordsMedian = withRecords.sorted()[withRecords.count / 2]
        let ratio = recordsMedian / plainMedian
        if json {
            let object: [String: Any] = [
                "benchmark": "records", "count": count, "directory": self.directory ?? FileManager.default.temporaryDirectory.path, "batch": batch, "runs": runs, "format": recordFormat.rawValue,
                "save_s": plainMedian, "save_runs_s": plain, "save_with_records_s": recordsMedian, "save_with_records_runs_s": withRecords,
                "records_s": recordsMedian - plainMedian, "ratio": ratio, "target_ratio": Self.target, "met": ratio <= Self.target,
                "records_per_second": Double(count) / max(recordsMedian - plainMedian, 1e-9),
            ]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(String(format: "save of %d objects (batches of %d): %.3f s without records, %.3f s with %@ records (median of %d)",
                         count, batch, plainMedian, recordsMedian, recordFormat.rawValue, plain.count))
            print(String(format: "ratio %.2fx (target <= %.0fx: %@); records alone %.3f s, %.0f records/s",
                         ratio, Self.target, ratio <= Self.target ? "met" : "NOT met", recordsMedian - plainMedian,
                         Double(count) / max(recordsMedian - plainMedian, 1e-9)))
        }
    }

    /// One timed run: inserts and saves `count` objects, with records in `records` format or none.
    private func measure(records: ExternalRecordFormat?, run: Int) throws -> Double {
        let base = self.directory.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        let directory = base.appendingPathComponent("bench-records-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let recordsURL = directory.appendingPathComponent("records")
        var options: [String: Any] = [:]
        if let records {
            options[PersistentStoreCoordinator.externalRecordsDirectoryOption] = recordsURL
            options[PersistentStoreCoordinator.externalRecordsFileFormatOption] = records.rawValue
        }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.model())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                       at: directory.appendingPathComponent("Notes.sqlite"), options: options)
        let context = ManagedObjectContext(coordinator: coordinator)
        let body = String(repeating: "words to index in the body of a note. ", count: 5)
        let created = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let start = Date()
        try context.performAndWait {
            var made = 0
            while made < count {
                for i in made..<min(count, made + batch) {
                    let note = try context.insertNewObject(forEntityName: "Note")
                    try note.setValue("note \(i)", forKey: "title")
                    try note.setValue(body, forKey: "body")
                    try note.setValue(Int64(i), forKey: "count")
                    try note.setValue(created.addingTimeInterval(Double(i)), forKey: "created")
                    try note.setValue(i % 2 == 0, forKey: "flag")
                }
                made = min(count, made + batch)
                try context.save()
                context.reset()
            }
        }
        let seconds = Date().timeIntervalSince(start)
        if let records {
            if let error = store.lastExternalRecordsError { throw ValidationError("run \(run): records failed: \(error)") }
            let folder = recordsURL.appendingPathComponent(store.identifier).appendingPathComponent("Note")
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            let expected = files.filter { $0.hasSuffix("." + records.defaultFileExtension) }.count
            guard expected == count, files.count == count else {
                throw ValidationError("run \(run): \(expected) record files for \(count) objects (\(files.count) files in all)")
            }
        }
        if !json { print(String(format: "run %d: %d objects, %@: %.3f s", run, count, records.map { "\($0.rawValue) records" } ?? "no records", seconds)) }
        return seconds
    }
}
