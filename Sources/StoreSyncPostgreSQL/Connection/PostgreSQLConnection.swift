import CLibPQ
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The isolation level of a transaction run by `PostgreSQLConnection.transaction`.
public enum PostgreSQLIsolation: String, Sendable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}

/// A notification received on a channel the connection LISTENs to.
public struct PostgreSQLNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
    /// The server process ID of the session that sent the NOTIFY.
    public var processID: Int32

    public init(channel: String, payload: String, processID: Int32) {
        self.channel = channel
        self.payload = payload
        self.processID = processID
    }
}

/// One libpq connection to a PostgreSQL server, used synchronously.
///
/// libpq through its C API rather than postgres-nio: the sync engine is
/// synchronous and must bring no event loop of its own; the daemon watches
/// `socket` with its libuv loop and calls `notifications()` when it is readable.
///
/// Use a connection from one thread at a time (libpq's rule for a PGconn).
///
/// ```swift
/// let connection = try PostgreSQLConnection("host=127.0.0.1 port=55432 user=storesync dbname=storesync")
/// let count = try connection.transaction {
///     try connection.execute("INSERT INTO item (name) VALUES ($1)", ["Ann"])
///     return try connection.execute("SELECT count(*) FROM item").int64(0, 0) ?? 0
/// }
/// ```
public final class PostgreSQLConnection {
    private var connection: OpaquePointer?
    /// Kept to connect again after `close()`; never shown.
    private let conninfo: String
    /// Texts that must never appear in an error: the password from the
    /// conninfo and PGPASSWORD.
    private let secrets: [String]
    /// The last error a statement raised: a body that catches an error inside
    /// a transaction leaves it aborted, and COMMIT then reports this one.
    private var lastError: PostgreSQLError?
    /// Channels to LISTEN to again after `reconnect()` (a new session forgets them).
    private var channels: [String] = []
    private var knownServer: String

    /// Connects with a libpq connection string (key=value or postgresql:// URI).
    /// The password comes from the URI/conninfo, PGPASSWORD, or PGPASSFILE/~/.pgpass,
    /// as libpq does. Errors never contain the password.
    ///
    /// ```swift
    /// let connection = try PostgreSQLConnection("postgresql://storesync@127.0.0.1:55432/storesync")
    /// ```
    /// - Throws: `PostgreSQLError` naming host:port/dbname when the string is
    ///   invalid or the server refuses or cannot be reached.
    public init(_ conninfo: String) throws {
        self.conninfo = conninfo
        var secrets = Self.passwordsWritten(in: conninfo)
        if let password = ProcessInfo.processInfo.environment["PGPASSWORD"], !password.isEmpty {
            secrets.append(password)
        }
        var parseError: UnsafeMutablePointer<CChar>?
        if let options = PQconninfoParse(conninfo, &parseError) {
            var option = options
            var described: [String: String] = [:]
            while let keyword = option.pointee.keyword {
                if let value = option.pointee.val {
                    described[String(cString: keyword)] = String(cString: value)
                }
                option += 1
            }
            PQconninfoFree(options)
            if let password = described["password"], !password.isEmpty { secrets.append(password) }
            knownServer = Self.describe(host: described["host"] ?? described["hostaddr"],
                                        port: described["port"], dbname: described["dbname"])
            self.secrets = secrets
        } else {
            let message = parseError.map { String(cString: $0) } ?? "out of memory"
            PQfreemem(parseError)
            self.secrets = secrets
            knownServer = "?"
            throw PostgreSQLError(message: "invalid connection string: " + Self.redact(message, secrets))
        }
        try connect()
    }

    deinit {
        PQfinish(connection)
    }

    /// The server's identity for messages: "host:port/dbname" (no user, no password).
    /// The host is a directory for a Unix socket.
    public var serverDescription: String {
        guard let connection else { return knownServer }
        return Self.describe(host: PQhost(connection).map { String(cString: $0) },
                             port: PQport(connection).map { String(cString: $0) },
                             dbname: PQdb(connection).map { String(cString: $0) })
    }

