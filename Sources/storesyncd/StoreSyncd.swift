#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Foundation
import Logging
import StoreSyncConfig

/// `storesyncd`: keeps the SQLite stores of each configured sync group
/// identical (docs/SYNC.md), reacting to their file changes. Runs in the
/// foreground; under systemd as `Type=notify` (systemd/storesyncd.service).
@main
struct StoreSyncd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storesyncd",
        abstract: "Sync daemon for local SQLite object stores.",
        discussion: """
        Reads the configuration (default: $CONFIGURATION_DIRECTORY/storesyncd.toml, else \
        /etc/storesyncd/storesyncd.toml), opens every group's hub and stores, and syncs on file \
        changes. SIGHUP re-reads the configuration; SIGTERM/SIGINT finish the round in flight and exit 0.
        Exit status 78 (EX_CONFIG): the configuration is invalid ("FILE: key KEY: reason" on stderr).
        """
    )

    @Option(help: "The configuration file.")
    var config: String?

    @Flag(help: "Validate the configuration (models included) and exit: 0 when valid, 78 when not.")
    var checkConfig = false

    @Option(help: "Where hubs live (overrides state_directory and $STATE_DIRECTORY).")
    var stateDirectory: String?

    @Option(help: "Where runtime files live (overrides runtime_directory and $RUNTIME_DIRECTORY).")
    var runtimeDirectory: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical (overrides log_level).")
    var logLevel: String?

    @Option(help: "auto, journal, logfmt or json (overrides log_format).")
    var logFormat: String?

    @Option(help: "Create a demo group in DIR (a sample model, three stores, a config) unless it exists, and run on it.")
    var demo: String?

    @Option(help: "With --demo: make N saves in s1 after start-up and log when they arrive in s2 and s3.")
    var demoWrites: Int = 0

    @Flag(help: "With --demo-writes: exit 0 once every write has arrived in s2 and s3.")
    var exitWhenSynced = false

    /// sysexits.h: EX_CONFIG, what systemd and scripts expect for a bad config.
    static let exConfig: Int32 = 78

    func validate() throws {
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if let logFormat, LogFormat(rawValue: logFormat) == nil {
            throw ValidationError("--log-format must be one of \(LogFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if demo == nil, demoWrites > 0 || exitWhenSynced { throw ValidationError("--demo-writes and --exit-when-synced need --demo DIR") }
        if demoWrites < 0 { throw ValidationError("--demo-writes must not be negative") }
        if exitWhenSynced, demoWrites == 0 { throw ValidationError("--exit-when-synced needs --demo-writes N") }
        if demo != nil, config != nil { throw ValidationError("--demo DIR writes and uses DIR/storesyncd.toml; leave out --config") }
    }

    /// Flag paths are relative to the working directory (paths in the file
    /// are relative to the file).
    static func absolute(_ path: String?) -> String? {
        guard let path else { return nil }
        let expanded = (path as NSString).expandingTildeInPath
        return expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    }

    func run() throws {
        // Before any thread: the arena limit applies to threads made after it.
        ProcessMemory.configure()
        let overrides = ConfigurationOverrides(stateDirectory: Self.absolute(stateDirectory), runtimeDirectory: Self.absolute(runtimeDirectory),
                                               logLevel: logLevel.flatMap(Logger.Level.init(rawValue:)), logFormat: logFormat.flatMap(LogFormat.init(rawValue:)))
        DaemonLogHandler.level = overrides.logLevel ?? .info
        DaemonLogHandler.output = DaemonLogHandler.resolve(overrides.logFormat ?? .auto)
        LoggingSystem.bootstrap { DaemonLogHandler(label: $0) }
        let logger = Logger(label: "storesyncd")

        var file = Self.absolute(config) ?? DaemonConfiguration.defaultPath()
        var demoDirectory: URL?
        if let demo {
            let directory = URL(fileURLWithPath: Self.absolute(demo)!)
            do { file = try Demo.prepare(directory) } catch {
                logger.critical("cannot create the demo", metadata: ["directory": "\(directory.path)", "error": "\(error)"])
                throw ExitCode(1)
            }
            demoDirectory = directory
        }

        let configuration: DaemonConfiguration
        do {
            configuration = try DaemonConfiguration.load(file: file, overrides: overrides)
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            throw ExitCode(Self.exConfig)
        }
        if checkConfig {
            let stores = configuration.groups.reduce(0) { $0 + $1.stores.count }
            print("\(file): OK (\(configuration.groups.count) group\(configuration.groups.count == 1 ? "" : "s"), \(stores) stores)")
            return
        }
        DaemonLogHandler.level = configuration.logLevel
        DaemonLogHandler.output = DaemonLogHandler.resolve(configuration.logFormat)

        let daemon: Daemon
        do {
            daemon = try Daemon(configuration: configuration, overrides: overrides)
        } catch {
            logger.critical("cannot start the event loop", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        if let demoDirectory, demoWrites > 0 {
            let writer = try Demo.Writer(directory: demoDirectory, count: demoWrites, logger: logger)
            let exitWhenSynced = exitWhenSynced
            daemon.onReady = { writer.start() }
            daemon.onRound = { [unowned daemon] _ in
                writer.roundFinished(daemon.loop) { if exitWhenSynced { daemon.stop() } }
            }
        }
        let status: Int32
        do { status = try daemon.run() } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        if status != 0 { throw ExitCode(status) }
    }
}
