import ArgumentParser
import Foundation
import StoreSyncControl

/// `storesyncctl reload [--wait]`: what SIGHUP does, with an answer. The
/// systemd unit's `ExecReload=` uses `--wait`, so `systemctl reload` reports
/// a refused configuration instead of succeeding blindly.
struct ReloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Make the daemon re-read its configuration (as SIGHUP does).",
        discussion: """
            The daemon reads its configuration file again. A valid one replaces the running \
            groups (each finishes its round in flight first); an invalid one is refused and the \
            running configuration kept. With --wait the command returns when the reload is over \
            and exits 1 with the daemon's reason ("FILE: key KEY: reason") when it was refused. \
            Without --wait it returns once the reload has started.

            Examples:
              storesyncctl reload --wait
              storesyncctl reload --wait --timeout 90 --socket /run/storesyncd/control.sock

            \(DaemonExit.help)
            """
    )

    @Flag(help: "Return when the reload is over; exit 1 with the reason when the new configuration is refused.")
    var wait = false

    @Flag(help: "Print the daemon's answer as JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() throws {
        let reply = daemon.call(.reload, ["wait": .bool(wait)])
        if json { ControlOutput.printJSON(reply) }
        guard reply["ok"]?.bool == true else {
            if reply["error"]?["code"]?.string == ControlErrorCode.reloadRefused.rawValue {
                DaemonOptions.fail("reload refused: \(reply["error"]?["message"]?.string ?? "")", DaemonExit.notOK)
            }
            DaemonOptions.failReply(reply)
        }
        if json { return }
        guard wait else { return print("reload started") }
        let groups = reply["groups"]?.int ?? 0
        let failed = (reply["failed_groups"]?.array ?? []).map(ControlOutput.cell)
        print("reloaded: \(groups) group\(groups == 1 ? "" : "s")\(failed.isEmpty ? "" : "; not open: \(failed.joined(separator: ", "))")")
        if !failed.isEmpty { throw DaemonExit.notOK }
    }
}
