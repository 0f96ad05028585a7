import CSQLite
import Foundation

/// A connection to one SQLite database file: the little the SQLite store
/// needs from SQLite's C API, not a general database layer.
///
/// Errors are Core Data errors (134180 `NSSQLiteError`, or 134090 when the
/// file stays locked past the busy timeout) carrying the raw SQLite result
/// code as an `NSError` in `NSSQLiteErrorDomain` under the underlying-error
/// key (CONST-ED-01).
///
/// ```swift
/// let db = try SQLiteConnection(path: "/tmp/Store.sqlite", mode: .readWriteCreate)
/// try db.transaction {
///     try db.run("UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_ENT = ?", [.integer(2)])
/// }
/// let version = try db.dataVersion()
/// ```
public final class SQLiteConnection {
    public enum OpenMode: Sendable {
        case readOnly
        /// Read-only with SQLite's `immutable=1`: no locks, and no `-wal` or
        /// `-shm` file is created or read. Only safe for a file that nothing
        /// else writes while it is open and whose WAL (if any) is checkpointed,
        /// see `SQLiteStore.readOnlyOpenMode(forFileAt:)`.
        case readOnlyImmutable
        case readWrite
        case readWriteCreate
    }

    public let path: String
    public let mode: OpenMode
    private var handle: OpaquePointer?
    private var statementCache: [String: SQLiteStatement] = [:]
    private var transactionDepth = 0
    /// Prepared statements run on this connection (counted at their first
    /// step), so tests can prove a code path issues O(levels) queries rather
    /// than one per object. `execute(_:)` text (BEGIN, COMMIT) is not counted.
    var executedStatementCount = 0

