import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes one store's external records (PC-43) into
/// `<directory>/<store UUID>/` (layout in docs/EXTERNAL-RECORDS.md).
///
/// Every file is written to a hidden temporary name in its own directory
/// and renamed into place, so a crawler reading the directory sees the old
/// record or the new one, never part of one; a record is removed with
/// `unlink` (a missing file is not an error). A directory that cannot be
/// written makes a call throw a `CoreDataError` in `NSCocoaErrorDomain`
/// (513 no permission, 640 out of space, 642 read-only volume, 512
/// otherwise) with `NSFilePathErrorKey` naming the path; the record that
/// was there is left whole.
///
/// A store added with `NSExternalRecordsDirectoryOption` has one
/// (`PersistentStore.externalRecordWriter`) that its coordinator drives
/// after each save commits; the daemon makes its own for the stores it
/// exports. Thread-safe: writes of different records run in parallel, the
/// change feed is appended under a lock (and `flock(2)` for other processes).
///
/// ```swift
/// let writer = try ExternalRecordWriter(configuration: .init(directory: recordsURL),
///                                       model: model, storeIdentifier: store.identifier, storeURL: store.url)
/// try writer.writeRecord(for: note)          // <records>/<uuid>/Note/12.json
/// try writer.removeRecord(for: deletedID)
/// let count = try writer.rebuild(from: context)
/// ```
public final class ExternalRecordWriter: @unchecked Sendable {
    public let configuration: ExternalRecordsConfiguration
    public let storeIdentifier: String
    /// The store the records describe, as written to `store-file`.
    public private(set) var storeURL: URL?
    let model: ManagedObjectModel
    /// `<directory>/<store UUID>`.
    public let storeFolder: URL
    private let storeFolderPath: String
    private let plans: [ObjectIdentifier: ExternalRecordContent.Plan]
    /// Guards the catching-up state below.
    private let stateLock = NSLock()
    /// Guards the change feed's position (appends are serialized).
    private let feedLock = NSLock()

    // Catching up after failures (the coordinator's use; see `recordCommittedSave`).
    var pendingIDs = Set<ManagedObjectID>()
    var needsRebuildFlag = false
    var lastErrorValue: Error?
    /// Past this many objects waiting, a full rebuild is cheaper to keep than the list.
    static let pendingLimit = 10_000

    // The change feed's last sequence number and the file size it was read at.
    private var feedSequence: Int64?
    private var feedSize: off_t = -1

    /// Creates `<directory>/<storeUUID>/` with `store-file` (the store URL)
    /// and `model.mom` (the model, compiled; rewritten only when it differs).
    /// - Throws: a file-write error naming the path when the folder cannot be made.
    public convenience init(configuration: ExternalRecordsConfiguration, model: ManagedObjectModel,
                            storeIdentifier: String, storeURL: URL?) throws {
        self.init(unpreparedConfiguration: configuration, model: model, storeIdentifier: storeIdentifier, storeURL: storeURL)
        try prepareStoreFolder()
    }

    /// A writer that has not touched the disk yet (the coordinator's: a
    /// folder it cannot make yet must not stop the store from opening).
    init(unpreparedConfiguration configuration: ExternalRecordsConfiguration, model: ManagedObjectModel,
         storeIdentifier: String, storeURL: URL?) {
        self.configuration = configuration
        self.model = model
        self.storeIdentifier = storeIdentifier
        self.storeURL = storeURL
        self.storeFolder = ExternalRecordsLayout.storeFolder(configuration.directory, storeIdentifier)
        var folderPath = storeFolder.path
        while folderPath.count > 1 && folderPath.hasSuffix("/") { folderPath.removeLast() }
        self.storeFolderPath = folderPath
        var plans: [ObjectIdentifier: ExternalRecordContent.Plan] = [:]
        for entity in model.entities {
            plans[ObjectIdentifier(entity)] = ExternalRecordContent.Plan(entity: entity, exportsAllAttributesWhenNoneFlagged: configuration.exportsAllAttributesWhenNoneFlagged)
        }
        self.plans = plans
    }

