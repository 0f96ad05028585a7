#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A writer's log: one JSON object per committed save, appended after the
/// save's commit and fsync'd, so a checker can count every change the
/// writer made (docs/WORKLOAD.md). A save that failed is not logged.
public struct WriterSave: Codable, Sendable, Equatable {
    /// The writer's name (`w1`); its objects are named `<writer>-r<n>` and `<writer>-f<n>`.
    public var writer: String
    /// The store it wrote (the group's store name, `s1`).
    public var store: String
    /// 1, 2, … across every run of the writer on this log.
    public var save: Int
    /// `CLOCK_MONOTONIC` right after the commit returned.
    public var committedNanoseconds: UInt64
    /// One operation per object the save touched, with the object's state after it.
    public var ops: [WriterOp]

    public init(writer: String, store: String, save: Int, committedNanoseconds: UInt64, ops: [WriterOp]) {
        self.writer = writer
        self.store = store
        self.save = save
        self.committedNanoseconds = committedNanoseconds
        self.ops = ops
    }
}

/// What a save did to one object. Inserts and updates carry the object's
/// whole state after the save (a `Record`'s `a` and folder name, nil for
/// none); deletes only the name.
public struct WriterOp: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case insert, update, delete }
    public var kind: Kind
    /// `Record` or `Folder`.
    public var entity: String
    public var name: String
    /// The global identifier (inserts; the checker knows it from there on).
    public var gid: UUID?
    public var a: Int64?
    public var folder: String?

    public init(kind: Kind, entity: String, name: String, gid: UUID? = nil, a: Int64? = nil, folder: String? = nil) {
        self.kind = kind
        self.entity = entity
        self.name = name
        self.gid = gid
        self.a = a
        self.folder = folder
    }
}

/// Appends saves to a log file: one `write(2)` of one line, then `fsync`.
public final class WriterLogFile {
    private let fd: Int32
    private let encoder: JSONEncoder

    public init(url: URL) throws {
        fd = open(url.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
    }

    deinit { close(fd) }

    public func append(_ save: WriterSave, sync: Bool = true) throws {
        var bytes = Array(try encoder.encode(save))
        bytes.append(UInt8(ascii: "\n"))
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            offset += written
        }
        if sync { fsync(fd) }
    }

    /// Every complete save in a log (a torn last line, from a writer killed
    /// while appending, is left out); an absent file is an empty log.
    public static func read(_ url: URL) throws -> [WriterSave] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        let data = try Data(contentsOf: url)
        let decoder = JSONDecoder()
        var saves: [WriterSave] = []
        for line in data.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            guard let save = try? decoder.decode(WriterSave.self, from: Data(line)) else { continue }
            saves.append(save)
        }
        return saves
    }
}

/// A writer's objects as its log leaves them: what every store must hold.
public struct WriterState: Sendable {
    public struct Object: Sendable, Equatable {
        public var entity: String
        public var name: String
        public var gid: UUID?
        public var a: Int64?
        public var folder: String?
        public var deleted = false
        /// Saves that changed it (each is at most one change row per store transaction).
        public var changes = 0
        /// The store whose writer owns it.
        public var owner: String
    }

    /// Every object ever inserted, by name (deleted ones kept, marked).
    public var objects: [String: Object] = [:]
    /// The highest object number used (`<writer>-r<n>`, `-f<n>`).
    public var counter = 0
    public var saves = 0
    public var ops = 0

    public init() {}

    public init(replaying saves: [WriterSave]) {
        for save in saves { apply(save) }
    }

    public mutating func apply(_ save: WriterSave) {
        saves = max(saves, save.save)
        for op in save.ops {
            ops += 1
            if let number = Int(op.name.split(separator: "-").last?.dropFirst() ?? "") { counter = max(counter, number) }
            switch op.kind {
            case .insert:
                objects[op.name] = Object(entity: op.entity, name: op.name, gid: op.gid, a: op.a, folder: op.folder, changes: 1, owner: save.store)
            case .update:
                objects[op.name, default: Object(entity: op.entity, name: op.name, owner: save.store)].a = op.a
                objects[op.name]!.folder = op.folder
                objects[op.name]!.changes += 1
            case .delete:
                objects[op.name, default: Object(entity: op.entity, name: op.name, owner: save.store)].deleted = true
                objects[op.name]!.changes += 1
            }
        }
    }

    public var live: [Object] { objects.values.filter { !$0.deleted } }
}