    /// Opens the file. `busyTimeout` is how long a statement waits for another
    /// connection's lock before failing with 134090; `journalMode` ("WAL" by
    /// default, as Core Data uses) is applied only to writable connections.
    public init(path: String, mode: OpenMode, busyTimeout: TimeInterval = 5, journalMode: String? = "WAL") throws {
        self.path = path
        self.mode = mode
        var flags: Int32 = SQLITE_OPEN_NOMUTEX
        switch mode {
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        case .readOnlyImmutable: flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .readWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(mode == .readOnlyImmutable ? Self.immutableURI(path) : path, &db, flags, nil)
        handle = db
        if rc != SQLITE_OK {
            let err = error(rc, context: "opening \(path)")
            sqlite3_close_v2(db)
            handle = nil
            throw err
        }
        sqlite3_extended_result_codes(db, 0)
        sqlite3_busy_timeout(db, Int32(max(0, min(busyTimeout * 1000, Double(Int32.max)))))
        if mode != .readOnly && mode != .readOnlyImmutable, let journalMode {
            _ = try query("PRAGMA journal_mode=\(journalMode)")
        }
    }

    deinit { close() }

    /// The first `count` bytes of a file, read through SQLite's own file
    /// layer (its default VFS), or nil when the file cannot be opened.
    ///
    /// Why not `FileHandle`: SQLite's locks are POSIX advisory locks, and
    /// closing *any* descriptor of a file drops every lock this process
    /// holds on it, so a header read beside a live connection can let
    /// another process checkpoint and delete the `-wal` under a writer
    /// (lost commits). SQLite's unix VFS knows every descriptor it opened
    /// on a file and defers closing one while a connection of the process
    /// holds locks there; opening the file as a main database through the
    /// VFS gets that protection.
    ///
    /// ```swift
    /// let header = try SQLiteConnection.readFileHeader(path: "/var/db/Sync.sqlite", count: 100)
    /// ```
    public static func readFileHeader(path: String, count: Int) throws -> Data? {
        guard let vfs = sqlite3_vfs_find(nil), let open = vfs.pointee.xOpen else {
            throw CoreDataError(.sqlite, "SQLite has no default file layer to read \(path)")
        }
        // The VFS wants a full path that stays valid while the file is open.
        let fullPath = URL(fileURLWithPath: path).standardizedFileURL.path
        let size = max(Int(vfs.pointee.szOsFile), MemoryLayout<sqlite3_file>.size)
        let memory = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        memory.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        defer { memory.deallocate() }
        let file = memory.bindMemory(to: sqlite3_file.self, capacity: 1)
        return try fullPath.withCString { cPath -> Data? in
            var outFlags: Int32 = 0
            let rc = open(vfs, cPath, file, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB, &outFlags)
            guard rc == SQLITE_OK, let methods = file.pointee.pMethods else { return nil }
            defer { _ = methods.pointee.xClose?(file) }
            var fileSize: sqlite3_int64 = 0
            guard methods.pointee.xFileSize?(file, &fileSize) == SQLITE_OK else {
                throw CoreDataError(.sqlite, "cannot find the size of \(path)")
            }
            let n = Int(min(sqlite3_int64(count), fileSize))
            var bytes = [UInt8](repeating: 0, count: n)
            if n > 0 {
                let read = bytes.withUnsafeMutableBytes { methods.pointee.xRead?(file, $0.baseAddress, Int32(n), 0) ?? SQLITE_IOERR }
                guard read == SQLITE_OK else { throw CoreDataError(.sqlite, "cannot read \(path) (SQLite result \(read))") }
            }
            return Data(bytes)
        }
    }

    /// `file:` URI for `path` with `immutable=1`; characters a URI gives
    /// meaning to (`?`, `#`, `%`, spaces) are percent-escaped.
    static func immutableURI(_ path: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#%")
        let escaped = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
        return "file:\(escaped)?immutable=1"
    }

    /// Finalises cached statements and closes the file.
    public func close() {
        statementCache.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    public var isOpen: Bool { handle != nil }

    // MARK: - Statements

    /// A prepared statement for `sql`, from the cache when it was prepared before.
    public func prepare(_ sql: String) throws -> SQLiteStatement {
        if let cached = statementCache[sql] { return cached }
        let statement = try prepareUncached(sql)
        statementCache[sql] = statement
        return statement
    }

    /// A statement that is not cached: for SQL run once (schema creation).
    public func prepareUncached(_ sql: String) throws -> SQLiteStatement {
        guard let handle else { throw CoreDataError(.sqlite, "connection to \(path) is closed") }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            sqlite3_finalize(stmt)
            throw error(rc == SQLITE_OK ? SQLITE_MISUSE : rc, context: sql)
        }
        return SQLiteStatement(handle: stmt, sql: sql, connection: self)
    }

    /// Runs one statement with bound values and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ values: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        try prepare(sql).query(values)
    }

    /// Runs one statement with bound values, ignoring any rows.
    public func run(_ sql: String, _ values: [SQLiteValue] = []) throws {
        try prepare(sql).run(values)
    }

    /// Runs SQL text that may hold several statements, without binding.
    public func execute(_ sql: String) throws {
        guard let handle else { throw CoreDataError(.sqlite, "connection to \(path) is closed") }
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        if rc != SQLITE_OK { throw error(rc, context: sql) }
    }

