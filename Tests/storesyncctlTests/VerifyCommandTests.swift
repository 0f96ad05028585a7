import Foundation
import Testing
@testable import storesyncctl

/// `storesyncctl verify`: a synced group agrees (exit 0); a value, an object
/// and a relationship changed in one store with the `sqlite3` shell (Core
/// Data's layout: ZRECORD, Z_PK, Z_ENT, Z_OPT) are each reported (exit 1),
/// in the table and in JSON; after a round of the engine, none are.
@Suite struct VerifyCommandTests {
    func run(_ arguments: [String]) throws -> CommandOutcome {
        try VerifyCommand.parse(arguments).execute()
    }

    @Test func aPlantedValueObjectAndRelationshipAreReportedUntilTheEngineCarriesThem() throws {
        let fixture = try SyncGroupFixture()
        let agreed = try run(["notes", "--config", fixture.configPath])
        #expect(agreed.exitCode == 0, "\(agreed)")
        #expect(agreed.standardOutput == "group notes: the hub and 3 stores (app, web, phone) agree on 2 objects\n")

        // A second record and folder everywhere, then three changes in phone only.
        let app = try fixture.app("app", author: "app")
        let ids = try app.performAndWait {
            let folder = try app.insertNewObject(forEntityName: "Folder")
            try folder.setValue("Archive", forKey: "name")
            let spare = try app.insertNewObject(forEntityName: "Record")
            try spare.setValue("spare", forKey: "name")
            try app.save()
            return [folder.objectID, spare.objectID]
        }
        let gids = try app.persistentStoreCoordinator.globalIdentifiers(for: ids)
        let archive = gids[ids[0]]!.uuidString, spare = gids[ids[1]]!.uuidString
        try fixture.group.runUntilIdle()
        #expect(try run(["--config", fixture.configPath]).exitCode == 0)

        try SyncGroupFixture.sqlite3(fixture.url("phone").path, """
            BEGIN;
            UPDATE ZRECORD SET ZA = 99, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'sql';
            UPDATE ZRECORD SET ZFOLDER = (SELECT Z_PK FROM ZFOLDER WHERE ZNAME = 'Archive'), Z_OPT = Z_OPT + 1
                WHERE ZNAME = 'sql' AND Z_ENT = (SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record');
            DELETE FROM ZRECORD WHERE ZNAME = 'spare';
            COMMIT;
            """)
        let differing = try run(["notes", "--config", fixture.configPath])
        #expect(differing.exitCode == 1)
        let record = fixture.record.uuidString, inbox = fixture.folder.uuidString
        let rows = differing.standardOutput.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
        #expect(rows.first == "group notes: 5 differences between the hub (4 objects) and 3 stores")
        #expect(rows.dropFirst().first == "STORE DIFFERENCE ENTITY OBJECT PROPERTY STORE VALUE HUB VALUE NOTE")
        #expect(Set(rows.dropFirst(2)) == [
            "phone value Record \(record) a 99 2",
            "phone relationship Record \(record) folder \(archive) \(inbox)",
            "phone relationship Folder \(inbox) records [] [\(record)]",
            "phone relationship Folder \(archive) records [\(record)] []",
            "phone missing-object Record \(spare) (missing) (present)",
        ], "\(differing.standardOutput)")

        let json = try run(["notes", "--config", fixture.configPath, "--json"])
        #expect(json.exitCode == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        #expect(object["agree"] as? Bool == false)
        let group = try #require((object["groups"] as? [[String: Any]])?.first)
        #expect(group["group"] as? String == "notes" && group["stores"] as? [String] == ["app", "web", "phone"] && group["hubObjects"] as? Int == 4)
        let differences = try #require(group["differences"] as? [[String: Any]])
        #expect(differences.count == 5)
        for difference in differences {
            #expect(Set(difference.keys) == ["store", "kind", "entity", "object", "property", "storeValue", "hubValue", "conflict", "reason"])
        }
        let value = try #require(differences.first { $0["kind"] as? String == "value" })
        #expect(value["store"] as? String == "phone" && value["entity"] as? String == "Record" && value["object"] as? String == record
                && value["property"] as? String == "a" && value["storeValue"] as? Int == 99 && value["hubValue"] as? Int == 2)
        let relationship = try #require(differences.first { $0["kind"] as? String == "relationship" && $0["property"] as? String == "folder" })
        #expect(relationship["storeValue"] as? String == archive && relationship["hubValue"] as? String == inbox)
        let missing = try #require(differences.first { $0["kind"] as? String == "missing-object" })
        #expect(missing["object"] as? String == spare && missing["property"] is NSNull)

        // The engine pulls phone's SQL like any writer's and carries it everywhere.
        try fixture.group.runUntilIdle()
        let repaired = try run(["notes", "--config", fixture.configPath])
        #expect(repaired.exitCode == 0, "\(repaired.standardOutput)")
        #expect(repaired.standardOutput == "group notes: the hub and 3 stores (app, web, phone) agree on 3 objects\n")
    }

    @Test func badInputIsRefusedWithTheDocumentedStatus() throws {
        let fixture = try SyncGroupFixture(history: false)
        var outcome = try run(["photos", "--config", fixture.configPath])
        #expect(outcome.exitCode == 64 && outcome.standardError.contains("no group 'photos' in \(fixture.configPath) (it has: notes)"), "\(outcome)")
        outcome = try run(["--config", fixture.directory.appendingPathComponent("missing.toml").path])
        #expect(outcome.exitCode == 66 && outcome.standardError.contains("no configuration file at"), "\(outcome)")
        let broken = try CLI.temporaryFile("storesyncd.toml", "[[group]]\nname = 3\n")
        outcome = try run(["--config", broken])
        #expect(outcome.exitCode == 78 && outcome.standardError.contains("key group[1].name"), "\(outcome)")
        let unknownOption = try CLI.run(["verify", "--bogus"])
        #expect(unknownOption.status == 64 && unknownOption.stderr.contains("Unknown option '--bogus'"))

        // No hub yet: the daemon never ran the group.
        try FileManager.default.removeItem(at: fixture.directory.appendingPathComponent("state"))
        outcome = try run(["notes", "--config", fixture.configPath])
        #expect(outcome.exitCode == 66 && outcome.standardError.contains("sync group notes has no hub at"), "\(outcome)")
    }
}