    // MARK: - Public API

    /// Where the record of `objectID` lives: `<store folder>/<Entity>/<pk>.<ext>`.
    public func recordURL(for objectID: ManagedObjectID) -> URL {
        ExternalRecordsLayout.entityFolder(storeFolder, objectID.entity.name)
            .appendingPathComponent(ExternalRecordsLayout.recordName(primaryKey: objectID.primaryKey ?? 0, fileExtension: configuration.fileExtension))
    }

    /// Where the plain-text rendering of `objectID`'s record lives (written
    /// only with `writesPlainText`).
    public func plainTextURL(for objectID: ManagedObjectID) -> URL {
        ExternalRecordsLayout.entityFolder(storeFolder, objectID.entity.name)
            .appendingPathComponent(ExternalRecordsLayout.recordName(primaryKey: objectID.primaryKey ?? 0, fileExtension: ExternalRecordsLayout.plainTextExtension))
    }

    /// The names of the properties `entity`'s records hold (sorted), and
    /// those indexers should index (PD-11, PD-12, PD-12a).
    public func exportedPropertyNames(of entity: EntityDescription) -> (stored: [String], indexed: [String]) {
        let plan = plan(for: entity)
        return (plan.properties.map(\.name), plan.indexed)
    }

    /// Writes (replaces) the record of `object` from its current values:
    /// its entity's exported properties, entity name, object URI, store
    /// UUID, global identifier when the store keeps history, modification
    /// time. Call it on the object's context's queue. An object of an entity
    /// with nothing to export writes nothing and returns false.
    /// - Throws: 134070 for an object not saved yet or of another store; a
    ///   file-write error naming the path.
    @discardableResult public func writeRecord(for object: ManagedObject) throws -> Bool {
        let id = object.objectID
        guard !id.isTemporaryID, id.storeIdentifier == storeIdentifier else {
            throw CoreDataError(.persistentStoreOperation, id.isTemporaryID
                ? "\(id) has a temporary ID: save the object before writing its external record"
                : "\(id) belongs to store \(id.storeIdentifier ?? "?"), not to \(storeIdentifier) whose records this writer writes")
        }
        let plan = plan(for: id.entity)
        guard !plan.properties.isEmpty else { return false }
        var values: [String: Any] = [:]
        for property in plan.properties {
            let value = try object.value(forKey: property.name)
            if let relationship = property as? RelationshipDescription {
                values[property.name] = Self.relationshipValue(value, relationship)
            } else if let value {
                values[property.name] = value
            }
        }
        // An ID read from persistent history names no open store: the store
        // is found by its identifier through the object's coordinator, so the
        // record still carries the global identifier.
        let store = id.persistentStore ?? object.managedObjectContext?.persistentStoreCoordinator.store(withIdentifier: storeIdentifier)
        var gid: UUID?
        if let store, store.recordsPersistentHistory {
            gid = try store.globalIdentifiers(for: [id])[id]
        }
        let source = ExternalRecordContent.Source(objectID: id, globalIdentifier: gid, values: values)
        return try write([source], deletes: [], deleteIDs: [:]).written == 1
    }

    /// Removes the record (and its `.txt` rendering) of an object that was deleted.
    /// - Throws: a file-write error naming the path (not for a missing file).
    public func removeRecord(for objectID: ManagedObjectID) throws {
        _ = try write([], deletes: [objectID], deleteIDs: [:])
    }

