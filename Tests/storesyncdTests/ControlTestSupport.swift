#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import StoreSyncControl
import XCTest

extension Daemon {
    /// The storesyncctl binary, built beside storesyncd.
    static let ctlBinary = binary.deletingLastPathComponent().appendingPathComponent("storesyncctl")

    /// Runs storesyncctl to completion, with systemd's variables cleared so
    /// only the arguments say where the socket is.
    static func ctl(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        try runTool(ctlBinary.path, arguments, environment: environment)
    }

    /// Runs a program to completion with `RUNTIME_DIRECTORY` and `NO_COLOR`
    /// cleared, then `environment` added.
    static func runTool(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        var env = ProcessInfo.processInfo.environment
        for key in ["RUNTIME_DIRECTORY", "NO_COLOR"] { env[key] = nil }
        env.merge(environment) { $1 }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let collected = Collected()
        let thread = Thread { collected.data = err.fileHandleForReading.readDataToEndOfFile(); collected.done.signal() }
        thread.start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        collected.done.wait()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: collected.data, as: UTF8.self))
    }

    /// A real daemon on a three-store group, started and ready: its control
    /// socket answers and every group has finished its start-up round.
    final class Controlled {
        let directory: URL
        let config: String
        let daemon: Running
        var socket: String { directory.appendingPathComponent("run/control.sock").path }

        init(policies: [String] = ["store-trump", "object-trump", "overwrite"], extra: String = "", groupExtra: String = "") throws {
            directory = try Daemon.temporaryDirectory()
            config = try Daemon.makeGroup(in: directory, policies: policies, extra: extra, groupExtra: groupExtra)
            daemon = try Running(["--config", config], logFile: directory.appendingPathComponent("daemon.log"))
            let ready = Daemon.wait(timeout: 20) { [self] in
                guard let reply = try? request(["op": "status"]), reply["daemon"]?["state"]?.string == "running" else { return false }
                return (reply["groups"]?.array ?? []).allSatisfy { $0["last_round"]?.isNull == false }
            }
            if !ready { throw NSError(domain: "Controlled", code: 1, userInfo: [NSLocalizedDescriptionKey: "daemon not ready:\n\(daemon.log)"]) }
        }

        deinit {
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit(timeout: 10)
            try? FileManager.default.removeItem(at: directory)
        }

        func url(_ store: String) -> URL { directory.appendingPathComponent("\(store).sqlite") }

        func client(timeout: Double = 10) throws -> ControlClient { try ControlClient(path: socket, timeout: timeout) }

        /// One request on a new connection.
        func request(_ fields: [String: JSONValue], timeout: Double = 10) throws -> JSONValue {
            try client(timeout: timeout).request(fields)
        }

        /// storesyncctl with --socket pointing here (placed after the subcommand's own arguments).
        func ctl(_ arguments: [String]) throws -> Daemon.Result {
            try Daemon.ctl(arguments + ["--socket", socket])
        }

        /// Inserts or updates the Item named `name` in a store, as an application would.
        func save(_ store: String, name: String, count: Int64) throws {
            try Daemon.saveItem(at: url(store), name: name, count: count)
        }
    }

    /// Inserts or updates the Item named `name` in the store file at `url`,
    /// as an application would (no daemon needed).
    static func saveItem(at url: URL, name: String, count: Int64) throws {
        let context = try Daemon.app(url)
        defer { for store in context.persistentStoreCoordinator.persistentStores { try? context.persistentStoreCoordinator.remove(store) } }
        try context.performAndWait {
            let request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "name == %@", name)
            let item = try context.fetch(request).first ?? context.insertNewObject(forEntityName: "Item")
            try item.setValue(name, forKey: "name")
            try item.setValue(count, forKey: "count")
            try context.save()
        }
    }
}

extension JSONValue {
    /// Parses one reply line in a test.
    static func line(_ text: String) throws -> JSONValue { try parse(Data(text.utf8)) }
}
