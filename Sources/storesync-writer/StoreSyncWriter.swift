import ArgumentParser
import Foundation
import ObjectGraph
import SyncWorkload

/// `storesync-writer`: writer processes for tests, scripts and benchmarks
/// (docs/WORKLOAD.md). Not installed; built with the package.
@main
struct StoreSyncWriter: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storesync-writer",
        abstract: "Saves into a store as an application would, logging every committed change; checks stores against the logs.",
        subcommands: [SetUp.self, Write.self, Check.self]
    )
}

struct SetUp: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup",
        abstract: "Create DIR with the workload model, empty stores s1… (history on) and a storesyncd.toml syncing them."
    )

    @Argument(help: "The directory to create.")
    var directory: String

    @Option(help: "Policies of the stores, comma separated (their count is the number of stores).")
    var policies = "object-trump,object-trump,object-trump"

    @Option(name: .customLong("set"), help: "An extra top-level config line KEY=VALUE (VALUE in TOML), repeatable.")
    var settings: [String] = []

    func run() throws {
        var extra: [String: String] = [:]
        for setting in settings {
            guard let equals = setting.firstIndex(of: "=") else { throw ValidationError("--set wants KEY=VALUE, got \(setting)") }
            extra[String(setting[..<equals])] = String(setting[setting.index(after: equals)...])
        }
        let config = try WorkloadModel.setUp(in: URL(fileURLWithPath: directory),
                                             policies: policies.split(separator: ",").map(String.init), settings: extra)
        print(config.path)
    }
}

struct Write: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Save into one store until --saves are committed or SIGTERM/SIGINT; each committed save is appended to --log and fsync'd."
    )

    @Option(help: "The model (an .xcdatamodel folder or .xcdatamodeld bundle).")
    var model: String

    @Option(help: "The store file.")
    var store: String

    @Option(help: "The store's name in the sync group (written to the log).")
    var storeName: String

    @Option(help: "The writer's name: its objects are named NAME-r<n> and NAME-f<n>.")
    var name: String

    @Option(help: "The log file (appended; a writer started again on it goes on from its state).")
    var log: String

    @Option(help: "Seed of the random operations and pauses (decimal or 0x hex).")
    var seed: String = "1"

    @Option(help: "Stop after this many committed saves (default: until SIGTERM).")
    var saves: Int?

    @Option(help: "Records per save, inserts only (default: 1–4 random inserts, updates, relationship edits, deletes).")
    var inserts: Int?

    @Option(help: "Saves per second, on a fixed schedule.")
    var rate: Double?

    @Option(help: "Random pause between saves, MIN-MAX milliseconds (without --rate).")
    var pause = "0-0"

    @Flag(help: "Do not fsync the log after each save (benchmarks).")
    var noSync = false

    @Flag(help: "Write with raw SQL through SQLite's C API instead of ObjectGraph (a foreign writer; --model is not read): transactions of up to --max-changes row changes with forward references, and bursts of small commits.")
    var rawSQL = false

    @Option(help: "With --raw-sql: the most row changes of one transaction.")
    var maxChanges = 60

    @Option(help: "A file to create once SIGTERM is handled and the store is open (a parent waits for it before stopping the writer).")
    var readyFile: String?

    func run() throws {
        guard let seedValue = seed.hasPrefix("0x") ? UInt64(seed.dropFirst(2), radix: 16) : UInt64(seed) else {
            throw ValidationError("--seed must be a number")
        }
        let bounds = pause.split(separator: "-").compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] >= 0, bounds[0] <= bounds[1] else { throw ValidationError("--pause wants MIN-MAX") }
        WorkloadSignals.install()
        if rawSQL {
            let writer = try RawSQLWriter(name: name, storeName: storeName, store: URL(fileURLWithPath: store), log: URL(fileURLWithPath: log),
                                          syncLog: !noSync)
            if let readyFile { FileManager.default.createFile(atPath: readyFile, contents: nil) }
            let committed = writer.run(maxChanges: maxChanges, seed: seedValue, saves: saves, pace: .init(rate: rate, pause: bounds[0]...bounds[1]))
            var line = "writer \(name) (raw SQL): \(committed) transactions committed, \(writer.failedSaves) failed"
            if let error = writer.lastError { line += " (last: \(error))" }
            FileHandle.standardError.write(Data((line + "\n").utf8))
            return
        }
        let writer = try WorkloadWriter(name: name, storeName: storeName, store: URL(fileURLWithPath: store),
                                        model: try ManagedObjectModel(contentsOf: URL(fileURLWithPath: model)),
                                        log: URL(fileURLWithPath: log), syncLog: !noSync)
        if let readyFile { FileManager.default.createFile(atPath: readyFile, contents: nil) }
        let committed = writer.run(inserts.map { .inserts(count: $0) } ?? .mixed, seed: seedValue, saves: saves,
                                   pace: .init(rate: rate, pause: bounds[0]...bounds[1]))
        var line = "writer \(name): \(committed) saves committed, \(writer.failedSaves) failed"
        if let error = writer.lastError { line += " (last: \(error))" }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Compare stores (and the hub) with the writers' logs: lost, duplicated, extra, stale and echoed changes; exit 1 when any."
    )

    @Option(help: "The model.")
    var model: String

    @Option(name: .customLong("store"), help: "NAME=PATH of a store, repeatable.")
    var stores: [String]

    @Option(help: "The group's state directory (holding hub.sqlite); leave out to check only the stores.")
    var hub: String?

    @Option(name: .customLong("log"), help: "A writer's log, repeatable.")
    var logs: [String]

    func run() throws {
        let places = try stores.map { entry -> (String, URL) in
            guard let equals = entry.firstIndex(of: "=") else { throw ValidationError("--store wants NAME=PATH") }
            return (String(entry[..<equals]), URL(fileURLWithPath: String(entry[entry.index(after: equals)...])))
        }
        let report = try WorkloadCheck.run(model: try ManagedObjectModel(contentsOf: URL(fileURLWithPath: model)), stores: places,
                                           hubDirectory: hub.map { URL(fileURLWithPath: $0) }, logs: logs.map { URL(fileURLWithPath: $0) })
        print(report.json)
        if !report.isClean { throw ExitCode(1) }
    }
}
