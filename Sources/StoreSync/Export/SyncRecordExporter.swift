#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph

/// Keeps a directory of external records (docs/EXTERNAL-RECORDS.md) in step
/// with a sync group's hub. Every change of the group passes through the
/// hub (applications' saves pulled from the stores, the engine's own
/// settlements, changes made while no daemon ran and pulled at the next
/// round), so the hub's persistent history is the one feed to follow.
///
/// The exporter reads the hub's history after its cursor, writes the record
/// of every object inserted or updated there and removes the record of every
/// object deleted, then moves the cursor. The cursor (`export-cursor.json`
/// in the group's state directory: the hub's store identifier, the history
/// position the records reflect, and the export settings) is written after
/// the records, with a rename, so a crash between the two makes the next
/// export write some records again, never skip one. Without a usable cursor
/// (none yet, another hub, other settings, or history purged past it:
/// 134301) it rebuilds the directory from the hub's objects instead
/// (`rebuild(reason:)`).
///
/// Not thread-safe: call it where the group's rounds run (the daemon's group
/// queue), between rounds, so the hub does not move under it.
///
/// ```swift
/// let group = try SyncGroup(configuration: configuration)
/// let exporter = try SyncRecordExporter(group: group,
///     configuration: ExternalRecordsConfiguration(directory: URL(fileURLWithPath: "/srv/notes/records")))
/// try group.runRound()
/// let report = try exporter.exportChanges()   // the first one rebuilds
/// print(report.written, report.removed, report.position)
/// ```
public final class SyncRecordExporter {
    /// What one export did.
    public struct Report: Sendable, Equatable {
        /// The whole directory was rewritten (`rebuildReason` says why).
        public var rebuilt: Bool
        public var rebuildReason: String?
        /// Records written (each rebuilt record counts once).
        public var written: Int
        /// Records removed for objects deleted from the hub.
        public var removed: Int
        /// The hub history position the records now reflect.
        public var position: Int64
        /// Hub transactions read (0 for a rebuild).
        public var transactions: Int

        public init(rebuilt: Bool, rebuildReason: String?, written: Int, removed: Int, position: Int64, transactions: Int) {
            self.rebuilt = rebuilt
            self.rebuildReason = rebuildReason
            self.written = written
            self.removed = removed
            self.position = position
            self.transactions = transactions
        }
    }

    /// What the cursor file holds.
    struct Cursor: Codable, Equatable {
        var version = 1
        /// The hub's store identifier: a new hub (its file deleted) starts over.
        var store: String
        var position: Int64
        /// The settings the records were written with: others start over.
        var settings: String
        /// The records' extension then (absent in a cursor of an older build):
        /// a rebuild with another one removes the old files.
        var fileExtension: String?
    }

    /// Hub row changes read per history page: the records of one page are
    /// written, then the cursor moves, so an interrupted catch-up keeps its
    /// progress and memory stays bounded by a page.
    public static let pageChanges = 2_000

    public let configuration: ExternalRecordsConfiguration
    /// Where the cursor is kept.
    public let cursorURL: URL
    private let hub: EmbeddedHub
    private let model: ManagedObjectModel
    private let context: ManagedObjectContext
    /// Made at the first export that can create the store's folder: a
    /// directory that cannot be written yet must not stop the group opening.
    private var writer: ExternalRecordWriter?

    /// The file name of the cursor in the group's state directory.
    public static let cursorFileName = "export-cursor.json"

    /// An exporter of `group`'s hub. Nothing is written until the first
    /// `exportChanges()` or `rebuild()`.
    /// - Parameter cursorURL: default `<group state directory>/export-cursor.json`.
    /// - Throws: 134070 when the group's hub is not the embedded hub (the
    ///   records are read from its store).
    public init(group: SyncGroup, configuration: ExternalRecordsConfiguration, cursorURL: URL? = nil) throws {
        guard let hub = group.hub as? EmbeddedHub else {
            throw CoreDataError(.persistentStoreOperation,
                                "sync group \(group.configuration.name): external records are exported from the embedded hub, and this group's hub is a \(type(of: group.hub))")
        }
        self.hub = hub
        self.configuration = configuration
        self.model = group.configuration.model
        self.cursorURL = cursorURL ?? group.configuration.stateDirectory.appendingPathComponent(Self.cursorFileName)
        context = ManagedObjectContext(coordinator: hub.coordinator)
    }

    /// The hub's store identifier: the records' folder is `<directory>/<this>/`.
    public var storeIdentifier: String { hub.store.identifier }

    /// The folder this exporter's records live in.
    public var storeDirectory: URL { configuration.directory.appendingPathComponent(storeIdentifier, isDirectory: true) }

