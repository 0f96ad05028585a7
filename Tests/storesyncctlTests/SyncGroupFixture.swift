import CSQLite
import Foundation
import ObjectGraph
import StoreSync
import StoreSyncConfig

/// A sync group on disk as the daemon would run it: a model file, a
/// `storesyncd.toml`, three stores (app object-trump, web error, phone
/// store-trump) and the hub in `state/notes/`, synced by a real `SyncGroup`
/// in this process with a known history:
///
/// 1. app (author app) inserts folder Inbox and record one (a=1) in it; round.
/// 2. web (author web) sets a=2; round.
/// 3. `sqlite3` renames one to "sql" in phone (a foreign writer); round;
///    a 50 ms pause.
/// 4. app sets b=7, web sets b=5; round: app is pulled first, so web's change
///    meets the hub's and conflict 1 (web, record one) is recorded; it is
///    resolved taking the hub; rounds until idle.
final class SyncGroupFixture {
    let directory: URL
    let configPath: String
    let modelPath: String
    let model: ManagedObjectModel
    let group: SyncGroup
    var folder = UUID()
    var record = UUID()

    func url(_ store: String) -> URL { directory.appendingPathComponent("\(store).sqlite") }

    init(history: Bool = true) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("storesyncctl-group-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let modelURL = directory.appendingPathComponent("Notes.xcdatamodel")
        try XcodeModelWriter.write(Self.makeModel(), to: modelURL)
        modelPath = modelURL.path
        configPath = directory.appendingPathComponent("storesyncd.toml").path
        try Data("""
            state_directory = "state"
            runtime_directory = "run"

            [[group]]
            name = "notes"
            model = "Notes.xcdatamodel"

            [[group.store]]
            name = "app"
            path = "app.sqlite"
            policy = "object-trump"

            [[group.store]]
            name = "web"
            path = "web.sqlite"
            policy = "error"

            [[group.store]]
            name = "phone"
            path = "phone.sqlite"
            policy = "store-trump"
            """.utf8).write(to: URL(fileURLWithPath: configPath))
        let configuration = try DaemonConfiguration.load(file: configPath)
        let settings = configuration.groups[0]
        model = settings.model
        group = try SyncGroup(configuration: settings.syncConfiguration(stateDirectory: configuration.stateDirectory,
                                                                         historyRetention: configuration.historyRetention))
        try group.runUntilIdle()
        if history { try writeHistory() }
    }

    deinit { try? group.close() }

    /// Folder (name, records) and Record (a, b, name, folder).
    static func makeModel() -> ManagedObjectModel {
        let record = EntityDescription(name: "Record")
        let folder = EntityDescription(name: "Folder")
        let records = RelationshipDescription(name: "records", destination: record, toMany: true)
        let recordFolder = RelationshipDescription(name: "folder", destination: folder, toMany: false)
        records.inverseRelationship = recordFolder
        recordFolder.inverseRelationship = records
        records.deleteRule = .nullify
        recordFolder.deleteRule = .nullify
        record.properties = [AttributeDescription(name: "a", type: .integer32), AttributeDescription(name: "b", type: .integer32),
                             AttributeDescription(name: "name", type: .string), recordFolder]
        folder.properties = [AttributeDescription(name: "name", type: .string), records]
        let model = ManagedObjectModel()
        model.entities = [folder, record]
        return model
    }

    /// An application's context on one store.
    func app(_ store: String, author: String) throws -> ManagedObjectContext {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url(store))
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = author
        // The engine writes the file too: read objects as stored now.
        context.stalenessInterval = 0
        return context
    }

    func set(_ context: ManagedObjectContext, _ gid: UUID, _ key: String, _ value: Any) throws {
        try context.performAndWait {
            context.reset()
            guard let object = try context.existingObject(withGlobalIdentifier: gid) else { throw CoreDataError(.persistentStoreOperation, "no object \(gid)") }
            try object.setValue(value, forKey: key)
            try context.save()
        }
    }

    private func writeHistory() throws {
        let app = try self.app("app", author: "app"), web = try self.app("web", author: "web")
        let ids = try app.performAndWait {
            let folder = try app.insertNewObject(forEntityName: "Folder")
            try folder.setValue("Inbox", forKey: "name")
            let record = try app.insertNewObject(forEntityName: "Record")
            try record.setValue("one", forKey: "name")
            try record.setValue(Int32(1), forKey: "a")
            try record.setValue(folder, forKey: "folder")
            try app.save()
            return [folder.objectID, record.objectID]
        }
        let gids = try app.persistentStoreCoordinator.globalIdentifiers(for: ids)
        folder = gids[ids[0]]!
        record = gids[ids[1]]!
        try group.runUntilIdle()
        try set(web, record, "a", Int32(2))
        try group.runUntilIdle()
        try Self.sqlite3(url("phone").path, "UPDATE ZRECORD SET ZNAME = 'sql', Z_OPT = Z_OPT + 1 WHERE ZNAME = 'one';")
        try group.runUntilIdle()
        // A pause, so a time between steps 3 and 4 separates them clearly.
        Thread.sleep(forTimeInterval: 0.05)
        try set(app, record, "b", Int32(7))
        try set(web, record, "b", Int32(5))
        try group.runRound()
        let conflicts = try group.conflicts()
        precondition(conflicts.count == 1 && conflicts[0].store == "web", "the fixture expects one conflict of web, got \(conflicts)")
        try group.resolve(conflicts[0].id, taking: .hub)
        try group.runUntilIdle()
    }

    /// Runs SQL through the `sqlite3` shell, as an administrator would.
    @discardableResult
    static func sqlite3(_ path: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = ["-bail", "-cmd", ".timeout 5000", path, sql]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CoreDataError(.sqlite, "sqlite3 \(path) failed (\(process.terminationStatus)): \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: output, as: UTF8.self)
    }
}
