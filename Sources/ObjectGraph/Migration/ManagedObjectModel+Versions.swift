import Foundation

/// Finding the model version a store was made with among several (MOM-IN-03,
/// MOM-IN-05), and naming versions, for migration.
extension ManagedObjectModel {
    /// The name of the model version this model was read from: the
    /// `.xcdatamodel` folder (`"Model 2.xcdatamodel"`) or `.mom` file name;
    /// nil for a model built in code.
    ///
    /// ```swift
    /// let v2 = try XcodeModelBundle(url: bundleURL).model(named: "Model 2.xcdatamodel")
    /// v2.versionName   // "Model 2.xcdatamodel"
    /// ```
    public var versionName: String? {
        guard let url = sourceURL else { return nil }
        if url.lastPathComponent == "contents" { return url.deletingLastPathComponent().lastPathComponent }
        return url.lastPathComponent
    }

    /// The model among the versions at `urls` that made the store whose
    /// metadata is given, or nil (MOM-IN-03, Core Data's
    /// `mergedModelFromBundles:forStoreMetadata:`). Each URL is a model
    /// bundle (`.xcdatamodeld`, `.momd`), a single model (`.xcdatamodel`,
    /// `.mom`), or a directory searched (not recursively) for them. When
    /// several bundles each hold part of the store's entities, one version
    /// of each is merged (`modelByMerging(_:forStoreMetadata:)`).
    ///
    /// Matching is by version hashes (`isConfiguration(nil, compatibleWithStoreMetadata:)`),
    /// so it finds the versions of stores ObjectGraph wrote; for stores
    /// Apple's Core Data wrote, whose hashes cannot be recomputed here, see
    /// `version(matchingStoreAt:inBundle:)` (schema and cached model).
    ///
    /// ```swift
    /// let metadata = try SQLiteStore.metadataForStore(at: storeURL)
    /// let source = try ManagedObjectModel.mergedModel(from: [bundleURL], forStoreMetadata: metadata)
    /// ```
    /// - Throws: the errors of reading a model file.
    public static func mergedModel(from urls: [URL], forStoreMetadata metadata: [String: Any]) throws -> ManagedObjectModel? {
        var versions: [ManagedObjectModel] = []
        for url in modelLocations(in: urls) {
            versions += try modelVersions(in: url).0.map(\.model)
        }
        return try modelByMerging(versions, forStoreMetadata: metadata)
    }

    /// Of `models` (typically every version of one or more models), the one
    /// that made the store whose metadata is given, or one merged from
    /// several whose entities together are the store's; nil when none fits
    /// (MOM-IN-05, `modelByMergingModels:forStoreMetadata:`).
    ///
    /// ```swift
    /// let source = try ManagedObjectModel.modelByMerging([v1, v2, v3], forStoreMetadata: metadata)
    /// ```
    public static func modelByMerging(_ models: [ManagedObjectModel], forStoreMetadata metadata: [String: Any]) throws -> ManagedObjectModel? {
        if let whole = models.first(where: { $0.isConfiguration(nil, compatibleWithStoreMetadata: metadata) }) { return whole }
        guard let stored = metadata[storeModelVersionHashesKey] as? [String: Data], !stored.isEmpty else { return nil }
        // Models whose every entity has its hash in the store, without
        // overlapping entity names, until the store's entities are covered.
        var chosen: [ManagedObjectModel] = []
        var covered: Set<String> = []
        for model in models where !model.entities.isEmpty {
            let names = Set(model.entities.map(\.name))
            guard covered.isDisjoint(with: names), model.entities.allSatisfy({ stored[$0.name] == $0.versionHash }) else { continue }
            chosen.append(model)
            covered.formUnion(names)
        }
        guard covered == Set(stored.keys), chosen.count > 1 else { return nil }
        let merged = try ManagedObjectModel(byMerging: chosen)
        return merged.isConfiguration(nil, compatibleWithStoreMetadata: metadata) ? merged : nil
    }

    /// For each model, the entities whose version hashes differ from the
    /// store's (or that the store lacks), and the store's entities the model
    /// lacks: what a 134130 or 134100 reports.
    static func hashMismatches(of models: [(name: String, model: ManagedObjectModel)], storeMetadata metadata: [String: Any]) -> [String: [String]] {
        let stored = metadata[storeModelVersionHashesKey] as? [String: Data] ?? [:]
        var out: [String: [String]] = [:]
        for (name, model) in models {
            var differing = model.entities.filter { stored[$0.name] != $0.versionHash }.map(\.name)
            differing += Set(stored.keys).subtracting(model.entities.map(\.name)).map { "\($0) (only in the store)" }
            out[name] = differing.sorted()
        }
        return out
    }

    /// Model bundles and single models given directly or found in directories.
    static func modelLocations(in urls: [URL]) -> [URL] {
        let modelExtensions: Set<String> = ["xcdatamodeld", "momd", "xcdatamodel", "mom"]
        var out: [URL] = []
        for url in urls {
            if modelExtensions.contains(url.pathExtension) { out.append(url); continue }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue,
                  let items = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { continue }
            out += items.sorted().map { url.appendingPathComponent($0) }.filter { modelExtensions.contains($0.pathExtension) }
        }
        return out
    }

    /// The versions of a bundle in migration order: names compared as
    /// numbers where they hold digits (`Model 2` before `Model 10`,
    /// `XCServerCoreData1.2.0` before `XCServerCoreData2.0.0`), since Xcode
    /// records no order between versions. A bundle's current version is
    /// where its migrations end.
    static func versionOrder(_ names: [String]) -> [String] {
        // Without the extension, so "Model" comes before "Model 2".
        func base(_ name: String) -> String {
            for ext in [".xcdatamodel", ".mom"] where name.hasSuffix(ext) { return String(name.dropLast(ext.count)) }
            return name
        }
        return names.sorted { base($0).compare(base($1), options: [.numeric]) == .orderedAscending }
    }
}
