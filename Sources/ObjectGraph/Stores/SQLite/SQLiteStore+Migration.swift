import Foundation

/// Migrating SQLite store files (docs/MIGRATION.md): in place with SQL when
/// the mapping only changes the schema, otherwise by copying into a new file
/// and replacing the original's contents in one SQLite transaction.
extension SQLiteStore {
    /// What migrating the store at `url` with `mappingModel` would do,
    /// without changing it: the in-place SQL plan's changes, or why it would
    /// be migrated by copying.
    ///
    /// ```swift
    /// let preview = try SQLiteStore.migrationPreview(at: url, sourceModel: v1, destinationModel: v2, mappingModel: mapping)
    /// print(preview.inPlace, preview.changes)
    /// ```
    public static func migrationPreview(at url: URL, sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel,
                                        mappingModel: MappingModel) throws -> MigrationPreview {
        try sourceModel.markInUse()
        try destinationModel.markInUse()
        try mappingModel.validate(sourceModel: sourceModel, destinationModel: destinationModel)
        try checkFileSignature(at: url, requireExisting: true)
        let db = try openWrappingErrors(path: url.path, mode: readOnlyOpenMode(forFileAt: url), busyTimeout: defaultTimeout)
        defer { db.close() }
        switch try SQLiteMigrationPlan.make(source: sourceModel, destination: destinationModel, mapping: mappingModel, db: db) {
        case .inPlace(let plan): return MigrationPreview(inPlace: true, changes: plan.changes, statements: plan.statements.filter { $0 != SQLiteMigrationPlan.dropIndexesMarker })
        case .copy(let reason): return MigrationPreview(inPlace: false, changes: ["copy every object through the mapping model: \(reason)"], statements: [])
        }
    }

    /// `migrateStore(at:options:mappingModel:manager:)` for SQLite files.
    static func migrateFile(at url: URL, options: [String: Any], mappingModel: MappingModel, manager: MigrationManager) throws {
        let source = manager.sourceModel, destination = manager.destinationModel
        try source.markInUse()
        try destination.markInUse()
        try mappingModel.validate(sourceModel: source, destinationModel: destination)
        try checkFileSignature(at: url, requireExisting: true)
        let timeout = (options[PersistentStore.timeoutOption] as? Double) ?? (options[PersistentStore.timeoutOption] as? Int).map(Double.init) ?? defaultTimeout
        // journalMode nil: a failed migration must not even switch the file's journal mode.
        let db: SQLiteConnection
        do {
            db = try SQLiteConnection(path: url.path, mode: .readWrite, busyTimeout: timeout, journalMode: nil)
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw openError(from: error, url: url)
        }
        defer { db.close() }
        let outcome: SQLiteMigrationPlan.Outcome
        do {
            outcome = try SQLiteMigrationPlan.make(source: source, destination: destination, mapping: mappingModel, db: db)
        } catch let error as CoreDataError where error.code == .sqlite {
            throw MigrationManager.wrap(error, .migrationManagerSourceStore, "reading the store at \(url.path) failed", path: url.path)
        }
        switch outcome {
        case .inPlace(let plan):
            try checkMandatoryDestinationValues(db, url: url, source: source, destination: destination, mapping: mappingModel)
            try migrateInPlace(db, url: url, plan: plan, destination: destination, manager: manager)
        case .copy:
            try migrateByCopying(db, url: url, options: options, mappingModel: mappingModel, manager: manager)
        }
    }

