import Foundation
import Testing
@testable import storesyncctl

/// `storesyncctl query GROUP ENTITY`: a sync group named in the
/// configuration is read through its hub by default, or one of its stores
/// with `--store`, with the group's model; mistakes get a clear message and
/// the documented status.
@Suite struct QueryGroupTests {
    func run(_ arguments: [String]) throws -> QueryCommand.Outcome {
        try QueryCommand.parse(arguments).execute()
    }

    @Test func aGroupIsReadThroughItsHubOrAStore() throws {
        let fixture = try SyncGroupFixture()
        let hub = try run(["notes", "Record", "--config", fixture.configPath, "--json"])
        #expect(hub.exitCode == 0, "\(hub)")
        let hubRows = try #require(try JSONSerialization.jsonObject(with: Data(hub.standardOutput.utf8)) as? [[String: Any]])
        #expect(hubRows.map { $0["name"] as? String } == ["sql"], "\(hub.standardOutput)")
        #expect(hubRows.first?["a"] as? Int == 2)

        let table = try run(["notes", "Folder", "name == \"Inbox\"", "--config", fixture.configPath])
        #expect(table.exitCode == 0, "\(table)")
        #expect(table.standardOutput.contains("Inbox"), "\(table.standardOutput)")

        // A store differs from the hub until synced: plant a value in phone only.
        _ = try SyncGroupFixture.sqlite3(fixture.url("phone").path, "UPDATE ZRECORD SET ZA = 42, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'sql';")
        let phone = try run(["notes", "Record", "a == 42", "--store", "phone", "--config", fixture.configPath, "--json"])
        #expect(phone.exitCode == 0, "\(phone)")
        #expect(phone.standardOutput.contains("\"sql\""), "\(phone.standardOutput)")
        let hubAgain = try run(["notes", "Record", "a == 42", "--config", fixture.configPath, "--json"])
        #expect(hubAgain.exitCode == 0, "\(hubAgain)")
        let hubRowsAgain = try #require(try JSONSerialization.jsonObject(with: Data(hubAgain.standardOutput.utf8)) as? [Any])
        #expect(hubRowsAgain.isEmpty, "\(hubAgain.standardOutput)")
    }

    @Test func mistakesAreNamedWithTheirStatus() throws {
        let fixture = try SyncGroupFixture(history: false)
        var outcome = try run(["notes", "Record", "--store", "tablet", "--config", fixture.configPath])
        #expect(outcome.exitCode == 64 && outcome.standardError.contains("group notes has no store 'tablet' (it has: app, web, phone)"), "\(outcome)")
        outcome = try run(["notes", "Record", "--model", fixture.modelPath, "--config", fixture.configPath])
        #expect(outcome.exitCode == 64 && outcome.standardError.contains("--model: a group's hub and stores are read with the group's model"), "\(outcome)")
        outcome = try run(["photos", "Record", "--config", fixture.configPath])
        #expect(outcome.exitCode == 66 && outcome.standardError.contains("no group 'photos' in \(fixture.configPath) (it has: notes)"), "\(outcome)")
        outcome = try run(["notes", "Nope", "--config", fixture.configPath])
        #expect(outcome.exitCode == 65 && outcome.standardError.contains("the model has no entity 'Nope'"), "\(outcome)")
        outcome = try run(["notes", "Record", "name ==", "--config", fixture.configPath])
        #expect(outcome.exitCode == 65 && outcome.standardError.contains("column") && outcome.standardError.contains("^"), "\(outcome)")
        let missingConfig = fixture.directory.appendingPathComponent("none.toml").path
        outcome = try run(["notes", "Record", "--config", missingConfig])
        #expect(outcome.exitCode == 66 && outcome.standardError.contains("no configuration file at \(missingConfig)"), "\(outcome)")
    }
}
