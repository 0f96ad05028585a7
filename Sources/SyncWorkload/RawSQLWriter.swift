#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import Foundation

/// A writer that is not ObjectGraph: it writes a store's Core Data layout
/// with raw SQL through SQLite's C API, as any other program on the host
/// may (docs/WORKLOAD.md, "Raw SQL writers"). The file's history triggers
/// record its changes as a foreign writer's: no author, and consecutive
/// commits with no ObjectGraph transaction between them read as one
/// transaction (docs/HISTORY.md). It logs every committed transaction as
/// `WorkloadWriter` logs a save, so `WorkloadCheck` checks it the same way.
///
/// One transaction (`step`) makes up to `maxChanges` row changes of the
/// writer's own objects, in the orders a sync engine finds hardest when it
/// reads a transaction in parts: records pointing at a folder row the
/// transaction inserts only at its end (a forward to-one reference), updates
/// and moves of records made earlier in it, folders cleared of their
/// records then deleted, deletes of records inserted or updated earlier in
/// it. `burst` makes a run of small commits, which history cannot tell apart.
///
/// ```swift
/// let writer = try RawSQLWriter(name: "x1", storeName: "s1", store: url, log: logURL)
/// var rng = WorkloadRandom(seed: 7)
/// writer.step(maxChanges: 60, &rng)   // one transaction of up to 60 row changes
/// writer.burst(&rng)                  // several small commits back to back
/// ```
///
/// Needs root entities `Record` (`ZNAME`, an integer `ZA`, a to-one
/// `ZFOLDER`) and `Folder` (`ZNAME`) in Core Data's layout (the workload
/// model and the engine tests' model have them).
public final class RawSQLWriter {
    public let name: String
    public let storeName: String
    public private(set) var state: WriterState
    public private(set) var failedSaves = 0
    public private(set) var lastError: String?
    private var db: OpaquePointer?
    private let log: WriterLogFile
    private let syncLog: Bool
    private var recordEntity: Int64 = 0
    private var folderEntity: Int64 = 0
    /// Z_PK of each of the writer's objects, learned when inserted (or looked up by name after a restart).
    private var keys: [String: Int64] = [:]

    public init(name: String, storeName: String, store url: URL, log logURL: URL, syncLog: Bool = true) throws {
        self.name = name
        self.storeName = storeName
        guard sqlite3_open_v2(url.path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw RawSQLError("cannot open \(url.path): \(message)")
        }
        sqlite3_busy_timeout(db, 10_000)
        state = WriterState(replaying: try WriterLogFile.read(logURL).filter { $0.writer == name })
        log = try WriterLogFile(url: logURL)
        self.syncLog = syncLog
        let record = try integer("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record'")
        let folder = try integer("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder'")
        guard let record, let folder else { throw RawSQLError("\(url.path) has no Record and Folder entities in Core Data's layout") }
        recordEntity = record
        folderEntity = folder
    }

    deinit { sqlite3_close(db) }

    struct RawSQLError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: - SQL