    /// The rowid of the last row this connection inserted.
    public var lastInsertRowID: Int64 { handle.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { handle.map { Int(sqlite3_changes($0)) } ?? 0 }

    // MARK: - Transactions

    /// Runs `body` in a transaction, committing when it returns and rolling
    /// back when it throws. Writers use BEGIN IMMEDIATE so the write lock is
    /// taken up front: a deferred transaction that later upgrades can fail
    /// with SQLITE_BUSY without waiting, after work was already done.
    /// Nested calls join the outer transaction.
    public func transaction<T>(immediate: Bool = true, _ body: () throws -> T) throws -> T {
        if transactionDepth > 0 {
            transactionDepth += 1
            defer { transactionDepth -= 1 }
            return try body()
        }
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        transactionDepth = 1
        do {
            let result = try body()
            try execute("COMMIT")
            transactionDepth = 0
            return result
        } catch {
            transactionDepth = 0
            try? execute("ROLLBACK")
            throw error
        }
    }

    public var isInTransaction: Bool { transactionDepth > 0 }

    /// SQLite's `PRAGMA data_version`: changes when another connection commits
    /// to the file, so a store can tell whether its caches are stale.
    public func dataVersion() throws -> Int64 {
        try query("PRAGMA data_version").first?.first?.int64Value ?? 0
    }

    // MARK: - Swift functions and collations

    /// Boxes keep registered Swift closures alive as long as the connection.
    private final class FunctionBox {
        let body: ([SQLiteValue]) throws -> SQLiteValue
        init(_ body: @escaping ([SQLiteValue]) throws -> SQLiteValue) { self.body = body }
    }
    private final class CollationBox {
        let compare: (String, String) -> ComparisonResult
        let bytewiseWhenASCII: Bool
        init(_ compare: @escaping (String, String) -> ComparisonResult, bytewiseWhenASCII: Bool) {
            self.compare = compare
            self.bytewiseWhenASCII = bytewiseWhenASCII
        }
    }

    /// Byte order of two ASCII texts (what Swift's `<` and `==` give for
    /// them), or nil when either has a non-ASCII byte anywhere: a combining
    /// mark after the first difference still changes the order ("e\u{301}"
    /// is "é", after "z").
    private static func asciiOrder(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int32? {
        for byte in a where byte >= 0x80 { return nil }
        for byte in b where byte >= 0x80 { return nil }
        for i in 0..<min(a.count, b.count) where a[i] != b[i] { return a[i] < b[i] ? -1 : 1 }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
    private var functionBoxes: [FunctionBox] = []
    private var collationBoxes: [CollationBox] = []

    /// Makes a Swift function callable from SQL on this connection, so SQL can
    /// use exactly the semantics Swift code uses (string folding, matching).
    /// `argumentCount` -1 accepts any number. A thrown error becomes a SQL error.
    ///
    /// ```swift
    /// try db.createFunction("og_reverse", argumentCount: 1) { args in
    ///     .text(String((args[0].stringValue ?? "").reversed()))
    /// }
    /// try db.query("SELECT og_reverse('abc')")   // [[.text("cba")]]
    /// ```
    public func createFunction(_ name: String, argumentCount: Int32, deterministic: Bool = true,
                               _ body: @escaping ([SQLiteValue]) throws -> SQLiteValue) throws {
        guard let handle else { throw CoreDataError(.sqlite, "connection to \(path) is closed") }
        let box = FunctionBox(body)
        functionBoxes.append(box)
        let flags = SQLITE_UTF8 | (deterministic ? SQLITE_DETERMINISTIC : 0)
        let rc = sqlite3_create_function_v2(handle, name, argumentCount, flags, Unmanaged.passUnretained(box).toOpaque(), { context, count, arguments in
            guard let context, let user = sqlite3_user_data(context) else { return }
            let box = Unmanaged<FunctionBox>.fromOpaque(user).takeUnretainedValue()
            var values: [SQLiteValue] = []
            values.reserveCapacity(Int(count))
            for i in 0..<Int(count) {
                guard let value = arguments?[i] else { values.append(.null); continue }
                values.append(SQLiteConnection.value(of: value))
            }
            do {
                switch try box.body(values) {
                case .null: sqlite3_result_null(context)
                case .integer(let v): sqlite3_result_int64(context, v)
                case .real(let v): sqlite3_result_double(context, v)
                case .text(let s):
                    var s = s   // by byte count, like binding (NUL characters included)
                    s.withUTF8 { bytes in
                        guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_result_text(context, "", 0, SQLiteConnection.transient) }
                        sqlite3_result_text(context, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(bytes.count), SQLiteConnection.transient)
                    }
                case .blob(let d):
                    d.withUnsafeBytes { buffer in
                        if let base = buffer.baseAddress, buffer.count > 0 {
                            sqlite3_result_blob(context, base, Int32(buffer.count), SQLiteConnection.transient)
                        } else {
                            sqlite3_result_zeroblob(context, 0)
                        }
                    }
                }
            } catch {
                sqlite3_result_error(context, "\(error)", -1)
            }
        }, nil, nil, nil)
        if rc != SQLITE_OK { throw self.error(rc, context: "registering function \(name)") }
    }

    /// Registers a collation that orders text with a Swift comparison.
    ///
    /// ```swift
    /// try db.createCollation("SWIFT") { a, b in a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending) }
    /// try db.query("SELECT 1 WHERE 'e\u{301}' = 'é' COLLATE SWIFT")   // one row
    /// ```
    ///
    /// `bytewiseWhenASCII`: `compare` orders ASCII texts by their bytes (as
    /// Swift's own `<` does), so two ASCII texts are compared without making
    /// Strings: sorting n rows calls the collation n log n times.
    public func createCollation(_ name: String, bytewiseWhenASCII: Bool = false, _ compare: @escaping (String, String) -> ComparisonResult) throws {
        guard let handle else { throw CoreDataError(.sqlite, "connection to \(path) is closed") }
        let box = CollationBox(compare, bytewiseWhenASCII: bytewiseWhenASCII)
        collationBoxes.append(box)
        let rc = sqlite3_create_collation_v2(handle, name, SQLITE_UTF8, Unmanaged.passUnretained(box).toOpaque(), { user, lengthA, a, lengthB, b in
            guard let user else { return 0 }
            let box = Unmanaged<CollationBox>.fromOpaque(user).takeUnretainedValue()
            if box.bytewiseWhenASCII,
               let order = SQLiteConnection.asciiOrder(UnsafeRawBufferPointer(start: a, count: a == nil ? 0 : Int(lengthA)),
                                                       UnsafeRawBufferPointer(start: b, count: b == nil ? 0 : Int(lengthB))) {
                return order
            }
            let left = a.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(lengthA)), as: UTF8.self) } ?? ""
            let right = b.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(lengthB)), as: UTF8.self) } ?? ""
            switch box.compare(left, right) {
            case .orderedAscending: return -1
            case .orderedSame: return 0
            case .orderedDescending: return 1
            }
        }, nil)
        if rc != SQLITE_OK { throw self.error(rc, context: "registering collation \(name)") }
    }

    fileprivate static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    fileprivate static func value(of value: OpaquePointer) -> SQLiteValue {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let text = sqlite3_value_text(value) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let bytes = sqlite3_value_blob(value) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: count))
        default: return .null
        }
    }

    // MARK: - Errors

    /// A Core Data error for SQLite result code `rc`, with the raw code under
    /// the underlying-error key.
    func error(_ rc: Int32, context: String) -> CoreDataError {
        let primary = rc & 0xff
        let sqliteMessage: String
        if let handle, let msg = sqlite3_errmsg(handle) {
            sqliteMessage = String(cString: msg)
        } else {
            sqliteMessage = String(cString: sqlite3_errstr(rc))
        }
        let underlying = NSError(domain: CoreDataError.sqliteErrorDomain, code: Int(primary),
                                 userInfo: [NSLocalizedDescriptionKey: sqliteMessage])
        let code: CoreDataError.Code = (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) ? .persistentStoreTimeout : .sqlite
        return CoreDataError(code, "SQLite error \(primary) (\(sqliteMessage)) for \(context)", userInfo: [
            CoreDataError.underlyingErrorKey: underlying,
            CoreDataError.filePathErrorKey: path,
        ])
    }
}

extension CoreDataError {
    /// The SQLite result code carried under the underlying-error key, if any.
    public var sqliteResultCode: Int? {
        guard let underlying = userInfo[CoreDataError.underlyingErrorKey] as? NSError,
              underlying.domain == CoreDataError.sqliteErrorDomain else { return nil }
        return underlying.code
    }
}
