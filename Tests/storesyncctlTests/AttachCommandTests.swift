import Foundation
import ObjectGraph
import Testing
@testable import storesyncctl

/// `storesyncctl attach` and `detach`: history on and off for a store file,
/// refused only when unsafe (detach while the file is open elsewhere, or of
/// a sync group's store without --force), and bad input.
@Suite struct AttachCommandTests {
    /// A store an application made without history, holding two objects.
    func plainStore(_ fixture: SyncGroupFixture) throws -> URL {
        let url = fixture.directory.appendingPathComponent("plain.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: fixture.model)
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            try context.insertNewObject(forEntityName: "Folder").setValue("f", forKey: "name")
            try context.insertNewObject(forEntityName: "Record").setValue("r", forKey: "name")
            try context.save()
        }
        try coordinator.remove(store)
        return url
    }

    func historyTables(_ url: URL) throws -> Int {
        Int(try SyncGroupFixture.sqlite3(url.path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'OGH%';")
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    @Test func attachSwitchesHistoryOnAndDetachOff() throws {
        let fixture = try SyncGroupFixture(history: false)
        let url = try plainStore(fixture)
        #expect(try historyTables(url) == 0)

        var outcome = try AttachCommand.parse([url.path, "--model", fixture.modelPath]).execute()
        #expect(outcome.exitCode == 0 && outcome.standardOutput.contains("history is on for \(url.path)")
                && outcome.standardOutput.contains("2 existing objects got global IDs"), "\(outcome)")
        #expect(try historyTables(url) > 0)
        #expect(try SyncGroupFixture.sqlite3(url.path, "SELECT count(*) FROM OGH_GLOBALID WHERE DEAD = 0;").trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        outcome = try AttachCommand.parse([url.path, "--model", fixture.modelPath]).execute()
        #expect(outcome.exitCode == 0 && outcome.standardOutput == "history is already on for \(url.path); nothing to do\n")

        // A writer records from now on; the log reads it.
        let app = try fixture.app("plain", author: "app")
        try app.performAndWait {
            try app.insertNewObject(forEntityName: "Folder").setValue("g", forKey: "name")
            try app.save()
        }
        let log = try LogCommand.parse(["--store", url.path, "--model", fixture.modelPath, "--json"]).execute()
        #expect(log.exitCode == 0 && log.standardOutput.split(separator: "\n").count == 1 && log.standardOutput.contains("\"author\":\"app\""), "\(log)")

        // Open elsewhere (this process's connection, the CLI another process): refused, nothing changed.
        let refused = try CLI.run(["detach", url.path, "--config", fixture.configPath])
        #expect(refused.status == 75 && refused.stderr.contains("is open in another process or connection"), "\(refused)")
        #expect(try historyTables(url) > 0)
        try app.performAndWait {
            try app.insertNewObject(forEntityName: "Folder").setValue("h", forKey: "name")
            try app.save()   // the open writer still saves
        }
        for store in app.persistentStoreCoordinator.persistentStores { try app.persistentStoreCoordinator.remove(store) }

        outcome = try DetachCommand.parse([url.path, "--config", fixture.configPath]).execute()
        #expect(outcome.exitCode == 0 && outcome.standardOutput.contains("history is off for \(url.path)"), "\(outcome)")
        #expect(try historyTables(url) == 0)
        #expect(try SyncGroupFixture.sqlite3(url.path, "SELECT count(*) FROM ZFOLDER;").trimmingCharacters(in: .whitespacesAndNewlines) == "3")
        outcome = try DetachCommand.parse([url.path, "--config", fixture.configPath]).execute()
        #expect(outcome.exitCode == 0 && outcome.standardOutput == "history is already off for \(url.path); nothing to do\n", "\(outcome)")
    }

    @Test func detachingASyncGroupsStoreNeedsForce() throws {
        let fixture = try SyncGroupFixture(history: false)
        try fixture.group.close()
        let web = fixture.url("web")
        // The engine's metadata names the group.
        var outcome = try DetachCommand.parse([web.path]).execute()
        #expect(outcome.exitCode == 64 && outcome.standardError.contains("is a store of sync group notes")
                && outcome.standardError.contains("--force"), "\(outcome)")
        #expect(try historyTables(web) > 0)

        // A store the configuration lists, with no engine metadata yet.
        let url = try plainStore(fixture)
        _ = try AttachCommand.parse([url.path, "--model", fixture.modelPath]).execute()
        let listed = try String(contentsOfFile: fixture.configPath, encoding: .utf8)
            + "\n[[group.store]]\nname = \"plain\"\npath = \"plain.sqlite\"\npolicy = \"error\"\n"
        try Data(listed.utf8).write(to: URL(fileURLWithPath: fixture.configPath))
        outcome = try DetachCommand.parse([url.path, "--config", fixture.configPath]).execute()
        #expect(outcome.exitCode == 64 && outcome.standardError.contains("is a store of sync group notes (in \(fixture.configPath))"), "\(outcome)")

        outcome = try DetachCommand.parse([web.path, "--force"]).execute()
        #expect(outcome.exitCode == 0, "\(outcome)")
        #expect(try historyTables(web) == 0)
    }

    @Test func badInputIsRefusedWithTheDocumentedStatus() throws {
        let fixture = try SyncGroupFixture(history: false)
        let text = try CLI.temporaryFile("notes.txt", "not a database")
        var outcome = try AttachCommand.parse([text, "--model", fixture.modelPath]).execute()
        #expect(outcome.exitCode == 65 && outcome.standardError.contains("is not a SQLite store file"), "\(outcome)")
        outcome = try DetachCommand.parse([text]).execute()
        #expect(outcome.exitCode == 65 && outcome.standardError.contains("is not a SQLite store file"), "\(outcome)")
        outcome = try AttachCommand.parse([fixture.directory.appendingPathComponent("none.sqlite").path, "--model", fixture.modelPath]).execute()
        #expect(outcome.exitCode == 66 && outcome.standardError.contains("no store file at"), "\(outcome)")
        outcome = try AttachCommand.parse([fixture.url("app").path, "--model", fixture.directory.appendingPathComponent("none.xcdatamodel").path]).execute()
        #expect(outcome.exitCode == 66 && outcome.standardError.contains("no model at"), "\(outcome)")

        // A model the store was not made with.
        let other = ManagedObjectModel()
        let thing = EntityDescription(name: "Thing")
        thing.properties = [AttributeDescription(name: "name", type: .string)]
        other.entities = [thing]
        let otherModel = fixture.directory.appendingPathComponent("Other.xcdatamodel")
        try XcodeModelWriter.write(other, to: otherModel)
        let url = try plainStore(fixture)
        outcome = try AttachCommand.parse([url.path, "--model", otherModel.path]).execute()
        #expect(outcome.exitCode == 65 && !outcome.standardError.isEmpty, "\(outcome)")
        #expect(try historyTables(url) == 0)

        let missingArgument = try CLI.run(["attach", url.path])
        #expect(missingArgument.status == 64 && missingArgument.stderr.contains("--model"), "\(missingArgument)")
        let unknownOption = try CLI.run(["detach", url.path, "--bogus"])
        #expect(unknownOption.status == 64 && unknownOption.stderr.contains("Unknown option '--bogus'"))
    }
}
