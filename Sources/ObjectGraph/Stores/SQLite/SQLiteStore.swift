// Over 600 lines, not split yet (issue 31): opening and schema, fetching,
// and the save pipeline (`save`, `writeSave`, `performInTransaction`) share
// private state (the connection, external-file bookkeeping, the history
// position). The planned split is `+Open`, `+Fetch`, `+Save` once that
// state has one owner; batch requests and history already live apart.
import Foundation

/// A store in one SQLite file laid out exactly as Apple's Core Data lays it
/// out (`NSSQLiteStoreType`), so files move between Core Data on Apple
/// platforms and ObjectGraph on Linux.
///
/// Opening an existing file resolves entities by name through `Z_PRIMARYKEY`
/// (never by position), checks the version hashes, then checks every table
/// and column the model needs. Apple's version hashes are not reproducible
/// here (ObjectGraph's hasher is not byte-compatible), so a file Apple wrote
/// is accepted when its hash keys name exactly the model's entities and its
/// schema matches; a file ObjectGraph wrote must match its hashes byte for byte.
///
/// ```swift
/// let store = SQLiteStore(model: model, configurationName: nil,
///                         url: URL(fileURLWithPath: "/var/db/Sync.sqlite"), options: [:])
/// try store.load()
/// let bots = try store.fetchSnapshots(FetchRequest(entityName: "Bot")).snapshots
/// ```
public final class SQLiteStore: PersistentStore {
    public override class var storeType: String { "SQLite" }

    /// `NSSQLitePragmasOption`, `NSSQLiteAnalyzeOption` and
    /// `NSSQLiteManualVacuumOption`: see `SQLiteStoreOptions`.
    public static let pragmasOption = SQLiteStoreOptions.pragmasKey
    public static let analyzeOption = SQLiteStoreOptions.analyzeKey
    public static let manualVacuumOption = SQLiteStoreOptions.manualVacuumKey
    /// Seconds to wait for another connection's lock; the default is 5.
    public static let defaultTimeout: TimeInterval = 5
    /// With `readOnlyOption`: open the file as an ordinary SQLite reader
    /// (shared locks, WAL index) instead of `immutable=1`, so every commit
    /// other connections and processes make while the store is open is seen,
    /// and nothing is read torn while they write. The cost: SQLite creates
    /// `-wal` and `-shm` beside a WAL-mode file that has none (and leaves
    /// them), so the directory must be writable. For readers that follow a
    /// store other programs write (the change log, `storesyncctl log --follow`).
    ///
    /// ```swift
    /// let store = SQLiteStore(model: model, configurationName: nil, url: url,
    ///                         options: [PersistentStore.readOnlyOption: true, SQLiteStore.liveReadOnlyOption: true])
    /// ```
    public static let liveReadOnlyOption = "ObjectGraphLiveReadOnlyOption"

    public private(set) var schema: SQLiteSchema?
    private var connection: SQLiteConnection?
    private var entityByNumber: [Int: SQLiteSchema.EntityMapping] = [:]
    /// The metadata as last read from or written to the file, to notice
    /// changes made through `metadata` (PS-12: persisted at the next save).
    private var storedMetadata: [String: Any] = [:]
    /// The file's persistent history layout when it records history
    /// (`SQLiteStore+History.swift`), and why not when its history is damaged.
    var history: SQLiteHistorySchema?
    var historyProblem: CoreDataError?
    /// What `noticeRemoteCommit()` saw last.
    var lastSeenDataVersion: Int64?
    var lastSeenRemoteToken: PersistentHistoryToken?
    /// The position of the last change the latest save recorded (nil when it recorded none).
    var lastSaveHistoryToken: PersistentHistoryToken?
    /// The history position before the save in progress, and the global
    /// identifiers of the rows the latest save changed.
    var historySaveStart: Int64 = 0
    var lastSaveGlobalIdentifiers: [SavedRowKey: UUID] = [:]
    /// Serialises calls: a connection and its cached statements are not thread-safe.
    let lock = NSRecursiveLock()

    private var timeout: TimeInterval {
        switch options[PersistentStore.timeoutOption] {
        case let n as Double: return n
        case let n as Int: return TimeInterval(n)
        case let n as NSNumber: return n.doubleValue
        default: return Self.defaultTimeout
        }
    }

    public required init(model: ManagedObjectModel, configurationName: String?, url: URL?, options: [String: Any]) {
        super.init(model: model, configurationName: configurationName, url: url, options: options)
    }

    deinit { connection?.close() }

    /// Closes the file; the store cannot be used afterwards.
    public func close() {
        lock.lock(); defer { lock.unlock() }
        connection?.close()
        connection = nil
    }

    // MARK: - Coordinator hooks

    /// The coordinator's class-level metadata read (PC-23) for SQLite files.
    public override class func metadataForPersistentStore(at url: URL) throws -> [String: Any] {
        try metadataForStore(at: url)
    }

    /// The coordinator's class-level metadata write (PS-15) for SQLite files.
    public override class func setMetadata(_ metadata: [String: Any], forPersistentStoreAt url: URL) throws {
        try setMetadata(metadata, forStoreAt: url)
    }

    /// A non-atomic store releases its connection and opens one at the new
    /// place (PC-14, `setURL:forPersistentStore:`); no file is moved.
    public override func relocate(to url: URL) throws {
        close()
        try super.relocate(to: url)
        try load()
    }

    /// Removing the store from its coordinator closes the file.
    public override func willRemoveFromPersistentStoreCoordinator() {
        close()
    }

    // MARK: - Persistent history (SQLiteStore+History.swift)

    public override var recordsPersistentHistory: Bool { isPersistentHistoryEnabled }

    public override var historyTokenOfLastSave: PersistentHistoryToken? {
        lock.lock(); defer { lock.unlock() }
        return lastSaveHistoryToken
    }

    public override func globalIdentifiers(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: UUID] {
        try historyGlobalIdentifiers(for: ids)
    }

    public override func objectID(forGlobalIdentifier globalIdentifier: UUID) throws -> ManagedObjectID? {
        try historyObjectID(forGlobalIdentifier: globalIdentifier)
    }

    public override func objectIDs(forGlobalIdentifiers globalIdentifiers: [UUID]) throws -> [UUID: ManagedObjectID] {
        try historyObjectIDs(forGlobalIdentifiers: globalIdentifiers)
    }

    public override func currentPersistentHistoryToken() throws -> PersistentHistoryToken? {
        try historyCurrentToken()
    }

    public override func executeHistoryRequest(_ request: PersistentHistoryChangeRequest) throws -> PersistentHistoryResult {
        try historyExecute(request)
    }

    // MARK: - Opening

    public override func load() throws {
        lock.lock(); defer { lock.unlock() }
        guard let url, url.isFileURL else {
            throw CoreDataError(.persistentStoreOpen, "a SQLite store needs a file URL, got \(url?.absoluteString ?? "nil")")
        }
        // Refuse bad options before the file is created or touched.
        storeOptions = try SQLiteStoreOptions(options)
        connection?.close()
        connection = nil
        let path = url.path
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let size = (attributes?[.size] as? NSNumber)?.intValue ?? 0
        if isInMemoryDatabase {
            try createNew(url: url)
        } else if attributes != nil && size > 0 {
            try openExisting(url: url)
        } else {
            if isReadOnly {
                throw CoreDataError(.persistentStoreOpen, "no store file at \(path) to open read-only",
                                    userInfo: [CoreDataError.filePathErrorKey: path])
            }
            try createNew(url: url)
        }
    }

    private func openExisting(url: URL) throws {
        try Self.checkFileSignature(at: url, requireExisting: true)
        // Validate through a read-only connection first, so a file we refuse
        // (wrong hashes, foreign schema, corrupt) is never written to: even
        // switching the journal mode would change its header.
        let readerMode = isReadOnly && !boolOption(Self.liveReadOnlyOption) ? Self.readOnlyOpenMode(forFileAt: url) : .readOnly
        let reader = try Self.openWrappingErrors(path: url.path, mode: readerMode, busyTimeout: timeout)
        let (fileMetadata, fileSchema) = try validate(reader, url: url)
        let db: SQLiteConnection
        if isReadOnly {
            db = reader
        } else {
            reader.close()
            db = try Self.openWrappingErrors(path: url.path, mode: .readWrite, busyTimeout: timeout)
        }
        do {
            try storeOptions.applyPragmas(to: db, writable: !isReadOnly)
            try storeOptions.maintain(db, writable: !isReadOnly)
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            db.close()
            throw Self.openError(from: error, url: url)
        }
        connection = db
        metadata = fileMetadata
        storedMetadata = fileMetadata
        try install(fileSchema)
        try loadHistory(db, schema: fileSchema)
    }

    /// True for a store at `/dev/null`: Core Data's idiom for a throw-away
    /// SQLite store (tests, previews) keeps the database in memory, SQLite's
    /// `:memory:`, gone when the store closes. Each such store is a database
    /// of its own; large binary values stay in their rows (there is no
    /// folder beside the file for external storage).
    ///
    /// ```swift
    /// try coordinator.addPersistentStore(ofType: SQLiteStore.storeType, at: URL(fileURLWithPath: "/dev/null"))
    /// ```
    public var isInMemoryDatabase: Bool { url?.isFileURL == true && url?.path == Self.inMemoryDatabasePath }

    /// The path Core Data opens as an in-memory SQLite database.
    public static let inMemoryDatabasePath = "/dev/null"

