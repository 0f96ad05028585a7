import Foundation
import Testing
@testable import ObjectGraph

/// Stores written by Apple's Core Data, opened read-write through
/// `PersistentStoreCoordinator` (the path an application and the sync
/// daemon take), written to, and checked afterwards with SQLite itself.
@Suite struct SQLiteAppleStoreWriteTests {
    static let sqlite = PersistentStoreCoordinator.sqliteStoreType

    /// Each fixture takes an insert, an update and a delete through a
    /// coordinator with its model version (PC add, MOM-VR-01 as refined for
    /// Apple's hashes in docs/SQLITE-LAYOUT.md), then passes
    /// `integrity_check`, keeps `sqlite_master` as it was, keeps Apple's
    /// metadata and model cache, and reopens with the changes.
    @Test(arguments: SQLiteFixtures.all)
    func insertUpdateDeleteThroughTheCoordinator(_ fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteFixtures.model(for: fixture)
        let schemaBefore = try RawSQLite.master(url.path)
        let metadataBefore = try RawSQLite.query(url.path, "SELECT Z_VERSION, Z_UUID, Z_PLIST FROM Z_METADATA")
        let modelCacheBefore = try RawSQLite.query(url.path, "SELECT Z_CONTENT FROM Z_MODELCACHE")
        let botsBefore = try RawSQLite.query(url.path, "SELECT Z_PK, ZNAME FROM ZBOT ORDER BY Z_PK")

        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: Self.sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            for name in ["Linux Bot", "Doomed Bot"] {
                let bot = try context.insertNewObject(forEntityName: "Bot")
                try bot.setValue(name, forKey: "name")
                try bot.setValue("id-\(name)", forKey: "identifier")
            }
            try context.save()
            let bots = try context.fetch(FetchRequest(entityName: "Bot"))
            for bot in bots {
                switch try bot.value(forKey: "name") as? String {
                case "Doomed Bot": context.delete(bot)
                case "Linux Bot": try bot.setValue(7 as Int32, forKey: "type")
                default: try bot.setValue("renamed \(try bot.value(forKey: "name") as? String ?? "")", forKey: "name")
                }
            }
            try context.save()
        }
        for store in coordinator.persistentStores { try coordinator.remove(store) }

        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
        #expect(try RawSQLite.master(url.path) == schemaBefore)
        #expect(try RawSQLite.query(url.path, "SELECT Z_VERSION, Z_UUID, Z_PLIST FROM Z_METADATA") == metadataBefore)
        #expect(try RawSQLite.query(url.path, "SELECT Z_CONTENT FROM Z_MODELCACHE") == modelCacheBefore)
        let expected = (botsBefore.map { "renamed \($0[1].text ?? "")" } + ["Linux Bot"]).sorted()
        #expect(try RawSQLite.query(url.path, "SELECT ZNAME FROM ZBOT").map { $0[0].text ?? "" }.sorted() == expected)
        #expect(try RawSQLite.query(url.path, "SELECT ZTYPE FROM ZBOT WHERE ZNAME = 'Linux Bot'").first?.first?.int == 7)

        // Reopens through a coordinator and reads what was written.
        let again = try PersistentStoreCoordinator(managedObjectModel: model)
        try again.addPersistentStore(ofType: Self.sqlite, at: url)
        let reader = ManagedObjectContext(coordinator: again)
        let names = try reader.performAndWait {
            try reader.fetch(FetchRequest(entityName: "Bot")).map { try $0.value(forKey: "name") as? String ?? "" }.sorted()
        }
        #expect(names == expected)
    }

    /// An Apple-written store opened with a model whose entities differ is
    /// refused by the coordinator with 134100 (MOM-VR-01), and opens with
    /// `NSIgnorePersistentStoreVersioningOption` when the schema still fits
    /// (PC-37): the 1.2.0 store with the 1.2.0 model minus one entity
    /// (`BuildResultSummary`, and the one relationship into it; the file's
    /// extra table and column are allowed by the schema check).
    @Test func appleStoreWithOtherEntitiesIsRefusedUnlessVersioningIsIgnored() throws {
        let fixture = "XCServerCoreData_1.2.0.sqlite"
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteFixtures.model(for: fixture).copy()
        let integration = try #require(model.entitiesByName["Integration"])
        integration.properties = integration.properties.filter { $0.name != "buildResultSummary" }
        model.entities = model.entities.filter { $0.name != "BuildResultSummary" }
        let plist = try RawSQLite.query(url.path, "SELECT Z_PLIST FROM Z_METADATA")

        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        let error = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: Self.sqlite, at: url) }
        #expect(error?.code == .persistentStoreIncompatibleVersionHash)
        #expect(error?.userInfo[CoreDataError.filePathErrorKey] as? String == url.path)
        #expect(coordinator.persistentStores.isEmpty)

        let store = try coordinator.addPersistentStore(ofType: Self.sqlite, at: url, options: [PersistentStore.ignoreVersioningOption: true])
        let context = ManagedObjectContext(coordinator: coordinator)
        #expect(try context.performAndWait { try context.count(for: FetchRequest(entityName: "Bot")) } == 2)
        try coordinator.remove(store)
        #expect(try RawSQLite.query(url.path, "SELECT Z_PLIST FROM Z_METADATA") == plist)
    }

    /// A store ObjectGraph wrote compares hashes byte for byte on every
    /// path: the coordinator and the store refuse a changed model with
    /// 134100, and both open it with the ignore option (given as an
    /// `NSNumber`, as Objective-C callers pass it).
    @Test func objectGraphStoreWithChangedHashesIsRefusedUnlessVersioningIsIgnored() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Hashes.sqlite")
        let (first, _) = try Company.stack(type: Self.sqlite, url: url)
        for store in first.persistentStores { try first.remove(store) }

        let changed = ReferenceModel.make()
        try #require(changed.entitiesByName["Department"]).versionHashModifier = "v2"
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: changed)
        let error = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: Self.sqlite, at: url) }
        #expect(error?.code == .persistentStoreIncompatibleVersionHash)
        let direct = #expect(throws: CoreDataError.self) { try SQLiteFixtures.openStore(url, model: changed) }
        #expect(direct?.code == .persistentStoreIncompatibleVersionHash)

        try coordinator.addPersistentStore(ofType: Self.sqlite, at: url, options: [PersistentStore.ignoreVersioningOption: NSNumber(value: true)])
        _ = try SQLiteFixtures.openStore(url, model: changed, options: [PersistentStore.ignoreVersioningOption: true])
    }
}
