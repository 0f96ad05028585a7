import ArgumentParser

/// `storesyncctl`: the control CLI for StoreSync. Each subcommand lives in its
/// own file, named after it.
@main
struct StoreSyncCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storesyncctl",
        abstract: "Inspect Core Data models, predicates and stores; control storesyncd.",
        discussion: """
            Commands that talk to storesyncd (status, pause, resume, sync, reload, conflicts, \
            metrics, export, log --follow) reach it through its control socket: --socket PATH, else \
            --config's control_socket, else $RUNTIME_DIRECTORY/control.sock, else \
            /run/storesyncd/control.sock. The others (log, verify, attach, detach, query, \
            model, predicate, migrate) read the files and work without the daemon.

            Output is aligned text for people (colour only on a terminal, never with NO_COLOR \
            set); --json gives stable JSON for scripts. Errors go to stderr. Each command's \
            --help lists its exit statuses; see storesyncctl(1).

            Exit statuses:
              0   success (status: every store in sync; verify: the stores agree)
              1   status: something is behind, paused, failed or in conflict; verify:
                  differences; other daemon commands: the daemon refused the request
              3   storesyncd is not running (no socket, or nothing accepts on it)
              64  usage error: an unknown subcommand or option, a bad value
              65  bad data: a predicate with a syntax error (its column shown), a model
                  or store that cannot be read
              66  no such file (store, model, configuration)
              70  internal error
              74  I/O error (a socket error, writing a store)
              75  try again: the daemon did not answer within --timeout, a store stayed locked
              76  the socket answered, but not as storesyncd
              77  permission denied (the control socket is 0660)
              78  the configuration file cannot be used
            """,
        subcommands: [
            AttachCommand.self,
            DetachCommand.self,
            LogCommand.self,
            MigrateCommand.self,
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
            ExportCommand.self,
            VerifyCommand.self,
            CompletionCommand.self,
        ]
    )
}