    /// Runs the plan in one `BEGIN IMMEDIATE` transaction; on any error
    /// SQLite rolls it back and the file is as it was.
    private static func migrateInPlace(_ db: SQLiteConnection, url: URL, plan: SQLiteMigrationPlan, destination: ManagedObjectModel, manager: MigrationManager) throws {
        try manager.begin(totalUnits: Double(plan.statements.count + 3))
        var succeeded = false
        defer { manager.finish(succeeded: succeeded) }
        try manager.advance(.schema, nil)
        do {
            try db.transaction {
                let metadata = try SQLiteMetadata.read(from: db)
                for sql in plan.statements {
                    if sql == SQLiteMigrationPlan.dropIndexesMarker {
                        try dropUnwantedIndexes(db, plan: plan)
                    } else {
                        try db.prepareUncached(sql).run()
                    }
                    try manager.advance(.schema, nil, units: 1)
                }
                // The store keeps its UUID (object IDs survive: keys do not change).
                let uuid = metadata[SQLiteMetadata.storeUUIDKey] as? String ?? UUID().uuidString
                try SQLiteMetadata.write(SQLiteMetadata.newMetadata(model: destination, configurationName: nil, storeUUID: uuid), to: db)
                try db.run(SQLiteSchema.modelCacheTableSQL.replacingOccurrences(of: "CREATE TABLE", with: "CREATE TABLE IF NOT EXISTS"))
                try db.run("DELETE FROM Z_MODELCACHE")
                if let cache = try? CompiledModelWriter.modelCacheData(destination) {
                    try db.run("INSERT INTO Z_MODELCACHE (Z_CONTENT) VALUES (?)", [.blob(cache)])
                }
                try manager.advance(.save, nil, units: 1)
            }
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw MigrationManager.wrap(error, .migration, "migrating the store at \(url.path) in place failed, nothing was changed", path: url.path)
        }
        succeeded = true
    }

    /// Core Data's check before it migrates in place: each object must get
    /// a value for every required attribute (without a default) and to-one,
    /// and members for a to-many with a minimum count, or the migration fails
    /// with 134110 ("Cannot migrate store in-place: Validation error missing
    /// attribute values on mandatory destination …") and nothing changes.
    /// Under a SQL plan an object's value is its source value (copied or
    /// looked up) or nothing (a new property), so the rows tell: a query per
    /// required property of an entity that has rows.
    private static func checkMandatoryDestinationValues(_ db: SQLiteConnection, url: URL, source: ManagedObjectModel, destination: ManagedObjectModel, mapping: MappingModel) throws {
        var fileNumbers: [String: Int] = [:]
        for row in try db.query("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY") {
            if let number = row[0].int64Value, let name = row[1].stringValue { fileNumbers[name] = Int(number) }
        }
        let schema = try SQLiteSchema(model: source, configurationName: nil, entityNumbers: fileNumbers)
        for entityMapping in mapping.entityMappings where entityMapping.mappingType == .copy || entityMapping.mappingType == .transform {
            guard let sourceEntity = entityMapping.sourceEntityName.flatMap({ source.entitiesByName[$0] }),
                  let destinationEntity = entityMapping.destinationEntityName.flatMap({ destination.entitiesByName[$0] }),
                  let rows = schema.entity(named: sourceEntity.name) else { continue }
            // The mapping's instances: the source entity's own rows (the default source expression).
            func exists(_ condition: String?) throws -> Bool {
                let sql = "SELECT 1 FROM \(rows.tableName) WHERE Z_ENT = \(rows.number)\(condition.map { " AND \($0)" } ?? "") LIMIT 1"
                return !(try db.query(sql).isEmpty)
            }
            guard try exists(nil) else { continue }
            for property in destinationEntity.properties where !property.isTransient {
                let lacking: Bool
                if let attribute = property as? AttributeDescription {
                    guard !attribute.isOptional, attribute.defaultValue == nil else { continue }
                    if let key = entityMapping.attributeMappings.first(where: { $0.name == attribute.name })?.copiedSourceKey {
                        guard let column = rows.columnsByProperty[key] else { continue }
                        lacking = try exists("\(column) IS NULL")
                    } else {
                        lacking = true
                    }
                } else if let rel = property as? RelationshipDescription {
                    let looked = entityMapping.relationshipMappings.first(where: { $0.name == rel.name })?.lookedUpSourceRelationship
                    if rel.isToMany {
                        // Members carried over from the source are counted by the destination's validation.
                        guard rel.minCount > 0, looked == nil else { continue }
                        lacking = true
                    } else {
                        guard !rel.isOptional else { continue }
                        if let key = looked {
                            guard sourceEntity.relationshipsByName[key]?.isToMany == false, let column = rows.columnsByProperty[key] else { continue }
                            lacking = try exists("\(column) IS NULL")
                        } else {
                            lacking = true
                        }
                    }
                } else {
                    continue
                }
                if lacking {
                    throw MigrationManager.mandatoryValueError(entity: destinationEntity.name, property: property, sourceURL: url, destinationURL: url, inPlace: true)
                }
            }
        }
    }