    private func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "error \(sqlite3_errcode(db))"
            sqlite3_free(message)
            throw RawSQLError("\(text) (in: \(sql.prefix(120)))")
        }
    }

    private func integer(_ sql: String) throws -> Int64? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw RawSQLError(String(cString: sqlite3_errmsg(db))) }
        defer { sqlite3_finalize(statement) }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return sqlite3_column_type(statement, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 0)
        case SQLITE_DONE: return nil
        default: throw RawSQLError(String(cString: sqlite3_errmsg(db)))
        }
    }

    private func text(_ sql: String) throws -> String? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw RawSQLError(String(cString: sqlite3_errmsg(db))) }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let bytes = sqlite3_column_text(statement, 0) else { return nil }
        return String(cString: bytes)
    }

    /// The next Z_PK of an entity, reserved as Core Data reserves it (Z_PRIMARYKEY.Z_MAX).
    private func reserveKey(_ entity: String) throws -> Int64 {
        try execute("UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = '\(entity)'")
        guard let key = try integer("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = '\(entity)'") else { throw RawSQLError("no Z_PRIMARYKEY row for \(entity)") }
        return key
    }

    private func key(_ object: String, table: String) throws -> Int64 {
        if let known = keys[object] { return known }
        guard let found = try integer("SELECT Z_PK FROM \(table) WHERE ZNAME = '\(object)'") else {
            throw RawSQLError("writer \(name): its object \(object) is not in the store")
        }
        keys[object] = found
        return found
    }

    // MARK: - Transactions

    /// An object as the transaction being built leaves it.
    private struct Draft {
        var entity: String
        var a: Int64?
        var folder: String?
        var alive: Bool
        /// Existed before the transaction (else inserted by it).
        var existed: Bool
    }

    private func nextName(_ kind: String) -> String {
        state.counter += 1
        return "\(name)-\(kind)\(state.counter)"
    }

    /// One transaction of 1…`maxChanges` row changes; returns it as logged,
    /// or nil when it failed (rolled back, not logged).
    @discardableResult
    public func step(maxChanges: Int, _ rng: inout WorkloadRandom) -> WriterSave? {
        let target = Int.random(in: 1...max(1, maxChanges), using: &rng)
        let counter = state.counter
        var drafts: [String: Draft] = [:]
        var order: [String] = []
        var newKeys: [String: Int64] = [:]
        do {
            try execute("BEGIN IMMEDIATE")
            try build(target, &rng, &drafts, &order, &newKeys)
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            state.counter = counter
            failedSaves += 1
            lastError = "\(error)"
            return nil
        }
        keys.merge(newKeys) { $1 }
        return logCommitted(drafts, order)
    }

    /// 2–8 small transactions (1–3 row changes each) committed back to back.
    @discardableResult
    public func burst(_ rng: inout WorkloadRandom) -> [WriterSave] {
        (0..<Int.random(in: 2...8, using: &rng)).compactMap { _ in step(maxChanges: 3, &rng) }
    }

    private func build(_ target: Int, _ rng: inout WorkloadRandom, _ drafts: inout [String: Draft], _ order: inout [String],
                       _ newKeys: inout [String: Int64]) throws {
        func current(_ object: String) -> Draft? {
            if let draft = drafts[object] { return draft }
            guard let known = state.objects[object], !known.deleted else { return nil }
            return Draft(entity: known.entity, a: known.a, folder: known.folder, alive: true, existed: true)
        }
        func set(_ object: String, _ draft: Draft) {
            if drafts[object] == nil { order.append(object) }
            drafts[object] = draft
        }
        func liveNames(_ entity: String) -> [String] {
            var names = Set(state.live.filter { $0.entity == entity }.map(\.name))
            for (object, draft) in drafts where draft.entity == entity { if draft.alive { names.insert(object) } else { names.remove(object) } }
            return names.sorted()
        }
        func pick(_ names: [String]) -> String? { names.isEmpty ? nil : names[Int.random(in: 0..<names.count, using: &rng)] }
        func keyOf(_ object: String, _ table: String) throws -> Int64 { try newKeys[object] ?? key(object, table: table) }
        // Folders whose key is reserved and whose row comes later in the transaction.
        var forward: [String] = []
        func folderKey(_ folder: String?) throws -> String {
            guard let folder else { return "NULL" }
            return String(try keyOf(folder, "ZFOLDER"))
        }
        func insertFolder(_ folder: String) throws {
            try execute("INSERT INTO ZFOLDER (Z_PK, Z_ENT, Z_OPT, ZNAME) VALUES (\(newKeys[folder]!), \(folderEntity), 1, '\(folder)')")
            set(folder, Draft(entity: "Folder", alive: true, existed: false))
        }
        var changes = 0
        while changes < target {
            let roll = Int.random(in: 0..<100, using: &rng)
            let records = liveNames("Record"), folders = liveNames("Folder")
            if roll < 25 || records.isEmpty {
                let record = nextName("r")
                var folder: String?
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: folder = pick(folders)
                case 1:
                    // A forward reference: the folder's key now, its row at the end.
                    if forward.isEmpty || Bool.random(using: &rng) {
                        let made = nextName("f")
                        newKeys[made] = try reserveKey("Folder")
                        forward.append(made)
                    }
                    folder = pick(forward)
                default: break
                }
                let key = try reserveKey("Record")
                newKeys[record] = key
                let a = Int64.random(in: 0...999, using: &rng)
                try execute("INSERT INTO ZRECORD (Z_PK, Z_ENT, Z_OPT, ZNAME, ZA, ZFOLDER) VALUES (\(key), \(recordEntity), 1, '\(record)', \(a), \(try folderKey(folder)))")
                set(record, Draft(entity: "Record", a: a, folder: folder, alive: true, existed: false))
                changes += 1
            } else if roll < 33 {
                if let waiting = forward.first, Bool.random(using: &rng) {
                    forward.removeFirst()
                    try insertFolder(waiting)
                } else {
                    let folder = nextName("f")
                    newKeys[folder] = try reserveKey("Folder")
                    try insertFolder(folder)
                }
                changes += 1
            } else if roll < 55 {
                guard let record = pick(records), var draft = current(record) else { continue }
                let a = ((draft.a ?? 0) + Int64.random(in: 1...5, using: &rng)) % 30_000
                try execute("UPDATE ZRECORD SET ZA = \(a), Z_OPT = Z_OPT + 1 WHERE Z_PK = \(try keyOf(record, "ZRECORD"))")
                draft.a = a
                set(record, draft)
                changes += 1
            } else if roll < 70 {
                // A move to another folder (maybe one whose row comes later), or out of its folder.
                guard let record = pick(records), var draft = current(record) else { continue }
                let choices = (folders + forward).filter { $0 != draft.folder }
                let destination = draft.folder != nil && Bool.random(using: &rng) ? nil : pick(choices)
                guard destination != draft.folder else { continue }
                try execute("UPDATE ZRECORD SET ZFOLDER = \(try folderKey(destination)), Z_OPT = Z_OPT + 1 WHERE Z_PK = \(try keyOf(record, "ZRECORD"))")
                draft.folder = destination
                set(record, draft)
                changes += 1
            } else if roll < 85 {
                guard let record = pick(records), var draft = current(record) else { continue }
                try execute("DELETE FROM ZRECORD WHERE Z_PK = \(try keyOf(record, "ZRECORD"))")
                draft.alive = false
                set(record, draft)
                changes += 1
            } else {
                // A folder cleared of its records (each an update), then deleted,
                // as Core Data's nullify rule does it.
                guard let folder = pick(folders), var draft = current(folder) else { continue }
                for record in records {
                    guard var member = current(record), member.folder == folder else { continue }
                    try execute("UPDATE ZRECORD SET ZFOLDER = NULL, Z_OPT = Z_OPT + 1 WHERE Z_PK = \(try keyOf(record, "ZRECORD"))")
                    member.folder = nil
                    set(record, member)
                    changes += 1
                }
                try execute("DELETE FROM ZFOLDER WHERE Z_PK = \(try keyOf(folder, "ZFOLDER"))")
                draft.alive = false
                set(folder, draft)
                changes += 1
            }
        }
        // The rows the forward references point at, last.
        for folder in forward { try insertFolder(folder) }
    }

    /// Logs a committed transaction: one op per object with its state after
    /// it (objects made and deleted in it are not logged: no store ever had them).
    private func logCommitted(_ drafts: [String: Draft], _ order: [String]) -> WriterSave {
        let committed = monotonicNanoseconds()
        var ops: [WriterOp] = []
        for object in order {
            guard let draft = drafts[object] else { continue }
            switch (draft.existed, draft.alive) {
            case (false, false):
                keys[object] = nil
                continue
            case (false, true):
                let table = draft.entity == "Record" ? recordEntity : folderEntity
                let gid = (try? text("SELECT GID FROM OGH_GLOBALID WHERE TBL = \(table) AND PK = \(keys[object] ?? -1)")).flatMap { $0 }.flatMap(UUID.init(uuidString:))
                ops.append(WriterOp(kind: .insert, entity: draft.entity, name: object, gid: gid, a: draft.a, folder: draft.folder))
            case (true, true):
                ops.append(WriterOp(kind: .update, entity: draft.entity, name: object, a: draft.a, folder: draft.folder))
            case (true, false):
                keys[object] = nil
                ops.append(WriterOp(kind: .delete, entity: draft.entity, name: object))
            }
        }
        let save = WriterSave(writer: name, store: storeName, save: state.saves + 1, committedNanoseconds: committed, ops: ops)
        state.apply(save)
        do { try log.append(save, sync: syncLog) } catch {
            // A change committed and not logged would count as extra: stop.
            fatalError("writer \(name): cannot append to its log: \(error)")
        }
        return save
    }
}

