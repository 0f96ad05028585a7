#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
@testable import StoreSync
import XCTest

/// The engine side of the daemon's external records (issue 18 part 3):
/// `SyncRecordExporter` follows the hub's history from a durable cursor
/// (PC-43 b, c: an update rewrites a record, a delete removes it), rebuilds
/// when it has no usable cursor or the history after it was purged (134301),
/// and keeps its cursor when writing fails so it catches up later.
final class SyncRecordExporterTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws { directory = try SyncFixtures.directory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    var records: URL { directory.appendingPathComponent("records") }

    func group() throws -> SyncGroup {
        let stores = ["s1", "s2"].map { SyncStoreConfiguration(name: $0, url: directory.appendingPathComponent("\($0).sqlite"), policy: .storeTrump) }
        return try SyncGroup(configuration: SyncGroupConfiguration(name: "test", model: SyncFixtures.model(),
                                                                   stateDirectory: directory.appendingPathComponent("state"),
                                                                   stores: stores))
    }

    /// Saves `names` as Records into s1 (a = index), deletes `deleting`, updates `updating` to a = 99.
    func change(inserting names: [String] = [], updating: [String] = [], deleting: [String] = []) throws {
        let app = try SyncFixtures.app(directory.appendingPathComponent("s1.sqlite"))
        defer { for store in app.persistentStoreCoordinator.persistentStores { try? app.persistentStoreCoordinator.remove(store) } }
        try app.performAndWait {
            for (i, name) in names.enumerated() {
                let record = try app.insertNewObject(forEntityName: "Record")
                try record.setValue(name, forKey: "name")
                try record.setValue(Int32(i), forKey: "a")
            }
            for record in try app.fetch(FetchRequest(entityName: "Record")) {
                let name = try record.value(forKey: "name") as? String ?? ""
                if updating.contains(name) { try record.setValue(Int32(99), forKey: "a") }
                if deleting.contains(name) { app.delete(record) }
            }
            try app.save()
        }
    }