    /// True when the connection is usable (PQstatus == CONNECTION_OK). A server
    /// that dropped the session is noticed only by the next statement.
    public var isConnected: Bool {
        connection.map { PQstatus($0) == CONNECTION_OK } ?? false
    }

    /// True inside BEGIN … COMMIT (including a transaction aborted by an error).
    public var isInTransaction: Bool {
        guard let connection else { return false }
        switch PQtransactionStatus(connection) {
        case PQTRANS_INTRANS, PQTRANS_INERROR, PQTRANS_ACTIVE: return true
        default: return false
        }
    }

    /// The connection's socket for a poller (PQsocket); -1 when not connected.
    /// When it is readable, call `notifications()`.
    public var socket: Int32 {
        connection.map { PQsocket($0) } ?? -1
    }

    /// Runs one statement with parameters ($1, $2, …) sent as text
    /// (PQexecParams, text results). nil is SQL NULL.
    ///
    /// ```swift
    /// let result = try connection.execute("SELECT name FROM item WHERE id = $1", [id])
    /// let name = result.rowCount > 0 ? result.string(0, 0) : nil
    /// ```
    /// - Throws: `PostgreSQLError` with the SQLSTATE and the statement (never the parameters).
    @discardableResult
    public func execute(_ sql: String, _ parameters: [(any PostgreSQLParameter)?] = []) throws -> PostgreSQLResult {
        let connection = try connected(for: sql)
        var texts: [UnsafeMutablePointer<CChar>?] = []
        defer { texts.forEach { free($0) } }
        for (index, parameter) in parameters.enumerated() {
            guard let parameter else {
                texts.append(nil)
                continue
            }
            let text = parameter.postgreSQLText
            // A C string ends at NUL, and PostgreSQL text cannot hold one: say so
            // rather than send a silently truncated value.
            guard !text.utf8.contains(0) else {
                throw record(PostgreSQLError(
                    message: "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold",
                    statement: sql, server: serverDescription))
            }
            texts.append(strdup(text))
        }
        let values: [UnsafePointer<CChar>?] = texts.map { $0.map { UnsafePointer($0) } }
        let result = PQexecParams(connection, sql, Int32(values.count), nil, values, nil, nil, 0)
        return try check(result, sql)
    }

    /// Runs several statements with no parameters (PQexec), e.g. DDL scripts.
    /// They run in one implicit transaction unless the script has its own
    /// BEGIN/COMMIT; the first error stops it.
    ///
    /// ```swift
    /// try connection.executeScript("CREATE TABLE a (id int); CREATE TABLE b (id int);")
    /// ```
    public func executeScript(_ sql: String) throws {
        let connection = try connected(for: sql)
        _ = try check(PQexec(connection, sql), sql)
    }

    /// BEGIN ISOLATION LEVEL <isolation>; body; COMMIT.
    ///
    /// On serialization failure (SQLSTATE 40001) or deadlock (40P01), in the body
    /// or at COMMIT: ROLLBACK, wait a short randomised back-off, run body again,
    /// up to `attempts` times, then throw the last error. Any other error:
    /// ROLLBACK and rethrow. Nested calls (already inside a transaction on this
    /// connection) just run body (no savepoint): the outer call owns the retry.
    ///
    /// The body may run more than once, so it must not have effects outside the
    /// database that cannot be repeated. A PostgreSQLError wrapped in another
    /// error (NSUnderlyingErrorKey) is recognised too.
    ///
    /// ```swift
    /// let total = try connection.transaction {
    ///     let sum = try connection.execute("SELECT coalesce(sum(n), 0) FROM t").int64(0, 0) ?? 0
    ///     try connection.execute("INSERT INTO t (n) VALUES ($1)", [sum + 1])
    ///     return sum + 1
    /// }
    /// ```
    public func transaction<T>(_ isolation: PostgreSQLIsolation = .serializable, attempts: Int = 10,
                               _ body: () throws -> T) throws -> T {
        if isInTransaction { return try body() }
        var attempt = 0
        while true {
            attempt += 1
            do {
                lastError = nil
                try execute("BEGIN ISOLATION LEVEL \(isolation.rawValue)")
                let value = try body()
                if let connection, PQtransactionStatus(connection) == PQTRANS_INERROR {
                    // The body caught a statement's error: COMMIT would quietly roll back.
                    throw lastError ?? PostgreSQLError(
                        message: "the transaction was aborted by an error that its body caught",
                        server: serverDescription)
                }
                try execute("COMMIT")
                return value
            } catch {
                rollbackQuietly()
                guard let failure = PostgreSQLError.underlying(error), failure.isSerializationFailure,
                      attempt < attempts else { throw error }
                Self.backOff(attempt)
            }
        }
    }