    /// The position the records reflect, from the cursor file (nil: none, or
    /// one written for another hub or other settings).
    public func exportedPosition() -> Int64? {
        guard let cursor = readCursor(), cursor.store == storeIdentifier, cursor.settings == settingsFingerprint else { return nil }
        return cursor.position
    }

    /// Brings the records up to the hub's current position: the history
    /// after the cursor, page by page, or a rebuild when there is no usable
    /// cursor. Throws the writer's error (a directory that cannot be
    /// written: CocoaError 513/640/642 naming the path) with the cursor left
    /// at the last page written, so the next call goes on from there.
    @discardableResult
    public func exportChanges() throws -> Report {
        let current = try hub.currentPosition()
        guard let cursor = readCursor() else { return try rebuild(reason: "no export cursor yet (first export)") }
        guard cursor.store == storeIdentifier else {
            return try rebuild(reason: "the cursor belongs to hub \(cursor.store), not \(storeIdentifier) (the hub was recreated)")
        }
        guard cursor.settings == settingsFingerprint else { return try rebuild(reason: "the export settings changed") }
        guard cursor.position <= current else {
            return try rebuild(reason: "the cursor (position \(cursor.position)) is past the hub's newest position \(current)")
        }
        let writer = try makeWriter()
        var report = Report(rebuilt: false, rebuildReason: nil, written: 0, removed: 0, position: cursor.position, transactions: 0)
        var from = cursor.position
        while from < current {
            let request = PersistentHistoryChangeRequest.fetchHistory(after: PersistentHistoryToken(storeIdentifier: storeIdentifier, position: from))
            request.affectedStores = [hub.store]
            request.changeLimit = Self.pageChanges
            let transactions: [PersistentHistoryTransaction]
            do {
                transactions = try hub.coordinator.execute(request).transactions
            } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired {
                // Only after the exporter failed for longer than the
                // retention: the daemon exports before it purges.
                var rebuilt = try rebuild(reason: "the hub's history after the cursor (position \(from)) was purged")
                rebuilt.written += report.written
                rebuilt.removed += report.removed
                return rebuilt
            }
            guard let last = transactions.last else { break }
            // The last change of each object in the page decides: its record
            // is written once however often it changed, or removed.
            var order: [ManagedObjectID] = []
            var deleted: [ManagedObjectID: Bool] = [:]
            for transaction in transactions {
                for change in transaction.changes where !EmbeddedHub.bookkeeping.contains(change.entity.name) {
                    if deleted[change.changedObjectID] == nil { order.append(change.changedObjectID) }
                    deleted[change.changedObjectID] = change.changeType == .delete
                }
            }
            let (written, removed) = try write(order, deleted: deleted, with: writer)
            report.written += written
            report.removed += removed
            report.transactions += transactions.count
            from = last.token.position
            try writeCursor(Cursor(store: storeIdentifier, position: from, settings: settingsFingerprint, fileExtension: configuration.fileExtension))
        }
        report.position = from
        return report
    }

