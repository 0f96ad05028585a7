import ArgumentParser

/// `storesync-bench`: performance workloads, one subcommand per subsystem.
/// Each subcommand lives in its own file; add new ones to `subcommands`.
@main
struct StoreSyncBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storesync-bench",
        abstract: "Benchmarks for StoreSync. Build with -c release before trusting the numbers.",
        subcommands: [
            BatchBenchmark.self,
            DaemonBenchmark.self,
            HistoryBenchmark.self,
            MigrateBenchmark.self,
            RecordsBenchmark.self,
            PredicateBenchmark.self,
            SQLiteBenchmark.self,
            SQLiteStoreBenchmark.self,
            SyncBenchmark.self,
        ]
    )
}
