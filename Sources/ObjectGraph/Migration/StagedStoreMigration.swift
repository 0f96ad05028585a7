import Foundation

/// Migrates a store through the versions of a model bundle, one step at a
/// time, to the bundle's current version (or another): what a tool holding a
/// store and the app's `.xcdatamodeld` needs, and what Core Data's automatic
/// migration (one step, from the store's version straight to the current
/// one) cannot do when some step needs a mapping file.
///
/// The store's version is found as `ManagedObjectModel.version(matchingStoreAt:inBundle:)`
/// finds it (SQLite) or by version hashes (other stores). Versions are
/// ordered by name, numbers compared as numbers (`ManagedObjectModel.versionOrder`).
/// From each version, the step goes to the furthest later version (up to
/// the target) that one of `mappingModels` maps to from it; with none, to
/// the next version with an inferred mapping. Each step is migrated by the
/// store class (SQLite: in place when it can).
///
/// ```swift
/// let migration = try StagedStoreMigration(storeAt: storeURL, bundle: bundleURL, mappingURLs: [mappingsURL])
/// for step in migration.steps { print(step.sourceVersionName, "->", step.destinationVersionName, step.mappingModel.isInferred) }
/// try migration.run { step, progress in print(step, progress) }
/// ```
public struct StagedStoreMigration {
    /// One migration between two versions.
    public struct Step {
        public let sourceVersionName: String
        public let destinationVersionName: String
        public let sourceModel: ManagedObjectModel
        public let destinationModel: ManagedObjectModel
        public let mappingModel: MappingModel
        /// The file the mapping came from; nil for an inferred one.
        public let mappingURL: URL?
    }

    public let storeURL: URL
    public let storeType: String
    /// The version the store was made with, and the one it ends at.
    public let sourceVersionName: String
    public let destinationVersionName: String
    public let steps: [Step]

