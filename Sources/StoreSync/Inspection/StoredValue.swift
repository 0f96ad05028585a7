import Foundation
import ObjectGraph

/// A stored property value as the inspection tools (the change log, the
/// verifier) report it: attributes by type, relationships by the related
/// objects' global identifiers, so values read from different stores compare.
///
/// ```swift
/// let value = StoredValue(attributeValue: "Inbox")      // .string("Inbox")
/// print(value.text, value.jsonValue)                     // "Inbox" Inbox
/// ```
public enum StoredValue: Equatable, @unchecked Sendable, CustomStringConvertible {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case decimal(Decimal)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case uri(URL)
    /// A to-one relationship's destination.
    case object(UUID)
    /// A to-many relationship's members (in order when ordered, else sorted).
    case objects([UUID])
    /// Anything else (a transformable's value), as order-independent text.
    case other(String)

    /// An attribute value as ObjectGraph hands it out (nil and `NSNull` are `.null`).
    public init(attributeValue value: Any?) {
        guard let value, !(value is NSNull) else { self = .null; return }
        switch value {
        case let v as Bool: self = .bool(v)
        case let v as Int16: self = .integer(Int64(v))
        case let v as Int32: self = .integer(Int64(v))
        case let v as Int64: self = .integer(v)
        case let v as Int: self = .integer(Int64(v))
        case let v as Decimal: self = .decimal(v)
        case let v as Double: self = .double(v)
        case let v as Float: self = .double(Double(v))
        case let v as String: self = .string(v)
        case let v as Date: self = .date(v)
        case let v as Data: self = .data(v)
        case let v as UUID: self = .uuid(v)
        case let v as URL: self = .uri(v)
        default: self = .other(ObjectState.canonical(value))
        }
    }

    /// A to-one value as the change log and the stores give it: a global
    /// identifier, or nil.
    public init(destination: UUID?) {
        self = destination.map(StoredValue.object) ?? .null
    }

    public static func == (a: StoredValue, b: StoredValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.integer(x), .integer(y)): return x == y
        // Two NaNs are the same stored value.
        case let (.double(x), .double(y)): return x == y || (x.isNaN && y.isNaN)
        case let (.decimal(x), .decimal(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.date(x), .date(y)): return x == y
        case let (.data(x), .data(y)): return x == y
        case let (.uuid(x), .uuid(y)): return x == y
        case let (.uri(x), .uri(y)): return x == y
        case let (.object(x), .object(y)): return x == y
        case let (.objects(x), .objects(y)): return x == y
        case let (.other(x), .other(y)): return x == y
        default: return false
        }
    }

    /// The value for JSON, following `storesyncctl query --json`: numbers and
    /// booleans as themselves; decimals as strings (exact digits); non-finite
    /// doubles as "nan", "inf", "-inf"; dates as ISO 8601 UTC with
    /// milliseconds; binary data as base64; UUIDs, URIs and global
    /// identifiers as strings; a to-many as an array of global identifiers.
    public var jsonValue: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let v): return v
        case .integer(let v): return v
        case .double(let v): return v.isFinite ? v : (v.isNaN ? "nan" : (v > 0 ? "inf" : "-inf"))
        case .decimal(let v): return "\(v)"
        case .string(let v): return v
        case .date(let v): return Self.isoFormatter.string(from: v)
        case .data(let v): return v.base64EncodedString()
        case .uuid(let v): return v.uuidString
        case .uri(let v): return v.absoluteString
        case .object(let v): return v.uuidString
        case .objects(let v): return v.map(\.uuidString)
        case .other(let v): return v
        }
    }

    /// The value for people: strings quoted (control characters escaped, so
    /// a value stays on its line), binary data by size, relationships by
    /// global identifier.
    public var text: String {
        switch self {
        case .null: return "nil"
        case .bool(let v): return v ? "true" : "false"
        case .integer(let v): return String(v)
        case .double(let v): return String(v)
        case .decimal(let v): return "\(v)"
        case .string(let v): return Self.quoted(v)
        case .date(let v): return Self.isoFormatter.string(from: v)
        case .data(let v): return "<\(v.count) bytes>"
        case .uuid(let v): return v.uuidString
        case .uri(let v): return v.absoluteString
        case .object(let v): return v.uuidString
        case .objects(let v): return "[" + v.map(\.uuidString).joined(separator: ", ") + "]"
        case .other(let v): return v
        }
    }

    public var description: String { text }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += String(format: "\\u{%02X}", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// ISO 8601 in UTC with milliseconds: the form every JSON time takes.
    public static let isoFormatter: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}
