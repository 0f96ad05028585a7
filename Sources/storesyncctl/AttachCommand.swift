import ArgumentParser
import Foundation
import ObjectGraph

/// `storesyncctl attach STORE --model PATH`: switches persistent history on
/// for a store file, as the sync engine does when a store joins a group
/// (it opens the store with `persistentHistoryTrackingKey`; docs/HISTORY.md).
struct AttachCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Switch persistent history on for a store file, as the daemon does when a store joins a group.",
        discussion: """
            Creates the history tables and triggers in the file (one transaction) and gives \
            every existing object its global ID; from then on every writer's changes are \
            recorded, whoever makes them. Nothing before is recorded. A store that already \
            records history is left as it is.

            Attaching is safe while applications have the store open, even for writing: \
            SQLite serialises the change with their transactions, and their later commits \
            are recorded (an application that opened the store before it was attached \
            records as a foreign writer, without author, until it reopens it). So attach \
            refuses nothing for being open; it refuses a file that is not a Core Data SQLite \
            store, a model the store was not made with, and a history that is damaged or \
            of an unknown format (detach removes it).

            Exit statuses: 0 attached (or already attached); 65 not a store, a model that \
            does not fit, damaged history; 66 no store or model file; 75 the file stayed \
            locked by a writer past the timeout (5 s).

            Examples:
              storesyncctl attach /var/lib/app/App.sqlite --model App.xcdatamodeld
            """
    )

    @Argument(help: "The SQLite store file.")
    var store: String

    @Option(help: "The store's model: a .xcdatamodeld or .momd bundle (the version matching the store is used), a .xcdatamodel folder, or a .mom file.")
    var model: String

    func run() throws { try execute().perform() }

    func execute() -> CommandOutcome {
        do {
            let url = try GroupLookup.checkStoreFile(store)
            guard FileManager.default.fileExists(atPath: model) else { throw CommandFailure(message: "no model at \(model)", exitCode: SysExit.noInput) }
            _ = try SQLiteStore.metadataForStore(at: url)
            let resolved = try StoreModelResolver.resolve(store: url, modelPath: model)
            if try StoreHistory.isOn(url, model: resolved.model) {
                return CommandOutcome(standardOutput: "history is already on for \(url.path); nothing to do\n")
            }
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: resolved.model)
            let opened = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                                            options: [PersistentStore.persistentHistoryTrackingKey: true])
            defer { try? coordinator.remove(opened) }
            let context = ManagedObjectContext(coordinator: coordinator)
            let objects = try context.performAndWait {
                try resolved.model.entities.filter { $0.superentity == nil }.reduce(0) { $0 + (try context.count(for: FetchRequest(entityName: $1.name))) }
            }
            return CommandOutcome(standardOutput: "history is on for \(url.path) (model \(resolved.origin)); \(objects) existing object\(objects == 1 ? "" : "s") got global IDs\n")
        } catch let error as CoreDataError where error.code == .persistentStoreOpen && error.message.contains("persistent history") {
            return CommandOutcome(standardError: "\(error.message)\n(storesyncctl detach \(store) removes the history so that it can be attached afresh)\n",
                                  exitCode: SysExit.dataError.rawValue)
        } catch {
            return CommandOutcome.failure(error)
        }
    }
}

/// Whether a store file records history, read without writing anything.
enum StoreHistory {
    static func isOn(_ url: URL, model: ManagedObjectModel, ignoringVersionHashes: Bool = false) throws -> Bool {
        let store = SQLiteStore(model: model, configurationName: nil, url: url,
                                options: [PersistentStore.readOnlyOption: true, PersistentStore.ignoreVersioningOption: ignoringVersionHashes])
        try store.load()
        defer { store.close() }
        return store.recordsPersistentHistory
    }
}
