import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl status [GROUP] [--json]`: where every group and store of
/// the running daemon stands, with an exit status scripts and monitoring
/// can test (0 in sync, 1 not, 3 daemon not running).
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon and each group's stores: state, positions, lag, conflicts.",
        discussion: """
            Asks the running storesyncd through its control socket. Per store: its state \
            (ok, paused, catching-up, failed with the reason), history positions (what the hub \
            pulled through / the store's newest; what was pushed / the hub's newest), lag to the \
            hub in store transactions and seconds, conflicts waiting and the last error. For a \
            group with [group.export]: the records' state (ok, failing with the error), the hub \
            position they reflect and when they were last written. For a group whose hub is in \
            PostgreSQL: the server (host:port/db), this host's name, whether the hub is reachable, \
            the notification connection, and every host's stores the hub knows (positions, last \
            seen). A group busy with a long round is shown from its last round, marked with its age.

            "In sync" means every store is ok with no conflict waiting, no export failing and \
            every hub reachable; a paused store is not in sync.

            Examples:
              storesyncctl status
              storesyncctl status demo
              storesyncctl status --json | jq '.groups[].stores[] | select(.state != "ok")'
              storesyncctl status --socket /tmp/demo/run/control.sock

            \(DaemonExit.help)
            """
    )

    @Argument(help: "Only this group.")
    var group: String?

    @Flag(help: "Print the daemon's answer as one JSON object (fields in docs/CONTROL.md).")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        var fields: [String: JSONValue] = [:]
        if let group { fields["group"] = .string(group) }
        let reply = daemon.require(.status, fields)
        if json {
            ControlOutput.printJSON(reply)
        } else {
            print(Self.render(reply), terminator: "")
        }
        if reply["in_sync"]?.bool != true { throw DaemonExit.notOK }
    }

    /// The human form: one line about the daemon, a table of stores, and
    /// what needs attention under it.
    static func render(_ reply: JSONValue, now: Date = Date()) -> String {
        let daemon = reply["daemon"] ?? .null
        var out = "storesyncd \(ControlOutput.cell(daemon["version"])), pid \(ControlOutput.cell(daemon["pid"])), "
            + "up \(ControlOutput.duration(daemon["uptime_s"]?.double ?? 0)), \(ControlOutput.cell(daemon["state"]))\n"
        out += "config \(ControlOutput.cell(daemon["config"])), socket \(ControlOutput.cell(daemon["control_socket"]))\n\n"
        var rows: [[String]] = []
        var notes: [String] = []
        var total = 0, ok = 0
        for group in reply["groups"]?.array ?? [] {
            let name = ControlOutput.cell(group["name"])
            // An unreachable hub is said once, in the hub's note below, not
            // again for the group and for each of its stores.
            let hubDown = group["hub"]?["reachable"]?.bool == false
            if let error = group["error"]?.string, !hubDown { notes.append("group \(name): \(error)") }
            if group["fresh"]?.bool == false {
                let asOf = group["as_of"]?.string
                notes.append("group \(name) is busy; shown as of its last round, \(asOf == nil ? "none yet" : ControlOutput.ago(asOf, now: now))")
            }
            for store in group["stores"]?.array ?? [] {
                total += 1
                let state = ControlOutput.cell(store["state"])
                let conflicts = store["conflicts_waiting"]?.int ?? 0
                if state == "ok" && conflicts == 0 { ok += 1 }
                let positions = store["positions"] ?? .null
                let lag = store["lag"] ?? .null
                rows.append([
                    name, ControlOutput.cell(store["name"]), ControlOutput.state(state),
                    positions.isNull ? "-" : "\(ControlOutput.cell(positions["pulled_through"]))/\(ControlOutput.cell(positions["store"]))",
                    positions.isNull ? "-" : "\(ControlOutput.cell(positions["pushed_through"]))/\(ControlOutput.cell(positions["hub"]))",
                    lag.isNull ? "-" : "\(ControlOutput.cell(lag["transactions"])) tx, \(ControlOutput.duration(lag["seconds"]?.double ?? 0))",
                    conflicts > 0 ? ControlOutput.paint("\(conflicts)", .red) : ControlOutput.cell(store["conflicts_waiting"]),
                ])
                if let error = store["last_error"]?.string, !(hubDown && error == group["error"]?.string) {
                    notes.append("\(name)/\(ControlOutput.cell(store["name"])): \(state == "failed" ? "failed: " : "last error: ")\(error)")
                }
            }
        }
        out += ControlOutput.table(["GROUP", "STORE", "STATE", "PULLED/STORE", "PUSHED/HUB", "LAG", "CONFLICTS"], rows)
        // External records ([group.export]): one row per exporting group.
        var exports: [[String]] = []
        for group in reply["groups"]?.array ?? [] {
            guard let export = group["export"], !export.isNull else { continue }
            let name = ControlOutput.cell(group["name"])
            let state = ControlOutput.cell(export["state"])
            exports.append([name, state == "pending" ? ControlOutput.paint(state, .yellow) : ControlOutput.state(state),
                            export["position"]?.isNull == false ? "hub \(ControlOutput.cell(export["position"]))" : "-",
                            export["last_export"]?.string.map { ControlOutput.ago($0, now: now) } ?? "never",
                            ControlOutput.cell(export["directory"])])
            if state == "failing" {
                let since = export["failing_since"]?.string.map { ", failing since \(ControlOutput.ago($0, now: now))" } ?? ""
                notes.append("\(name) export\(since): \(ControlOutput.cell(export["last_error"]))")
            }
        }
        if !exports.isEmpty {
            out += "\n" + ControlOutput.table(["GROUP", "EXPORT", "RECORDS AT", "LAST EXPORT", "DIRECTORY"], exports)
        }
        // Shared (PostgreSQL) hubs: the server, whether it is reached, the
        // notification connection, and every host's stores the hub knows.
        var hubs: [[String]] = []
        var known: [[String]] = []
        for group in reply["groups"]?.array ?? [] {
            guard let hub = group["hub"], hub["kind"]?.string == "postgresql" else {
                if let hub = group["hub"], hub["reachable"]?.bool == false {
                    notes.append("group \(ControlOutput.cell(group["name"])): hub unreachable: \(ControlOutput.cell(hub["error"]))")
                }
                continue
            }
            let name = ControlOutput.cell(group["name"])
            let reachable = hub["reachable"]?.bool != false
            hubs.append([name, ControlOutput.cell(hub["server"]), ControlOutput.cell(hub["host_name"]),
                         reachable ? ControlOutput.paint("reachable", .green) : ControlOutput.paint("unreachable", .red),
                         ControlOutput.cell(hub["notifications"]?["state"])])
            if !reachable {
                let since = hub["unreachable_since"]?.string.flatMap(JSONValue.date)
                    .map { " for \(ControlOutput.duration(max(0, now.timeIntervalSince($0))))" } ?? ""
                // libpq's messages run over several lines.
                let reason = (hub["error"]?.string ?? "-").split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
                notes.append("group \(name): hub \(ControlOutput.cell(hub["server"])) unreachable\(since); the stores go on and catch up when it returns: \(reason)")
            }
            for store in hub["known_stores"]?.array ?? [] {
                let host = ControlOutput.cell(store["host"])
                known.append([name, store["this_host"]?.bool == true ? "\(host) (this)" : host, ControlOutput.cell(store["store"]),
                              ControlOutput.cell(store["pulled_through"]), ControlOutput.cell(store["pushed_through"]),
                              store["needs_full_push"]?.bool == true ? "yes" : "no",
                              store["last_seen"]?.string.map { ControlOutput.ago($0, now: now) } ?? "never"])
            }
        }
        if !hubs.isEmpty {
            out += "\n" + ControlOutput.table(["GROUP", "HUB", "HOST", "STATE", "NOTIFICATIONS"], hubs)
        }
        if !known.isEmpty {
            out += "\n" + ControlOutput.table(["GROUP", "HOST", "STORE", "PULLED", "PUSHED", "FULL PUSH DUE", "LAST SEEN"], known)
        }
        if !notes.isEmpty { out += "\n" + notes.map { "  \($0)" }.joined(separator: "\n") + "\n" }
        let summary = reply["in_sync"]?.bool == true
            ? ControlOutput.paint("All \(total) store\(total == 1 ? "" : "s") in sync.", .green)
            : ControlOutput.paint("\(ok) of \(total) store\(total == 1 ? "" : "s") in sync.", .yellow)
        out += "\n\(summary)\n"
        return out
    }
}
