import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl conflicts show ID [--json]`: one conflict with the base,
/// incoming and hub values side by side.
struct ConflictsShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one conflict: base, incoming and hub values side by side.",
        discussion: """
            BASE is the object before either change (as the store last received it from the \
            hub), INCOMING the store's change, HUB what the hub has now. Rows where incoming and \
            hub differ are marked with '*'. A resolved conflict is shown too, marked resolved.

            Examples:
              storesyncctl conflicts show demo:3
              storesyncctl conflicts show 3 --json

            \(DaemonExit.help)
            """
    )

    @Argument(help: "The conflict: GROUP:N, or N when the daemon has one group.")
    var conflict: String

    @Option(help: "The group, when ID is a bare number.")
    var group: String?

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        let reference = try ConflictReference(conflict, group: group)
        let reply = daemon.require(.conflictsShow, reference.fields)
        if json { return ControlOutput.printJSON(reply) }
        print(Self.render(reply["conflict"] ?? .null), terminator: "")
    }

    static func render(_ conflict: JSONValue, now: Date = Date()) -> String {
        var out = "conflict \(ControlOutput.cell(conflict["ref"]))"
            + (conflict["resolved"]?.bool == true ? " (resolved)" : " (waiting)") + "\n"
        out += "  store   \(ControlOutput.cell(conflict["store"]))\n"
        out += "  object  \(ControlOutput.cell(conflict["entity"])) \(ControlOutput.cell(conflict["object"]))\n"
        out += "  kind    \(ControlOutput.cell(conflict["kind"]))\n"
        out += "  base    hub position \(ControlOutput.cell(conflict["base_position"])); recorded at hub position \(ControlOutput.cell(conflict["hub_position"]))\n"
        out += "  created \(ControlOutput.cell(conflict["created"])) (\(ControlOutput.ago(conflict["created"]?.string, now: now)))\n\n"
        let base = conflict["base"]?.object ?? [:], incoming = conflict["incoming"]?.object ?? [:], hub = conflict["hub"]?.object ?? [:]
        let keys = Set(base.keys).union(incoming.keys).union(hub.keys).sorted()
        let rows = keys.map { key -> [String] in
            let differs = incoming[key] != nil && incoming[key] != hub[key]
            return [differs ? "*" : "", key, ControlOutput.cell(base[key]), ControlOutput.cell(incoming[key]), ControlOutput.cell(hub[key])]
        }
        out += ControlOutput.table(["", "PROPERTY", "BASE", "INCOMING", "HUB"], rows)
        if conflict["resolved"]?.bool != true {
            out += "\nResolve with: storesyncctl conflicts resolve \(ControlOutput.cell(conflict["ref"])) --take incoming|hub\n"
        }
        return out
    }
}