extension RawSQLWriter {
    /// Commits transactions until `saves` more have committed or
    /// SIGTERM/SIGINT (after `WorkloadSignals.install()`): one in three a
    /// burst of small commits, the others one transaction of up to
    /// `maxChanges` row changes. Returns the number committed.
    @discardableResult
    public func run(maxChanges: Int, seed: UInt64, saves limit: Int?, pace: WorkloadWriter.Pace) -> Int {
        var rng = WorkloadRandom(seed: seed)
        let start = monotonicNanoseconds()
        var committed = 0
        var attempts = 0
        var consecutiveFailures = 0
        while workloadStopRequested == 0, limit.map({ committed < $0 }) ?? true {
            attempts += 1
            let made = Int.random(in: 0..<3, using: &rng) == 0 ? burst(&rng).count : (step(maxChanges: maxChanges, &rng) == nil ? 0 : 1)
            committed += made
            consecutiveFailures = made > 0 ? 0 : consecutiveFailures + 1
            var wait: UInt64 = 0
            if let rate = pace.rate {
                let due = start + UInt64(Double(attempts) / rate * 1e9)
                let now = monotonicNanoseconds()
                wait = due > now ? due - now : 0
            } else if pace.pause.upperBound > 0 {
                wait = UInt64(Int.random(in: pace.pause, using: &rng)) * 1_000_000
            }
            if consecutiveFailures > 0 { wait = max(wait, UInt64(min(consecutiveFailures, 20)) * 5_000_000) }
            if wait > 0 {
                var request = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                _ = nanosleep(&request, nil)
            }
        }
        return committed
    }
}
