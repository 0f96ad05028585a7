import ArgumentParser
import StoreSyncControl

/// `storesyncctl metrics`: the daemon's counters and gauges in Prometheus
/// text format, for node_exporter's textfile collector.
struct MetricsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print the daemon's metrics in Prometheus text format.",
        discussion: """
            Counters and gauges per group and store: transactions pulled and pushed, conflicts \
            recorded, resolved and waiting, lag in transactions and seconds, store states, errors, \
            a histogram of round durations, and control requests. docs/CONTROL.md lists them.

            Examples:
              storesyncctl metrics
              storesyncctl metrics > /var/lib/node_exporter/textfile/storesyncd.prom.$$ && \\
                mv /var/lib/node_exporter/textfile/storesyncd.prom.$$ /var/lib/node_exporter/textfile/storesyncd.prom

            \(DaemonExit.help)
            """
    )

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        let reply = daemon.require(.metrics)
        print(reply["text"]?.string ?? "", terminator: "")
    }
}
