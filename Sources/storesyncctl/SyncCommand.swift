import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl sync [GROUP] [--wait] [--timeout S]`: run a round now
/// instead of at the next file event or safety timer.
struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Run a sync round now (every group, or one).",
        discussion: """
            Without --wait the round is scheduled and the command returns at once. With --wait \
            it returns when a round that started after the request has finished, printing what \
            it did; it exits 1 when the round failed or left a store failed, and 75 when the \
            round took longer than --timeout (it goes on in the daemon).

            Examples:
              storesyncctl sync
              storesyncctl sync demo --wait
              storesyncctl sync --wait --timeout 120 --json

            \(DaemonExit.help)
            """
    )

    @Argument(help: "Only this group.")
    var group: String?

    @Flag(help: "Return when the round has finished.")
    var wait = false

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        var fields: [String: JSONValue] = ["wait": .bool(wait)]
        if let group { fields["group"] = .string(group) }
        let reply = daemon.call(.sync, fields)
        if json { ControlOutput.printJSON(reply) }
        guard reply["ok"]?.bool == true else {
            if !json { print(Self.render(reply), terminator: "") }
            DaemonOptions.failReply(reply)
        }
        guard wait else {
            if !json {
                let groups = (reply["scheduled"]?.array ?? []).map(ControlOutput.cell)
                print("sync requested for \(groups.isEmpty ? "no group" : groups.joined(separator: ", "))")
            }
            return
        }
        if !json { print(Self.render(reply), terminator: "") }
        let failed = (reply["rounds"]?.array ?? []).flatMap { $0["stores"]?.array ?? [] }.contains { $0["state"]?.string == "failed" }
        if failed { throw DaemonExit.notOK }
    }

    /// One line per group's round, then one per store.
    static func render(_ reply: JSONValue) -> String {
        var out = ""
        for round in reply["rounds"]?.array ?? [] {
            let group = ControlOutput.cell(round["group"])
            if round["cancelled"]?.bool == true {
                out += "\(group): round dropped (the daemon stopped or reloaded)\n"
                continue
            }
            let moved = round["moved"]?.bool == true ? "changes moved" : "nothing to move"
            out += "\(group): round finished in \(ControlOutput.duration(round["duration_s"]?.double ?? 0)), \(moved), hub at \(ControlOutput.cell(round["hub_position"]))\n"
            if let error = round["error"]?.string { out += "  error: \(error)\n" }
            for store in round["stores"]?.array ?? [] {
                var line = "  \(ControlOutput.cell(store["name"])) \(ControlOutput.state(ControlOutput.cell(store["state"])))"
                if let conflicts = store["conflicts_waiting"]?.int, conflicts > 0 { line += ", \(conflicts) conflict\(conflicts == 1 ? "" : "s") waiting" }
                if let reason = store["reason"]?.string { line += ": \(reason)" }
                out += line + "\n"
            }
        }
        return out
    }
}