    private func createNew(url: URL) throws {
        let inMemory = isInMemoryDatabase
        if !inMemory {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        let newSchema = try SQLiteSchema(model: model, configurationName: configurationName)
        let existedBefore = inMemory || FileManager.default.fileExists(atPath: url.path)
        // Opening /dev/null itself fails at the first write (`journal_mode=WAL`
        // gives SQLITE_IOERR): the file cannot hold a database.
        let db = try Self.openWrappingErrors(path: inMemory ? ":memory:" : url.path, mode: .readWriteCreate, busyTimeout: timeout)
        let newMetadata = SQLiteMetadata.newMetadata(model: model, configurationName: configurationName, storeUUID: identifier)
        do {
            try storeOptions.applyPragmas(to: db, writable: true)
            try db.transaction {
                for sql in newSchema.createStatements() { try db.prepareUncached(sql).run() }
                for name in newSchema.entityNames {
                    let mapping = newSchema.entitiesByName[name]!
                    try db.run("INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, ?, 0)",
                               [.integer(Int64(mapping.number)), .text(name), .integer(Int64(mapping.superNumber))])
                }
                try SQLiteMetadata.write(newMetadata, to: db)
                // The model it was made with, as Apple's Core Data caches it, so
                // tools holding only the file (ours, Apple's) find the model.
                if let cache = try? CompiledModelWriter.modelCacheData(model) {
                    try db.run("INSERT INTO Z_MODELCACHE (Z_CONTENT) VALUES (?)", [.blob(cache)])
                }
            }
            try storeOptions.maintain(db, writable: true)
        } catch let error as CoreDataError {
            db.close()
            // A half-created file would later be refused as "not a Core Data
            // store"; remove what this call created.
            if !existedBefore {
                for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
            }
            if error.code == .persistentStoreTimeout { throw error }
            throw CoreDataError(.persistentStoreOpen, "creating the store at \(url.path) failed: \(error.message)",
                                userInfo: [CoreDataError.underlyingErrorKey: error.userInfo[CoreDataError.underlyingErrorKey] ?? error,
                                           CoreDataError.filePathErrorKey: url.path])
        }
        connection = db
        metadata = newMetadata
        storedMetadata = newMetadata
        try install(newSchema)
        try loadHistory(db, schema: newSchema)
    }

    /// Which columns of a table row hold which properties of one entity,
    /// worked out once per entity rather than per row. A class in an array
    /// indexed by `Z_ENT`: reading it per row costs one retain, where a
    /// dictionary of `EntityMapping` structs cost a hash and a copy of every
    /// field (it showed at the top of a `perf` profile of full fetches).
    final class RowPlan {
        let entity: EntityDescription
        /// `slot`: where the value goes in the snapshot (`EntityLayout`).
        var attributes: [(name: String, attribute: AttributeDescription, column: Int, external: Bool, slot: Int)] = []
        var toOnes: [(name: String, destination: EntityDescription?, column: Int, entityColumn: Int?, slot: Int)] = []
        let slotCount: Int
        /// What fills each snapshot slot, in slot order: an entry of
        /// `attributes` or `toOnes`, or nothing (no column). Built once, so a
        /// row's slots are initialized in one pass, each exactly once.
        enum Fill { case attribute(Int), toOne(Int), empty }
        private(set) lazy var fills: [Fill] = {
            var fills = [Fill](repeating: .empty, count: slotCount)
            for (n, entry) in attributes.enumerated() where entry.slot < slotCount { fills[entry.slot] = .attribute(n) }
            for (n, entry) in toOnes.enumerated() where entry.slot < slotCount { fills[entry.slot] = .toOne(n) }
            return fills
        }()
        init(entity: EntityDescription) {
            self.entity = entity
            slotCount = EntityLayout.of(entity).snapshotSlotCount
        }
    }
    private var rowPlans: [RowPlan?] = []

    func rowPlan(_ number: Int64) -> RowPlan? {
        number >= 0 && number < rowPlans.count ? rowPlans[Int(number)] : nil
    }
    private var mappingsByEntity: [ObjectIdentifier: SQLiteSchema.EntityMapping] = [:]
    /// Entity number → number of the root entity whose `Z_MAX` hands out its keys.
    private var keyEntityNumbers: [Int: Int] = [:]
    /// `NSSQLitePragmasOption`, `NSSQLiteAnalyzeOption`, `NSSQLiteManualVacuumOption`, read at `load()`.
    private var storeOptions = SQLiteStoreOptions()

    private func install(_ newSchema: SQLiteSchema) throws {
        if let connection { try SQLitePredicateCompiler.register(on: connection) }
        schema = newSchema
        let highestNumber = newSchema.entitiesByName.values.map(\.number).max() ?? 0
        // Core Data numbers entities 1…n; a file claiming more is not one of its stores
        // (and must not make the row-plan array huge).
        guard highestNumber < 1 << 16 else {
            throw CoreDataError(.persistentStoreIncompatibleSchema, "Z_PRIMARYKEY gives an entity number of \(highestNumber); Core Data numbers entities from 1")
        }
        entityByNumber = [:]
        rowPlans = Array(repeating: nil, count: highestNumber + 1)
        mappingsByEntity = [:]
        keyEntityNumbers = [:]
        for mapping in newSchema.entitiesByName.values {
            entityByNumber[mapping.number] = mapping
            mappingsByEntity[ObjectIdentifier(mapping.entity)] = mapping
            if let table = newSchema.table(named: mapping.tableName), let root = newSchema.entity(named: table.rootEntityName) {
                keyEntityNumbers[mapping.number] = root.number
            }
            guard let table = newSchema.table(named: mapping.tableName) else { continue }
            var index: [String: Int] = [:]
            for (i, c) in table.columns.enumerated() { index[c.name] = i }
            let plan = RowPlan(entity: mapping.entity)
            let layout = EntityLayout.of(mapping.entity)
            for property in mapping.entity.properties where !property.isTransient {
                guard let name = mapping.columnsByProperty[property.name], let i = index[name],
                      let slot = layout.slotIndex[property.name], slot < layout.snapshotSlotCount else { continue }
                if let attribute = property as? AttributeDescription {
                    plan.attributes.append((attribute.name, attribute, i, Self.mayStoreExternally(attribute), slot))
                } else if let rel = property as? RelationshipDescription {
                    plan.toOnes.append((rel.name, rel.destinationEntity, i, mapping.entityColumnsByRelationship[rel.name].flatMap { index[$0] }, slot))
                }
            }
            rowPlans[mapping.number] = plan
        }
        insertSQL = [:]
        updateColumnsByEntity = [:]
    }

    /// Reads and checks metadata, entity numbers and schema; returns the
    /// metadata and the schema built with the file's entity numbers.
    func validate(_ db: SQLiteConnection, url: URL) throws -> ([String: Any], SQLiteSchema) {
        do {
            let fileTables = try Self.readTables(db)
            guard fileTables["Z_METADATA"] != nil, fileTables["Z_PRIMARYKEY"] != nil else {
                throw CoreDataError(.persistentStoreTypeMismatch, "\(url.path) is a SQLite file but not a Core Data store (no Z_METADATA/Z_PRIMARYKEY)",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            let fileMetadata = try SQLiteMetadata.read(from: db)
            guard (fileMetadata[SQLiteMetadata.storeTypeKey] as? String) == Self.storeType else {
                throw CoreDataError(.persistentStoreTypeMismatch, "\(url.path) holds a store of type \(fileMetadata[SQLiteMetadata.storeTypeKey] ?? "nil"), not SQLite",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            try checkModelCompatibility(withStoreMetadata: fileMetadata)
            try checkCachedModel(db, metadata: fileMetadata, url: url)
            var numbers: [String: Int] = [:]
            for row in try db.query("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY") {
                if let n = row[0].int64Value, let name = row[1].stringValue { numbers[name] = Int(n) }
            }
            let fileSchema = try SQLiteSchema(model: model, configurationName: configurationName, entityNumbers: numbers)
            let differences = fileSchema.differences(fromFileTables: fileTables)
            guard differences.isEmpty else {
                throw CoreDataError(.persistentStoreIncompatibleSchema,
                                    "the store at \(url.path) does not have the model's schema: " + differences.joined(separator: "; "),
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            return (fileMetadata, fileSchema)
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw Self.openError(from: error, url: url)
        }
    }

    /// The opening rule for version hashes (`docs/SQLITE-LAYOUT.md`,
    /// "Opening rules" 4), applied by the store at `load()` and again by the
    /// coordinator: a file ObjectGraph wrote (`ObjectGraphVersionHashScheme`
    /// present) must match byte for byte; a file Apple's Core Data wrote,
    /// whose hashes cannot be recomputed here, must name exactly the model's
    /// entities (a superset for a named configuration), and the schema
    /// check decides the rest.
    public override func checkModelCompatibility(withStoreMetadata metadata: [String: Any]) throws {
        if boolOption(Self.ignoreVersioningOption) { return }
        if (metadata[SQLiteMetadata.hashSchemeKey] as? Int) == SQLiteMetadata.currentHashScheme {
            return try super.checkModelCompatibility(withStoreMetadata: metadata)
        }
        let stored = metadata[SQLiteMetadata.versionHashesKey] as? [String: Data] ?? [:]
        let names = Set(entities.map(\.name))
        let keys = Set(stored.keys)
        guard configurationName == nil ? keys == names : names.isSubset(of: keys) else {
            throw incompatibleVersionHashError()
        }
    }

    /// A store Apple's Core Data wrote holds hashes ObjectGraph cannot
    /// recompute; when it caches the model it was written with
    /// (`Z_MODELCACHE`), that model's hashes and this store's model's,
    /// both from ObjectGraph's hasher, must be equal, as Apple's own
    /// comparison of its hashes would require (134100 naming the entities
    /// otherwise). A cache that cannot be decoded decides nothing.
    private func checkCachedModel(_ db: SQLiteConnection, metadata: [String: Any], url: URL) throws {
        guard !boolOption(Self.ignoreVersioningOption),
              (metadata[SQLiteMetadata.hashSchemeKey] as? Int) != SQLiteMetadata.currentHashScheme,
              let cached = try? Self.cachedModel(from: db, url: url) else { return }
        let differing = entities.filter { cached.entitiesByName[$0.name]?.versionHash != $0.versionHash }.map(\.name).sorted()
        guard !differing.isEmpty else { return }
        throw incompatibleVersionHashError(differing: differing, metadata: metadata)
    }

    // MARK: - Migration (SQLiteStore+Migration.swift)

    /// In place with SQL when the mapping only changes the schema, else by
    /// copying every object and replacing the file's contents in one
    /// transaction; see docs/MIGRATION.md.
    public override class func migrateStore(at url: URL, options: [String: Any], mappingModel: MappingModel, manager: MigrationManager) throws {
        try migrateFile(at: url, options: options, mappingModel: mappingModel, manager: manager)
    }

    /// Hashes, the cached model of a store Apple wrote, and the schema.
    public override func checkStoreCompatibility(at url: URL) throws {
        try checkFileCompatibility(at: url)
    }

    /// Hashes, then model bundles by schema and cached model, then `Z_MODELCACHE`.
    public override func sourceModel(forStoreAt url: URL, metadata: [String: Any], searchURLs: [URL]) throws -> ManagedObjectModel? {
        try findSourceModel(forStoreAt: url, metadata: metadata, searchURLs: searchURLs)
    }

    /// Every table of the file with its columns' names and declared types.
    static func readTables(_ db: SQLiteConnection) throws -> [String: [(name: String, type: String)]] {
        var out: [String: [(name: String, type: String)]] = [:]
        for row in try db.query("SELECT name FROM sqlite_master WHERE type = 'table'") {
            guard let name = row[0].stringValue else { continue }
            out[name] = try db.query("SELECT name, type FROM pragma_table_info(?)", [.text(name)]).map {
                (name: $0[0].stringValue ?? "", type: $0[1].stringValue ?? "")
            }
        }
        return out
    }

    /// How a read-only store opens its file so that opening leaves no trace.
    ///
    /// A plain read-only open of a WAL-mode file (Core Data's default) makes
    /// SQLite create `-wal` and `-shm` files beside it, which it cannot
    /// remove again, and fails outright in a read-only directory. When the
    /// file is in WAL mode and has no non-empty `-wal` file, every committed
    /// transaction is in the main file, so it is opened `immutable=1`: no
    /// locks and no side files. The trade-off: a writer that starts while
    /// the store is open is not seen, and its changes may be read torn.
    /// A file with a pending `-wal` is opened plainly read-only, because
    /// its newest transactions live only in that `-wal` (SQLite then uses
    /// the existing side files, creating `-shm` if it is missing).
    ///
    /// The header is read through SQLite's file layer, never `FileHandle`:
    /// see `SQLiteConnection.readFileHeader(path:count:)`.
    static func readOnlyOpenMode(forFileAt url: URL) -> SQLiteConnection.OpenMode {
        guard let header = (try? SQLiteConnection.readFileHeader(path: url.path, count: 20)) ?? nil else { return .readOnly }
        // Bytes 18 and 19 are the write and read format versions: 2 is WAL.
        guard header.count == 20, header[18] == 2 || header[19] == 2 else { return .readOnly }
        let walSize = (try? FileManager.default.attributesOfItem(atPath: url.path + "-wal"))?[.size] as? NSNumber
        return (walSize?.intValue ?? 0) > 0 ? .readOnly : .readOnlyImmutable
    }

    /// SQLite's 16-byte file signature.
    static let sqliteSignature = Data("SQLite format 3\0".utf8)

    /// Refuses a file that is not SQLite before SQLite touches it (134010),
    /// and a missing one when it must exist (260).
    static func checkFileSignature(at url: URL, requireExisting: Bool) throws {
        guard FileManager.default.fileExists(atPath: url.path) else {
            if requireExisting {
                throw CoreDataError(.fileReadNoSuchFile, "no store file at \(url.path)", userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
            return
        }
        // Through SQLite's file layer, not FileHandle: closing a descriptor
        // of a file drops every lock this process holds on it.
        guard let head = try SQLiteConnection.readFileHeader(path: url.path, count: 16) else {
            throw CoreDataError(.persistentStoreOpen, "cannot read \(url.path)", userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        guard head == sqliteSignature else {
            throw CoreDataError(.persistentStoreTypeMismatch, "\(url.path) is not a SQLite store file",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
    }

    static func openWrappingErrors(path: String, mode: SQLiteConnection.OpenMode, busyTimeout: TimeInterval) throws -> SQLiteConnection {
        do {
            return try SQLiteConnection(path: path, mode: mode, busyTimeout: busyTimeout)
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw openError(from: error, url: URL(fileURLWithPath: path))
        }
    }

    /// The Core Data error for a SQLite failure while opening: 134010 when
    /// SQLite says it is not a database, 134090 when locked past the timeout,
    /// otherwise 134080; the raw SQLite error stays underneath.
    static func openError(from error: CoreDataError, url: URL) -> CoreDataError {
        let code: CoreDataError.Code
        switch error.sqliteResultCode {
        case 26: code = .persistentStoreTypeMismatch   // SQLITE_NOTADB
        case 5, 6: code = .persistentStoreTimeout       // SQLITE_BUSY, SQLITE_LOCKED
        default: code = .persistentStoreOpen
        }
        var info = error.userInfo
        info.removeValue(forKey: NSLocalizedDescriptionKey)
        info[CoreDataError.filePathErrorKey] = url.path
        return CoreDataError(code, "opening the SQLite store at \(url.path) failed: \(error.message)", userInfo: info)
    }

    /// Reads a store file's metadata without opening it as a store (PC-23).
    public static func metadataForStore(at url: URL) throws -> [String: Any] {
        try SQLiteMetadata.metadataForStore(at: url)
    }

    /// The value of `PRAGMA name` on the store's connection: how tests see
    /// what `NSSQLitePragmasOption` set.
    func pragmaValue(_ name: String) throws -> SQLiteValue? {
        lock.lock(); defer { lock.unlock() }
        return try openConnection().0.query("PRAGMA \(name)").first?.first
    }

    /// SQLite's `PRAGMA data_version` for this store's connection: it changes
    /// when another connection or process commits to the file, so callers
    /// can tell whether what they cached from the store may be stale.
    ///
    /// ```swift
    /// let seen = try store.dataVersion()
    /// // … later
    /// if try store.dataVersion() != seen { /* refetch */ }
    /// ```
    public func dataVersion() throws -> Int64 {
        lock.lock(); defer { lock.unlock() }
        return try openConnection().0.dataVersion()
    }

    /// Statements run on the store's connection so far (see
    /// `SQLiteConnection.executedStatementCount`); tests count queries with it.
    var executedStatementCount: Int {
        lock.lock(); defer { lock.unlock() }
        return connection?.executedStatementCount ?? 0
    }

    // MARK: - Reading

    func openConnection() throws -> (SQLiteConnection, SQLiteSchema) {
        guard let connection, let schema else {
            throw CoreDataError(.persistentStoreOperation, "the SQLite store at \(url?.path ?? "?") is not loaded (call load()) or was closed")
        }
        return (connection, schema)
    }

    private func mapping(for entity: EntityDescription) throws -> SQLiteSchema.EntityMapping {
        // By identity first: hashing the entity name for every row of a save shows in profiles.
        if let mapping = mappingsByEntity[ObjectIdentifier(entity)], mapping.entity === entity { return mapping }
        guard let mapping = schema?.entity(named: entity.name) else {
            throw CoreDataError(.persistentStoreOperation, "entity \(entity.name) is not in this store's configuration",
                                userInfo: [CoreDataError.entityNameErrorKey: entity.name])
        }
        return mapping
    }

    private func selectColumns(_ table: SQLiteSchema.Table) -> String {
        table.columns.map(\.name).joined(separator: ", ")
    }

    /// A snapshot from a row selected with `selectColumns(table)`.
    private func snapshot(fromRow row: [SQLiteValue], table: SQLiteSchema.Table, storeID: String) throws -> StoreSnapshot? {
        try snapshot(storeID: storeID) { row[$0] }
    }

    /// A snapshot from the current row of a statement selecting a table's
    /// columns in order, reading only the columns the row's entity uses.
    /// `storeID` is the store's identifier, read once per fetch by the
    /// caller: `identifier` looks it up in `metadata` on every call.
    private func snapshot(storeID: String, _ column: (Int) -> SQLiteValue) throws -> StoreSnapshot? {
        guard let pk = column(0).int64Value, let ent = column(1).int64Value, let plan = rowPlan(ent) else { return nil }
        func value(_ fill: RowPlan.Fill) throws -> Any? {
            switch fill {
            case .empty:
                return nil
            case .attribute(let n):
                let (_, attribute, i, external, _) = plan.attributes[n]
                let stored = external ? try unframedExternalBinary(column(i), attribute: attribute, entity: plan.entity) : column(i)
                return try SQLiteValueCodec.decode(stored, for: attribute)
            case .toOne(let n):
                let (_, declared, i, entityColumn, _) = plan.toOnes[n]
                guard let key = column(i).int64Value else { return nil }
                var destination = declared
                if let entityColumn, let n = column(entityColumn).int64Value, let other = rowPlan(n) { destination = other.entity }
                guard let destination else { return nil }
                let target = ManagedObjectID(entity: destination, storeIdentifier: storeID, primaryKey: key)
                target.persistentStore = self
                return target
            }
        }
        // Each slot initialized once, in order (assigning over nil slots
        // went through the existential's value witness per value).
        let fills = plan.fills
        let slots = try [Any?](unsafeUninitializedCapacity: fills.count) { buffer, initialized in
            for fill in fills {
                (buffer.baseAddress! + initialized).initialize(to: try value(fill))
                initialized += 1
            }
        }
        let id = ManagedObjectID(entity: plan.entity, storeIdentifier: storeID, primaryKey: pk)
        id.persistentStore = self
        return StoreSnapshot(objectID: id, version: column(2).int64Value ?? 0, slots: slots)
    }

    func entityNumbersSQL(_ numbers: [Int]) -> String {
        numbers.count == 1 ? "Z_ENT = \(numbers[0])" : "Z_ENT IN (\(numbers.map(String.init).joined(separator: ", ")))"
    }

    /// The rows of the entity (and sub-entities when asked) that match the
    /// request. When the compiler translates the predicate and every sort
    /// descriptor exactly (see `SQLitePredicateCompiler`), SQL filters,
    /// orders, offsets and limits, and the result is exact. When only the
    /// predicate compiles, the matching rows come back in primary-key order,
    /// unlimited, `isExact` false; when the predicate does not compile, every
    /// row of the entity does. The caller then finishes in memory
    /// (`finishedSnapshots(_:)`, or the coordinator).
    public override func fetchSnapshots(_ request: AnyFetchRequest) throws -> StoreFetchResult {
        try fetchSnapshots(request, each: { _, _ in })
    }

    public override func fetchSnapshots(_ request: AnyFetchRequest, each: (StoreSnapshot, _ isExact: Bool) throws -> Void) throws -> StoreFetchResult {
        lock.lock(); defer { lock.unlock() }
        let (db, schema) = try openConnection()
        guard let name = request.entityName, let mapping = schema.entity(named: name),
              let table = schema.table(named: mapping.tableName) else {
            throw CoreDataError(.persistentStoreOperation, "fetch request entity \(request.entityName ?? "nil") is not in this store",
                                userInfo: [CoreDataError.entityNameErrorKey: request.entityName ?? ""])
        }
        let numbers = request.includesSubentities ? mapping.numbersIncludingSubentities : [mapping.number]
        let columns = table.columns.map { "t0.\($0.name)" }.joined(separator: ", ")
        // A table holds only its root entity's hierarchy: when the fetch
        // wants all of it, a Z_ENT filter would only make SQLite walk the
        // Z_ENT index and look every row up again instead of scanning.
        let wholeTable = Set(numbers) == Set(schema.entity(named: table.rootEntityName)?.numbersIncludingSubentities ?? [])
        let entityFilter = wholeTable ? "1" : "t0." + entityNumbersSQL(numbers)

        var compiler = SQLitePredicateCompiler(schema: schema, storeIdentifier: identifier)
        var joins: [String] = []
        var condition = ""
        var bindings: [SQLiteValue] = []
        var orderBy = ["t0.Z_PK"]
        var isExact = true
        if let predicate = request.predicate, predicate != .truePredicate {
            if let compiled = compiler.compile(predicate, for: mapping) {
                joins = compiled.joins
                condition = " AND (\(compiled.sql))"
                bindings = compiled.bindings
            } else {
                isExact = false
            }
        } else {
            _ = compiler.compile(.truePredicate, for: mapping)
        }
        if isExact && !request.sortDescriptors.isEmpty {
            if let terms = compiler.orderBy(request.sortDescriptors, for: mapping) {
                orderBy = terms
                joins = compiler.joins
            } else {
                isExact = false
            }
        }
        var sql = "SELECT \(columns) FROM \(table.name) t0\(joins.map { " " + $0 }.joined()) WHERE \(entityFilter)\(condition) ORDER BY \(orderBy.joined(separator: ", "))"
        if isExact && (request.fetchLimit > 0 || request.fetchOffset > 0) {
            sql += " LIMIT ?\(bindings.count + 1) OFFSET ?\(bindings.count + 2)"
            bindings += [.integer(request.fetchLimit > 0 ? Int64(request.fetchLimit) : -1), .integer(Int64(max(0, request.fetchOffset)))]
        }
        // Compiled SQL differs per predicate: prepare it uncached rather than
        // let the statement cache grow with every distinct query.
        let statement = condition.isEmpty && request.sortDescriptors.isEmpty ? try db.prepare(sql) : try db.prepareUncached(sql)
        // Rows are turned into snapshots as SQLite steps, without an
        // intermediate array of rows.
        var snapshots: [StoreSnapshot] = []
        let storeID = identifier
        try statement.forEachRow(bindings) { row in
            if let snapshot = try snapshot(storeID: storeID, { row.column($0) }) {
                snapshots.append(snapshot)
                try each(snapshot, isExact)
            }
        }
        return StoreFetchResult(snapshots: snapshots, isExact: isExact)
    }

    /// `SELECT COUNT(*)` when the predicate compiles exactly; see
    /// `SQLiteStore+DictionaryFetching.swift`.
    public override func countObjects(_ request: AnyFetchRequest) throws -> Int? {
        try sqlCount(request)
    }

    /// Columns, aggregates, groups, having, distinct rows, order and limits
    /// in one SQL query when all of it translates exactly; see
    /// `SQLiteStore+DictionaryFetching.swift`.
    public override func fetchDictionaries(_ request: AnyFetchRequest) throws -> [[String: Any]]? {
        try sqlDictionaries(request)
    }

    public override func snapshots(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: StoreSnapshot] {
        lock.lock(); defer { lock.unlock() }
        let (db, schema) = try openConnection()
        var out: [ManagedObjectID: StoreSnapshot] = [:]
        var byTable: [String: [ManagedObjectID]] = [:]
        let storeID = identifier
        for id in ids where id.storeIdentifier == storeID {
            guard id.primaryKey != nil, let mapping = schema.entity(named: id.entity.name) else { continue }
            byTable[mapping.tableName, default: []].append(id)
        }
        for (tableName, tableIDs) in byTable {
            let table = schema.table(named: tableName)!
            for chunkStart in stride(from: 0, to: tableIDs.count, by: 500) {
                let chunk = Array(tableIDs[chunkStart..<min(chunkStart + 500, tableIDs.count)])
                let placeholders = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                let rows = try db.prepareUncached("SELECT \(selectColumns(table)) FROM \(tableName) WHERE Z_PK IN (\(placeholders))")
                    .query(chunk.map { .integer($0.primaryKey!) })
                for row in rows {
                    guard let snap = try snapshot(fromRow: row, table: table, storeID: storeID) else { continue }
                    // The ID must name the row's own entity: a Bot ID never fires a Commit row.
                    if let wanted = chunk.first(where: { $0.primaryKey == snap.objectID.primaryKey && $0.entity.name == snap.objectID.entity.name }) {
                        out[wanted] = snap
                    }
                }
            }
        }
        return out
    }

    public override func relatedObjectIDs(for relationship: RelationshipDescription, of id: ManagedObjectID) throws -> [ManagedObjectID] {
        lock.lock(); defer { lock.unlock() }
        let (db, schema) = try openConnection()
        guard let pk = id.primaryKey, let destination = relationship.destinationEntity,
              let destMapping = schema.entity(named: destination.name), let destTable = schema.table(named: destMapping.tableName) else { return [] }
        let sourceMapping = try mapping(for: id.entity)
        let entityFilter = "t.\(entityNumbersSQL(destMapping.numbersIncludingSubentities))"

        if !relationship.isToMany {
            guard let column = sourceMapping.columnsByProperty[relationship.name] else { return [] }
            return try ids(db, "SELECT t.Z_PK, t.Z_ENT FROM \(sourceMapping.tableName) s JOIN \(destTable.name) t ON t.Z_PK = s.\(column) WHERE s.Z_PK = ? AND \(entityFilter)", [.integer(pk)])
        }
        if let join = schema.joinTable(for: relationship) {
            let (mine, theirs) = join.relationship === relationship ? (join.firstColumn, join.secondColumn) : (join.secondColumn, join.firstColumn)
            let order = join.orderColumn.map { " ORDER BY j.\($0)" } ?? ""
            return try ids(db, "SELECT t.Z_PK, t.Z_ENT FROM \(join.name) j JOIN \(destTable.name) t ON t.Z_PK = j.\(theirs) WHERE j.\(mine) = ? AND \(entityFilter)\(order)", [.integer(pk)])
        }
        if let inverse = relationship.inverseRelationship, !inverse.isToMany {
            guard let column = destMapping.columnsByProperty[inverse.name] else { return [] }
            // When the destination's table holds only the destination, every
            // row is one of its objects: the foreign key's index answers
            // alone, without looking up each row's Z_ENT in the table.
            let soleEntity = destTable.rootEntityName == destination.name && destMapping.numbersIncludingSubentities.count == 1
            var sql = soleEntity ? "SELECT t.Z_PK, \(destMapping.number) FROM \(destTable.name) t WHERE t.\(column) = ?"
                                 : "SELECT t.Z_PK, t.Z_ENT FROM \(destTable.name) t WHERE t.\(column) = ? AND \(entityFilter)"
            var bindings: [SQLiteValue] = [.integer(pk)]
            if let entityColumn = destMapping.entityColumnsByRelationship[inverse.name] {
                sql += " AND t.\(entityColumn) = ?"
                bindings.append(.integer(Int64(sourceMapping.number)))
            }
            if relationship.isOrdered, destTable.column(named: "Z_FOK_" + inverse.name.uppercased()) != nil {
                sql += " ORDER BY t.Z_FOK_\(inverse.name.uppercased()), t.Z_PK"
            } else {
                sql += " ORDER BY t.Z_PK"
            }
            return try ids(db, sql, bindings)
        }
        if let owner = relationship.entity, let hidden = schema.hiddenOwnerColumns["\(owner.name).\(relationship.name)"] {
            return try ids(db, "SELECT t.Z_PK, t.Z_ENT FROM \(hidden.table) t WHERE t.\(hidden.column) = ? AND \(entityFilter) ORDER BY t.Z_PK", [.integer(pk)])
        }
        return []
    }

    /// The members of a to-many for many owners in one query per 500
    /// owners (`IN (…)`), ordered as `relatedObjectIDs(for:of:)` orders them
    /// for one owner: the owner's key leads the `ORDER BY`, so each owner's
    /// members come out contiguous and in their own order. To-ones are
    /// already in the owners' rows and take the per-owner default.
    public override func relatedObjectIDs(for relationship: RelationshipDescription, ofAll ids: [ManagedObjectID]) throws -> [ManagedObjectID: [ManagedObjectID]] {
        guard relationship.isToMany else { return try super.relatedObjectIDs(for: relationship, ofAll: ids) }
        lock.lock(); defer { lock.unlock() }
        let (db, schema) = try openConnection()
        let storeID = identifier
        var out: [ManagedObjectID: [ManagedObjectID]] = [:]
        // Owners of one entity go together: the inverse's entity column
        // (a to-one into a hierarchy) must match the owner's own entity.
        var byEntity: [Int: [ManagedObjectID]] = [:]
        for id in ids where id.storeIdentifier == storeID && id.primaryKey != nil {
            guard let mapping = schema.entity(named: id.entity.name) else { continue }
            out[id] = []
            byEntity[mapping.number, default: []].append(id)
        }
        guard let destination = relationship.destinationEntity, let destMapping = schema.entity(named: destination.name),
              let destTable = schema.table(named: destMapping.tableName) else { return out }
        let entityFilter = "t.\(entityNumbersSQL(destMapping.numbersIncludingSubentities))"

        // SQL with `%@` standing for the owner-key placeholders; column 0 is
        // the owner's key, columns 1 and 2 the member's Z_PK and Z_ENT.
        let template: String
        var extraBindings: (Int) -> [SQLiteValue] = { _ in [] }
        if let join = schema.joinTable(for: relationship) {
            let (mine, theirs) = join.relationship === relationship ? (join.firstColumn, join.secondColumn) : (join.secondColumn, join.firstColumn)
            let order = join.orderColumn.map { ", j.\($0)" } ?? ", t.Z_PK"
            template = "SELECT j.\(mine), t.Z_PK, t.Z_ENT FROM \(join.name) j JOIN \(destTable.name) t ON t.Z_PK = j.\(theirs) WHERE j.\(mine) IN (%@) AND \(entityFilter) ORDER BY j.\(mine)\(order)"
        } else if let inverse = relationship.inverseRelationship, !inverse.isToMany {
            guard let column = destMapping.columnsByProperty[inverse.name] else { return out }
            var sql = "SELECT t.\(column), t.Z_PK, t.Z_ENT FROM \(destTable.name) t WHERE t.\(column) IN (%@) AND \(entityFilter)"
            if let entityColumn = destMapping.entityColumnsByRelationship[inverse.name] {
                sql += " AND t.\(entityColumn) = ?"
                extraBindings = { [.integer(Int64($0))] }
            }
            let fok = "Z_FOK_" + inverse.name.uppercased()
            if relationship.isOrdered, destTable.column(named: fok) != nil {
                sql += " ORDER BY t.\(column), t.\(fok), t.Z_PK"
            } else {
                sql += " ORDER BY t.\(column), t.Z_PK"
            }
            template = sql
        } else if let owner = relationship.entity, let hidden = schema.hiddenOwnerColumns["\(owner.name).\(relationship.name)"] {
            template = "SELECT t.\(hidden.column), t.Z_PK, t.Z_ENT FROM \(hidden.table) t WHERE t.\(hidden.column) IN (%@) AND \(entityFilter) ORDER BY t.\(hidden.column), t.Z_PK"
        } else {
            return out
        }

        for (entityNumber, owners) in byEntity {
            for chunkStart in stride(from: 0, to: owners.count, by: Self.ownerChunkSize) {
                let chunk = owners[chunkStart..<min(chunkStart + Self.ownerChunkSize, owners.count)]
                var ownerByKey: [Int64: ManagedObjectID] = [:]
                for id in chunk { ownerByKey[id.primaryKey!] = id }
                let placeholders = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                let sql = template.replacingOccurrences(of: "%@", with: placeholders)
                // One statement text per chunk size: uncached, like other `IN` lists.
                let statement = try db.prepareUncached(sql)
                try statement.forEachRow(chunk.map { .integer($0.primaryKey!) } + extraBindings(entityNumber)) { row in
                    guard let ownerKey = row.column(0).int64Value, let owner = ownerByKey[ownerKey],
                          let pk = row.column(1).int64Value, let ent = row.column(2).int64Value,
                          let memberMapping = entityByNumber[Int(ent)] else { return }
                    let member = ManagedObjectID(entity: memberMapping.entity, storeIdentifier: storeID, primaryKey: pk)
                    member.persistentStore = self
                    out[owner, default: []].append(member)
                }
            }
        }
        return out
    }

    /// Owner keys per `IN (…)` list: well under SQLite's default limit of
    /// 32,766 bound parameters (999 before 3.32), and the same chunk size
    /// `snapshots(for:)` uses.
    static let ownerChunkSize = 500

    /// The IDs a `SELECT Z_PK, Z_ENT …` returns, read row by row from the
    /// statement (no array of values per row: a to-many fault of n members
    /// runs this over n rows).
    private func ids(_ db: SQLiteConnection, _ sql: String, _ bindings: [SQLiteValue]) throws -> [ManagedObjectID] {
        let storeID = identifier
        var out: [ManagedObjectID] = []
        try db.prepare(sql).forEachRow(bindings) { row in
            guard let pk = row.column(0).int64Value, let ent = row.column(1).int64Value, let plan = rowPlan(ent) else { return }
            let id = ManagedObjectID(entity: plan.entity, storeIdentifier: storeID, primaryKey: pk)
            id.persistentStore = self
            out.append(id)
        }
        return out
    }

    // MARK: - External binary storage

    /// Values of attributes that allow external storage larger than this
    /// many bytes go to a file of their own; smaller ones stay in the row
    /// (framed inline). Apple does not document its threshold: 1 MB was
    /// measured in 2011 (OS X Lion), about 128 KB on iOS since; 128 KiB is
    /// used here (see SQLITE-LAYOUT.md, "External binary storage").
    ///
    /// ```swift
    /// let goesToAFile = photo.count > SQLiteStore.externalBinaryDataThreshold
    /// ```
    public static let externalBinaryDataThreshold = 128 * 1024

    /// Binary and transformable attributes can be stored externally; the
    /// flag means nothing on other types.
    static func mayStoreExternally(_ attribute: AttributeDescription) -> Bool {
        attribute.allowsExternalBinaryDataStorage && (attribute.attributeType == .binaryData || attribute.attributeType == .transformable)
    }

    /// `.<StoreName>_SUPPORT/_EXTERNAL_DATA` beside the store file, where
    /// Core Data keeps externally stored values (StoreName: the file name
    /// without its extension). Copy it along with the store file.
    ///
    /// ```swift
    /// // /data/Photos.sqlite → /data/.Photos_SUPPORT/_EXTERNAL_DATA
    /// let folder = store.externalDataDirectory
    /// ```
    public var externalDataDirectory: URL? {
        guard let url, url.isFileURL else { return nil }
        let name = url.deletingPathExtension().lastPathComponent
        return url.deletingLastPathComponent().appendingPathComponent(".\(name)_SUPPORT").appendingPathComponent("_EXTERNAL_DATA")
    }

    /// The column value the codec decodes for a framed column: the inline
    /// bytes, or the external file's contents. A BLOB without a valid frame
    /// is passed through as the value itself.
    /// - Throws: 260 naming the file, entity and attribute when the
    ///   referenced file is missing or unreadable; nothing is changed.
    func unframedExternalBinary(_ stored: SQLiteValue, attribute: AttributeDescription, entity: EntityDescription) throws -> SQLiteValue {
        guard case .blob(let bytes) = stored, let frame = SQLiteValueCodec.ExternalBinaryFrame(decoding: bytes) else { return stored }
        switch frame {
        case .inline(let value):
            return .blob(value)
        case .external(let name):
            let file = externalDataDirectory?.appendingPathComponent(name)
            guard let file, let contents = FileManager.default.contents(atPath: file.path) else {
                let path = file?.path ?? "_EXTERNAL_DATA/\(name)"
                throw CoreDataError(.fileReadNoSuchFile,
                                    "the external data file \(path) holding \(entity.name).\(attribute.name) is missing or unreadable",
                                    userInfo: [CoreDataError.filePathErrorKey: path, CoreDataError.entityNameErrorKey: entity.name,
                                               CoreDataError.propertyNameErrorKey: attribute.name])
            }
            return .blob(contents)
        }
    }

    /// Files written by the save in progress (removed if it fails) and files
    /// its rows stop referencing (removed once it has committed).
    private var externalFilesWritten: [URL] = []
    private var externalFilesReleased: [URL] = []
    /// The framed columns of the row being updated, by attribute name, so an
    /// unchanged external value keeps its file instead of being copied.
    private var previousExternalColumns: [String: Data] = [:]

    /// The external-storage attributes of an entity with their columns.
    private func externalColumns(_ mapping: SQLiteSchema.EntityMapping) -> [(attribute: AttributeDescription, column: String)] {
        mapping.entity.properties.compactMap { property in
            guard let attribute = property as? AttributeDescription, !attribute.isTransient, Self.mayStoreExternally(attribute),
                  let column = mapping.columnsByProperty[attribute.name] else { return nil }
            return (attribute, column)
        }
    }

    /// The framed external-storage columns a row holds now, by attribute name.
    private func storedExternalColumns(pk: Int64, mapping: SQLiteSchema.EntityMapping, db: SQLiteConnection) throws -> [String: Data] {
        let columns = externalColumns(mapping)
        guard !columns.isEmpty else { return [:] }
        let rows = try db.query("SELECT \(columns.map(\.column).joined(separator: ", ")) FROM \(mapping.tableName) WHERE Z_PK = ?", [.integer(pk)])
        guard let row = rows.first else { return [:] }
        var out: [String: Data] = [:]
        for (index, entry) in columns.enumerated() { if case .blob(let bytes) = row[index] { out[entry.attribute.name] = bytes } }
        return out
    }

    private func externalFile(of column: Data?) -> URL? {
        guard let column, case .external(let name)? = SQLiteValueCodec.ExternalBinaryFrame(decoding: column) else { return nil }
        return externalDataDirectory?.appendingPathComponent(name)
    }

    /// The framed column for an encoded value: inline up to the threshold,
    /// else a new file written now (before the transaction commits). The
    /// previous file of the row is kept when it holds the same bytes.
    private func framedExternalBinary(_ bytes: Data, attribute: AttributeDescription, entity: EntityDescription) throws -> Data {
        let previous = previousExternalColumns[attribute.name]
        let previousFile = externalFile(of: previous)
        let framed: Data
        if bytes.count <= Self.externalBinaryDataThreshold || isInMemoryDatabase {
            framed = SQLiteValueCodec.ExternalBinaryFrame.inline(bytes).encoded
        } else if let previous, let previousFile,
                  (try? FileManager.default.attributesOfItem(atPath: previousFile.path)[.size] as? NSNumber)?.intValue == bytes.count,
                  FileManager.default.contents(atPath: previousFile.path) == bytes {
            return previous
        } else {
            guard let directory = externalDataDirectory else {
                throw CoreDataError(.persistentStoreSave, "no external data folder for \(entity.name).\(attribute.name): the store has no file URL")
            }
            let name = UUID().uuidString
            let file = directory.appendingPathComponent(name)
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try bytes.write(to: file, options: .atomic)
            } catch {
                throw CoreDataError(.persistentStoreSave, "writing the external data file \(file.path) for \(entity.name).\(attribute.name) failed: \(error)",
                                    userInfo: [CoreDataError.filePathErrorKey: file.path, CoreDataError.underlyingErrorKey: error,
                                               CoreDataError.propertyNameErrorKey: attribute.name])
            }
            externalFilesWritten.append(file)
            framed = SQLiteValueCodec.ExternalBinaryFrame.external(name).encoded
        }
        if let previousFile { externalFilesReleased.append(previousFile) }
        return framed
    }

    // MARK: - Writing

    func ensureWritable(_ operation: String) throws {
        if isReadOnly {
            throw CoreDataError(.persistentStoreSave, "cannot \(operation): the store at \(url?.path ?? "?") was opened read-only",
                                userInfo: [CoreDataError.filePathErrorKey: url?.path ?? ""])
        }
    }

    /// Where primary keys come from: `Z_PRIMARYKEY.Z_MAX` of the root entity
    /// of the table, because sub-entities share the table and its `Z_PK`.
    private func keyEntityNumber(_ mapping: SQLiteSchema.EntityMapping) -> Int {
        guard let schema, let table = schema.table(named: mapping.tableName),
              let root = schema.entity(named: table.rootEntityName) else { return mapping.number }
        return root.number
    }

    /// Allocates `count` primary keys in a short transaction of its own, so a
    /// key is never handed out twice, even to another process.
    public override func newObjectIDs(for entity: EntityDescription, count: Int) throws -> [ManagedObjectID] {
        lock.lock(); defer { lock.unlock() }
        try ensureWritable("allocate object IDs")
        let (db, _) = try openConnection()
        let mapping = try mapping(for: entity)
        guard count > 0 else { return [] }
        let keyEntity = Int64(keyEntityNumber(mapping))
        let first: Int64 = try wrapSaveErrors {
            try db.transaction {
                let current = try db.query("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?", [.integer(keyEntity)]).first?.first?.int64Value ?? 0
                try db.run("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?", [.integer(current + Int64(count)), .integer(keyEntity)])
                guard db.changes == 1 else {
                    // Without the row the keys would be handed out again next time.
                    throw CoreDataError(.persistentStoreSave, "Z_PRIMARYKEY has no row for entity number \(keyEntity) (\(entity.name)); cannot allocate primary keys")
                }
                return current + 1
            }
        }
        let storeID = identifier
        return (0..<Int64(count)).map {
            let id = ManagedObjectID(entity: entity, storeIdentifier: storeID, primaryKey: first + $0)
            id.persistentStore = self
            return id
        }
    }

    private var insertSQL: [String: (sql: String, properties: [(PropertyDescription, String)])] = [:]
    private var updateColumnsByEntity: [String: [(PropertyDescription, String)]] = [:]

    /// The stored properties of an entity with their columns, in a fixed order.
    private func writableColumns(_ mapping: SQLiteSchema.EntityMapping) -> [(PropertyDescription, String)] {
        var out: [(PropertyDescription, String)] = []
        for property in mapping.entity.properties where !property.isTransient {
            guard let column = mapping.columnsByProperty[property.name] else { continue }
            out.append((property, column))
            if let entityColumn = mapping.entityColumnsByRelationship[property.name] {
                out.append((property, entityColumn))
            }
        }
        return out
    }

    /// The value to bind for one column of a snapshot's row.
    private func binding(for snapshot: StoreSnapshot, mapping: SQLiteSchema.EntityMapping,
                         property: PropertyDescription, column: String, slot: Int?) throws -> SQLiteValue {
        // By slot: the snapshot's layout is its entity's, the mapping's.
        let value: Any?
        if let slot, slot < snapshot.slots.count { value = snapshot.slots[slot] } else { value = nil }
        if let attribute = property as? AttributeDescription {
            let encoded = try SQLiteValueCodec.encode(value, for: attribute)
            guard Self.mayStoreExternally(attribute), case .blob(let bytes) = encoded else { return encoded }
            return .blob(try framedExternalBinary(bytes, attribute: attribute, entity: mapping.entity))
        }
        guard let value, !SQLiteValueCodec.isNSNull(value) else { return .null }
        guard let target = value as? ManagedObjectID else {
            throw CoreDataError(.persistentStoreSave, "to-one \(mapping.entity.name).\(property.name) holds \(type(of: value)), not a ManagedObjectID")
        }
        guard let key = target.primaryKey else {
            throw CoreDataError(.persistentStoreSave, "to-one \(mapping.entity.name).\(property.name) points to an object with a temporary ID; obtain permanent IDs before saving")
        }
        if column == mapping.entityColumnsByRelationship[property.name] {
            guard let n = schema?.entity(named: target.entity.name)?.number else {
                throw CoreDataError(.persistentStoreSave, "to-one \(mapping.entity.name).\(property.name) points to entity \(target.entity.name), which this store does not hold")
            }
            return .integer(Int64(n))
        }
        return .integer(key)
    }

    /// Rows a save writes per INSERT statement (see `writeSave`).
    static let rowsPerInsert = 32

    /// A one-row `INSERT … VALUES (?, …)` made to take `rows` rows.
    static func multiRowInsert(_ sql: String, rows: Int) -> String {
        guard let values = sql.range(of: " VALUES ", options: .backwards) else { return sql }
        let row = String(sql[values.upperBound...])
        return String(sql[..<values.upperBound]) + Array(repeating: row, count: rows).joined(separator: ", ")
    }

    private func insertStatement(_ mapping: SQLiteSchema.EntityMapping) -> (sql: String, properties: [(PropertyDescription, String)]) {
        if let cached = insertSQL[mapping.entity.name] { return cached }
        let properties = writableColumns(mapping)
        let columns = ["Z_PK", "Z_ENT", "Z_OPT"] + properties.map(\.1)
        let sql = "INSERT INTO \(mapping.tableName) (\(columns.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
        insertSQL[mapping.entity.name] = (sql, properties)
        return (sql, properties)
    }

    /// The columns an UPDATE may set, in the order of the entity's writable
    /// columns (an update writes the changed ones among them).
    private func updateColumns(_ mapping: SQLiteSchema.EntityMapping) -> [(PropertyDescription, String)] {
        if let cached = updateColumnsByEntity[mapping.entity.name] { return cached }
        let properties = writableColumns(mapping)
        updateColumnsByEntity[mapping.entity.name] = properties
        return properties
    }

    /// Writes one save in one transaction. Any object whose stored `Z_OPT`
    /// is not what the saver expected (or that is gone) fails the whole save
    /// with `StoreVersionConflict` and nothing is written.
    ///
    /// `Z_OPT` is set to the snapshot's `version`, or to `expectedVersion + 1`
    /// if the snapshot carries no newer version, so the lock value always moves.
    public override func save(_ request: StoreSaveRequest) throws {
        lock.lock(); defer { lock.unlock() }
        try ensureWritable("save")
        let (db, schema) = try openConnection()
        var metadataToWrite = metadata
        metadataToWrite[SQLiteMetadata.storeTypeKey] = Self.storeType
        // Compared by value: the Z_PLIST Apple's Core Data wrote stays byte
        // for byte as it was unless an entry really changed.
        let metadataChanged = !SQLiteMetadata.isEqual(metadataToWrite, storedMetadata)
        if request.isEmpty && !metadataChanged { return }
        externalFilesWritten = []
        externalFilesReleased = []
        previousExternalColumns = [:]
        defer {
            externalFilesWritten = []
            externalFilesReleased = []
            previousExternalColumns = [:]
        }
        do {
            try writeSave(request, metadata: metadataToWrite, metadataChanged: metadataChanged, db: db, schema: schema)
        } catch {
            // Rolled back: no row references the files this save wrote.
            for file in externalFilesWritten { try? FileManager.default.removeItem(at: file) }
            // Inside performInTransaction the save's statements are not undone
            // until the enclosing transaction rolls back: make sure it does.
            if enclosingTransactionDepth > 0 && enclosingTransactionFailure == nil { enclosingTransactionFailure = error }
            throw error
        }
        // Committed: files no row references any more can go. A crash before
        // this leaves unreferenced files behind, never a reference without a file.
        for file in externalFilesReleased { try? FileManager.default.removeItem(at: file) }
        if metadataChanged { storedMetadata = metadataToWrite }
    }

    /// Set while `performInTransaction` runs (nested calls add up).
    private var enclosingTransactionDepth = 0
    /// The first save that failed inside `performInTransaction`: the whole
    /// transaction rolls back even when the body caught it.
    private var enclosingTransactionFailure: Error?

    /// Runs `body` inside one SQLite transaction of this store: every save
    /// made on this store meanwhile, through `save(_:)` or through a context
    /// of its coordinator, commits when `body` returns, and none does when it
    /// throws. A save that fails inside rolls the whole transaction back,
    /// even if `body` catches the error. Reads inside see the transaction's
    /// own writes, and no other connection can write the file until it ends
    /// (it starts with `BEGIN IMMEDIATE`), so what `body` reads cannot
    /// change before its writes commit.
    ///
    /// Each save keeps its own history transaction (author, context name),
    /// so a large write can be made of many saves of bounded size that
    /// commit together. After a rollback, contexts that saved inside hold
    /// state that was never committed: reset them.
    ///
    /// ```swift
    /// try store.performInTransaction {
    ///     for page in pages {
    ///         apply(page, to: context)
    ///         try context.save()
    ///         context.reset()
    ///     }
    /// }
    /// ```
    public func performInTransaction<T>(_ body: () throws -> T) throws -> T {
        lock.lock(); defer { lock.unlock() }
        try ensureWritable("write")
        let (db, _) = try openConnection()
        if enclosingTransactionDepth > 0 {
            enclosingTransactionDepth += 1
            defer { enclosingTransactionDepth -= 1 }
            return try body()
        }
        let metadataBefore = storedMetadata
        enclosingTransactionDepth = 1
        enclosingTransactionFailure = nil
        defer {
            enclosingTransactionDepth = 0
            enclosingTransactionFailure = nil
        }
        do {
            return try wrapSaveErrors {
                try db.transaction {
                    let result = try body()
                    if let failure = enclosingTransactionFailure { throw failure }
                    return result
                }
            }
        } catch {
            // Nothing of the transaction is in the file: forget what its saves left behind.
            storedMetadata = metadataBefore
            lastSaveHistoryToken = nil
            lastSaveGlobalIdentifiers = [:]
            throw error
        }
    }

    private func writeSave(_ request: StoreSaveRequest, metadata metadataToWrite: [String: Any], metadataChanged: Bool,
                           db: SQLiteConnection, schema: SQLiteSchema) throws {
        try wrapSaveErrors {
            try db.transaction {
                if metadataChanged { try SQLiteMetadata.write(metadataToWrite, to: db) }
                let historyTransaction = try beginHistoryTransaction(request, db: db)
                var conflicts: [ManagedObjectID: StoreSnapshot?] = [:]
                var maxKeys: [Int: Int64] = [:]
                // Each row is bound on a statement prepared once per save,
                // kind and entity: no SQL text is built or looked up per row.
                enum Kind { case insert, insertRows, update, delete }
                // Updates that write only changed columns get one statement
                // per set of columns (indices into the entity's writable columns).
                struct StatementKey: Hashable { let kind: Kind; let entity: Int; var columns: [Int] = [] }
                var statements: [StatementKey: SQLiteStatement] = [:]
                func statement(_ kind: Kind, _ mapping: SQLiteSchema.EntityMapping, columns: [Int] = [], _ sql: () -> String) throws -> SQLiteStatement {
                    let key = StatementKey(kind: kind, entity: mapping.number, columns: columns)
                    if let prepared = statements[key] { return prepared }
                    let prepared = try db.prepare(sql())
                    statements[key] = prepared
                    return prepared
                }
                // Per entity, the snapshot slot of each written column, found
                // once per save instead of once per value.
                var columnSlots: [Int: [Int?]] = [:]
                func slots(_ mapping: SQLiteSchema.EntityMapping, _ properties: [(PropertyDescription, String)]) -> [Int?] {
                    if let known = columnSlots[mapping.number] { return known }
                    let layout = EntityLayout.of(mapping.entity)
                    let found = properties.map { layout.slotIndex[$0.0.name] }
                    columnSlots[mapping.number] = found
                    return found
                }

                for (id, expected) in request.deleted {
                    let mapping = try mapping(for: id.entity)
                    guard let pk = id.primaryKey else { continue }
                    let external = try storedExternalColumns(pk: pk, mapping: mapping, db: db)
                    let statement = try statement(.delete, mapping) { "DELETE FROM \(mapping.tableName) WHERE Z_PK = ? AND Z_ENT = ? AND Z_OPT = ?" }
                    statement.reset()
                    try statement.bind(.integer(pk), at: 1)
                    try statement.bind(.integer(Int64(mapping.number)), at: 2)
                    try statement.bind(.integer(expected), at: 3)
                    try statement.runBound()
                    if db.changes == 0 {
                        conflicts[id] = .some(try currentSnapshot(id, db: db))
                        continue
                    }
                    for column in external.values { if let file = externalFile(of: column) { externalFilesReleased.append(file) } }
                    try removeJoinRows(of: id, pk: pk, schema: schema, db: db)
                }

                for (snapshot, expected) in request.updated {
                    let id = snapshot.objectID
                    let mapping = try mapping(for: id.entity)
                    guard let pk = id.primaryKey else {
                        throw CoreDataError(.persistentStoreSave, "cannot update \(id): it has a temporary ID")
                    }
                    let columns = updateColumns(mapping)
                    let version = snapshot.version > expected ? snapshot.version : expected + 1
                    // Only the changed columns when the request lists them
                    // all: unchanged ones (and their indexes) stay untouched.
                    let written: [Int]
                    if request.changedValuesAreComplete {
                        let changed = request.changedValues[id]
                        written = columns.indices.filter { changed?[columns[$0].0.name] != nil }
                    } else {
                        written = Array(columns.indices)
                    }
                    let columnSlots = slots(mapping, columns)
                    if written.contains(where: { (columns[$0].0 as? AttributeDescription).map(Self.mayStoreExternally) ?? false }) {
                        previousExternalColumns = try storedExternalColumns(pk: pk, mapping: mapping, db: db)
                    }
                    defer { previousExternalColumns = [:] }
                    let statement = try statement(.update, mapping, columns: written) {
                        let sets = (["Z_OPT"] + written.map { columns[$0].1 }).map { "\($0) = ?" }.joined(separator: ", ")
                        return "UPDATE \(mapping.tableName) SET \(sets) WHERE Z_PK = ? AND Z_ENT = ? AND Z_OPT = ?"
                    }
                    statement.reset()
                    try statement.bind(.integer(version), at: 1)
                    var index: Int32 = 2
                    for i in written {
                        let (property, column) = columns[i]
                        try statement.bind(try binding(for: snapshot, mapping: mapping, property: property, column: column, slot: columnSlots[i]), at: index)
                        index += 1
                    }
                    try statement.bind(.integer(pk), at: index)
                    try statement.bind(.integer(Int64(mapping.number)), at: index + 1)
                    try statement.bind(.integer(expected), at: index + 2)
                    try statement.runBound()
                    if db.changes == 0 { conflicts[id] = .some(try currentSnapshot(id, db: db)) }
                }

                if !conflicts.isEmpty { throw StoreVersionConflict(current: conflicts) }

                // Rows of one entity usually come together: what a row needs
                // from its entity (mapping, statement, column slots, key entity)
                // is looked up when the entity changes, not for every row.
                // Rows are written `rowsPerInsert` at a time in one multi-row
                // INSERT: with history's triggers SQLite keeps a statement
                // journal, copying every page a statement touches that an
                // earlier one of the transaction dirtied (the tables' last
                // leaves, each time), so one statement per row paid that per
                // row (issue 15). The save is one transaction either way: a
                // row that fails fails the save, as before.
                struct InsertPlan {
                    let entity: EntityDescription
                    let mapping: SQLiteSchema.EntityMapping
                    let statement: SQLiteStatement
                    /// The INSERT of `rowsPerInsert` rows (nil: one at a time).
                    let rows: SQLiteStatement?
                    let rowsPerInsert: Int
                    let columns: [(property: PropertyDescription, column: String, slot: Int?)]
                    let keyEntity: Int
                }
                var current: InsertPlan?
                var pending: [StoreSnapshot] = []
                var highestKey: Int64 = 0
                func flushHighestKey() {
                    guard let current, highestKey > 0 else { return }
                    maxKeys[current.keyEntity] = max(maxKeys[current.keyEntity] ?? 0, highestKey)
                    highestKey = 0
                }
                func bindRow(_ snapshot: StoreSnapshot, _ plan: InsertPlan, _ statement: SQLiteStatement, from first: Int32) throws {
                    try statement.bind(.integer(snapshot.objectID.primaryKey ?? 0), at: first)
                    try statement.bind(.integer(Int64(plan.mapping.number)), at: first + 1)
                    try statement.bind(.integer(max(1, snapshot.version)), at: first + 2)
                    var index = first + 3
                    for (property, column, slot) in plan.columns {
                        try statement.bind(try binding(for: snapshot, mapping: plan.mapping, property: property, column: column, slot: slot), at: index)
                        index += 1
                    }
                }
                /// Writes the rows waiting for `current`: whole groups of
                /// `rowsPerInsert` together, the rest (the last of an entity) one by one.
                func flushPending() throws {
                    guard let plan = current, !pending.isEmpty else { return }
                    var start = 0
                    if let rows = plan.rows {
                        let width = Int32(3 + plan.columns.count)
                        while pending.count - start >= plan.rowsPerInsert {
                            rows.reset()
                            for offset in 0..<plan.rowsPerInsert {
                                try bindRow(pending[start + offset], plan, rows, from: Int32(offset) * width + 1)
                            }
                            try rows.runBound()
                            start += plan.rowsPerInsert
                        }
                    }
                    for snapshot in pending[start...] {
                        plan.statement.reset()
                        try bindRow(snapshot, plan, plan.statement, from: 1)
                        try plan.statement.runBound()
                    }
                    pending.removeAll(keepingCapacity: true)
                }
                for snapshot in request.inserted {
                    let id = snapshot.objectID
                    guard let pk = id.primaryKey else {
                        throw CoreDataError(.persistentStoreSave, "cannot insert \(id): it has a temporary ID; obtain permanent IDs first")
                    }
                    if current?.entity !== id.entity {
                        try flushPending()
                        flushHighestKey()
                        let mapping = try mapping(for: id.entity)
                        let sqlPlan = insertStatement(mapping)
                        let single = try statement(.insert, mapping) { sqlPlan.sql }
                        let columns = zip(sqlPlan.properties, slots(mapping, sqlPlan.properties)).map { ($0.0.0, $0.0.1, $0.1) }
                        // At most 999 parameters, SQLite's limit before 3.32.
                        let rowsPerInsert = min(Self.rowsPerInsert, 999 / (3 + columns.count))
                        let rows = rowsPerInsert > 1 && request.inserted.count >= rowsPerInsert
                            ? try statement(.insertRows, mapping) { Self.multiRowInsert(sqlPlan.sql, rows: rowsPerInsert) }
                            : nil
                        current = InsertPlan(entity: id.entity, mapping: mapping, statement: single, rows: rows, rowsPerInsert: rows == nil ? 1 : rowsPerInsert,
                                             columns: columns, keyEntity: keyEntityNumbers[mapping.number] ?? keyEntityNumber(mapping))
                    }
                    pending.append(snapshot)
                    if pending.count >= (current?.rowsPerInsert ?? 1) { try flushPending() }
                    highestKey = max(highestKey, pk)
                }
                try flushPending()
                flushHighestKey()

                for change in request.toManyChanges {
                    try writeToMany(change, schema: schema, db: db)
                }

                // Keys chosen by the caller (not from newObjectIDs) must not be handed out again.
                for (entity, key) in maxKeys {
                    try db.run("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ? AND Z_MAX < ?",
                               [.integer(key), .integer(Int64(entity)), .integer(key)])
                }
                try endHistoryTransaction(historyTransaction, db: db)
            }
        }
    }

    /// Writes metadata into a store file that is not open (PS-15), leaving
    /// its objects untouched. `NSStoreType` is always written as SQLite and
    /// `NSStoreUUID` goes to `Z_UUID`, as Core Data keeps it.
    ///
    /// ```swift
    /// var metadata = try SQLiteStore.metadataForStore(at: url)
    /// metadata["SyncCursor"] = "42"
    /// try SQLiteStore.setMetadata(metadata, forStoreAt: url)
    /// ```
    /// - Throws: 260 for a missing file, 134010 for a file that is not a
    ///   Core Data SQLite store, 134030 when the write fails.
    public static func setMetadata(_ metadata: [String: Any], forStoreAt url: URL) throws {
        _ = try SQLiteMetadata.metadataForStore(at: url)
        let db = try openWrappingErrors(path: url.path, mode: .readWrite, busyTimeout: defaultTimeout)
        defer { db.close() }
        var values = metadata
        values[SQLiteMetadata.storeTypeKey] = storeType
        do {
            try db.transaction { try SQLiteMetadata.write(values, to: db) }
        } catch let error as CoreDataError where error.code == .sqlite {
            var info = error.userInfo
            info.removeValue(forKey: NSLocalizedDescriptionKey)
            throw CoreDataError(.persistentStoreSave, "writing metadata to \(url.path) failed: \(error.message)", userInfo: info)
        }
    }

    private func currentSnapshot(_ id: ManagedObjectID, db: SQLiteConnection) throws -> StoreSnapshot? {
        guard let pk = id.primaryKey, let mapping = schema?.entity(named: id.entity.name), let table = schema?.table(named: mapping.tableName) else { return nil }
        let rows = try db.query("SELECT \(selectColumns(table)) FROM \(table.name) WHERE Z_PK = ? AND Z_ENT = ?",
                                [.integer(pk), .integer(Int64(mapping.number))])
        return try rows.first.flatMap { try snapshot(fromRow: $0, table: table, storeID: identifier) }
    }

    /// A deleted object leaves no many-to-many rows behind (Core Data nullifies them).
    private func removeJoinRows(of id: ManagedObjectID, pk: Int64, schema: SQLiteSchema, db: SQLiteConnection) throws {
        for rel in EntityLayout.of(id.entity).relationships where rel.isToMany {
            guard let join = schema.joinTable(for: rel) else { continue }
            let column = join.relationship === rel ? join.firstColumn : join.secondColumn
            try db.run("DELETE FROM \(join.name) WHERE \(column) = ?", [.integer(pk)])
        }
    }

    private func writeToMany(_ change: ToManyChange, schema: SQLiteSchema, db: SQLiteConnection) throws {
        let rel = change.relationship
        guard let pk = change.objectID.primaryKey else {
            throw CoreDataError(.persistentStoreSave, "to-many change for \(change.objectID) with a temporary ID")
        }
        let keys: [Int64] = try change.destinations.map {
            guard let key = $0.primaryKey else {
                throw CoreDataError(.persistentStoreSave, "\(change.objectID).\(rel.name) holds an object with a temporary ID")
            }
            return key
        }
        if let join = schema.joinTable(for: rel) {
            let (mine, theirs) = join.relationship === rel ? (join.firstColumn, join.secondColumn) : (join.secondColumn, join.firstColumn)
            try db.run("DELETE FROM \(join.name) WHERE \(mine) = ?", [.integer(pk)])
            for (position, key) in keys.enumerated() {
                if let order = join.orderColumn {
                    try db.run("INSERT OR REPLACE INTO \(join.name) (\(mine), \(theirs), \(order)) VALUES (?, ?, ?)",
                               [.integer(pk), .integer(key), .integer(Int64(position + 1))])
                } else {
                    try db.run("INSERT OR REPLACE INTO \(join.name) (\(mine), \(theirs)) VALUES (?, ?)", [.integer(pk), .integer(key)])
                }
            }
            return
        }
        guard let destination = rel.destinationEntity, let destMapping = schema.entity(named: destination.name) else { return }
        if let inverse = rel.inverseRelationship, !inverse.isToMany {
            // The foreign key travels in the destination's snapshot; only
            // the order of an ordered to-many is kept here.
            let fok = "Z_FOK_" + inverse.name.uppercased()
            guard rel.isOrdered, schema.table(named: destMapping.tableName)?.column(named: fok) != nil else { return }
            for (position, key) in keys.enumerated() {
                try db.run("UPDATE \(destMapping.tableName) SET \(fok) = ? WHERE Z_PK = ?", [.integer(Int64(position + 1)), .integer(key)])
            }
            return
        }
        if let owner = rel.entity, let hidden = schema.hiddenOwnerColumns["\(owner.name).\(rel.name)"] {
            try db.run("UPDATE \(hidden.table) SET \(hidden.column) = NULL WHERE \(hidden.column) = ?", [.integer(pk)])
            for key in keys {
                try db.run("UPDATE \(hidden.table) SET \(hidden.column) = ? WHERE Z_PK = ?", [.integer(pk), .integer(key)])
            }
        }
    }

    /// SQLite failures while writing become 134030 (save error) with the raw
    /// SQLite error underneath; lock timeouts stay 134090; conflicts pass through.
    func wrapSaveErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CoreDataError where error.code == .sqlite {
            var info = error.userInfo
            info.removeValue(forKey: NSLocalizedDescriptionKey)
            throw CoreDataError(.persistentStoreSave, "saving to the SQLite store failed: \(error.message)", userInfo: info)
        }
    }
}
