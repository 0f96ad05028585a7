import Foundation

/// Any JSON value, as the control protocol carries it. Requests are read
/// into this (not into fixed `Codable` structs) so that a missing or
/// mistyped field can be reported by name instead of as a decoding failure,
/// and so that fields added by a later protocol version pass through.
///
/// Integers and fractions are kept apart: history positions are 64-bit
/// integers and must come back exactly as they went in.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The member `key` of an object; nil for a missing member or a non-object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// An integer, or a fraction with no fractional part.
    public var int: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e15: return Int64(value)
        default: return nil
        }
    }

    public var double: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    public var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var array: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var object: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var isNull: Bool { self == .null }

    /// The JSON type's name, for messages such as "field v: expected an integer, found string".
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Parses one JSON text.
    public static func parse(_ data: Data) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: data)
    }

    /// Compact JSON with sorted keys and no newline inside (a string's
    /// newline is escaped), so one value is always one line of the protocol.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a JSONValue cannot fail: every case maps to JSON, and
        // non-finite doubles are written as null by `encode(to:)`.
        return (try? encoder.encode(self)) ?? Data("null".utf8)
    }

    /// `encoded()` as text.
    public var text: String { String(decoding: encoded(), as: UTF8.self) }
}

extension JSONValue: Codable {
    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a JSON value")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value):
            if value.isFinite { try container.encode(value) } else { try container.encodeNil() }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// A string or null.
    public init(_ value: String?) { self = value.map(JSONValue.string) ?? .null }
    public init(_ value: Int) { self = .int(Int64(value)) }
    public init(_ value: Int64) { self = .int(value) }
    public init(_ value: Double) { self = .double(value) }
    public init(_ value: Bool) { self = .bool(value) }
    /// A `[String: String]` as an object of strings (conflict values).
    public init(_ values: [String: String]) { self = .object(values.mapValues(JSONValue.string)) }
    /// An instant as RFC 3339 text with milliseconds, UTC.
    public init(_ date: Date) { self = .string(JSONValue.timestamp(date)) }

    /// RFC 3339 text with milliseconds, UTC, as `init(_: Date)` writes it.
    ///
    /// ```swift
    /// JSONValue.timestamp(Date(timeIntervalSince1970: 0))   // "1970-01-01T00:00:00.000Z"
    /// ```
    public static func timestamp(_ date: Date) -> String {
        timestampFormatter().string(from: date)
    }

    /// One formatter per thread: making one builds an ICU date format (about
    /// 0.6 ms; made per log line it was a sixth of the daemon's CPU at 100
    /// saves a second), and Foundation does not document one as safe to
    /// use from several threads at once.
    private static func timestampFormatter() -> ISO8601DateFormatter {
        let key = "StoreSyncControl.JSONValue.timestampFormatter"
        if let formatter = Thread.current.threadDictionary[key] as? ISO8601DateFormatter { return formatter }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        Thread.current.threadDictionary[key] = formatter
        return formatter
    }

    public static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