    /// Rewrites the whole store folder from what `context`'s coordinator
    /// holds in this writer's store: every exportable object written, every
    /// record file of this store that no longer has an object removed (with
    /// its rendering), stale temporary files removed, other files left
    /// alone. Reads the store's saved rows, not the context's unsaved
    /// changes. Returns the number of records written.
    /// - Throws: 134070 when the coordinator has no store with this
    ///   writer's identifier; a file-write error naming the path.
    @discardableResult public func rebuild(from context: ManagedObjectContext) throws -> Int {
        let coordinator = context.persistentStoreCoordinator
        guard let store = coordinator.persistentStores.first(where: { $0.identifier == storeIdentifier }) else {
            throw CoreDataError(.persistentStoreOperation, "the context's coordinator has no store \(storeIdentifier) to rebuild the external records of")
        }
        coordinator.lock()
        defer { coordinator.unlock() }
        return try rebuild(from: store)
    }

    /// The error of the last write the coordinator made for its store that
    /// failed; nil again once every record it missed has been written.
    public var lastError: Error? { withStateLock { lastErrorValue } }

    /// How many saved objects' records wait to be written or removed since
    /// a write failed (a full rebuild may be pending instead: `needsCatchUp`).
    public var pendingObjectCount: Int { withStateLock { pendingIDs.count } }

    /// True while records the coordinator could not write are waiting.
    public var needsCatchUp: Bool { withStateLock { needsRebuildFlag || !pendingIDs.isEmpty } }

    func withStateLock<T>(_ body: () throws -> T) rethrows -> T {
        stateLock.lock()
        defer { stateLock.unlock() }
        return try body()
    }

    // MARK: - The store folder

    /// Makes the store folder and writes `store-file` and `model.mom`.
    func prepareStoreFolder() throws {
        try makeDirectory(storeFolder)
        let storeFile = storeFolder.appendingPathComponent(ExternalRecordsLayout.storeFileName)
        let url = withStateLock { storeURL }
        try writeIfChanged(Data(((url?.absoluteString ?? "") + "\n").utf8), to: storeFile)
        // A model the compiled form cannot hold (ObjectGraph's model writer
        // refuses a few features) gets no model.mom; records do not need it.
        if let mom = try? CompiledModelWriter.archive(model) {
            try writeIfChanged(mom, to: storeFolder.appendingPathComponent(ExternalRecordsLayout.modelFileName))
        }
    }

    /// The store moved (PC-14): `store-file` names the new place.
    func storeDidMove(to url: URL?) {
        withStateLock { storeURL = url }
        try? prepareStoreFolder()
    }

