import ArgumentParser

/// `storesyncctl model show|check PATH`.
struct ModelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Show or check a managed object model (.xcdatamodeld, .xcdatamodel or contents file).",
        subcommands: []
    )
}
