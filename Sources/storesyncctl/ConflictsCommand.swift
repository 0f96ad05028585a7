import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl conflicts list|show|resolve`: the conflicts stores with the
/// `error` policy recorded, waiting for an operator's decision.
struct ConflictsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List, show and resolve the conflicts waiting for a decision.",
        discussion: """
            A store with the error policy that changed an object the hub changed too records \
            a conflict instead of choosing; its later changes to that object wait until the \
            conflict is resolved: take incoming (the store's object goes to the hub and every \
            store) or hub (the hub's object goes back to the store).

            A conflict is named GROUP:N (N alone when the daemon has one group).

            Examples:
              storesyncctl conflicts list
              storesyncctl conflicts show demo:3
              storesyncctl conflicts resolve demo:3 --take incoming

            \(DaemonExit.help)
            """,
        subcommands: [ConflictsListCommand.self, ConflictsShowCommand.self, ConflictsResolveCommand.self],
        defaultSubcommand: ConflictsListCommand.self
    )
}

/// A conflict as the command line names it.
struct ConflictReference {
    var group: String?
    var number: Int64

    /// `GROUP:N` or `N`; `--group` fills in or must agree with the prefix.
    init(_ text: String, group: String?) throws {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let numberText = parts.count == 2 ? parts[1] : parts[0]
        guard let number = Int64(numberText), number > 0 else {
            throw ValidationError("'\(text)' is not a conflict: expected GROUP:N or N (as conflicts list prints it)")
        }
        let prefix = parts.count == 2 ? parts[0] : nil
        if let prefix, prefix.isEmpty { throw ValidationError("'\(text)' has an empty group before ':'") }
        if let prefix, let group, prefix != group { throw ValidationError("'\(text)' names group \(prefix), but --group says \(group)") }
        self.group = prefix ?? group
        self.number = number
    }

    var fields: [String: JSONValue] {
        var fields: [String: JSONValue] = ["conflict": .int(number)]
        if let group { fields["group"] = .string(group) }
        return fields
    }
}
