import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The verifier: a synced group agrees; a value, an object and a
/// relationship changed behind the engine's back in one store are each
/// reported with store, entity, object, property and both values; a round
/// of the engine brings the group back to agreement.
@Suite struct SyncVerifierTests {
    @Test func aSyncedGroupAgrees() throws {
        let history = try KnownHistory.make()
        let verification = try SyncVerifier(configuration: history.configuration).verify()
        #expect(verification.agrees, "\(verification.differences)")
        #expect(verification.stores == ["s1", "s2", "s3"])
        #expect(verification.hubObjects == 2)
    }

    @Test func plantedDifferencesAreReportedAndARoundRepairsThem() throws {
        let history = try KnownHistory.make()
        let s3 = history.urls[2].path
        // A second folder everywhere, then three changes in s3 only, as SQL.
        let app = try SyncFixtures.app(history.urls[0])
        let archive = try app.performAndWait {
            let folder = try app.insertNewObject(forEntityName: "Folder")
            try folder.setValue("Archive", forKey: "name")
            let spare = try app.insertNewObject(forEntityName: "Record")
            try spare.setValue("spare", forKey: "name")
            try app.save()
            return try app.persistentStoreCoordinator.globalIdentifiers(for: [folder.objectID, spare.objectID])
        }
        try history.group.runUntilIdle()
        #expect(try SyncVerifier(configuration: history.configuration).verify().agrees)
        let archiveID = try #require(archive.first { $0.key.entity.name == "Folder" }?.value)
        let spareID = try #require(archive.first { $0.key.entity.name == "Record" }?.value)

        try SyncBadInputTests.sql(s3, """
            UPDATE ZRECORD SET ZA = 99, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'sql';
            UPDATE ZRECORD SET ZFOLDER = (SELECT Z_PK FROM ZFOLDER WHERE ZNAME = 'Archive'), Z_OPT = Z_OPT + 1 WHERE ZNAME = 'sql';
            DELETE FROM ZRECORD WHERE ZNAME = 'spare';
            """)
        let verification = try SyncVerifier(configuration: history.configuration).verify()
        #expect(!verification.agrees)
        let found = Set(verification.differences.map { "\($0.store) \($0.kind.rawValue) \($0.entity ?? "") \($0.globalIdentifier?.uuidString ?? "") \($0.property ?? "") \($0.storeValue?.text ?? "-") \($0.hubValue?.text ?? "-")" })
        let record = history.record.uuidString, inbox = history.folder.uuidString
        #expect(found == [
            "s3 value Record \(record) a 99 2",
            "s3 relationship Record \(record) folder \(archiveID.uuidString) \(inbox)",
            "s3 relationship Folder \(inbox) records [] [\(record)]",
            "s3 relationship Folder \(archiveID.uuidString) records [\(record)] []",
            "s3 missing-object Record \(spareID.uuidString)  - -",
        ], "\(verification.differences.map(\.description).joined(separator: "\n"))")
        #expect(verification.differences.allSatisfy { $0.store == "s3" && $0.conflict == nil })

        // The engine pulls s3's SQL like any writer's and brings every store along.
        try history.group.runUntilIdle()
        let repaired = try SyncVerifier(configuration: history.configuration).verify()
        #expect(repaired.agrees, "\(repaired.differences.map(\.description))")
    }

    @Test func anUnresolvedConflictIsNamedOnItsDifferenceAndAnUnreadableStoreIsADifference() throws {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.objectTrump, .error], in: directory)
        let urls = (1...2).map { directory.appendingPathComponent("s\($0).sqlite") }
        let apps = try urls.map { try SyncFixtures.app($0) }
        let id = try apps[0].performAndWait {
            let record = try apps[0].insertNewObject(forEntityName: "Record")
            try record.setValue(Int32(1), forKey: "a")
            try apps[0].save()
            return record.objectID
        }
        let gid = try #require(try apps[0].persistentStoreCoordinator.globalIdentifiers(for: [id])[id])
        try group.runUntilIdle()
        try KnownHistory.set(apps[0], gid, "a", Int32(2))
        try KnownHistory.set(apps[1], gid, "a", Int32(3))
        try group.runUntilIdle()
        let conflict = try #require(try group.conflicts().first)

        var configuration = group.configuration
        configuration.stores.append(SyncStoreConfiguration(name: "gone", url: directory.appendingPathComponent("gone.sqlite"), policy: .objectTrump))
        let verification = try SyncVerifier(configuration: configuration).verify()
        #expect(verification.differences.map(\.description) == [
            "store s2: Record \(gid.uuidString) a: store 3, hub 2 (conflict \(conflict.id) waits)",
            "store gone: cannot be read: no store file at \(directory.appendingPathComponent("gone.sqlite").path)",
        ])
        let json = try JSONSerialization.data(withJSONObject: verification.differences.map(\.jsonObject))
        #expect(String(decoding: json, as: UTF8.self).contains("\"conflict\":\(conflict.id)"))

        // No hub: an error naming where it looked.
        let empty = SyncGroupConfiguration(name: "none", model: SyncFixtures.model(), stateDirectory: directory.appendingPathComponent("nothing"), stores: [])
        #expect { try SyncVerifier(configuration: empty).verify() } throws: { "\($0)".contains("sync group none has no hub at") }
    }
}
