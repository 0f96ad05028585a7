import Foundation
import Testing
@testable import ObjectGraph

/// Z_METADATA as Apple writes it (PS metadata, PC-23 metadataForPersistentStore).
@Suite struct SQLiteMetadataTests {
    static let frameworkVersions: [String: Int] = [
        "XCServerCoreData_1.2.0.sqlite": 754,
        "XCServerCoreData_1.2.0_empty.sqlite": 754,
        "XCServerCoreData_2.0.0_empty.sqlite": 836,
        "XCServerCoreData_2.0.1.sqlite": 851,
    ]

    @Test(arguments: SQLiteFixtures.all)
    func readsEveryFixturesMetadataWithoutTouchingTheFile(fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let before = try Data(contentsOf: url)
        let metadata = try SQLiteStore.metadataForStore(at: url)
        #expect(try Data(contentsOf: url) == before)

        let rawUUID = try RawSQLite.query(url.path, "SELECT Z_UUID FROM Z_METADATA").first?.first?.text
        #expect(metadata["NSStoreType"] as? String == "SQLite")
        #expect(metadata["NSStoreUUID"] as? String == rawUUID)
        #expect(metadata["NSStoreModelVersionHashesVersion"] as? Int == 3)
        #expect(metadata["NSStoreModelVersionIdentifiers"] as? [String] == [""])
        #expect(metadata["NSPersistenceFrameworkVersion"] as? Int == Self.frameworkVersions[fixture])
        let hashes = try #require(metadata["NSStoreModelVersionHashes"] as? [String: Data])
        let model = try SQLiteFixtures.model(for: fixture)
        #expect(Set(hashes.keys) == Set(model.entities.map(\.name)))
        #expect(hashes.values.allSatisfy { $0.count == 32 })
        #expect(metadata[SQLiteMetadata.hashSchemeKey] == nil, "Apple's files carry no ObjectGraph marker")
    }

    @Test func newStoreWritesCoreDataMetadata() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("New.sqlite")
        let model = try SQLiteFixtures.model(for: "XCServerCoreData_2.0.1.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        store.close()
        let metadata = try SQLiteStore.metadataForStore(at: url)
        #expect(metadata["NSStoreUUID"] as? String == store.identifier)
        #expect(metadata["NSStoreType"] as? String == "SQLite")
        #expect(metadata["NSStoreModelVersionHashes"] as? [String: Data] == model.entityVersionHashesByName)
        #expect(metadata["NSStoreModelVersionHashesVersion"] as? Int == 3)
        #expect(metadata["NSStoreModelVersionIdentifiers"] as? [String] == [""])
        #expect(metadata[SQLiteMetadata.hashSchemeKey] as? Int == SQLiteMetadata.currentHashScheme)

        // As in Apple's files: one row, Z_VERSION 1, UUID in Z_UUID and not in the plist.
        let rows = try RawSQLite.query(url.path, "SELECT Z_VERSION, Z_UUID, Z_PLIST FROM Z_METADATA")
        #expect(rows.count == 1)
        #expect(rows[0][0] == .integer(1))
        #expect(rows[0][1].text == store.identifier)
        guard case .blob(let bytes) = rows[0][2] else { Issue.record("Z_PLIST is not a blob"); return }
        #expect(Array(bytes.prefix(8)) == Array("bplist00".utf8))
        let plist = try #require(try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: nil) as? [String: Any])
        #expect(plist["NSStoreUUID"] == nil)
        #expect(plist["NSStoreType"] as? String == "SQLite")
    }

    @Test func metadataOfMissingOrForeignFilesIsAnError() throws {
        let dir = try TestPaths.temporaryDirectory()
        #expect(throws: CoreDataError.self) { try SQLiteStore.metadataForStore(at: dir.appendingPathComponent("none.sqlite")) }
        do {
            _ = try SQLiteStore.metadataForStore(at: dir.appendingPathComponent("none.sqlite"))
        } catch { #expect(error.coreDataCode == 260) }
        let text = dir.appendingPathComponent("notes.txt")
        try Data("hello, not a database".utf8).write(to: text)
        do {
            _ = try SQLiteStore.metadataForStore(at: text)
            Issue.record("expected 134010")
        } catch { #expect(error.coreDataCode == 134010) }
    }

    @Test func plistRoundTrip() throws {
        let metadata: [String: Any] = ["NSStoreType": "SQLite", "NSStoreUUID": "X", "NSStoreModelVersionHashes": ["A": Data([1, 2])],
                                       "NSStoreModelVersionHashesVersion": 3, "custom": "value"]
        let data = try SQLiteMetadata.encodePlist(metadata)
        let back = try SQLiteMetadata.decodePlist(data)
        #expect(back["NSStoreUUID"] == nil)
        #expect(back["custom"] as? String == "value")
        #expect(back["NSStoreModelVersionHashes"] as? [String: Data] == ["A": Data([1, 2])])
        #expect(back["NSStoreModelVersionHashesVersion"] as? Int == 3)
    }
}

/// PS-12 and PS-15: metadata set on an open store is written at the next
/// save; metadata written to a closed file round-trips and leaves objects alone.
@Suite struct SQLiteMetadataWritingTests {
    @Test func metadataSetOnTheStoreIsPersistedAtTheNextSave() throws {
        let url = try SQLiteFixtures.copy("XCServerCoreData_2.0.1.sqlite")
        let model = try SQLiteFixtures.model(for: "XCServerCoreData_2.0.1.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        let uuid = store.identifier
        store.metadata["SyncCursor"] = "cursor-7"
        #expect(try SQLiteStore.metadataForStore(at: url)["SyncCursor"] == nil)
        try store.save(StoreSaveRequest())
        store.close()
        let reread = try SQLiteStore.metadataForStore(at: url)
        #expect(reread["SyncCursor"] as? String == "cursor-7")
        #expect(reread["NSStoreUUID"] as? String == uuid, "PS-09: the identifier survives")
        #expect(reread["NSPersistenceFrameworkVersion"] as? Int == 851, "Apple's keys are kept")
        let reopened = try SQLiteFixtures.openStore(url, model: model)
        #expect(reopened.identifier == uuid)
        #expect(reopened.metadata["SyncCursor"] as? String == "cursor-7")
        reopened.close()
    }

    @Test func setMetadataOnAClosedFileRoundTripsAndKeepsObjects() throws {
        let url = try SQLiteFixtures.copy("XCServerCoreData_2.0.1.sqlite")
        let rowsBefore = try RawSQLite.query(url.path, "SELECT * FROM ZBOT ORDER BY Z_PK")
        var metadata = try SQLiteStore.metadataForStore(at: url)
        metadata["SyncCursor"] = "c1"
        metadata["NSStoreType"] = "Binary"
        try SQLiteStore.setMetadata(metadata, forStoreAt: url)
        let back = try SQLiteStore.metadataForStore(at: url)
        #expect(back["SyncCursor"] as? String == "c1")
        #expect(back["NSStoreType"] as? String == "SQLite")
        #expect(back["NSStoreUUID"] as? String == metadata["NSStoreUUID"] as? String)
        #expect(try RawSQLite.query(url.path, "SELECT * FROM ZBOT ORDER BY Z_PK") == rowsBefore)
        #expect(throws: CoreDataError.self) {
            try SQLiteStore.setMetadata([:], forStoreAt: url.deletingLastPathComponent().appendingPathComponent("none.sqlite"))
        }
    }
}