    private func storeFolderIsReady() -> Bool {
        var info = stat()
        return stat(storeFolder.appendingPathComponent(ExternalRecordsLayout.storeFileName).path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    private func writeIfChanged(_ data: Data, to url: URL) throws {
        if let existing = FileManager.default.contents(atPath: url.path), existing == data { return }
        do { try Self.writeAtomically(data, to: url) } catch let error as POSIXErrorWithPath {
            throw Self.fileError(error.code, error.path, error.action)
        }
    }

    // MARK: - Writing batches

    func plan(for entity: EntityDescription) -> ExternalRecordContent.Plan {
        if let plan = plans[ObjectIdentifier(entity)] { return plan }
        // An entity of another model with the same name (a copy): plan by name.
        if let same = model.entitiesByName[entity.name], let plan = plans[ObjectIdentifier(same)] { return plan }
        return ExternalRecordContent.Plan(entity: entity, exportsAllAttributesWhenNoneFlagged: configuration.exportsAllAttributesWhenNoneFlagged)
    }

    static func relationshipValue(_ value: Any?, _ relationship: RelationshipDescription) -> Any? {
        guard let value = nilIfNSNull(value) else { return relationship.isToMany ? [ManagedObjectID]() : nil }
        if let object = value as? ManagedObject { return object.objectID }
        if let id = value as? ManagedObjectID { return id }
        let members: [ManagedObjectID]
        if let ordered = value as? [ManagedObject] { return ordered.map(\.objectID) }
        else if let set = value as? Set<ManagedObject> { members = set.map(\.objectID) }
        else if let ids = value as? [ManagedObjectID] { members = ids }
        else { return nil }
        return relationship.isOrdered ? members : members.map { (ExternalRecordContent.uriString($0), $0) }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// What a batch did: how many records it wrote, which objects it
    /// finished (written or removed), and the error that stopped it.
    struct BatchResult {
        var written = 0
        var finished = Set<ManagedObjectID>()
        var error: Error?
    }

    /// Writes `upserts` and removes `deletes`, then appends their lines to
    /// the change feed. Throws the first error, after the feed has the
    /// lines of what did happen.
    @discardableResult
    func write(_ upserts: [ExternalRecordContent.Source], deletes: [ManagedObjectID], deleteIDs: [ManagedObjectID: UUID]) throws -> BatchResult {
        let result = writeBatch(upserts, deletes: deletes, deleteIDs: deleteIDs)
        if let error = result.error { throw error }
        return result
    }

    func writeBatch(_ upserts: [ExternalRecordContent.Source], deletes: [ManagedObjectID], deleteIDs: [ManagedObjectID: UUID]) -> BatchResult {
        var result = BatchResult()
        if !storeFolderIsReady() {
            do { try prepareStoreFolder() } catch { result.error = error; return result }
        }
        let modified = ExternalRecordContent.modifiedValue(Date(), format: configuration.format)
        let format = configuration.format
        // Encoding and file I/O run on both cores for large batches; every
        // record is its own file, so the writes are independent.
        var outcomes = [Error?](repeating: nil, count: upserts.count)
        var wrote = [Bool](repeating: false, count: upserts.count)
        let work = { (i: Int) -> (Bool, Error?) in
            let source = upserts[i]
            let plan = self.plan(for: source.objectID.entity)
            guard !plan.properties.isEmpty else { return (false, nil) }
            do {
                let record = ExternalRecordContent.record(for: source, plan: plan, format: format, modified: modified)
                let (directory, name) = self.recordLocation(source.objectID, fileExtension: self.configuration.fileExtension)
                let data: Data
                do { data = try ExternalRecordContent.data(of: record, format: format) } catch {
                    throw CoreDataError(.fileWriteUnknown, "\(directory)/\(name): the record of \(source.objectID) cannot be encoded as \(format.rawValue): \(error)",
                                        userInfo: [CoreDataError.filePathErrorKey: "\(directory)/\(name)"])
                }
                try self.writeFile(data, directory: directory, name: name)
                if self.configuration.writesPlainText {
                    try self.writeFile(Data(ExternalRecordContent.plainText(of: record, plan: plan).utf8), directory: directory,
                                       name: "\(source.objectID.primaryKey ?? 0).\(ExternalRecordsLayout.plainTextExtension)")
                }
                return (true, nil)
            } catch {
                return (false, error)
            }
        }
        if upserts.count >= 256 {
            let chunks = min(8, max(2, ProcessInfo.processInfo.activeProcessorCount * 2))
            outcomes.withUnsafeMutableBufferPointer { outcomeBuffer in
                wrote.withUnsafeMutableBufferPointer { wroteBuffer in
                    let outcomeBase = outcomeBuffer.baseAddress!, wroteBase = wroteBuffer.baseAddress!
                    DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                        var i = chunk
                        while i < upserts.count {
                            let (ok, error) = work(i)
                            (wroteBase + i).pointee = ok
                            (outcomeBase + i).pointee = error
                            // One failure (a folder gone) fails every write after it: stop early.
                            if error != nil { break }
                            i += chunks
                        }
                    }
                }
            }
        } else {
            for i in upserts.indices {
                let (ok, error) = work(i)
                wrote[i] = ok
                outcomes[i] = error
                if error != nil { break }
            }
        }
        var feed: [[String: Any]] = []
        for (i, source) in upserts.enumerated() {
            if let error = outcomes[i] {
                if result.error == nil { result.error = error }
                continue
            }
            // Stopped early, a later record may not have been tried: only a
            // write that happened, or a record with nothing to export, is done.
            if wrote[i] {
                result.written += 1
                result.finished.insert(source.objectID)
                if configuration.writesChangeFeed { feed.append(feedEntry("upsert", source.objectID, source.globalIdentifier, path: true)) }
            } else if plan(for: source.objectID.entity).properties.isEmpty {
                result.finished.insert(source.objectID)
            }
        }
        if result.error == nil {
            for id in deletes {
                do {
                    let gid = deleteIDs[id] ?? (configuration.writesChangeFeed ? existingGlobalIdentifier(of: id) : nil)
                    let existed = try removeFile(recordURL(for: id))
                    if configuration.writesPlainText { _ = try removeFile(plainTextURL(for: id)) }
                    result.finished.insert(id)
                    if existed && configuration.writesChangeFeed { feed.append(feedEntry("delete", id, gid, path: false)) }
                } catch {
                    result.error = error
                    break
                }
            }
        }
        if !feed.isEmpty {
            do { try appendToChangeFeed(feed) } catch { if result.error == nil { result.error = error } }
        }
        return result
    }

    /// The global identifier a record on disk names (for the feed line of
    /// its deletion, when the store can no longer say).
    private func existingGlobalIdentifier(of id: ManagedObjectID) -> UUID? {
        guard let data = FileManager.default.contents(atPath: recordURL(for: id).path),
              let record = try? ExternalRecordContent.parse(data).record,
              let text = record[ExternalRecordContent.globalIdentifierKey] as? String else { return nil }
        return UUID(uuidString: text)
    }

    private func feedEntry(_ op: String, _ id: ManagedObjectID, _ gid: UUID?, path: Bool) -> [String: Any] {
        var entry: [String: Any] = [
            "op": op, "id": ExternalRecordContent.documentID(id, globalIdentifier: gid),
            "entity": id.entity.name, "uri": ExternalRecordContent.uriString(id),
        ]
        if path { entry["path"] = "\(id.entity.name)/\(ExternalRecordsLayout.recordName(primaryKey: id.primaryKey ?? 0, fileExtension: configuration.fileExtension))" }
        return entry
    }

    // MARK: - The change feed

    /// Appends one line per entry, numbered on from the feed's last line.
    /// A line is complete when it ends in a newline; a reader stops at the last one.
    private func appendToChangeFeed(_ entries: [[String: Any]]) throws {
        let url = storeFolder.appendingPathComponent(ExternalRecordsLayout.changeFeedName)
        feedLock.lock()
        defer { feedLock.unlock() }
        do {
            let fd = open(url.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw Self.fileError(errno, url.path, "cannot open the change feed") }
            defer { close(fd) }
            // Another process (the daemon beside an application) may append too.
            flock(fd, LOCK_EX)
            defer { flock(fd, LOCK_UN) }
            var info = stat()
            fstat(fd, &info)
            if feedSequence == nil || info.st_size != feedSize {
                feedSequence = Self.lastSequence(in: url)
            }
            var sequence = feedSequence ?? 0
            var text = Data()
            for var entry in entries {
                sequence += 1
                entry["seq"] = sequence
                text.append(try JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys, .withoutEscapingSlashes]))
                text.append(0x0A)
            }
            do { try Self.writeAll(fd, text, url.path) } catch let error as POSIXErrorWithPath {
                feedSequence = nil
                throw Self.fileError(error.code, error.path, "cannot append to the change feed")
            }
            feedSequence = sequence
            feedSize = info.st_size + off_t(text.count)
        }
    }

