import Foundation
import StoreSyncControl
import Testing
@testable import storesyncctl

/// `storesyncctl export rebuild` and the export rows of `status`, from
/// replies shaped as the daemon sends them (docs/CONTROL.md); the commands
/// against a real daemon are in storesyncdTests' ExternalRecordsDaemonTests.
@Suite struct ExportRebuildCommandTests {
    @Test func rebuildPrintsOneLinePerGroup() throws {
        let reply = try JSONValue.parse(Data("""
            {"v":1,"id":1,"ok":true,"records":4,"groups":[
             {"group":"notes","directory":"/srv/notes/records","records":3,"position":41,"duration_s":0.012,"error":null},
             {"group":"tasks","directory":"/srv/tasks/records","records":1,"position":7,"duration_s":1.5,"error":null}]}
            """.utf8))
        let text = ExportRebuildCommand.render(reply)
        #expect(text.hasPrefix("notes: 3 records written to /srv/notes/records in "))
        #expect(text.contains("\ntasks: 1 record written to /srv/tasks/records in "))
        #expect(text.split(separator: "\n").count == 2)
    }

    @Test func statusShowsEachExportAndAFailingOnesError() throws {
        let now = try #require(JSONValue.date("2026-11-27T19:10:00.000Z"))
        let reply = try JSONValue.parse(Data("""
            {"v":1,"id":1,"ok":true,"in_sync":false,
             "daemon":{"version":"0.1.0-dev","pid":1,"uptime_s":5,"state":"running","config":"/etc/storesyncd/storesyncd.toml","control_socket":"/run/storesyncd/control.sock"},
             "groups":[{"name":"notes","fresh":true,"error":null,"stores":[],
                        "export":{"directory":"/srv/notes/records","format":"json","state":"failing","position":41,
                                  "last_export":"2026-11-27T19:09:00.000Z","last_error":"NSCocoaErrorDomain 512: cannot write /srv/notes/records/X",
                                  "failing_since":"2026-11-27T19:09:30.000Z","failures":3}},
                       {"name":"plain","fresh":true,"error":null,"stores":[],"export":null}]}
            """.utf8))
        let text = StatusCommand.render(reply, now: now)
        #expect(text.contains("EXPORT"))
        let row = try #require(text.split(separator: "\n").first { $0.hasPrefix("notes") && $0.contains("/srv/notes/records") })
        #expect(row.contains("failing") && row.contains("hub 41") && row.contains("1 min 0 s ago"))
        #expect(!text.split(separator: "\n").contains { $0.hasPrefix("plain") }, "a group without export has no export row")
        #expect(text.contains("notes export, failing since 30 s ago: NSCocoaErrorDomain 512: cannot write /srv/notes/records/X"))
    }
}
