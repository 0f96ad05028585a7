import CLibPQ
import Foundation

/// The rows of a statement's result, in text format, copied out of libpq's
/// PGresult (so the result outlives neither a PQclear nor the connection).
///
/// Accessors return nil for NULL, and for text that is not of the asked type.
///
/// ```swift
/// let result = try connection.execute("SELECT id, name FROM item WHERE at > $1", [since])
/// for row in 0..<result.rowCount {
///     let id = result.uuid(row, 0), name = result.string(row, 1)
/// }
/// ```
public struct PostgreSQLResult: Sendable {
    private let columnNames: [String]
    private let rows: [[String?]]
    /// Rows affected by INSERT/UPDATE/DELETE (PQcmdTuples); 0 for other statements.
    public let affectedRows: Int

    init(_ result: OpaquePointer) {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        columnNames = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        rows = (0..<rowCount).map { row in
            (0..<columnCount).map { column in
                PQgetisnull(result, Int32(row), Int32(column)) != 0
                    ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
            }
        }
        affectedRows = Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    public var rowCount: Int { rows.count }
    public var columnCount: Int { columnNames.count }

    public func columnName(_ column: Int) -> String { columnNames[column] }

    /// The index of the first column named `named`, nil when there is none.
    public func column(named: String) -> Int? { columnNames.firstIndex(of: named) }

    public func isNull(_ row: Int, _ column: Int) -> Bool { rows[row][column] == nil }

    /// The value's text, nil when NULL.
    public func string(_ row: Int, _ column: Int) -> String? { rows[row][column] }

    public func int64(_ row: Int, _ column: Int) -> Int64? { string(row, column).flatMap { Int64($0) } }

    /// float4/float8/numeric text, including PostgreSQL's NaN, Infinity and -Infinity.
    public func double(_ row: Int, _ column: Int) -> Double? {
        guard let text = string(row, column) else { return nil }
        switch text {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default: return Double(text)
        }
    }

    /// boolean's "t"/"f" (also "true"/"false", e.g. from a text column).
    public func bool(_ row: Int, _ column: Int) -> Bool? {
        switch string(row, column) {
        case "t", "true": return true
        case "f", "false": return false
        default: return nil
        }
    }

    /// bytea in hex output format ("\x0a1b…"); the connection sets bytea_output to hex.
    public func data(_ row: Int, _ column: Int) -> Data? {
        guard let text = string(row, column) else { return nil }
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"),
              bytes.count % 2 == 0 else { return nil }
        var data = Data(capacity: (bytes.count - 2) / 2)
        var index = 2
        while index < bytes.count {
            guard let high = Self.hexValue(bytes[index]), let low = Self.hexValue(bytes[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }

    public func uuid(_ row: Int, _ column: Int) -> UUID? { string(row, column).flatMap { UUID(uuidString: $0) } }

    /// timestamptz output in the ISO DateStyle (the connection sets it), any
    /// offset, fractional seconds to the microsecond; "infinity" is distantFuture.
    public func date(_ row: Int, _ column: Int) -> Date? {
        string(row, column).flatMap { PostgreSQLTimestamp.date(from: $0) }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
