import Dispatch
import Foundation
import Logging
import ObjectGraph

/// `storesyncd --demo DIR`: a self-contained group to watch the daemon work
/// (README quick start): a sample model, three SQLite stores with different
/// policies and a config for them, all in DIR.
enum Demo {
    static let storeNames = ["s1", "s2", "s3"]
    static let policies = ["store-trump", "object-trump", "rollback"]

    /// `Note` (title, body, revision, modified) in `Folder`s.
    static func model() -> ManagedObjectModel {
        let note = EntityDescription(name: "Note")
        let folder = EntityDescription(name: "Folder")
        let notes = RelationshipDescription(name: "notes", destination: note, toMany: true)
        let noteFolder = RelationshipDescription(name: "folder", destination: folder, toMany: false)
        notes.inverseRelationship = noteFolder
        noteFolder.inverseRelationship = notes
        notes.deleteRule = .nullify
        noteFolder.deleteRule = .nullify
        note.properties = [AttributeDescription(name: "title", type: .string), AttributeDescription(name: "body", type: .string),
                           AttributeDescription(name: "revision", type: .integer64), AttributeDescription(name: "modified", type: .date),
                           noteFolder]
        folder.properties = [AttributeDescription(name: "name", type: .string), notes]
        let model = ManagedObjectModel()
        model.entities = [folder, note]
        return model
    }

    /// Creates DIR with `Demo.xcdatamodel`, `s1.sqlite`…`s3.sqlite` and
    /// `storesyncd.toml`, unless a config is already there (a demo directory
    /// can be run again and keeps its data). Returns the config's path.
    static func prepare(_ directory: URL) throws -> String {
        let config = directory.appendingPathComponent("storesyncd.toml")
        if FileManager.default.fileExists(atPath: config.path) { return config.path }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let model = model()
        try XcodeModelWriter.write(model, to: directory.appendingPathComponent("Demo.xcdatamodel"))
        for name in storeNames {
            // An empty store of the model; the daemon switches history on
            // when it joins the group.
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                           at: directory.appendingPathComponent("\(name).sqlite"))
            try coordinator.remove(store)
        }
        var text = """
        # storesyncd demo: three stores of one model, each with its own policy.
        # Relative paths are relative to this file.
        state_directory = "state"
        runtime_directory = "run"
        log_level = "info"
        debounce = "5ms"

        [[group]]
        name = "demo"
        model = "Demo.xcdatamodel"

        """
        for (name, policy) in zip(storeNames, policies) {
            text += """

            [[group.store]]
            name = "\(name)"
            path = "\(name).sqlite"
            policy = "\(policy)"

            """
        }
        try Data(text.utf8).write(to: config, options: .atomic)
        return config.path
    }

    /// Makes `count` saves in s1 from a writer thread once the daemon is
    /// ready, and logs as they arrive in s2 and s3 (checked after each round,
    /// off the loop). `whenSynced` runs on the loop once all have arrived.
    // @unchecked Sendable: `arrived`, `finished` are touched in `queue`'s blocks only; `checkWaiting` is the loop's (assertOnLoop checks); `started` is set before the first check is queued; the rest is immutable (the model only read).
    final class Writer: @unchecked Sendable {
        let directory: URL
        let count: Int
        let model: ManagedObjectModel
        let logger: Logger
        let runID = String(UUID().uuidString.prefix(8))
        private let queue = DispatchQueue(label: "storesyncd.demo.check")
        private var arrived: [String: Int] = [:]    // on `queue`
        private var finished = false                 // on `queue`
        private var checkWaiting = false             // on the loop thread
        private var started = Date()

        init(directory: URL, count: Int, logger: Logger) throws {
            self.directory = directory
            self.count = count
            self.logger = logger
            model = try ManagedObjectModel(contentsOf: directory.appendingPathComponent("Demo.xcdatamodel"))
        }

        var prefix: String { "demo-\(runID)-" }

        func start() {
            started = Date()
            let thread = Thread { [self] in
                do {
                    let context = try Demo.context(directory.appendingPathComponent("s1.sqlite"), model: model)
                    context.transactionAuthor = "demo-writer"
                    try context.performAndWait {
                        for index in 1...count {
                            let note = try context.insertNewObject(forEntityName: "Note")
                            try note.setValue("\(prefix)\(index)", forKey: "title")
                            try note.setValue("written by the demo writer", forKey: "body")
                            try note.setValue(Int64(index), forKey: "revision")
                            try note.setValue(Date(), forKey: "modified")
                            try context.save()
                            // Separate saves a moment apart: the daemon sees
                            // a stream of changes, not one transaction.
                            Thread.sleep(forTimeInterval: 0.02)
                        }
                    }
                    logger.info("demo: writes made in s1", metadata: ["saves": "\(count)"])
                } catch {
                    logger.error("demo: the writer failed", metadata: ["error": "\(error)"])
                }
            }
            thread.start()
        }

        /// After a round (on the loop): count the writes in s2 and s3 off the
        /// loop; one check at a time, since a check covers every round before it.
        func roundFinished(_ loop: EventLoop, whenSynced: @escaping @Sendable () -> Void) {
            loop.assertOnLoop()
            guard !checkWaiting else { return }
            checkWaiting = true
            queue.async { [self] in
                loop.post { [self] in
                    loop.assertOnLoop()
                    checkWaiting = false
                }
                guard !finished else { return }
                var all = true
                for name in Demo.storeNames.dropFirst() {
                    let found = (try? countArrived(in: name)) ?? 0
                    if found != arrived[name] {
                        arrived[name] = found
                        logger.info("demo: writes arrived", metadata: ["store": "\(name)", "arrived": "\(found)", "of": "\(count)"])
                    }
                    all = all && found == count
                }
                if all {
                    finished = true
                    logger.info("demo: all writes arrived in s2 and s3",
                                metadata: ["saves": "\(count)", "elapsed_ms": "\(Int(Date().timeIntervalSince(started) * 1000))"])
                    loop.post(whenSynced)
                }
            }
        }

        private func countArrived(in name: String) throws -> Int {
            let context = try Demo.context(directory.appendingPathComponent("\(name).sqlite"), model: model)
            defer { for store in context.persistentStoreCoordinator.persistentStores { try? context.persistentStoreCoordinator.remove(store) } }
            return try context.performAndWait {
                try context.fetch(FetchRequest(entityName: "Note")).filter { ((try? $0.value(forKey: "title")) as? String)?.hasPrefix(prefix) == true }.count
            }
        }
    }

    static func context(_ url: URL, model: ManagedObjectModel) throws -> ManagedObjectContext {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        return ManagedObjectContext(coordinator: coordinator)
    }
}
