import ArgumentParser
import Foundation
import ObjectGraph

/// `storesyncctl migrate STORE --model BUNDLE [--mapping PATH]... [--to VERSION] [--dry-run]`:
/// migrates a SQLite store to the current version of a model bundle, one
/// version at a time (`StagedStoreMigration`), printing each step and stage
/// with its progress; with `--dry-run`, what each step would change.
///
/// Exit statuses: 65 when the store was made with no version of the bundle
/// (134130, with what did not match), a step cannot be inferred and no
/// mapping file covers it (134190), a mapping file does not parse or does
/// not fit (134110, with the position or the problems), or a policy fails;
/// 66 for a missing store, bundle or mapping file; 74 when writing the store
/// fails (a full disk: nothing is changed); 75 when the store stays locked.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Migrate a SQLite store to the current version of its model bundle.",
        discussion: """
            The store's version is found among the bundle's versions (by version hashes, \
            else by schema and the model Core Data cached in the store). Versions are ordered \
            by name, numbers compared as numbers. From each version the step goes to the \
            furthest later version a mapping file (--mapping) maps to, else to the next \
            version with an inferred (lightweight) mapping. A step that only changes the \
            schema runs in place with SQL in one transaction; others copy every object into a \
            new file and replace the store's contents in one transaction. A step that fails \
            leaves the store as the previous step left it.

            Mapping files are ObjectGraph JSON mapping files or Xcode .xcmappingmodel folders \
            (see docs/MIGRATION.md); entity migration policies other than the base one must be \
            compiled into a program, so this command only runs mappings that use the base \
            policy and its FUNCTION($entityPolicy, 'dateFromISO8601String:', …).

            Examples:
              storesyncctl migrate Sync.sqlite --model Model.xcdatamodeld --dry-run
              storesyncctl migrate Sync.sqlite --model Model.xcdatamodeld --mapping Mappings/
              storesyncctl migrate Sync.sqlite --model Model.xcdatamodeld --to 'Model 3.xcdatamodel'

            Exit statuses: 0 migrated (or nothing to do, or the dry run printed); 64 usage; \
            65 no version fits the store, no mapping for a step, a mapping that fails; 66 no \
            such store or model; 74 SQLite could not write (a full disk); 75 the store stayed \
            locked by a writer past the timeout.
            """
    )

    @Argument(help: "The SQLite store file.")
    var store: String

    @Option(help: "The model bundle (.xcdatamodeld or .momd) holding the store's version and the versions after it.")
    var model: String

    @Option(name: .customLong("mapping"), help: "A mapping file (.json or .xcmappingmodel) or a directory of them (repeatable).")
    var mappings: [String] = []

    @Option(name: .customLong("to"), help: "The version to end at (default: the bundle's current version).")
    var target: String?

    @Flag(help: "Print what each step would change; change nothing.")
    var dryRun = false

    func run() throws {
        do {
            try perform()
        } catch let error as CoreDataError {
            printError("storesyncctl migrate: " + error.message)
            throw Self.exitCode(for: error)
        }
    }

    static func exitCode(for error: CoreDataError) -> ExitCode {
        switch error.code {
        case .fileReadNoSuchFile, .fileNoSuchFile: return SysExit.noInput
        case .persistentStoreTimeout: return SysExit.temporaryFailure
        default:
            // SQLite failing to write (a full disk, an I/O error) anywhere underneath.
            return isSQLiteFailure(error) ? SysExit.ioError : SysExit.dataError
        }
    }

    static func isSQLiteFailure(_ error: Error, depth: Int = 0) -> Bool {
        guard depth < 8 else { return false }
        if let coreData = error as? CoreDataError {
            if coreData.code == .sqlite { return true }
            return (coreData.userInfo[CoreDataError.underlyingErrorKey] as? Error).map { isSQLiteFailure($0, depth: depth + 1) } ?? false
        }
        return (error as NSError).domain == CoreDataError.sqliteErrorDomain
    }

    private func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    private func perform() throws {
        let storeURL = URL(fileURLWithPath: store)
        guard FileManager.default.fileExists(atPath: storeURL.path) else {
            throw CoreDataError(.fileReadNoSuchFile, "no store file at \(storeURL.path)")
        }
        guard FileManager.default.fileExists(atPath: model) else {
            throw CoreDataError(.fileReadNoSuchFile, "no model bundle at \(model)")
        }
        for mapping in mappings where !FileManager.default.fileExists(atPath: mapping) {
            throw CoreDataError(.fileReadNoSuchFile, "no mapping file or directory at \(mapping)")
        }
        // Mapping files that exist but do not load are reported, not skipped silently.
        let bundleURL = URL(fileURLWithPath: model)
        for file in MappingModel.mappingFiles(in: mappings.map { URL(fileURLWithPath: $0) }) {
            _ = try MappingModel(contentsOf: file)
        }
        let migration = try StagedStoreMigration(storeAt: storeURL, bundle: bundleURL, mappingURLs: mappings.map { URL(fileURLWithPath: $0) },
                                                 targetVersion: target)
        out("store \(storeURL.path): version \(migration.sourceVersionName)")
        guard !migration.steps.isEmpty else {
            out("already at \(migration.destinationVersionName); nothing to do")
            return
        }
        out("\(dryRun ? "would migrate" : "migrating") to \(migration.destinationVersionName) in \(migration.steps.count) step\(migration.steps.count == 1 ? "" : "s")")
        let previews = try migration.preview()
        for (index, (step, preview)) in zip(migration.steps, previews).enumerated() {
            let source = step.mappingURL.map { "mapping \($0.path)" } ?? "inferred mapping"
            out("step \(index + 1)/\(migration.steps.count): \(step.sourceVersionName) -> \(step.destinationVersionName) (\(source), \(preview.inPlace ? "in place" : "by copying"))")
            if dryRun {
                for change in preview.changes { out("  \(change)") }
                for mapping in step.mappingModel.entityMappings where !preview.inPlace {
                    out("  \(mapping.name): \(mapping.mappingType)")
                }
            }
        }
        guard !dryRun else { return }
        var lastLine = ""
        var lastStep = -1
        try migration.run { index, progress in
            if index != lastStep {
                if lastStep >= 0 { out("step \(lastStep + 1): done") }
                lastStep = index
                out("step \(index + 1): \(migration.steps[index].sourceVersionName) -> \(migration.steps[index].destinationVersionName)")
            }
            // One line per stage and mapping, and per tenth of the way.
            let line = "  \(progress.stage.rawValue)\(progress.entityMappingName.map { " \($0)" } ?? "") \(Int(progress.fraction * 10) * 10)%"
            if line != lastLine {
                out(line)
                lastLine = line
            }
        }
        if lastStep >= 0 { out("step \(lastStep + 1): done") }
        out("migrated \(storeURL.path) to \(migration.destinationVersionName)")
    }
}