    /// Rewrites the records from the hub's objects: every object of the
    /// group's model written, the record files of objects the hub no longer
    /// holds removed, other files left alone; then sets the cursor to the
    /// hub position read before it started.
    ///
    /// Not `ExternalRecordWriter.rebuild(from:)`: that one exports every
    /// entity of the store, and the hub's store also holds the engine's
    /// bookkeeping (cursors, conflicts, pending pushes), which are no records.
    /// This walks the group's model only, with the writer's public calls.
    @discardableResult
    public func rebuild(reason: String = "asked for") throws -> Report {
        let position = try hub.currentPosition()
        let writer = try makeWriter()
        let fileExtension = writer.configuration.fileExtension
        // Files of the extension the previous settings wrote (same hub, same
        // directory) are records too, of a format no longer written.
        var oldExtensions: Set<String> = ["txt"]
        if let previous = readCursor(), previous.store == storeIdentifier, let old = previous.fileExtension,
           previous.settings.hasPrefix(configuration.directory.standardizedFileURL.path + "|") {
            oldExtensions.insert(old)
        }
        oldExtensions.remove(fileExtension)
        var written = 0, removed = 0
        try context.performAndWait {
            defer { context.reset() }
            for entity in model.entities where !entity.isAbstract && !EmbeddedHub.bookkeeping.contains(entity.name) {
                var live = Set<Int64>()
                var offset = 0
                while true {
                    // Pages bound what the context holds (the hub does not
                    // change meanwhile: this runs on the group's queue).
                    let request = FetchRequest(entityName: entity.name)
                    request.includesSubentities = false
                    request.fetchLimit = Self.pageChanges
                    request.fetchOffset = offset
                    let page = try context.fetch(request)
                    for object in page where object.entity.name == entity.name {
                        if try writer.writeRecord(for: object), case .primaryKey(let key) = object.objectID.referenceObject {
                            written += 1
                            live.insert(key)
                        }
                    }
                    context.reset()
                    if page.count < Self.pageChanges { break }
                    offset += page.count
                }
                let folder = writer.recordURL(for: ManagedObjectID(entity: entity, storeIdentifier: storeIdentifier, primaryKey: 1)).deletingLastPathComponent()
                for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
                    // Only `<pk>.<extension>` names are records (or their
                    // renderings); anything else is someone's file.
                    guard !name.hasPrefix("."), let dot = name.firstIndex(of: ".") else { continue }
                    let stem = String(name[..<dot]), ext = String(name[name.index(after: dot)...])
                    guard let key = Int64(stem), key > 0, String(key) == stem else { continue }
                    if ext == fileExtension, !live.contains(key) {
                        // Through the writer: its rendering goes too, and the change feed says so.
                        try writer.removeRecord(for: ManagedObjectID(entity: entity, storeIdentifier: storeIdentifier, primaryKey: key))
                        removed += 1
                    } else if oldExtensions.contains(ext), ext != "txt" || !configuration.writesPlainText || !live.contains(key) {
                        // An old format's record, or a rendering no longer wanted.
                        if unlink(folder.appendingPathComponent(name).path) != 0 && errno != ENOENT {
                            throw CoreDataError(.fileWriteUnknown, "cannot remove \(folder.appendingPathComponent(name).path): \(String(cString: strerror(errno)))",
                                                userInfo: [CoreDataError.filePathErrorKey: folder.appendingPathComponent(name).path])
                        }
                    }
                }
            }
        }
        try writeCursor(Cursor(store: storeIdentifier, position: position, settings: settingsFingerprint, fileExtension: configuration.fileExtension))
        return Report(rebuilt: true, rebuildReason: reason, written: written, removed: removed, position: position, transactions: 0)
    }

    // MARK: - Writing

    private func write(_ objects: [ManagedObjectID], deleted: [ManagedObjectID: Bool], with writer: ExternalRecordWriter) throws -> (Int, Int) {
        try context.performAndWait {
            // Read, written, forgotten: the context holds one page at most.
            defer { context.reset() }
            var written = 0, removed = 0
            for id in objects {
                // An ID read from history names no open store; the writer
                // finds the record's global identifier through the store,
                // so the object is loaded through the coordinator's own ID.
                let object: ManagedObject?
                if deleted[id] == true {
                    object = nil
                } else if let current = hub.coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation) {
                    do {
                        object = try context.existingObject(with: current)
                    } catch let error as CoreDataError where error.code == .managedObjectContextReferentialIntegrity {
                        // Deleted by a transaction after this page, whose
                        // page removes the record as well.
                        object = nil
                    }
                } else {
                    object = nil
                }
                guard let object else {
                    try writer.removeRecord(for: id)
                    removed += 1
                    continue
                }
                if try writer.writeRecord(for: object) { written += 1 }
            }
            return (written, removed)
        }
    }

    private func makeWriter() throws -> ExternalRecordWriter {
        if let writer { return writer }
        let made = try ExternalRecordWriter(configuration: configuration, model: model, storeIdentifier: storeIdentifier, storeURL: hub.url)
        writer = made
        return made
    }

    // MARK: - Cursor

    /// Every setting that changes what a record file holds or where it is.
    var settingsFingerprint: String {
        [configuration.directory.standardizedFileURL.path, configuration.format.rawValue, configuration.fileExtension,
         "all=\(configuration.exportsAllAttributesWhenNoneFlagged)", "text=\(configuration.writesPlainText)",
         "feed=\(configuration.writesChangeFeed)"].joined(separator: "|")
    }

    func readCursor() -> Cursor? {
        guard let data = try? Data(contentsOf: cursorURL) else { return nil }
        // A cursor that cannot be read is no cursor: the rebuild that follows
        // rewrites it.
        return try? JSONDecoder().decode(Cursor.self, from: data)
    }

    /// Written to a temporary file, flushed, then renamed over the old one:
    /// after a crash the cursor is the old one or the new one, whole.
    func writeCursor(_ cursor: Cursor) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(cursor)
        let temporary = cursorURL.deletingLastPathComponent().appendingPathComponent(".\(cursorURL.lastPathComponent).tmp")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
            throw CoreDataError(.fileWriteUnknown, "cannot create \(temporary.path) to write the export cursor",
                                userInfo: [CoreDataError.filePathErrorKey: temporary.path])
        }
        let handle = try FileHandle(forWritingTo: temporary)
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            throw error
        }
        if rename(temporary.path, cursorURL.path) != 0 {
            let code = errno
            throw CoreDataError(.fileWriteUnknown, "cannot rename \(temporary.path) to \(cursorURL.path): \(String(cString: strerror(code)))",
                                userInfo: [CoreDataError.filePathErrorKey: cursorURL.path])
        }
    }
}
