import Foundation

/// An error from PostgreSQL or from libpq: a failed statement, a refused or
/// lost connection.
///
/// Its description names the server (`host:port/dbname`), the SQLSTATE and the
/// statement, never the password nor the parameters (they may hold user data).
///
/// ```swift
/// do {
///     try connection.execute("INSERT INTO t (id) VALUES ($1)", [1])
/// } catch let error as PostgreSQLError where error.sqlState == "23505" {
///     print(error)   // PostgreSQL error 23505 at 127.0.0.1:55432/postgres: duplicate key value … in: INSERT INTO t …
/// }
/// ```
public struct PostgreSQLError: Error, CustomStringConvertible, Sendable {
    /// PG_DIAG_SQLSTATE, e.g. "40001"; nil for failures libpq reports itself
    /// (refused connection, lost connection, bad connection string).
    public var sqlState: String?
    /// The primary message.
    public var message: String
    public var detail: String?
    /// The statement that failed (its first 200 characters), never its parameters.
    public var statement: String?
    /// The server as "host:port/dbname", when known.
    public var server: String?
    /// True when the connection was lost or refused: PQstatus went bad, or
    /// SQLSTATE class 08 (connection exception) or 57P01…57P03 (the server
    /// shut the session down or is starting/stopping). `reconnect()` may help.
    public var isConnectionFailure: Bool

    /// Serialization failure (40001) or deadlock (40P01): the transaction may
    /// succeed when run again, which `PostgreSQLConnection.transaction` does.
    public var isSerializationFailure: Bool {
        sqlState == "40001" || sqlState == "40P01"
    }

    public init(sqlState: String? = nil, message: String, detail: String? = nil, statement: String? = nil,
                server: String? = nil, isConnectionFailure: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.statement = statement.map { String($0.prefix(200)) }
        self.server = server
        self.isConnectionFailure = isConnectionFailure || Self.isConnectionState(sqlState)
    }

    static func isConnectionState(_ sqlState: String?) -> Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState)
    }

    /// "PostgreSQL error 23505 at host:port/db: message (detail) in: statement"
    public var description: String {
        var text = "PostgreSQL "
        if let sqlState {
            text += "error \(sqlState)"
        } else {
            text += isConnectionFailure ? "connection error" : "error"
        }
        if let server { text += " at \(server)" }
        text += ": \(message)"
        if let detail, !detail.isEmpty { text += " (\(detail))" }
        if let statement { text += " in: \(statement)" }
        return text
    }
}

extension PostgreSQLError: LocalizedError {
    public var errorDescription: String? { description }
}

extension PostgreSQLError {
    /// The PostgreSQLError behind `error`: itself, or one found through
    /// NSUnderlyingErrorKey (a hub may wrap it in a Core Data error).
    public static func underlying(_ error: any Error) -> PostgreSQLError? {
        var current: any Error = error
        for _ in 0..<8 {
            if let found = current as? PostgreSQLError { return found }
            guard let next = (current as NSError).userInfo[NSUnderlyingErrorKey] as? any Error else { return nil }
            current = next
        }
        return nil
    }
}
