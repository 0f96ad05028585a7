import ArgumentParser
import StoreSyncControl

/// `storesyncctl resume [GROUP|STORE|GROUP/STORE]`: undo `pause`; the group
/// runs a round at once so the store catches up.
struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Sync paused stores again (a store, a group's stores, or every store).",
        discussion: """
            The store's changes made while it was paused are pulled, and what the hub received \
            meanwhile is pushed to it, in a round that starts at once. Resuming a store that is \
            not paused does nothing.

            NAME is a group, a store (when only one group has a store of that name) or \
            GROUP/STORE; without it every store of every group is resumed.

            Examples:
              storesyncctl resume s2
              storesyncctl resume
              storesyncctl resume demo/s2 && storesyncctl sync --wait

            \(DaemonExit.help)
            """
    )

    @Argument(help: "GROUP, STORE or GROUP/STORE (default: everything).")
    var name: String?

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        try PauseCommand.change(.resume, name: name, json: json, daemon: daemon)
    }
}
