import ArgumentParser

/// `storesyncctl export rebuild`: the external records the daemon keeps for
/// indexers (`[group.export]`, docs/EXTERNAL-RECORDS.md).
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Manage the external records directories the daemon keeps for indexers.",
        discussion: """
            A group with a [group.export] table in the configuration has its objects written \
            as one record file each, kept in step with the group's hub after every round. \
            `status` shows each group's export state and last error.

            Examples:
              storesyncctl export rebuild
              storesyncctl export rebuild notes --json

            \(DaemonExit.help)
            """,
        subcommands: [ExportRebuildCommand.self]
    )
}