    /// Record files (not temporary ones) of the Record entity: file name → text.
    func recordFiles(_ exporter: SyncRecordExporter) -> [String: String] {
        let folder = exporter.storeDirectory.appendingPathComponent("Record")
        var out: [String: String] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] where !name.hasPrefix(".") && name.hasSuffix(".json") {
            out[name] = (try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)) ?? ""
        }
        return out
    }

    func names(_ exporter: SyncRecordExporter) -> Set<String> {
        Set(recordFiles(exporter).values.compactMap { text in ["alpha", "beta", "gamma", "delta"].first { text.contains("\"\($0)\"") } })
    }

    func testFirstExportRebuildsThenFollowsTheHubsHistory() throws {
        let group = try group()
        defer { try? group.close() }
        let exporter = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records))
        try change(inserting: ["alpha", "beta", "gamma"])
        try group.runUntilIdle()

        let first = try exporter.exportChanges()
        XCTAssertTrue(first.rebuilt)
        XCTAssertEqual(first.rebuildReason, "no export cursor yet (first export)")
        XCTAssertEqual(first.written, 3)
        XCTAssertEqual(first.position, try group.hub.currentPosition())
        XCTAssertEqual(names(exporter), ["alpha", "beta", "gamma"])
        XCTAssertEqual(exporter.exportedPosition(), first.position)
        // Each record carries the object's global identifier, the same in every store.
        let hubIDs = try SyncFixtures.contents(directory.appendingPathComponent("state/hub.sqlite"))
        for text in recordFiles(exporter).values {
            let record = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let gid = try XCTUnwrap((record["globalIdentifier"] as? String).flatMap(UUID.init(uuidString:)), "\(record)")
            XCTAssertEqual(hubIDs[gid]?["name"], ((record["values"] as? [String: Any])?["name"] as? String).map { "String:\($0)" })
        }
        // The engine's bookkeeping (cursors, conflicts, pending pushes) is not exported.
        for entity in EmbeddedHub.bookkeeping {
            XCTAssertFalse(FileManager.default.fileExists(atPath: exporter.storeDirectory.appendingPathComponent(entity).path), entity)
        }

        try change(updating: ["alpha"], deleting: ["beta"])
        try change(inserting: ["delta"])
        try group.runUntilIdle()
        let second = try exporter.exportChanges()
        XCTAssertFalse(second.rebuilt)
        XCTAssertEqual(second.written, 2, "alpha rewritten, delta written")
        XCTAssertEqual(second.removed, 1, "beta removed")
        XCTAssertGreaterThan(second.transactions, 0)
        XCTAssertEqual(second.position, try group.hub.currentPosition())
        XCTAssertEqual(names(exporter), ["alpha", "gamma", "delta"])
        let alpha = try XCTUnwrap(recordFiles(exporter).values.first { $0.contains("\"alpha\"") })
        XCTAssertTrue(alpha.contains("99"), "alpha's record was not rewritten: \(alpha)")
        XCTAssertTrue(alpha.contains("\"globalIdentifier\""), "a record written from history lacks the global identifier: \(alpha)")

        // Nothing new: nothing written, the position stays.
        let idle = try exporter.exportChanges()
        XCTAssertEqual([idle.written, idle.removed, idle.transactions], [0, 0, 0])
        XCTAssertEqual(idle.position, second.position)

        // A new exporter (a restart) goes on from the durable cursor.
        try change(deleting: ["gamma"])
        try group.runUntilIdle()
        let restarted = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records))
        let third = try restarted.exportChanges()
        XCTAssertFalse(third.rebuilt)
        XCTAssertEqual(third.removed, 1)
        XCTAssertEqual(names(restarted), ["alpha", "delta"])
    }

    /// History purged past the cursor (134301): the exporter rebuilds.
    func testHistoryPurgedPastTheCursorRebuilds() throws {
        let group = try group()
        defer { try? group.close() }
        let exporter = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records))
        try change(inserting: ["alpha", "beta"])
        try group.runUntilIdle()
        try exporter.exportChanges()
        try change(deleting: ["alpha"])
        try change(inserting: ["gamma"])
        try group.runUntilIdle()
        // What the retention does to an exporter that failed for longer than it.
        try group.hub.purgeHistory(through: try group.hub.currentPosition(), committedBefore: nil)
        let report = try exporter.exportChanges()
        XCTAssertTrue(report.rebuilt, "\(report)")
        XCTAssertTrue(report.rebuildReason?.contains("was purged") == true, report.rebuildReason ?? "")
        XCTAssertEqual(names(exporter), ["beta", "gamma"])
        XCTAssertEqual(report.position, try group.hub.currentPosition())
    }

    /// A records directory replaced by a regular file: the export throws, the
    /// cursor does not move, and once the directory is back the next export
    /// writes what was missed (not a rebuild).
    func testFailedExportKeepsTheCursorAndCatchesUp() throws {
        let group = try group()
        defer { try? group.close() }
        let exporter = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records))
        try change(inserting: ["alpha"])
        try group.runUntilIdle()
        let before = try exporter.exportChanges().position

        let away = directory.appendingPathComponent("records.away")
        try FileManager.default.moveItem(at: records, to: away)
        try Data("in the way".utf8).write(to: records)
        try change(inserting: ["beta"])
        try group.runUntilIdle()
        XCTAssertThrowsError(try exporter.exportChanges()) { error in
            XCTAssertTrue("\(error)".contains(self.records.path) || ((error as NSError).userInfo[NSFilePathErrorKey] as? String)?.hasPrefix(self.records.path) == true,
                          "the error names no path under the directory: \(error)")
        }
        XCTAssertEqual(exporter.exportedPosition(), before)

        try FileManager.default.removeItem(at: records)
        try FileManager.default.moveItem(at: away, to: records)
        let report = try exporter.exportChanges()
        XCTAssertFalse(report.rebuilt)
        XCTAssertEqual(report.written, 1)
        XCTAssertEqual(names(exporter), ["alpha", "beta"])
    }

    /// Other settings, a cursor of another hub, or a cursor that cannot be
    /// read: the records are rebuilt, each time saying why.
    func testUnusableCursorRebuilds() throws {
        let group = try group()
        defer { try? group.close() }
        try change(inserting: ["alpha"])
        try group.runUntilIdle()
        let exporter = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records))
        try exporter.exportChanges()
        XCTAssertFalse(try exporter.exportChanges().rebuilt)

        let plain = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records, writesPlainText: true))
        XCTAssertEqual(try plain.exportChanges().rebuildReason, "the export settings changed")

        var cursor = try XCTUnwrap(plain.readCursor())
        cursor.store = "00000000-0000-0000-0000-000000000000"
        try plain.writeCursor(cursor)
        XCTAssertTrue(try plain.exportChanges().rebuildReason?.contains("the hub was recreated") == true)

        try Data("{not json".utf8).write(to: plain.cursorURL)
        XCTAssertEqual(try plain.exportChanges().rebuildReason, "no export cursor yet (first export)")
        XCTAssertEqual(plain.cursorURL.lastPathComponent, "export-cursor.json")
        XCTAssertEqual(plain.cursorURL.deletingLastPathComponent().path, group.configuration.stateDirectory.path)
        XCTAssertEqual(try plain.exportChanges().rebuilt, false)
    }

    /// New settings on the same directory (as a daemon reload gives): the
    /// rebuild writes the new format and removes the old format's records and
    /// the renderings no longer asked for; another store's folder and files
    /// that are not records stay.
    func testSettingsChangeReplacesTheOldFormatsFiles() throws {
        let group = try group()
        defer { try? group.close() }
        try change(inserting: ["alpha", "beta"])
        try group.runUntilIdle()
        let json = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records, writesPlainText: true))
        try json.exportChanges()
        let folder = json.storeDirectory.appendingPathComponent("Record")
        func files() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() }
        XCTAssertEqual(try files(), ["1.json", "1.txt", "2.json", "2.txt"])
        try Data("mine".utf8).write(to: folder.appendingPathComponent("notes.md"))
        let other = records.appendingPathComponent("00000000-0000-0000-0000-0000000000AA/Record")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: other.appendingPathComponent("7.json"))

        let xml = try SyncRecordExporter(group: group, configuration: ExternalRecordsConfiguration(directory: records, format: .xml))
        let report = try xml.exportChanges()
        XCTAssertEqual(report.rebuildReason, "the export settings changed")
        XCTAssertEqual(report.written, 2)
        XCTAssertEqual(try files(), ["1.xml", "2.xml", "notes.md"])
        let plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: folder.appendingPathComponent("1.xml")), format: nil)
        XCTAssertEqual((plist as? [String: Any])?["entity"] as? String, "Record")
        XCTAssertTrue(FileManager.default.fileExists(atPath: other.appendingPathComponent("7.json").path), "another store's record was touched")
    }
}
