import Foundation

/// The version of a model bundle that a store was written with, as
/// `ManagedObjectModel.version(matchingStoreAt:inBundle:)` found it.
public struct ModelVersionMatch {
    /// How the version was recognised.
    public enum Evidence: String, Sendable {
        /// The store's `NSStoreModelVersionHashes` equal the version's
        /// (stores ObjectGraph wrote: Apple's hashes are not reproducible here).
        case versionHashes = "version hashes"
        /// Its schema is exactly the store's tables and columns, and its
        /// hashes equal those of the model cached in the store's `Z_MODELCACHE`.
        case schemaAndModelCache = "schema and cached model"
        /// Its schema is exactly the store's tables and columns (no cached
        /// model to tell versions of the same schema apart).
        case schema = "schema"
    }

    /// The version's name: a `.xcdatamodel` folder name, or a `.mom` name
    /// without extension.
    public let versionName: String
    public let model: ManagedObjectModel
    public let evidence: Evidence
    /// Other versions that fit as well (same schema, no cache to decide);
    /// `versionName` is the bundle's current version if it is among them,
    /// else the last by name.
    public let alternatives: [String]
}

extension ManagedObjectModel {
    /// Finds the version of a model bundle (`.xcdatamodeld` or `.momd`; a
    /// single model file or folder is one version) that the SQLite store at
    /// `storeURL` was written with, as Core Data does with
    /// `mergedModel(from:forStoreMetadata:)`:
    ///
    /// 1. a version for which `isConfiguration(nil, compatibleWithStoreMetadata:)`
    ///    holds (stores ObjectGraph wrote);
    /// 2. otherwise (Apple's hashes cannot be recomputed here) the versions
    ///    whose entity names are the store's and whose schema
    ///    (`SQLiteSchema` with the file's entity numbers) is exactly the
    ///    file's tables, columns and declared types; when the store caches
    ///    its model (`Z_MODELCACHE`), those whose hashes equal the cached
    ///    model's are preferred.
    ///
    /// The store is read through SQLite only, read-only.
    ///
    /// ```swift
    /// let match = try ManagedObjectModel.version(matchingStoreAt: URL(fileURLWithPath: "Server.sqlite"),
    ///                                            inBundle: URL(fileURLWithPath: "XCServerCoreData.xcdatamodeld"))
    /// match.versionName   // "XCServerCoreData2.0.1.xcdatamodel"
    /// ```
    /// - Throws: 134100 naming, for every version, the hashes, entities or
    ///   tables that did not match, when no version fits; the errors of
    ///   reading the bundle or the store otherwise.
    public static func version(matchingStoreAt storeURL: URL, inBundle bundleURL: URL) throws -> ModelVersionMatch {
        let (versions, current) = try modelVersions(in: bundleURL)
        // Metadata, tables and numbers through one connection opened as a
        // read-only store opens (immutable when nothing is pending in a -wal),
        // so no -wal/-shm appears beside the store.
        let file = try StoreShape(url: storeURL)
        let metadata = file.metadata
        func pick(_ names: [String], _ evidence: ModelVersionMatch.Evidence) -> ModelVersionMatch {
            let chosen = names.contains(current) ? current : names.last!
            return ModelVersionMatch(versionName: chosen, model: versions.first { $0.name == chosen }!.model, evidence: evidence,
                                     alternatives: names.filter { $0 != chosen })
        }
        let byHashes = versions.filter { $0.model.isConfiguration(nil, compatibleWithStoreMetadata: metadata) }.map(\.name)
        if !byHashes.isEmpty { return pick(byHashes, .versionHashes) }

        let cached = try SQLiteStore.cachedModel(forStoreAt: storeURL)
        var reasons: [String] = []
        var schemaFits: [String] = []
        let storeHashes = metadata[ManagedObjectModel.storeModelVersionHashesKey] as? [String: Data] ?? [:]
        let ourHashes = (metadata[SQLiteMetadata.hashSchemeKey] as? Int) == SQLiteMetadata.currentHashScheme
        for (name, model) in versions {
            var problems: [String] = []
            if ourHashes {
                let differing = model.entities.filter { storeHashes[$0.name] != $0.versionHash }.map(\.name).sorted()
                let extra = Set(storeHashes.keys).subtracting(model.entities.map(\.name)).sorted()
                if !differing.isEmpty { problems.append("version hashes differ for \(differing.joined(separator: ", "))") }
                if !extra.isEmpty { problems.append("the store's hashes name entities the version lacks: \(extra.joined(separator: ", "))") }
            }
            problems += file.mismatches(with: model)
            if problems.isEmpty { schemaFits.append(name) } else { reasons.append("\(name): " + problems.joined(separator: "; ")) }
        }
        if let cached, !schemaFits.isEmpty {
            let cachedHashes = cached.entityVersionHashesByName
            let same = schemaFits.filter { name in versions.first { $0.name == name }!.model.entityVersionHashesByName == cachedHashes }
            if !same.isEmpty { return pick(same, .schemaAndModelCache) }
        }
        if !schemaFits.isEmpty { return pick(schemaFits, .schema) }
        throw CoreDataError(.persistentStoreIncompatibleVersionHash,
                            "\(storeURL.path): no version of \(bundleURL.path) fits the store"
                            + (ourHashes ? "" : " (its version hashes are Apple's, so versions were compared by schema)")
                            + ":\n" + reasons.joined(separator: "\n"),
                            userInfo: [CoreDataError.filePathErrorKey: storeURL.path,
                                       CoreDataError.reasonErrorKey: CoreDataError.MigrationReason.incompatibleModel])
    }

