import CSQLite
import Foundation

/// One SQLite storage-class value, as bound to or read from a statement.
///
/// ```swift
/// try connection.run("UPDATE ZBOT SET ZNAME = ? WHERE Z_PK = ?", [.text("Nightly"), .integer(2)])
/// ```
public enum SQLiteValue: Equatable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The value as an integer, converting a real (SQLite's own affinity rules
    /// can leave either in an INTEGER column); nil for other classes.
    public var int64Value: Int64? {
        switch self {
        case .integer(let v): return v
        case .real(let v): return Int64(exactly: v.rounded(.towardZero))
        default: return nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .real(let v): return v
        default: return nil
        }
    }

    public var stringValue: String? { if case .text(let s) = self { return s } else { return nil } }
    public var dataValue: Data? { if case .blob(let d) = self { return d } else { return nil } }

    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let v): return String(v)
        case .real(let v): return String(v)
        case .text(let s): return "'\(s)'"
        case .blob(let d): return "x'<\(d.count) bytes>'"
        }
    }
}

/// A prepared statement owned by a `SQLiteConnection` (which caches it by SQL
/// text). Not thread-safe: a connection and its statements are used by one
/// thread at a time, as the store serialises its calls.
///
/// ```swift
/// let rows = try connection.prepare("SELECT Z_PK FROM ZBOT WHERE Z_ENT = ?").query([.integer(2)])
/// ```
public final class SQLiteStatement {
    let handle: OpaquePointer
    public let sql: String
    unowned let connection: SQLiteConnection

    init(handle: OpaquePointer, sql: String, connection: SQLiteConnection) {
        self.handle = handle
        self.sql = sql
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLite copies bound text and blobs (SQLITE_TRANSIENT), so Swift buffers
    /// may be released as soon as binding returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Clears earlier bindings and state, then binds `values` to `?1…?n`.
    public func bind(_ values: [SQLiteValue]) throws {
        reset()
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard values.count == expected else {
            throw CoreDataError(.sqlite, "statement expects \(expected) parameters, got \(values.count): \(sql)")
        }
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    /// Resets the statement and clears its bindings, for binding one value
    /// at a time with `bind(_:at:)` (no array per row on hot paths).
    ///
    /// ```swift
    /// let insert = try connection.prepare("INSERT INTO ZTAG (Z_PK, ZLABEL) VALUES (?, ?)")
    /// for (key, label) in rows {
    ///     insert.reset()
    ///     try insert.bind(.integer(key), at: 1)
    ///     try insert.bind(.text(label), at: 2)
    ///     try insert.runBound()
    /// }
    /// ```
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Binds one value to `?index` (1-based).
    public func bind(_ value: SQLiteValue, at index: Int32) throws {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
        case .real(let v): rc = sqlite3_bind_double(handle, index, v)
        case .text(let s):
            // By byte count: a length of -1 would end the text at its first
            // NUL character, which a Swift string may contain.
            var s = s
            rc = s.withUTF8 { bytes in
                guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_bind_text(handle, index, "", 0, Self.transient) }
                return sqlite3_bind_text(handle, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(bytes.count), Self.transient)
            }
        case .blob(let d):
            rc = d.withUnsafeBytes { buffer in
                // A zero-length blob must stay a blob, not NULL: bind a
                // zeroblob when there is no base address.
                guard let base = buffer.baseAddress, buffer.count > 0 else { return sqlite3_bind_zeroblob(handle, index, 0) }
                return sqlite3_bind_blob(handle, index, base, Int32(buffer.count), Self.transient)
            }
        }
        if rc != SQLITE_OK { throw connection.error(rc, context: "binding parameter \(index) of \(sql)") }
    }

    /// Runs a statement bound with `bind(_:at:)` to completion, ignoring rows.
    public func runBound() throws {
        defer { sqlite3_reset(handle) }
        while try step() {}
    }

    /// Advances one row; true while a row is available.
    public func step() throws -> Bool {
        // Not busy means this step starts a new execution of the statement.
        if sqlite3_stmt_busy(handle) == 0 { connection.executedStatementCount += 1 }
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            sqlite3_reset(handle)
            throw connection.error(rc, context: sql)
        }
    }

    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    public func columnName(_ index: Int) -> String {
        sqlite3_column_name(handle, Int32(index)).map { String(cString: $0) } ?? ""
    }

    /// The value of a column of the current row, in its storage class.
    public func column(_ index: Int) -> SQLiteValue {
        let i = Int32(index)
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(handle, i) else { return .text("") }
            let count = Int(sqlite3_column_bytes(handle, i))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, i))
            guard count > 0, let bytes = sqlite3_column_blob(handle, i) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: count))
        default: return .null
        }
    }

    /// The current row's values.
    public func row() -> [SQLiteValue] { (0..<columnCount).map(column) }

    /// Binds, runs to completion and returns every row.
    public func query(_ values: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        try bind(values)
        defer { sqlite3_reset(handle) }
        var rows: [[SQLiteValue]] = []
        while try step() { rows.append(row()) }
        return rows
    }

    /// Binds, then calls `body` for each row while the statement is on it
    /// (read columns with `column(_:)` inside `body` only).
    public func forEachRow(_ values: [SQLiteValue] = [], _ body: (SQLiteStatement) throws -> Void) throws {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() { try body(self) }
    }

    /// Binds and runs a statement that returns no rows of interest.
    public func run(_ values: [SQLiteValue] = []) throws {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() {}
    }
}
