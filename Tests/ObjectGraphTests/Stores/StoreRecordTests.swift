import Foundation
import Testing
@testable import ObjectGraph

/// `StoreRecord` and `PersistentStore.finishedSnapshots(_:)` over the
/// XCServerCoreData 2.0.1 fixture.
@Suite struct StoreRecordTests {
    static let fixture = "XCServerCoreData_2.0.1.sqlite"

    func openFixture() throws -> SQLiteStore {
        try SQLiteFixtures.openStore(try SQLiteFixtures.copy(Self.fixture), model: try SQLiteFixtures.model(for: Self.fixture),
                                     options: [PersistentStore.readOnlyOption: true])
    }

    @Test func readsAttributesAndFollowsRelationships() throws {
        let store = try openFixture()
        defer { store.close() }
        let request = FetchRequest(entityName: "Integration")
        request.predicate = try FetchPredicate(format: "number == 105 AND bot.name == 'Pocket Bot iOS'")
        let snapshots = try store.fetchSnapshots(request).snapshots
        let record = try #require(StoreRecord.records(for: snapshots, in: store).first)
        #expect(try record.value(forKey: "result") as? String == "internal-build-error")
        let bot = try #require(try record.value(forKey: "bot") as? StoreRecord)
        #expect(try bot.value(forKey: "name") as? String == "Pocket Bot iOS")
        let blueprints = try #require(try record.value(forKey: "revisionBlueprints") as? [StoreRecord])
        #expect(blueprints.allSatisfy { $0.objectID.entity.name == "RevisionBlueprint" })
        // The same record object comes back: the row is read once.
        #expect(try record.value(forKey: "bot") as? StoreRecord === bot)
        #expect(throws: KeyValueCodingError.self) { try record.value(forKey: "nmae") }
        #expect(try FetchPredicate(format: "bot.integrations.@count > 10").evaluate(with: record))
    }

    @Test func finishedSnapshotsFinishWhatSQLDidNot() throws {
        let store = try openFixture()
        defer { store.close() }
        let request = FetchRequest(entityName: "Commit")
        request.predicate = try FetchPredicate(format: "SUBQUERY(commitChanges, $c, $c.status == 1).@count >= 2")
        request.sortDescriptors = [FetchSortDescriptor(key: "commitHash", ascending: false)]
        request.fetchOffset = 1
        request.fetchLimit = 3
        #expect(try !store.fetchSnapshots(request).isExact)
        let finished = try store.finishedSnapshots(request)
        let raw = try RawSQLite.query(store.url!.path, """
            SELECT c.Z_PK FROM ZCOMMIT c
            WHERE (SELECT COUNT(*) FROM ZCOMMITCHANGE x WHERE x.ZCOMMIT = c.Z_PK AND x.ZSTATUS = 1) >= 2
            ORDER BY c.ZCOMMITHASH DESC, c.Z_PK LIMIT 3 OFFSET 1
            """)
        #expect(raw.count == 3)
        #expect(finished.map(\.objectID.primaryKey) == raw.map { $0[0].int })
    }
}