    /// Plans the steps; nothing is written.
    /// - Parameters:
    ///   - mappingURLs: mapping files, or directories holding them.
    ///   - targetVersion: the version to end at; nil for the bundle's current version.
    /// - Throws: 134130 when no version of the bundle made the store (with the
    ///   hashes or tables that did not match), 134190 for a step that needs a
    ///   mapping file and has none, 134110 for a target before the store's version.
    public init(storeAt storeURL: URL, ofType storeType: String = PersistentStoreCoordinator.sqliteStoreType, bundle: URL,
                mappingURLs: [URL] = [], targetVersion: String? = nil) throws {
        self.storeURL = storeURL
        self.storeType = storeType
        let (versions, current) = try ManagedObjectModel.modelVersions(in: bundle)
        let order = ManagedObjectModel.versionOrder(versions.map(\.name))
        let models = Dictionary(versions.map { ($0.name, $0.model) }, uniquingKeysWith: { first, _ in first })
        let source: String
        if storeType == PersistentStoreCoordinator.sqliteStoreType {
            do {
                source = try ManagedObjectModel.version(matchingStoreAt: storeURL, inBundle: bundle).versionName
            } catch let error as CoreDataError where error.code == .persistentStoreIncompatibleVersionHash {
                var info = error.userInfo
                info[CoreDataError.storeURLErrorKey] = storeURL
                info[CoreDataError.reasonErrorKey] = CoreDataError.MigrationReason.missingSourceModel
                throw CoreDataError(.migrationMissingSourceModel, error.message, userInfo: info)
            }
        } else {
            let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: storeType, at: storeURL)
            guard let match = versions.first(where: { $0.model.isConfiguration(nil, compatibleWithStoreMetadata: metadata) }) else {
                let mismatches = ManagedObjectModel.hashMismatches(of: versions, storeMetadata: metadata)
                throw CoreDataError(.migrationMissingSourceModel,
                                    "\(storeURL.path): no version of \(bundle.path) made the store; version hashes that differ:\n"
                                    + mismatches.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.joined(separator: ", "))" }.joined(separator: "\n"),
                                    userInfo: [CoreDataError.filePathErrorKey: storeURL.path, CoreDataError.storeMetadataErrorKey: metadata,
                                               CoreDataError.mismatchedVersionHashesErrorKey: mismatches,
                                               CoreDataError.storeURLErrorKey: storeURL, CoreDataError.reasonErrorKey: CoreDataError.MigrationReason.missingSourceModel])
            }
            source = match.name
        }
        let target = targetVersion ?? current
        guard let from = order.firstIndex(of: source), let to = order.firstIndex(of: target) else {
            throw CoreDataError(.migration, "\(bundle.path) has no version named \(targetVersion ?? current)")
        }
        guard from <= to else {
            throw CoreDataError(.migration, "the store is at \(source), after \(target) in the bundle's version order; migrations only go forward")
        }
        sourceVersionName = source
        destinationVersionName = target
        let files = MappingModel.mappingFiles(in: mappingURLs)
        var steps: [Step] = []
        var position = from
        while position < to {
            let a = order[position]
            var chosen: Step?
            for later in stride(from: to, to: position, by: -1) {
                let b = order[later]
                for file in files {
                    guard let mapping = try? MappingModel(contentsOf: file, sourceModel: models[a]!, destinationModel: models[b]!),
                          mapping.sourceModelVersionName != nil || mapping.destinationModelVersionName != nil,
                          mapping.problems(sourceModel: models[a]!, destinationModel: models[b]!).isEmpty else { continue }
                    chosen = Step(sourceVersionName: a, destinationVersionName: b, sourceModel: models[a]!, destinationModel: models[b]!,
                                  mappingModel: mapping, mappingURL: file)
                    position = later
                    break
                }
                if chosen != nil { break }
            }
            if chosen == nil {
                let b = order[position + 1]
                let mapping: MappingModel
                do {
                    mapping = try MappingModel.inferredMappingModel(forSourceModel: models[a]!, destinationModel: models[b]!)
                } catch let error as CoreDataError where error.code == .inferredMappingModel {
                    throw CoreDataError(.inferredMappingModel, "\(a) -> \(b): \(error.message); give a mapping file for this step",
                                        userInfo: error.userInfo)
                }
                chosen = Step(sourceVersionName: a, destinationVersionName: b, sourceModel: models[a]!, destinationModel: models[b]!,
                              mappingModel: mapping, mappingURL: nil)
                position += 1
            }
            steps.append(chosen!)
        }
        self.steps = steps
    }

    /// What each step would do, without changing the store: the first step
    /// is planned against the store itself, the later ones against an empty
    /// store of their source version (SQLite; other store types copy).
    public func preview() throws -> [MigrationPreview] {
        guard storeType == PersistentStoreCoordinator.sqliteStoreType else {
            return steps.map { MigrationPreview(inPlace: false, changes: $0.mappingModel.entityMappings.map(\.description), statements: []) }
        }
        var out: [MigrationPreview] = []
        for (index, step) in steps.enumerated() {
            if index == 0 {
                out.append(try SQLiteStore.migrationPreview(at: storeURL, sourceModel: step.sourceModel, destinationModel: step.destinationModel,
                                                            mappingModel: step.mappingModel))
                continue
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("objectgraph-preview-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let empty = directory.appendingPathComponent("Empty.sqlite")
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: step.sourceModel)
            let store = try coordinator.addPersistentStore(ofType: storeType, at: empty)
            try coordinator.remove(store)
            out.append(try SQLiteStore.migrationPreview(at: empty, sourceModel: step.sourceModel, destinationModel: step.destinationModel,
                                                        mappingModel: step.mappingModel))
        }
        return out
    }

    /// Runs every step in order; `progress` gets the step's index and each
    /// report of its migration manager. A failed step leaves the store as
    /// the previous step left it (each step is atomic).
    public func run(progress: ((Int, MigrationProgress) -> Void)? = nil) throws {
        let storeClass = try PersistentStoreCoordinator.storeClass(storeType)
        for (index, step) in steps.enumerated() {
            let manager = storeClass.migrationManagerType.init(sourceModel: step.sourceModel, destinationModel: step.destinationModel)
            let token = progress.map { handler in manager.observeProgress { handler(index, $0) } }
            defer { token?.cancel() }
            try storeClass.migrateStore(at: storeURL, options: [:], mappingModel: step.mappingModel, manager: manager)
        }
    }
}
