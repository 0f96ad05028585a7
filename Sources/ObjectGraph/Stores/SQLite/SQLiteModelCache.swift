import Foundation

extension SQLiteStore {
    /// The model Core Data cached in a SQLite store when it wrote it: table
    /// `Z_MODELCACHE`, column `Z_CONTENT`, a raw-deflated keyed archive of
    /// the `NSManagedObjectModel` (see docs/COMPILED-MODELS.md). Nil when the
    /// store has no such table or the table is empty.
    ///
    /// The file is opened read-only through SQLite (`immutable=1` unless a
    /// `-wal` holds transactions, see `readOnlyOpenMode(forFileAt:)`), so a
    /// store another process has open keeps its locks.
    ///
    /// ```swift
    /// if let model = try SQLiteStore.cachedModel(forStoreAt: URL(fileURLWithPath: "App.sqlite")) {
    ///     print(model.entities.map(\.name))
    /// }
    /// ```
    public static func cachedModel(forStoreAt url: URL) throws -> ManagedObjectModel? {
        try checkFileSignature(at: url, requireExisting: true)
        let connection = try openWrappingErrors(path: url.path, mode: readOnlyOpenMode(forFileAt: url), busyTimeout: 5)
        defer { connection.close() }
        return try cachedModel(from: connection, url: url)
    }

    /// `cachedModel(forStoreAt:)` through a connection already open on the file.
    static func cachedModel(from connection: SQLiteConnection, url: URL) throws -> ManagedObjectModel? {
        let content: Data
        do {
            let tables = try connection.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'Z_MODELCACHE'")
            guard !tables.isEmpty else { return nil }
            let rows = try connection.query("SELECT Z_CONTENT FROM Z_MODELCACHE")
            guard let first = rows.first, let value = first.first else { return nil }
            switch value {
            case .null: return nil
            case .blob(let data): content = data
            default:
                throw CoreDataError(.fileReadCorruptFile, "\(url.path): Z_MODELCACHE.Z_CONTENT is \(value), not a blob",
                                    userInfo: [CoreDataError.filePathErrorKey: url.path])
            }
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw openError(from: error, url: url)
        }
        return try ManagedObjectModel(compiledModelCacheData: content, source: url.path)
    }
}
