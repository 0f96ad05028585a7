#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import XCTest

/// Runs the built `storesyncd` binary as systemd or an administrator would.
enum Daemon {
    static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// The products directory: the test bundle is built beside the binary.
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("storesyncd")

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs to completion (for --check-config and the demo).
    static func run(_ arguments: [String], environment: [String: String]? = nil) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes at once: a full stderr pipe would block the daemon.
        let collected = Collected()
        let thread = Thread { collected.data = err.fileHandleForReading.readDataToEndOfFile(); collected.done.signal() }
        thread.start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        collected.done.wait()
        let stderr = collected.data
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// stderr as read by another thread; the semaphore orders the access.
    final class Collected: @unchecked Sendable {
        var data = Data()
        let done = DispatchSemaphore(value: 0)
    }

    /// A daemon running in the background; its stderr is collected to a file.
    final class Running {
        let process = Process()
        let logFile: URL

        init(_ arguments: [String], environment: [String: String] = [:], logFile: URL) throws {
            self.logFile = logFile
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
            process.executableURL = Daemon.binary
            process.arguments = arguments
            var env = ProcessInfo.processInfo.environment
            for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "STATE_DIRECTORY",
                        "RUNTIME_DIRECTORY", "CONFIGURATION_DIRECTORY"] { env[key] = nil }
            env.merge(environment) { $1 }
            process.environment = env
            let handle = try FileHandle(forWritingTo: logFile)
            process.standardError = handle
            process.standardOutput = handle
            try process.run()
        }

        var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

        func signal(_ number: Int32) { kill(process.processIdentifier, number) }

        /// Waits (bounded) for the exit; nil if it did not exit in time (then killed).
        func waitForExit(timeout: TimeInterval) -> Int32? {
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
            return process.terminationStatus
        }

        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("storesyncd-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// `Item` (name, count) — a small model written as an Xcode model folder.
    static func model() -> ManagedObjectModel {
        let item = EntityDescription(name: "Item")
        item.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "count", type: .integer64)]
        let model = ManagedObjectModel()
        model.entities = [item]
        return model
    }

    /// Writes the model, creates `names` as empty stores and a config
    /// syncing them; returns the config's path.
    @discardableResult
    static func makeGroup(in directory: URL, stores names: [String] = ["s1", "s2", "s3"],
                          policies: [String] = ["store-trump", "object-trump", "overwrite"], extra: String = "",
                          groupExtra: String = "") throws -> String {
        try XcodeModelWriter.write(model(), to: directory.appendingPathComponent("Items.xcdatamodel"))
        for name in names {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model())
            let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                           at: directory.appendingPathComponent("\(name).sqlite"))
            try coordinator.remove(store)
        }
        var text = """
        state_directory = "state"
        runtime_directory = "run"
        log_level = "debug"
        log_format = "logfmt"
        debounce = "20ms"
        \(extra)
        [[group]]
        name = "items"
        model = "Items.xcdatamodel"

        """
        for (name, policy) in zip(names, policies) {
            text += "[[group.store]]\nname = \"\(name)\"\npath = \"\(name).sqlite\"\npolicy = \"\(policy)\"\n\n"
        }
        // Tables of the group after its stores (`[group.export]`).
        text += groupExtra
        let config = directory.appendingPathComponent("storesyncd.toml")
        try Data(text.utf8).write(to: config)
        return config.path
    }

    /// An application's stack on a store file.
    static func app(_ url: URL) throws -> ManagedObjectContext {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = "test-app"
        return context
    }

    /// name → count of every Item in a store, read fresh.
    static func items(_ url: URL) throws -> [String: Int64] {
        let context = try app(url)
        defer { for store in context.persistentStoreCoordinator.persistentStores { try? context.persistentStoreCoordinator.remove(store) } }
        return try context.performAndWait {
            var out: [String: Int64] = [:]
            for item in try context.fetch(FetchRequest(entityName: "Item")) {
                out[(try item.value(forKey: "name") as? String) ?? ""] = (try item.value(forKey: "count") as? Int64) ?? -1
            }
            return out
        }
    }

    /// Whether the start-up round has finished (its summary line is logged;
    /// at debug a "round started" line comes first).
    static func startRoundDone(_ log: String) -> Bool {
        log.split(separator: "\n").contains { $0.contains("msg=round ") && $0.contains("trigger=start") }
    }

    /// Polls (tests only) until `condition` holds or `timeout` passes.
    static func wait(timeout: TimeInterval, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        } while Date() < deadline
        return try condition()
    }
}
