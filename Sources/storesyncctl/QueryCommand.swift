import ArgumentParser
import Foundation
import ObjectGraph
import StoreSync
import StoreSyncConfig

/// `storesyncctl query STORE-OR-GROUP ENTITY [PREDICATE] --model PATH [--sort KEY[:desc]]... [--offset N] [--limit N] [--json]`:
/// a read-only fetch from a Core Data SQLite store (Apple-written ones
/// included), or a sync group's hub or store named in the daemon's
/// configuration, filtered with Core Data's predicate language.
///
/// The store is opened read-only through `SQLiteStore` and never written:
/// a WAL-mode file without a pending `-wal` is opened `immutable=1`, so no
/// `-wal`/`-shm` files appear beside it (see `SQLiteStore.readOnlyOpenMode`).
/// What SQL cannot do exactly is finished in memory with the same semantics.
///
/// Exit statuses: 65 for a bad predicate (with its column), an entity,
/// predicate key or sort key the model does not have, or a store the model
/// does not fit, or a store file SQLite finds damaged while reading it; 66
/// for a missing or unreadable store or model; 75 when the store stays
/// locked by a writer past the timeout.
struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Fetch objects from a SQLite store, read-only, with a Core Data predicate.",
        discussion: """
            Prints an aligned table: the object ID, one column per attribute, and to-one \
            relationships as object URIs. With --json, prints an array of objects keyed by \
            property name: dates as ISO 8601 strings, binary data as base64, decimals as \
            strings (exact digits), to-one relationships as an object URI or null, to-many \
            relationships as arrays of object URIs, and the object's own URI under "objectID".

            Without --model the store's own model is used: the one Core Data cached in it \
            (Z_MODELCACHE), else one derived from its tables, whose property names are the \
            lowercased column names (ZLASTUPDATE -> lastupdate) and whose integers read as \
            Integer 64. With a bundle (.xcdatamodeld or .momd), the version the store was \
            written with is picked (by version hashes, else by schema and cached model).

            STORE-OR-GROUP is a store file, or, when no such file exists, a sync group of \
            the daemon's configuration (--config): its hub by default, or its store --store \
            NAME, read with the group's model.

            Exit statuses: 0 success; 64 bad usage (--store without a group, --model with a \
            group); 65 a bad predicate (its column shown), an entity or key the model lacks, \
            a store the model does not fit or that is damaged; 66 no such store file or group, \
            or an unreadable store, model or configuration file; 75 the store stayed locked \
            by a writer past the timeout; 78 a configuration file that cannot be used.

            Examples:
              storesyncctl query Sync.sqlite Bot 'name BEGINSWITH[c] "ios"'
              storesyncctl query notes Note 'title CONTAINS[c] "plan"'
              storesyncctl query notes Note --store phone --config /etc/storesyncd/storesyncd.toml --json
              storesyncctl query Sync.sqlite Bot 'name BEGINSWITH[c] "ios"' --model Model.xcdatamodeld
              storesyncctl query Old.sqlite Bot 'lastupdate > CAST(0, "NSDate")' --json
              storesyncctl query Sync.sqlite Integration 'number > 3' --model Model.xcdatamodeld --sort number:desc --limit 5 --json
              storesyncctl query Sync.sqlite Integration --model Model.xcdatamodeld --sort number --offset 20 --limit 10
            """
    )

    @Argument(help: ArgumentHelp("The SQLite store file, or a sync group of the configuration (its hub, or --store).", valueName: "store-or-group"))
    var store: String

    @Argument(help: "The entity to fetch (its sub-entities included).")
    var entity: String

    @Argument(help: "A predicate in Core Data's format (all objects when omitted).")
    var predicate: String?

    @Option(help: "The model: a .xcdatamodeld or .momd bundle (the version matching the store is used), a .xcdatamodel folder, a contents file or a .mom file. Default: the store's own model.")
    var model: String?

    @Option(name: .customLong("sort"), help: "A sort key, KEY or KEY:desc (repeatable; the first is the primary key).")
    var sortKeys: [String] = []

    @Option(help: "At most this many objects.")
    var limit: Int?

    @Option(help: "Skip this many objects first (after sorting; applied before --limit, for paging).")
    var offset: Int?

    @Flag(help: "Print a JSON array of objects instead of a table.")
    var json = false

    @Option(name: .customLong("store"), help: "With a group: this store of it instead of its hub.")
    var groupStore: String?

    @Option(help: "The daemon's configuration file, where groups are looked up. Default: $CONFIGURATION_DIRECTORY/storesyncd.toml, else /etc/storesyncd/storesyncd.toml.")
    var config: String?

    func validate() throws {
        if let limit, limit <= 0 { throw ValidationError("--limit must be a positive number") }
        if let offset, offset < 0 { throw ValidationError("--offset must be zero or a positive number") }
    }

    /// What a run prints and how it exits; `run()` only performs it, so
    /// tests can check it without spawning a process.
    struct Outcome: Equatable {
        var standardOutput = ""
        var standardError = ""
        var exitCode: Int32 = 0
    }

    private struct Failure: Error {
        var message: String
        var exitCode: ExitCode
    }

    func run() throws {
        let outcome = execute()
        if !outcome.standardOutput.isEmpty { print(outcome.standardOutput, terminator: "") }
        if !outcome.standardError.isEmpty { FileHandle.standardError.write(Data(outcome.standardError.utf8)) }
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }

    func execute() -> Outcome {
        do {
            let text = try perform()
            return Outcome(standardOutput: text)
        } catch let failure as Failure {
            return Outcome(standardError: failure.message + "\n", exitCode: failure.exitCode.rawValue)
        } catch let error as CoreDataError {
            // Anything the store reports past opening (a page SQLite finds
            // malformed while reading rows or relationships, a value that does
            // not decode) is about the input file, not this program.
            let exitCode = error.code == .persistentStoreTimeout ? SysExit.temporaryFailure : SysExit.dataError
            return Outcome(standardError: error.message + "\n", exitCode: exitCode.rawValue)
        } catch {
            return Outcome(standardError: "\(error)\n", exitCode: SysExit.software.rawValue)
        }
    }

    /// The file to read and, for a group's hub or store, the model to read
    /// it with (the group's, never a guess).
    struct Target {
        var url: URL
        var model: ManagedObjectModel?
        var configurationName: String?
        var origin: String?
    }

    /// A store file as given, or a group of the configuration when no file
    /// has that name (or `--store`/`--config` say a group is meant).
    func target() throws -> Target {
        var isDirectory: ObjCBool = false
        let fileExists = FileManager.default.fileExists(atPath: store, isDirectory: &isDirectory) && !isDirectory.boolValue
        if fileExists && groupStore == nil && config == nil { return Target(url: URL(fileURLWithPath: store)) }
        let configuration: DaemonConfiguration
        do {
            configuration = try GroupLookup.configuration(config)
        } catch let failure as CommandFailure {
            if config == nil && groupStore == nil {
                // Most likely a mistyped file name: say that first.
                throw Failure(message: "no store file at \(URL(fileURLWithPath: store).path), and no group of that name: \(failure.message)", exitCode: SysExit.noInput)
            }
            throw Failure(message: failure.message, exitCode: failure.exitCode)
        }
        guard let settings = configuration.groups.first(where: { $0.name == store }) else {
            if fileExists && groupStore == nil { return Target(url: URL(fileURLWithPath: store)) }
            let groups = configuration.groups.map(\.name).joined(separator: ", ")
            throw Failure(message: "no store file at \(URL(fileURLWithPath: store).path), and no group '\(store)' in \(configuration.file) (it has: \(groups.isEmpty ? "none" : groups))",
                          exitCode: groupStore == nil ? SysExit.noInput : SysExit.usage)
        }
        if model != nil {
            throw Failure(message: "--model: a group's hub and stores are read with the group's model (\(settings.modelPath.path)); leave --model out", exitCode: SysExit.usage)
        }
        let group = settings.syncConfiguration(stateDirectory: configuration.stateDirectory, historyRetention: configuration.historyRetention)
        guard let name = groupStore else {
            return Target(url: group.hubURL, model: group.hubModel, origin: "the hub of group \(group.name)")
        }
        guard let member = group.stores.first(where: { $0.name == name }) else {
            throw Failure(message: "group \(group.name) has no store '\(name)' (it has: \(group.stores.map(\.name).joined(separator: ", ")))", exitCode: SysExit.usage)
        }
        return Target(url: member.url, model: group.model, configurationName: member.configurationName, origin: "store \(name) of group \(group.name)")
    }

    private func perform() throws -> String {
        let target = try target()
        let resolved = try loadModel(target)
        let model = resolved.model
        guard let entityDescription = model.entitiesByName[entity] else {
            throw Failure(message: "the model has no entity '\(entity)' (it has \(model.entities.map(\.name).sorted().joined(separator: ", ")))",
                          exitCode: SysExit.dataError)
        }
        // A derived model's names are guesses: say so next to a key it lacks.
        let derivedHint = resolved.isDerived ? "\n(the model was \(resolved.origin))" : ""
        let request = FetchRequest(entityName: entity)
        if let predicate, !predicate.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            let parsed: FetchPredicate
            do {
                parsed = try FetchPredicate(format: predicate)
            } catch let error as PredicateSyntaxError {
                throw Failure(message: "\(error)\n\(error.caretDiagram)", exitCode: SysExit.dataError)
            } catch {
                throw Failure(message: "\(error)", exitCode: SysExit.dataError)
            }
            let problems = ModelKeyPathChecker.problems(in: parsed, entity: entityDescription)
            if !problems.isEmpty { throw Failure(message: problems.joined(separator: "\n") + derivedHint, exitCode: SysExit.dataError) }
            request.predicate = parsed
        }
        request.sortDescriptors = try sortKeys.map { key in
            do { return try sortDescriptor(key, entityDescription) } catch let failure as Failure {
                throw Failure(message: failure.message + derivedHint, exitCode: failure.exitCode)
            }
        }
        request.fetchLimit = limit ?? 0
        request.fetchOffset = offset ?? 0

        let sqliteStore = try openStore(model, target, ignoringVersionHashes: resolved.isDerived)
        defer { sqliteStore.close() }
        let snapshots: [StoreSnapshot]
        do {
            snapshots = try sqliteStore.finishedSnapshots(request)
        } catch let error as PredicateEvaluationError {
            throw Failure(message: "\(error)", exitCode: SysExit.dataError)
        } catch let error as CoreDataError {
            throw Failure(message: error.message, exitCode: SysExit.dataError)
        }
        let rows = try QueryOutput(entity: entityDescription, store: sqliteStore)
        return json ? try rows.json(snapshots) : rows.table(snapshots)
    }

    private func loadModel(_ target: Target) throws -> StoreModelResolver.Resolved {
        let url = target.url
        if let groupModel = target.model {
            try checkStoreFile(url)
            return StoreModelResolver.Resolved(model: groupModel, origin: "the model of \(target.origin ?? "the group")")
        }
        if model == nil || StoreModelResolver.isBundle(model!) {
            // The store is read to choose the model: refuse a missing one first, as openStore would.
            try checkStoreFile(url)
        }
        do {
            return try StoreModelResolver.resolve(store: url, modelPath: model)
        } catch let error as CoreDataError {
            throw Failure(message: error.message, exitCode: StoreModelResolver.exitCode(for: error))
        }
    }

    private func checkStoreFile(_ url: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw Failure(message: "no store file at \(url.path)", exitCode: SysExit.noInput)
        }
        guard FileManager.default.isReadableFile(atPath: url.path) else {
            throw Failure(message: "cannot read the store file \(url.path)", exitCode: SysExit.noInput)
        }
    }

    /// `KEY`, `KEY:asc` or `KEY:desc`.
    private func sortDescriptor(_ text: String, _ entity: EntityDescription) throws -> FetchSortDescriptor {
        var key = text
        var ascending = true
        if let colon = text.lastIndex(of: ":") {
            key = String(text[..<colon])
            switch text[text.index(after: colon)...].lowercased() {
            case "asc": ascending = true
            case "desc": ascending = false
            default:
                throw Failure(message: "sort key '\(text)': the direction after ':' must be asc or desc", exitCode: SysExit.dataError)
            }
        }
        if let problem = ModelKeyPathChecker.sortProblem(key, entity) {
            throw Failure(message: problem, exitCode: SysExit.dataError)
        }
        return FetchSortDescriptor(key: key, ascending: ascending)
    }

    private func openStore(_ model: ManagedObjectModel, _ target: Target, ignoringVersionHashes: Bool) throws -> SQLiteStore {
        let url = target.url
        try checkStoreFile(url)
        // A derived model cannot reproduce the store's hashes; its schema was checked against the file instead.
        let sqliteStore = SQLiteStore(model: model, configurationName: target.configurationName, url: url,
                                      options: [PersistentStore.readOnlyOption: true,
                                                PersistentStore.ignoreVersioningOption: ignoringVersionHashes])
        do {
            try sqliteStore.load()
        } catch let error as CoreDataError {
            switch error.code {
            case .fileReadNoSuchFile, .fileNoSuchFile: throw Failure(message: error.message, exitCode: SysExit.noInput)
            case .persistentStoreIncompatibleSchema, .persistentStoreIncompatibleVersionHash:
                // A .xcdatamodeld names its current version, which is often not the one an older store was made with.
                throw Failure(message: error.message + "\n(give --model the model version the store was made with, e.g. Model.xcdatamodeld/Model2.xcdatamodel, the whole Model.xcdatamodeld to pick it, or no --model to use the store's own model)",
                              exitCode: SysExit.dataError)
            default: throw Failure(message: error.message, exitCode: SysExit.dataError)
            }
        }
        return sqliteStore
    }
}
