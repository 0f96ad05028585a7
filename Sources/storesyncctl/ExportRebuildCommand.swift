import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl export rebuild [GROUP] [--json]`: rewrites a group's
/// records directory from its hub (the `export.rebuild` op).
struct ExportRebuildCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebuild",
        abstract: "Rewrite the external records directory of every exporting group, or of one, from the hub.",
        discussion: """
            The daemon writes the record of every object its hub holds, removes the record files \
            of objects it no longer holds, and leaves files that are not records alone; it then \
            goes on from the hub's current position. Use it after files were deleted or changed \
            in the directory by hand, or to start an indexer from a known state. The command \
            returns when the rebuild is over (bounded by --timeout; a large group may need more) \
            and prints the number of records written per group.

            A group that has no [group.export] table, or no group at all exporting, exits 1 \
            (error code not-configured); an unknown group exits 1 (not-found).

            Examples:
              storesyncctl export rebuild
              storesyncctl export rebuild notes
              storesyncctl export rebuild notes --json --timeout 600

            \(DaemonExit.help)
            """
    )

    @Argument(help: "Only this group (default: every group with [group.export]).")
    var group: String?

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        var fields: [String: JSONValue] = [:]
        if let group { fields["group"] = .string(group) }
        let reply = daemon.call(.exportRebuild, fields)
        if json { ControlOutput.printJSON(reply) }
        guard reply["ok"]?.bool == true else { DaemonOptions.failReply(reply) }
        if !json { print(Self.render(reply), terminator: "") }
    }

    /// One line per group rebuilt.
    static func render(_ reply: JSONValue) -> String {
        var out = ""
        for group in reply["groups"]?.array ?? [] {
            let records = group["records"]?.int ?? 0
            out += "\(ControlOutput.cell(group["group"])): \(records) record\(records == 1 ? "" : "s") written to \(ControlOutput.cell(group["directory"]))"
            out += " in \(ControlOutput.duration(group["duration_s"]?.double ?? 0))\n"
        }
        return out
    }
}
