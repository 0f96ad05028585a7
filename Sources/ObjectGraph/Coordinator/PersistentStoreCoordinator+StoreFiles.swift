import Foundation

/// Removing and replacing store files: Core Data's
/// `destroyPersistentStore(at:ofType:options:)` and
/// `replacePersistentStore(at:destinationOptions:withPersistentStoreFrom:sourceOptions:ofType:)`.
///
/// Both work on the files, not on a store object: a store at the URL that
/// this coordinator has added is removed from it first (its objects'
/// contexts are told, MOC-UK-05). Other coordinators or processes with the
/// file open are not told; as with Core Data, close them first.
extension PersistentStoreCoordinator {
    /// The files a store of `type` at `url` consists of: a SQLite store has
    /// its `-wal`, `-shm` and `-journal` side files, which must go with it or
    /// a later store at the URL would replay the old WAL into a new file.
    static func storeFiles(at url: URL, type: String) -> [URL] {
        guard type == sqliteStoreType else { return [url] }
        return ["", "-wal", "-shm", "-journal"].map { URL(fileURLWithPath: url.path + $0) }
    }

    /// Deletes the store of `type` at `url` with its side files; a store
    /// that is not there is not an error (there is nothing to destroy).
    ///
    /// ```swift
    /// try coordinator.destroyPersistentStore(at: storeURL, ofType: PersistentStoreCoordinator.sqliteStoreType)
    /// ```
    ///
    /// - Throws: 134000 for an unregistered type; 512 (`fileWriteUnknown`)
    ///   when a file exists but cannot be removed.
    public func destroyPersistentStore(at url: URL, ofType type: String, options: [String: Any]? = nil) throws {
        _ = try Self.storeClass(type)
        if let added = persistentStore(for: url) { try remove(added) }
        for file in Self.storeFiles(at: url, type: type) where FileManager.default.fileExists(atPath: file.path) {
            do { try FileManager.default.removeItem(at: file) } catch {
                throw CoreDataError(.fileWriteUnknown, "cannot remove \(file.path): \(error.localizedDescription)",
                                    userInfo: [CoreDataError.filePathErrorKey: file.path, CoreDataError.underlyingErrorKey: error])
            }
        }
    }

    /// The spelling of Core Data's newer `destroyPersistentStore(at:type:options:)`.
    public func destroyPersistentStore(at url: URL, type: String, options: [String: Any]? = nil) throws {
        try destroyPersistentStore(at: url, ofType: type, options: options)
    }

    /// Makes the store at `destinationURL` a copy of the one at `sourceURL`
    /// (both of `type`): the destination's files are replaced; the source is
    /// left as it is. A SQLite source is copied with `VACUUM INTO`, which
    /// reads one consistent snapshot, WAL included, even while another
    /// connection writes; other types' files are copied.
    ///
    /// ```swift
    /// try coordinator.replacePersistentStore(at: liveURL, destinationOptions: nil,
    ///                                        withPersistentStoreFrom: backupURL, sourceOptions: nil,
    ///                                        ofType: PersistentStoreCoordinator.sqliteStoreType)
    /// ```
    ///
    /// - Throws: 134000 for an unregistered type; 260 (`fileReadNoSuchFile`)
    ///   when there is no source; 134180 when SQLite cannot copy it.
    public func replacePersistentStore(at destinationURL: URL, destinationOptions: [String: Any]? = nil,
                                       withPersistentStoreFrom sourceURL: URL, sourceOptions: [String: Any]? = nil,
                                       ofType type: String) throws {
        _ = try Self.storeClass(type)
        guard FileManager.default.fileExists(atPath: sourceURL.path) else {
            throw CoreDataError(.fileReadNoSuchFile, "no store to copy at \(sourceURL.path)",
                                userInfo: [CoreDataError.filePathErrorKey: sourceURL.path])
        }
        guard sourceURL.standardizedFileURL != destinationURL.standardizedFileURL else { return }
        // Written beside the destination, then moved over it, so a failed
        // copy leaves the old destination in place.
        let staging = destinationURL.deletingLastPathComponent()
            .appendingPathComponent(".\(destinationURL.lastPathComponent).replacing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: destinationURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        do {
            if type == Self.sqliteStoreType {
                let source = try SQLiteConnection(path: sourceURL.path, mode: .readOnly)
                try source.execute("VACUUM INTO '\(staging.path.replacingOccurrences(of: "'", with: "''"))'")
            } else {
                try FileManager.default.copyItem(at: sourceURL, to: staging)
            }
            try destroyPersistentStore(at: destinationURL, ofType: type, options: destinationOptions)
            try FileManager.default.moveItem(at: staging, to: destinationURL)
        } catch {
            try? FileManager.default.removeItem(at: staging)
            throw error
        }
    }

    /// The spelling of Core Data's newer `replacePersistentStore(at:destinationOptions:withPersistentStoreFrom:sourceOptions:type:)`.
    public func replacePersistentStore(at destinationURL: URL, destinationOptions: [String: Any]? = nil,
                                       withPersistentStoreFrom sourceURL: URL, sourceOptions: [String: Any]? = nil,
                                       type: String) throws {
        try replacePersistentStore(at: destinationURL, destinationOptions: destinationOptions,
                                   withPersistentStoreFrom: sourceURL, sourceOptions: sourceOptions, ofType: type)
    }
}
