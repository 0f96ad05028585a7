import Foundation
import CoreMetrics
import Prometheus
import StoreSync
import StoreSyncControl

/// The daemon's counters and gauges, kept with swift-metrics and exposed in
/// Prometheus text format (`metrics` on the control socket, for
/// node_exporter's textfile collector through `storesyncctl metrics`).
///
/// Everything is derived from what each job of a `GroupRunner` reports
/// (the positions and states of `SyncGroup.status()` before and after), so
/// the engine needs no metrics code. Handlers are thread-safe: runners
/// record from their own queues.
final class DaemonMetrics: @unchecked Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    /// `# HELP` text per metric name. swift-metrics has no help text, so it
    /// is added when the registry's output is rendered (`exposition()`).
    static let help: [String: String] = [
        "storesync_daemon_info": "Constant 1; the label version is the daemon's version.",
        "storesync_daemon_start_time_seconds": "When the daemon started, in seconds since the Unix epoch.",
        "storesync_rounds_total": "Sync jobs run per group (rounds and single-store pulls), failed ones included.",
        "storesync_round_errors_total": "Sync jobs per group that ended with an error (the hub could not be written, for instance).",
        "storesync_round_duration_seconds": "Wall time of each sync job per group.",
        "storesync_transactions_pulled_total": "Store history positions the hub has pulled through (one per store transaction; the engine's own writes, which are skipped, included).",
        "storesync_transactions_pushed_total": "Hub positions delivered to the store (one per hub transaction; a store that receives nothing is moved along 256 at a time).",
        "storesync_conflicts_total": "Conflicts recorded per group (stores with the error policy).",
        "storesync_conflicts_resolved_total": "Conflicts resolved through the control socket per group.",
        "storesync_conflicts_waiting": "Conflicts waiting for a decision per store.",
        "storesync_lag_transactions": "Store transactions the hub has not pulled yet.",
        "storesync_lag_seconds": "Seconds since the oldest store change the hub has not pulled was committed (0 when none).",
        "storesync_store_errors_total": "Sync jobs in which the store failed (it could not be opened, read or written).",
        "storesync_store_state": "1 for the store's current state (ok, paused, catching-up, failed), 0 for the others.",
        "storesync_control_requests_total": "Control socket requests by operation and outcome (ok or the error code).",
    ]

    init(start: Date = Date()) {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Rounds take from a millisecond (nothing to do) to minutes (a
        // catch-up of a million changes); the default buckets stop at 10 s.
        factory.durationHistogramBuckets["storesync_round_duration_seconds"] = [
            .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30),
            .seconds(60), .seconds(300),
        ]
        self.factory = factory
        Gauge(label: "storesync_daemon_info", dimensions: [("version", StoreSyncVersion.current)], factory: factory).record(1)
        Gauge(label: "storesync_daemon_start_time_seconds", factory: factory).record(start.timeIntervalSince1970)
    }

    /// After every job of a runner (on its queue): what moved since the
    /// job before (or since the group opened), and where each store stands.
    func recordJob(_ summary: RoundSummary, previous: [SyncStoreStatus]?, newConflicts: Int) {
        let group = [("group", summary.group)]
        if !summary.isStatusOnly {
            Counter(label: "storesync_rounds_total", dimensions: group, factory: factory).increment()
            CoreMetrics.Timer(label: "storesync_round_duration_seconds", dimensions: group, factory: factory)
                .recordNanoseconds(Int64((summary.duration * 1e9).rounded()))
            Counter(label: "storesync_round_errors_total", dimensions: group, factory: factory).increment(by: summary.error == nil ? 0 : 1)
        }
        Counter(label: "storesync_conflicts_total", dimensions: group, factory: factory).increment(by: newConflicts)
        Counter(label: "storesync_conflicts_resolved_total", dimensions: group, factory: factory).increment(by: 0)
        for store in summary.stores {
            let labels = group + [("store", store.name)]
            let before = previous?.first { $0.name == store.name }
            // A position going back (a store file replaced, history purged
            // and restarted) is not negative work: count nothing then.
            let pulled = before.map { max(0, store.pulledThrough - $0.pulledThrough) } ?? 0
            let pushed = before.map { max(0, store.pushedThrough - $0.pushedThrough) } ?? 0
            Counter(label: "storesync_transactions_pulled_total", dimensions: labels, factory: factory).increment(by: pulled)
            Counter(label: "storesync_transactions_pushed_total", dimensions: labels, factory: factory).increment(by: pushed)
            Counter(label: "storesync_store_errors_total", dimensions: labels, factory: factory)
                .increment(by: store.lastError == nil || summary.isStatusOnly ? 0 : 1)
            Gauge(label: "storesync_conflicts_waiting", dimensions: labels, factory: factory).record(store.conflictsWaiting)
            Gauge(label: "storesync_lag_transactions", dimensions: labels, factory: factory).record(Self.lagTransactions(store))
            Gauge(label: "storesync_lag_seconds", dimensions: labels, factory: factory).record(store.lagSeconds)
            for state in [SyncStoreStatus.State.ok, .paused, .catchingUp, .failed] {
                Gauge(label: "storesync_store_state", dimensions: labels + [("state", state.rawValue)], factory: factory)
                    .record(store.state == state ? 1 : 0)
            }
        }
    }

    /// A conflict resolved through the control socket.
    func recordResolution(group: String) {
        Counter(label: "storesync_conflicts_resolved_total", dimensions: [("group", group)], factory: factory).increment()
    }

    /// Every control request, by op (`invalid` when it had none) and outcome.
    func recordRequest(op: String, outcome: String) {
        Counter(label: "storesync_control_requests_total", dimensions: [("op", op), ("outcome", outcome)], factory: factory).increment()
    }

    /// Store transactions not pulled yet: the store's newest history position
    /// past what the hub pulled through.
    static func lagTransactions(_ store: SyncStoreStatus) -> Int64 {
        max(0, store.storePosition - store.pulledThrough)
    }

    /// The Prometheus text exposition format (version 0.0.4), with a
    /// `# HELP` line before each metric's `# TYPE` line.
    func exposition() -> String {
        var out = ""
        for line in registry.emitToString().split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst("# TYPE ".count).split(separator: " ").first.map(String.init) ?? ""
                if let help = Self.help[name] { out += "# HELP \(name) \(help)\n" }
            }
            out += line + "\n"
        }
        // The registry ends with a newline already; keep exactly one.
        while out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }
}