    /// Every version of a bundle with its name, and the current version's
    /// name; a lone model file or folder is one version.
    static func modelVersions(in url: URL) throws -> ([(name: String, model: ManagedObjectModel)], String) {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
        if exists && isDirectory.boolValue && url.pathExtension == "xcdatamodeld" {
            let bundle = try XcodeModelBundle(url: url)
            return (try bundle.versionNames.map { ($0, try bundle.model(named: $0)) }, bundle.currentVersionName)
        }
        if exists && isDirectory.boolValue && url.pathExtension == "momd" {
            let bundle = try CompiledModelBundle(url: url)
            return (try bundle.versionNames.map { ($0, try bundle.model(named: $0)) }, bundle.currentVersionName)
        }
        let name = url.lastPathComponent
        return ([(name, try ManagedObjectModel(contentsOf: url))], name)
    }
}

/// A store file's tables and entity numbers, read once to compare versions with.
private struct StoreShape {
    let path: String
    let tables: [String: [(name: String, type: String)]]
    let entityNumbers: [String: Int]
    let metadata: [String: Any]

    init(url: URL) throws {
        path = url.path
        try SQLiteStore.checkFileSignature(at: url, requireExisting: true)
        let db = try SQLiteStore.openWrappingErrors(path: url.path, mode: SQLiteStore.readOnlyOpenMode(forFileAt: url), busyTimeout: 5)
        defer { db.close() }
        do {
            tables = try SQLiteStore.readTables(db)
            guard tables["Z_PRIMARYKEY"] != nil else {
                throw CoreDataError(.persistentStoreTypeMismatch, "\(url.path) is a SQLite file but not a Core Data store (no Z_PRIMARYKEY table)",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            var numbers: [String: Int] = [:]
            for row in try db.query("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY") {
                if let n = row[0].int64Value, let name = row[1].stringValue { numbers[name] = Int(n) }
            }
            entityNumbers = numbers
            guard tables["Z_METADATA"] != nil else {
                throw CoreDataError(.persistentStoreTypeMismatch, "\(url.path) is a SQLite file but not a Core Data store (no Z_METADATA table)",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            metadata = try SQLiteMetadata.read(from: db)
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw SQLiteStore.openError(from: error, url: url)
        }
    }

    /// Why `model` is not exactly this file's schema: entities missing on
    /// either side, then tables and columns missing, typed differently or
    /// extra. Bookkeeping and history tables are not compared.
    func mismatches(with model: ManagedObjectModel) -> [String] {
        let names = Set(model.entities.map(\.name)), stored = Set(entityNumbers.keys)
        var out: [String] = []
        if !names.subtracting(stored).isEmpty { out.append("entities not in the store's Z_PRIMARYKEY: \(names.subtracting(stored).sorted().joined(separator: ", "))") }
        if !stored.subtracting(names).isEmpty { out.append("store entities the version lacks: \(stored.subtracting(names).sorted().joined(separator: ", "))") }
        guard out.isEmpty else { return out }
        let schema: SQLiteSchema
        do {
            schema = try SQLiteSchema(model: model, configurationName: nil, entityNumbers: entityNumbers)
        } catch let error as CoreDataError {
            return [error.message]
        } catch {
            return ["\(error)"]
        }
        out += schema.differences(fromFileTables: tables)
        // Core Data's own check allows extra columns; choosing between
        // versions needs an exact fit, or an older version missing a new
        // attribute would fit a newer store.
        var expected: [String: Set<String>] = [:]
        for table in schema.tables { expected[table.name] = Set(table.columns.map { $0.name.uppercased() }) }
        for join in schema.joinTables {
            expected[join.name] = Set([join.firstColumn, join.secondColumn, join.orderColumn, join.inverseOrderColumn].compactMap { $0?.uppercased() })
        }
        for (table, columns) in tables.sorted(by: { $0.key < $1.key }) where Self.isModelTable(table) {
            guard let wanted = expected[table] else { out.append("extra table \(table)"); continue }
            for column in columns where !wanted.contains(column.name.uppercased()) { out.append("extra column \(table).\(column.name)") }
        }
        return out
    }

    /// Entity and join tables (`Z…`), not Core Data's or ObjectGraph's bookkeeping and history tables.
    static func isModelTable(_ name: String) -> Bool {
        name.hasPrefix("Z") && !["Z_PRIMARYKEY", "Z_METADATA", "Z_MODELCACHE"].contains(name)
    }
}
