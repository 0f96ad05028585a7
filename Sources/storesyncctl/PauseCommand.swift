import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl pause [GROUP|STORE|GROUP/STORE]`: stop syncing stores until
/// `resume`. The daemon keeps pauses in memory (across reloads, not restarts).
struct PauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Stop syncing a store, a group's stores, or every store, until resume.",
        discussion: """
            A paused store is neither read nor written by the daemon; its changes wait in its \
            history and are pulled after resume. The answer comes once the round in flight has \
            finished, so no round touches the store after this command returns. Pauses last \
            across reloads but not across a restart of the daemon.

            NAME is a group, a store (when only one group has a store of that name) or \
            GROUP/STORE; without it every store of every group is paused.

            Examples:
              storesyncctl pause s2
              storesyncctl pause demo
              storesyncctl pause demo/s2 --json

            \(DaemonExit.help)
            """
    )

    @Argument(help: "GROUP, STORE or GROUP/STORE (default: everything).")
    var name: String?

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        try PauseCommand.change(.pause, name: name, json: json, daemon: daemon)
    }

    /// Shared with `resume`: one request, then one line per store changed.
    static func change(_ op: ControlProtocol.Op, name: String?, json: Bool, daemon: DaemonOptions) throws {
        var fields: [String: JSONValue] = [:]
        if let name { fields["name"] = .string(name) }
        let reply = daemon.require(op, fields)
        if json { return ControlOutput.printJSON(reply) }
        let key = op == .pause ? "paused" : "resumed"
        for entry in reply[key]?.array ?? [] {
            print("\(key) \(ControlOutput.cell(entry["group"]))/\(ControlOutput.cell(entry["store"]))")
        }
    }
}
