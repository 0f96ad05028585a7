import Foundation
import ObjectGraph
import Testing

/// `storesyncctl query` against a store an application has open and keeps
/// writing: the CLI's process opens and closes the file (header checks,
/// read-only connection) between the application's saves, and no save is
/// lost (see SQLiteFileLockSafetyTests for the same within one process).
@Suite struct QueryOpenStoreTests {
    func names(_ result: CLI.Result) throws -> [String] {
        try #require(result.status == 0, "query failed (\(result.status)): \(result.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        return objects.compactMap { $0["name"] as? String }
    }

    @Test func queryBetweenSavesOfAnOpenStoreLosesNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("query-open-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("App.sqlite")
        let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: CLI.companyModel))
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        func insert(_ name: String) throws {
            try context.performAndWait {
                let department = try context.insertNewObject(forEntityName: "Department")
                try department.setValue(name, forKey: "name")
                try context.save()
            }
        }
        let query = ["query", url.path, "Department", "--model", CLI.companyModel, "--sort", "name", "--json"]

        try insert("Alpha")
        #expect(try names(try CLI.run(query)) == ["Alpha"])
        try insert("Beta")
        #expect(try names(try CLI.run(query)) == ["Alpha", "Beta"])
        try insert("Gamma")
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        #expect(try names(try CLI.run(query)) == ["Alpha", "Beta", "Gamma"])
    }
}
