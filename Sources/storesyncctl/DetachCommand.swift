import ArgumentParser
import Foundation
import ObjectGraph
import StoreSyncConfig

/// `storesyncctl detach STORE`: switches persistent history off for a store
/// file (`SQLiteStore.removePersistentHistory(fromStoreAt:exclusively:)`).
struct DetachCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detach",
        abstract: "Switch persistent history off for a store file: drop its history tables and triggers, keep the data.",
        discussion: """
            Drops every history table and trigger in one transaction; the data and Core \
            Data's own tables stay as they are. The recorded history and every object's \
            global ID are gone.

            Refused when it is unsafe:
            - The file is open in another process or connection (the daemon, an application, \
            a reader such as storesyncctl log --follow): an application that loaded the \
            history would fail its next save, and the daemon would switch history on again \
            with new global IDs. SQLite cannot tell readers from writers, so any open \
            connection counts. The check and the change happen under one exclusive lock, \
            so no one can open the file in between. Exit 75: close it there and try again.
            - The store belongs to a sync group (its metadata shows the engine pushed to it, \
            or the configuration lists it): without global IDs, a store attached again \
            would give every object a new one and the group would see each as new, \
            duplicating it everywhere. Remove it from the group first, or give --force \
            (exit 64 otherwise).

            Exit statuses: 0 detached (or history was already off); 64 a sync group's \
            store without --force; 65 not a Core Data SQLite store; 66 no store file; 75 \
            the file is open elsewhere.

            Examples:
              storesyncctl detach /var/lib/app/App.sqlite
              storesyncctl detach /var/lib/app/App.sqlite --force
            """
    )

    @Argument(help: "The SQLite store file.")
    var store: String

    @Option(help: "The daemon's configuration file, to find whether a group syncs the store. Default: $CONFIGURATION_DIRECTORY/storesyncd.toml, else /etc/storesyncd/storesyncd.toml, when it exists.")
    var config: String?

    @Flag(help: "Detach a store that belongs to a sync group.")
    var force = false

    func run() throws { try execute().perform() }

    func execute() -> CommandOutcome {
        do {
            let url = try GroupLookup.checkStoreFile(store)
            let metadata = try SQLiteStore.metadataForStore(at: url)
            if !force, let group = try syncGroup(of: url, metadata: metadata) {
                throw CommandFailure(message: """
                    \(url.path) is a store of sync group \(group): detaching drops its global IDs, and when it is \
                    attached again every object gets a new one, so the group sees each as new and duplicates it. \
                    Remove the store from the group first, or give --force.
                    """, exitCode: SysExit.usage)
            }
            if let on = historyIsOn(url), !on {
                return CommandOutcome(standardOutput: "history is already off for \(url.path); nothing to do\n")
            }
            do {
                try SQLiteStore.removePersistentHistory(fromStoreAt: url, exclusively: true)
            } catch let error as CoreDataError where error.code == .persistentStoreTimeout {
                throw CommandFailure(message: """
                    \(url.path) is open in another process or connection (the daemon, an application, or a reader); \
                    detaching under it is unsafe (a writer that loaded the history would fail its next save). \
                    Close it there and try again. Nothing was changed.
                    """, exitCode: SysExit.temporaryFailure)
            }
            return CommandOutcome(standardOutput: "history is off for \(url.path): its history tables and triggers are dropped, the data is kept\n")
        } catch {
            return CommandOutcome.failure(error)
        }
    }

    /// The group that syncs the store: from the engine's metadata keys
    /// (`StoreSync.<group>.pushedThrough`), else from the configuration.
    private func syncGroup(of url: URL, metadata: [String: Any]) throws -> String? {
        let prefix = "StoreSync.", suffix = ".pushedThrough"
        if let key = metadata.keys.sorted().first(where: { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) }) {
            return String(key.dropFirst(prefix.count).dropLast(suffix.count))
        }
        let file = config ?? DaemonConfiguration.defaultPath()
        // The default file is only looked at when it is there; one given must be readable.
        guard config != nil || FileManager.default.fileExists(atPath: file) else { return nil }
        let configuration = try GroupLookup.configuration(file)
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        for group in configuration.groups where group.stores.contains(where: { $0.path.resolvingSymlinksInPath().path == path }) {
            return "\(group.name) (in \(configuration.file))"
        }
        return nil
    }

    /// Whether the file records history, read with its own model (nil when
    /// that cannot be told; the removal then finds out).
    private func historyIsOn(_ url: URL) -> Bool? {
        guard let model = try? SQLiteStore.storeModel(forStoreAt: url) else { return nil }
        return try? StoreHistory.isOn(url, model: model, ignoringVersionHashes: model.isDerivedFromStoreSchema)
    }
}
