import ArgumentParser

/// `storesyncctl`: the control CLI for StoreSync. Each subcommand lives in its
/// own file, named after it.
@main
struct StoreSyncCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storesyncctl",
        abstract: "Inspect Core Data models, predicates and stores; control storesyncd.",
        subcommands: [
            AttachCommand.self,
            DetachCommand.self,
            LogCommand.self,
            ModelCommand.self,
            PredicateCommand.self,
            QueryCommand.self,
            StatusCommand.self,
            PauseCommand.self,
            ResumeCommand.self,
            SyncCommand.self,
            ReloadCommand.self,
            ConflictsCommand.self,
            MetricsCommand.self,
            VerifyCommand.self,
        ]
    )
}
