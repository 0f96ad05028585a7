import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl conflicts resolve ID --take incoming|hub`.
struct ConflictsResolveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve a conflict by taking the store's change (incoming) or the hub's object.",
        discussion: """
            incoming: the store's current object (or its deletion) goes to the hub and so to \
            every store. hub: the hub's object goes back to the store. The command returns once \
            the decision is committed in the hub; a round then carries it to the stores, and the \
            object's held changes resume.

            Examples:
              storesyncctl conflicts resolve demo:3 --take incoming
              storesyncctl conflicts resolve 3 --take hub --json

            \(DaemonExit.help)
            """
    )

    enum Side: String, ExpressibleByArgument, CaseIterable {
        case incoming, hub
    }

    @Argument(help: "The conflict: GROUP:N, or N when the daemon has one group.")
    var conflict: String

    @Option(help: "Which side wins: incoming (the store's change) or hub.")
    var take: Side

    @Option(help: "The group, when ID is a bare number.")
    var group: String?

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        let reference = try ConflictReference(conflict, group: group)
        var fields = reference.fields
        fields["take"] = .string(take.rawValue)
        let reply = daemon.require(.conflictsResolve, fields)
        if json { return ControlOutput.printJSON(reply) }
        let resolved = reply["resolved"] ?? .null
        print("resolved \(ControlOutput.cell(resolved["ref"])) taking \(take.rawValue) (\(ControlOutput.cell(resolved["entity"])) \(ControlOutput.cell(resolved["object"])) of store \(ControlOutput.cell(resolved["store"])))")
    }
}
