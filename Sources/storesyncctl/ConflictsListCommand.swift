import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl conflicts list [--group G] [--json]`.
struct ConflictsListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the conflicts waiting for a decision.",
        discussion: """
            One line per conflict: its name (GROUP:N), the store that made the change, the \
            object's entity and global ID, the kind (update, delete-update, update-delete), its \
            age and the properties both sides changed. Exit 0 whether or not there are any.

            Examples:
              storesyncctl conflicts list
              storesyncctl conflicts list --group demo --json

            \(DaemonExit.help)
            """
    )

    @Option(help: "Only this group's conflicts.")
    var group: String?

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        var fields: [String: JSONValue] = [:]
        if let group { fields["group"] = .string(group) }
        let reply = daemon.require(.conflictsList, fields)
        if json { return ControlOutput.printJSON(reply) }
        print(Self.render(reply), terminator: "")
    }

    static func render(_ reply: JSONValue, now: Date = Date()) -> String {
        let conflicts = reply["conflicts"]?.array ?? []
        guard !conflicts.isEmpty else { return "No conflicts waiting.\n" }
        let rows = conflicts.map { conflict -> [String] in
            // The store's changed properties that the hub has otherwise.
            let changed = (conflict["incoming"]?.object ?? [:]).keys
            let differing = changed.filter { conflict["incoming"]?[$0] != conflict["hub"]?[$0] }.sorted()
            return [ControlOutput.cell(conflict["ref"]), ControlOutput.cell(conflict["store"]), ControlOutput.cell(conflict["entity"]),
                    ControlOutput.cell(conflict["object"]), ControlOutput.cell(conflict["kind"]),
                    ControlOutput.ago(conflict["created"]?.string, now: now), differing.isEmpty ? "-" : differing.joined(separator: ",")]
        }
        return ControlOutput.table(["CONFLICT", "STORE", "ENTITY", "OBJECT", "KIND", "AGE", "DIFFERING"], rows)
            + "\n\(conflicts.count) conflict\(conflicts.count == 1 ? "" : "s") waiting.\n"
    }
}