    private static func dropUnwantedIndexes(_ db: SQLiteConnection, plan: SQLiteMigrationPlan) throws {
        for row in try db.query("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL") {
            guard let name = row[0].stringValue, let table = row[1].stringValue, plan.modelTables.contains(table) else { continue }
            if let wanted = plan.wantedIndexes[name], wanted == row[2].stringValue { continue }
            try db.prepareUncached("DROP INDEX \(name)").run()
        }
    }

    /// Copies every object through the migration manager into a new file
    /// beside the store, then, in one transaction on the store, replaces its
    /// tables, indexes and rows with the new file's (`ATTACH`, `DROP`,
    /// `CREATE`, `INSERT … SELECT`). A writer that committed to the store in
    /// the meantime makes it fail (134150) rather than lose that write. The
    /// new file is deleted either way; the store gets a new UUID, since
    /// every object got a new key.
    private static func migrateByCopying(_ db: SQLiteConnection, url: URL, options: [String: Any], mappingModel: MappingModel, manager: MigrationManager) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).migrating")
        // What a migration killed part-way left behind.
        MigrationManager.removeStoreFiles(at: temporary)
        defer { MigrationManager.removeStoreFiles(at: temporary) }
        let versionBefore = try db.dataVersion()
        var sourceOptions = options
        sourceOptions[PersistentStore.migratePersistentStoresAutomaticallyOption] = nil
        sourceOptions[PersistentStore.persistentHistoryTrackingKey] = nil
        try manager.migrateStore(from: url, sourceType: storeType, options: sourceOptions, with: mappingModel,
                                 toDestinationURL: temporary, destinationType: storeType, destinationOptions: [:])
        // Values stored externally: the copy's files move beside the store
        // before the swap (named by UUID, they cannot collide); the store's
        // old files go once the swap committed, the moved ones if it did not.
        let fileManager = FileManager.default
        let oldDirectory = externalDataDirectory(of: url), newDirectory = externalDataDirectory(of: temporary)
        let oldFiles = (try? fileManager.contentsOfDirectory(atPath: oldDirectory.path)) ?? []
        var moved: [URL] = []
        defer { try? fileManager.removeItem(at: newDirectory.deletingLastPathComponent()) }
        if let files = try? fileManager.contentsOfDirectory(atPath: newDirectory.path), !files.isEmpty {
            try fileManager.createDirectory(at: oldDirectory, withIntermediateDirectories: true)
            for name in files {
                let target = oldDirectory.appendingPathComponent(name)
                try fileManager.moveItem(at: newDirectory.appendingPathComponent(name), to: target)
                moved.append(target)
            }
        }
        var swapped = false
        defer {
            if swapped {
                for name in oldFiles { try? fileManager.removeItem(at: oldDirectory.appendingPathComponent(name)) }
            } else {
                for file in moved { try? fileManager.removeItem(at: file) }
            }
        }
        do {
            try db.run("ATTACH DATABASE ? AS migrated", [.text(temporary.path)])
            defer { _ = try? db.execute("DETACH DATABASE migrated") }
            try db.transaction {
                guard try db.dataVersion() == versionBefore else {
                    throw CoreDataError(.migrationManagerSourceStore, "the store at \(url.path) was written to while it was being migrated; nothing was changed, migrate it again",
                                        userInfo: [CoreDataError.filePathErrorKey: url.path])
                }
                let objects = try db.query("SELECT type, name FROM main.sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND sql IS NOT NULL")
                for kind in ["trigger", "view", "table"] {
                    for row in objects where row[0].stringValue == kind {
                        guard let name = row[1].stringValue else { continue }
                        try db.prepareUncached("DROP \(kind.uppercased()) IF EXISTS main.\"\(name)\"").run()
                    }
                }
                let created = try db.query("SELECT type, name, sql FROM migrated.sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND sql IS NOT NULL ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, rowid")
                for row in created {
                    guard let type = row[0].stringValue, let name = row[1].stringValue, let sql = row[2].stringValue else { continue }
                    try db.prepareUncached(sql).run()
                    if type == "table" {
                        try db.prepareUncached("INSERT INTO main.\"\(name)\" SELECT * FROM migrated.\"\(name)\"").run()
                    }
                }
            }
            swapped = true
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw MigrationManager.wrap(error, .migrationManagerDestinationStore, "replacing the store at \(url.path) with its migrated copy failed, nothing was changed", path: url.path)
        }
    }

    /// `.<StoreName>_SUPPORT/_EXTERNAL_DATA` beside a store file (see `externalDataDirectory`).
    static func externalDataDirectory(of url: URL) -> URL {
        url.deletingLastPathComponent().appendingPathComponent(".\(url.deletingPathExtension().lastPathComponent)_SUPPORT")
            .appendingPathComponent("_EXTERNAL_DATA")
    }

    /// `sourceModel(forStoreAt:metadata:searchURLs:)` for SQLite files:
    /// version hashes first (stores ObjectGraph wrote), then each model bundle
    /// among `searchURLs` by schema and cached model
    /// (`ManagedObjectModel.version(matchingStoreAt:inBundle:)`, stores Apple
    /// wrote), then the model the store caches in `Z_MODELCACHE`.
    func findSourceModel(forStoreAt url: URL, metadata: [String: Any], searchURLs: [URL]) throws -> ManagedObjectModel? {
        if let byHashes = try ManagedObjectModel.mergedModel(from: searchURLs, forStoreMetadata: metadata) { return byHashes }
        for location in ManagedObjectModel.modelLocations(in: searchURLs) {
            if let match = try? ManagedObjectModel.version(matchingStoreAt: url, inBundle: location) { return match.model }
        }
        return try Self.cachedModel(forStoreAt: url)
    }

    /// `checkStoreCompatibility(at:)` for SQLite files: the checks `load()`
    /// makes (hashes, the cached model of a store Apple wrote, the schema)
    /// through a read-only connection.
    func checkFileCompatibility(at url: URL) throws {
        try Self.checkFileSignature(at: url, requireExisting: true)
        let reader = try Self.openWrappingErrors(path: url.path, mode: Self.readOnlyOpenMode(forFileAt: url), busyTimeout: Self.defaultTimeout)
        defer { reader.close() }
        _ = try validate(reader, url: url)
    }
}

/// What migrating a SQLite store would do (`SQLiteStore.migrationPreview`).
///
/// ```swift
/// let preview = try SQLiteStore.migrationPreview(at: url, sourceModel: v1, destinationModel: v2, mappingModel: mapping)
/// if preview.inPlace { preview.statements.forEach { print($0) } }   // ALTER TABLE ZNOTE ADD COLUMN ZTITLE VARCHAR
/// ```
public struct MigrationPreview: Sendable {
    /// True when SQL changes the tables in place; false when every object is copied.
    public let inPlace: Bool
    /// One line per change (tables, columns, join tables, numbers), or why it copies.
    public let changes: [String]
    /// The SQL an in-place migration runs, in order.
    public let statements: [String]
}