    /// The `seq` of the feed's last complete line; 0 for an empty or missing feed.
    static func lastSequence(in url: URL) -> Int64 {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { return 0 }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        var window: UInt64 = 4096
        while true {
            let start = size > window ? size - window : 0
            try? handle.seek(toOffset: start)
            let data = (try? handle.readToEnd()) ?? Data()
            let lines = data.split(separator: 0x0A, omittingEmptySubsequences: true)
            // The last line may be cut by a crashed writer: the one before it then counts.
            for line in lines.reversed() {
                if let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
                   let seq = (object["seq"] as? NSNumber)?.int64Value { return seq }
            }
            if start == 0 { return 0 }
            window *= 4
        }
    }

    // MARK: - Files

    /// `<store folder>/<Entity>` as a path, and a file's name in it: the
    /// write path builds strings, not URLs (URL operations cost more than
    /// encoding a record).
    func recordLocation(_ id: ManagedObjectID, fileExtension: String) -> (directory: String, name: String) {
        (storeFolderPath + "/" + id.entity.name, "\(id.primaryKey ?? 0).\(fileExtension)")
    }

    private func writeFile(_ data: Data, directory: String, name: String) throws {
        do {
            try Self.writeAtomically(data, directory: directory, name: name)
        } catch let error as POSIXErrorWithPath where error.code == ENOENT {
            // The entity folder (or the whole store folder) is not there yet.
            if !storeFolderIsReady() { try prepareStoreFolder() }
            try makeDirectory(URL(fileURLWithPath: directory, isDirectory: true))
            do { try Self.writeAtomically(data, directory: directory, name: name) } catch let error as POSIXErrorWithPath {
                throw Self.fileError(error.code, error.path, error.action)
            }
        } catch let error as POSIXErrorWithPath {
            throw Self.fileError(error.code, error.path, error.action)
        }
    }

