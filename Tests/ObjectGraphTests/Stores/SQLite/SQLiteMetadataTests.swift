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
