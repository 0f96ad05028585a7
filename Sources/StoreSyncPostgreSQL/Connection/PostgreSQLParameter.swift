import Foundation

/// A value sent as a statement parameter (`$1`, `$2`, …) in PostgreSQL's text
/// format; the server converts it to the parameter's type.
///
/// Text rather than binary format: it needs no knowledge of type OIDs on our
/// side, and every PostgreSQL type has a text input.
///
/// ```swift
/// try connection.execute("INSERT INTO item (id, name, data, at) VALUES ($1, $2, $3, $4)",
///                        [UUID(), "Ann", Data([0, 1]), Date()])
/// try connection.execute("UPDATE item SET name = $1", [nil as String?])   // NULL
/// ```
public protocol PostgreSQLParameter {
    /// The value in PostgreSQL's text input format.
    var postgreSQLText: String { get }
}

extension String: PostgreSQLParameter {
    public var postgreSQLText: String { self }
}

extension Substring: PostgreSQLParameter {
    public var postgreSQLText: String { String(self) }
}

extension Int: PostgreSQLParameter {
    public var postgreSQLText: String { String(self) }
}

extension Int16: PostgreSQLParameter {
    public var postgreSQLText: String { String(self) }
}

extension Int32: PostgreSQLParameter {
    public var postgreSQLText: String { String(self) }
}

extension Int64: PostgreSQLParameter {
    public var postgreSQLText: String { String(self) }
}

extension Double: PostgreSQLParameter {
    /// Swift's description is the shortest text that reads back as the same
    /// value, which float8in accepts; the non-finite values use PostgreSQL's names.
    public var postgreSQLText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return description
    }
}

extension Float: PostgreSQLParameter {
    public var postgreSQLText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return description
    }
}

extension Bool: PostgreSQLParameter {
    public var postgreSQLText: String { self ? "true" : "false" }
}

extension UUID: PostgreSQLParameter {
    /// Lowercase, as PostgreSQL prints uuids, so text comparisons agree.
    public var postgreSQLText: String { uuidString.lowercased() }
}

extension Data: PostgreSQLParameter {
    /// bytea hex format: `\x` then two hex digits a byte.
    public var postgreSQLText: String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        bytes.reserveCapacity(2 + count * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Date: PostgreSQLParameter {
    /// ISO 8601 in UTC with microseconds (timestamptz's precision), e.g.
    /// "2026-11-27 21:52:10.123456+00".
    public var postgreSQLText: String { PostgreSQLTimestamp.text(of: self) }
}

extension Decimal: PostgreSQLParameter {
    /// Decimal's description is plain digits with a '.' (never a locale's
    /// separator, never an exponent), which numeric's input accepts.
    public var postgreSQLText: String { description }
}
