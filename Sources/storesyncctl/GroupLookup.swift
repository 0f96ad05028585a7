import ArgumentParser
import Foundation
import ObjectGraph
import StoreSync
import StoreSyncConfig

/// A failure a command reports as is: the message for stderr and the exit
/// status. Commands that read the configuration or store files share it.
struct CommandFailure: Error {
    var message: String
    var exitCode: ExitCode
}

/// Finds sync groups in the daemon's configuration, for commands that work
/// from the files when the daemon is not running (`log`, `verify`).
enum GroupLookup {
    /// Reads `--config` (default: `DaemonConfiguration.defaultPath()`).
    static func configuration(_ path: String?) throws -> DaemonConfiguration {
        let file = path ?? DaemonConfiguration.defaultPath()
        guard FileManager.default.fileExists(atPath: file) else {
            throw CommandFailure(message: "no configuration file at \(file) (give --config FILE\(path == nil ? "; the default is $CONFIGURATION_DIRECTORY/storesyncd.toml, else /etc/storesyncd/storesyncd.toml" : ""))",
                                 exitCode: SysExit.noInput)
        }
        do {
            return try DaemonConfiguration.load(file: file)
        } catch let error as ConfigurationError {
            throw CommandFailure(message: "\(error)", exitCode: SysExit.config)
        }
    }

    /// The groups named (all when none is), as the engine configures them.
    static func groups(_ names: [String], in configuration: DaemonConfiguration) throws -> [SyncGroupConfiguration] {
        for name in names where !configuration.groups.contains(where: { $0.name == name }) {
            throw CommandFailure(message: "no group '\(name)' in \(configuration.file) (it has: \(configuration.groups.map(\.name).joined(separator: ", ")))",
                                 exitCode: SysExit.usage)
        }
        let selected = configuration.groups.filter { names.isEmpty || names.contains($0.name) }
        if let shared = selected.first(where: { $0.hub.postgreSQL != nil }) {
            // These commands read the embedded hub's file (SyncVerifier,
            // SyncChangeLog); a hub in a server is not read yet.
            throw CommandFailure(message: "group '\(shared.name)' keeps its hub in PostgreSQL (\(shared.hub.postgreSQL!.serverDescription)); "
                                 + "this command reads embedded hubs only (not done yet for a PostgreSQL hub)\(names.isEmpty ? "; name the other groups" : "")",
                                 exitCode: SysExit.usage)
        }
        return selected.map {
            $0.syncConfiguration(stateDirectory: configuration.stateDirectory, historyRetention: configuration.historyRetention)
        }
    }

    /// A model file as given (a bundle's current version).
    static func model(_ path: String) throws -> ManagedObjectModel {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CommandFailure(message: "no model at \(path)", exitCode: SysExit.noInput)
        }
        do {
            return try ManagedObjectModel(contentsOf: URL(fileURLWithPath: path))
        } catch let error as CoreDataError {
            throw CommandFailure(message: "cannot load the model \(path): \(error.message)", exitCode: StoreModelResolver.exitCode(for: error))
        }
    }

    /// A store file that must exist and be a file.
    static func checkStoreFile(_ path: String) throws -> URL {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw CommandFailure(message: "no store file at \(url.path)", exitCode: SysExit.noInput)
        }
        guard !isDirectory.boolValue else { throw CommandFailure(message: "\(url.path) is a directory, not a store file", exitCode: SysExit.noInput) }
        guard FileManager.default.isReadableFile(atPath: url.path) else {
            throw CommandFailure(message: "cannot read the store file \(url.path)", exitCode: SysExit.noInput)
        }
        return url
    }
}

/// What a run prints and how it exits, so tests can check a command without
/// spawning a process (commands that stream, like `log --follow`, print as
/// they go instead).
struct CommandOutcome: Equatable {
    var standardOutput = ""
    var standardError = ""
    var exitCode: Int32 = 0

    /// Prints the outcome and exits with its status.
    func perform() throws {
        if !standardOutput.isEmpty { FileHandle.standardOutput.write(Data(standardOutput.utf8)) }
        if !standardError.isEmpty { FileHandle.standardError.write(Data(standardError.utf8)) }
        if exitCode != 0 { throw ExitCode(exitCode) }
    }

    /// The outcome of an error: a `CommandFailure` as it says, a Core Data
    /// error as bad data (65, or 66/75 by its code), anything else 70.
    static func failure(_ error: Error) -> CommandOutcome {
        switch error {
        case let failure as CommandFailure:
            return CommandOutcome(standardError: failure.message + "\n", exitCode: failure.exitCode.rawValue)
        case let error as CoreDataError:
            return CommandOutcome(standardError: error.message + "\n", exitCode: StoreModelResolver.exitCode(for: error).rawValue)
        case let error as ChangeLogError:
            return CommandOutcome(standardError: "\(error)\n", exitCode: SysExit.usage.rawValue)
        default:
            return CommandOutcome(standardError: "\(error)\n", exitCode: SysExit.software.rawValue)
        }
    }
}