    /// LISTEN "channel" (a quoted identifier: any text, case kept). The
    /// connection LISTENs again after `reconnect()`.
    ///
    /// ```swift
    /// try connection.listen("storesync_group1")
    /// // … socket readable …
    /// for notification in try connection.notifications() { print(notification.payload) }
    /// ```
    public func listen(_ channel: String) throws {
        try execute("LISTEN " + quotedIdentifier(channel))
        if !channels.contains(channel) { channels.append(channel) }
    }

    /// Reads what the socket has (PQconsumeInput) and returns the notifications
    /// received, in order (including those that arrived during other statements).
    public func notifications() throws -> [PostgreSQLNotification] {
        let connection = try connected(for: nil)
        guard PQconsumeInput(connection) != 0 else { throw failure(of: nil) }
        var received: [PostgreSQLNotification] = []
        while let notify = PQnotifies(connection) {
            received.append(PostgreSQLNotification(
                channel: String(cString: notify.pointee.relname),
                payload: notify.pointee.extra.map { String(cString: $0) } ?? "",
                processID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        return received
    }

    /// Reconnects a broken (or closed) connection with the same connection
    /// string (PQreset): a new session, so the transaction in progress is lost;
    /// LISTENs are issued again.
    ///
    /// ```swift
    /// catch let error as PostgreSQLError where error.isConnectionFailure { try connection.reconnect() }
    /// ```
    /// - Throws: `PostgreSQLError` when the server is still unreachable.
    public func reconnect() throws {
        if let connection {
            PQreset(connection)
            guard PQstatus(connection) == CONNECTION_OK else { throw failure(of: nil) }
            try prepareSession()
        } else {
            try connect()
        }
        for channel in channels {
            try execute("LISTEN " + quotedIdentifier(channel))
        }
    }

    /// Closes the connection (PQfinish); `reconnect()` opens it again.
    public func close() {
        if let connection {
            knownServer = serverDescription
            PQfinish(connection)
        }
        connection = nil
    }

    // MARK: - Connecting

    private func connect() throws {
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgreSQLError(message: "out of memory connecting", server: knownServer, isConnectionFailure: true)
        }
        self.connection = connection
        guard PQstatus(connection) == CONNECTION_OK else {
            let error = failure(of: nil)
            knownServer = serverDescription
            PQfinish(connection)
            self.connection = nil
            throw error
        }
        knownServer = serverDescription
        // libpq prints notices (e.g. "relation already exists, skipping") to
        // stderr; a library must not write there, and they are informational.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        try prepareSession()
    }

    /// Fixes what the result accessors rely on, whatever the server's or the
    /// role's defaults: UTF-8 text, ISO dates, hex bytea, exact float text.
    private func prepareSession() throws {
        guard let connection else { return }
        guard PQsetClientEncoding(connection, "UTF8") == 0 else { throw failure(of: nil) }
        try executeScript("SET DateStyle TO 'ISO, MDY'; SET bytea_output TO 'hex'; SET extra_float_digits TO 3")
    }

    // MARK: - Results and errors

    private func connected(for statement: String?) throws -> OpaquePointer {
        guard let connection else {
            throw record(PostgreSQLError(message: "the connection is closed", statement: statement,
                                         server: knownServer, isConnectionFailure: true))
        }
        return connection
    }

    private func check(_ result: OpaquePointer?, _ sql: String) throws -> PostgreSQLResult {
        guard let result else { throw failure(of: sql) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PostgreSQLResult(result)
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            func field(_ code: UInt8) -> String? {
                PQresultErrorField(result, Int32(code)).map { String(cString: $0) }
            }
            let message = field(UInt8(ascii: "M")) ?? String(cString: PQresultErrorMessage(result))
            throw record(PostgreSQLError(
                sqlState: field(UInt8(ascii: "C")),
                message: Self.redact(message.trimmingCharacters(in: .whitespacesAndNewlines), secrets),
                detail: field(UInt8(ascii: "D")).map { Self.redact($0, secrets) },
                statement: sql, server: serverDescription,
                isConnectionFailure: connection.map { PQstatus($0) != CONNECTION_OK } ?? true))
        default:
            let status = String(cString: PQresStatus(PQresultStatus(result)))
            throw record(PostgreSQLError(message: "unsupported result \(status) (COPY is not supported)",
                                         statement: sql, server: serverDescription))
        }
    }

    /// An error from libpq's own message (PQerrorMessage): connection failures
    /// and failures with no result.
    private func failure(of statement: String?) -> PostgreSQLError {
        let message = connection.map { String(cString: PQerrorMessage($0)) } ?? "not connected"
        return record(PostgreSQLError(
            message: Self.redact(message.trimmingCharacters(in: .whitespacesAndNewlines), secrets),
            statement: statement, server: serverDescription,
            isConnectionFailure: connection.map { PQstatus($0) != CONNECTION_OK } ?? true))
    }

    private func record(_ error: PostgreSQLError) -> PostgreSQLError {
        lastError = error
        return error
    }

    private func rollbackQuietly() {
        guard let connection, PQstatus(connection) == CONNECTION_OK,
              PQtransactionStatus(connection) != PQTRANS_IDLE else { return }
        PQclear(PQexec(connection, "ROLLBACK"))
    }

    private func quotedIdentifier(_ name: String) throws -> String {
        let connection = try connected(for: nil)
        guard let quoted = PQescapeIdentifier(connection, name, name.utf8.count) else { throw failure(of: nil) }
        defer { PQfreemem(quoted) }
        return String(cString: quoted)
    }

    /// Exponential (2 ms doubling, at most 100 ms) with jitter, so that two
    /// transactions that collided do not collide again in lockstep.
    private static func backOff(_ attempt: Int) {
        let base = min(0.002 * Double(1 << min(attempt - 1, 10)), 0.1)
        let seconds = Double.random(in: base * 0.5...base * 1.5)
        usleep(UInt32(seconds * 1_000_000))
    }

    private static func describe(host: String?, port: String?, dbname: String?) -> String {
        let host = host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        let port = port.flatMap { $0.isEmpty ? nil : $0 } ?? "5432"
        return "\(host):\(port)/\(dbname ?? "")"
    }

    /// Passwords as written in a conninfo, found without libpq's parser (which
    /// may reject the string and quote part of it back in its message).
    static func passwordsWritten(in conninfo: String) -> [String] {
        var found: [String] = []
        let patterns = [#"password\s*=\s*'((?:[^'\\]|\\.)*)'"#, #"password\s*=\s*([^\s']+)"#,
                        #"://[^:/@\s]*:([^@\s]+)@"#, #"[?&]password=([^&\s]+)"#]
        for pattern in patterns {
            guard let expression = try? NSRegularExpression(pattern: pattern) else { continue }
            let range = NSRange(conninfo.startIndex..., in: conninfo)
            for match in expression.matches(in: conninfo, range: range) {
                if let captured = Range(match.range(at: 1), in: conninfo), !conninfo[captured].isEmpty {
                    let value = String(conninfo[captured])
                    found.append(value)
                    if let decoded = value.removingPercentEncoding, decoded != value { found.append(decoded) }
                }
            }
        }
        return found
    }

    static func redact(_ text: String, _ secrets: [String]) -> String {
        secrets.sorted { $0.count > $1.count }.reduce(text) { $0.replacingOccurrences(of: $1, with: "********") }
    }
}