    /// Removes a file; false when it was not there. A path through a
    /// non-directory (a folder replaced by a file) is an error: the record
    /// may be back when the folder is.
    private func removeFile(_ url: URL) throws -> Bool {
        if unlink(url.path) == 0 { return true }
        let code = errno
        if code == ENOENT { return false }
        throw Self.fileError(code, url.path, "cannot remove the record")
    }

    private func makeDirectory(_ url: URL) throws {
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue { return }
            let code = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError).map { Int32($0.code) } ?? EIO
            throw Self.fileError(code == 0 ? EIO : code, url.path, "cannot create the directory (\(error.localizedDescription))")
        }
    }

    struct POSIXErrorWithPath: Error {
        var code: Int32
        var path: String
        var action: String
    }

    static func writeAtomically(_ data: Data, to url: URL) throws {
        try writeAtomically(data, directory: url.deletingLastPathComponent().path, name: url.lastPathComponent)
    }

    /// Writes `data` to a hidden temporary file in `directory`, then renames
    /// it to `name`: readers see the old file or the new one, whole.
    static func writeAtomically(_ data: Data, directory: String, name: String) throws {
        let path = directory + "/" + name
        let temporary = "\(directory)/.\(name).\(getpid())-\(String(UInt64.random(in: 0...UInt64.max) & 0xFFFF_FFFF_FFFF, radix: 16)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXErrorWithPath(code: errno, path: path, action: "cannot create a temporary file in \(directory)") }
        do {
            try writeAll(fd, data, path)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw POSIXErrorWithPath(code: code, path: path, action: "cannot rename the temporary file into place")
        }
    }

    private static func writeAll(_ fd: Int32, _ data: Data, _ path: String) throws {
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw POSIXErrorWithPath(code: errno, path: path, action: "cannot write")
                }
                offset += n
            }
        }
    }

    /// Core Data's file-write error for an errno, naming the path.
    static func fileError(_ code: Int32, _ path: String, _ action: String) -> CoreDataError {
        let cocoa: CoreDataError.Code
        switch code {
        case EACCES, EPERM: cocoa = .fileWriteNoPermission
        case ENOSPC, EDQUOT: cocoa = .fileWriteOutOfSpace
        case EROFS: cocoa = .fileWriteVolumeReadOnly
        default: cocoa = .fileWriteUnknown
        }
        return CoreDataError(cocoa, "external records: \(path): \(action): \(String(cString: strerror(code)))",
                             userInfo: [CoreDataError.filePathErrorKey: path,
                                        CoreDataError.underlyingErrorKey: NSError(domain: NSPOSIXErrorDomain, code: Int(code))])
    }
}
