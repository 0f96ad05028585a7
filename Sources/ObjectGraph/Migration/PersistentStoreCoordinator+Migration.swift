import Foundation

/// Automatic migration when a store is added (PC-38, PC-39).
extension PersistentStoreCoordinator {
    /// Migrates the store file at `url` to the coordinator's model when it
    /// was made with another model, as `addPersistentStore` does with
    /// `NSMigratePersistentStoresAutomaticallyOption`:
    ///
    /// 1. the store's own compatibility rule decides whether it must be
    ///    migrated (`PersistentStore.checkStoreCompatibility(at:)`: 134100
    ///    or, for SQLite stores Apple wrote, 134020);
    /// 2. the source model is the store's among the models in
    ///    `migrationSearchURLsOption` (`PersistentStore.sourceModel(forStoreAt:metadata:searchURLs:)`),
    ///    else 134130 naming, per model looked at, the entities whose hashes differ;
    /// 3. the mapping model is the first mapping file there that fits
    ///    (`MappingModel.mappingModel(from:forSourceModel:destinationModel:)`),
    ///    else an inferred one with `NSInferMappingModelAutomaticallyOption`
    ///    (when it cannot be inferred: 134140 with the 134190 underneath, as
    ///    Core Data reports it), else 134140;
    /// 4. the store class migrates the file (`PersistentStore.migrateStore(at:options:mappingModel:manager:)`)
    ///    with its migration manager class (PS-18).
    ///
    /// A failure leaves the file as it was.
    func migrateStoreIfNeeded(_ store: PersistentStore, at url: URL) throws {
        let storeClass = type(of: store)
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber
        guard (size?.intValue ?? 0) > 0 else { return }     // a new store is created with the model
        do {
            try store.checkStoreCompatibility(at: url)
            return
        } catch let error as CoreDataError where error.code == .persistentStoreIncompatibleVersionHash || error.code == .persistentStoreIncompatibleSchema {
            // Made with another model: migrate.
        }
        let metadata = try storeClass.metadataForPersistentStore(at: url)
        let searchURLs = Self.searchURLs(in: store.options)
        guard let sourceModel = try store.sourceModel(forStoreAt: url, metadata: metadata, searchURLs: searchURLs) else {
            var versions: [(name: String, model: ManagedObjectModel)] = []
            for location in ManagedObjectModel.modelLocations(in: searchURLs) {
                versions += (try? ManagedObjectModel.modelVersions(in: location).0) ?? []
            }
            let mismatches = ManagedObjectModel.hashMismatches(of: versions, storeMetadata: metadata)
            let detail = mismatches.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.joined(separator: ", "))" }
            throw CoreDataError(.migrationMissingSourceModel,
                                "no model among \(searchURLs.map(\.path)) made the store at \(url.path)"
                                + (detail.isEmpty ? " (no model was found there)" : "; version hashes that differ:\n" + detail.joined(separator: "\n")),
                                userInfo: [CoreDataError.filePathErrorKey: url.path, CoreDataError.storeMetadataErrorKey: metadata,
                                           CoreDataError.mismatchedVersionHashesErrorKey: mismatches,
                                           CoreDataError.storeURLErrorKey: url, CoreDataError.reasonErrorKey: CoreDataError.MigrationReason.missingSourceModel])
        }
        let mapping: MappingModel
        if let found = MappingModel.mappingModel(from: searchURLs, forSourceModel: sourceModel, destinationModel: managedObjectModel) {
            mapping = found
        } else if store.boolOption(PersistentStore.inferMappingModelAutomaticallyOption) {
            do {
                mapping = try MappingModel.inferredMappingModel(forSourceModel: sourceModel, destinationModel: managedObjectModel)
            } catch let error as CoreDataError where error.code == .inferredMappingModel {
                // As Core Data reports it: 134140, why inference failed underneath.
                throw CoreDataError(.migrationMissingMappingModel,
                                    "no mapping model among \(searchURLs.map(\.path)) migrates the store at \(url.path), and none can be inferred: \(error.message)",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path, CoreDataError.underlyingErrorKey: error,
                                               CoreDataError.sourceModelErrorKey: sourceModel, CoreDataError.destinationModelErrorKey: managedObjectModel,
                                               CoreDataError.reasonErrorKey: CoreDataError.MigrationReason.cannotInferMappingModel])
            }
        } else {
            throw CoreDataError(.migrationMissingMappingModel,
                                "no mapping model among \(searchURLs.map(\.path)) migrates the store at \(url.path) from \(sourceModel.versionName ?? "its model") to \(managedObjectModel.versionName ?? "the coordinator's model"), and \(PersistentStore.inferMappingModelAutomaticallyOption) is not set",
                                userInfo: [CoreDataError.filePathErrorKey: url.path,
                                           CoreDataError.sourceModelErrorKey: sourceModel, CoreDataError.destinationModelErrorKey: managedObjectModel,
                                           CoreDataError.reasonErrorKey: CoreDataError.MigrationReason.missingMappingModel])
        }
        let manager = storeClass.migrationManagerType.init(sourceModel: sourceModel, destinationModel: managedObjectModel)
        try storeClass.migrateStore(at: url, options: store.options, mappingModel: mapping, manager: manager)
    }

    /// `migrationSearchURLsOption` as URLs (paths are accepted too).
    static func searchURLs(in options: [String: Any]) -> [URL] {
        switch options[PersistentStore.migrationSearchURLsOption] {
        case let urls as [URL]: return urls
        case let url as URL: return [url]
        case let paths as [String]: return paths.map { URL(fileURLWithPath: $0) }
        case let path as String: return [URL(fileURLWithPath: path)]
        default: return []
        }
    }
}
