import Foundation
import ObjectGraph

/// Converts attribute values between their Swift types (the ones ObjectGraph
/// returns for each `AttributeType`) and the text of PostgreSQL's typed
/// columns. The same text is what the hub's history keeps of old values, so
/// a value read back from either is of the exact type the embedded hub
/// would give (the engine compares canonical strings that name the type).
///
/// | Attribute | Column | Text |
/// |---|---|---|
/// | integer 16/32/64 | smallint/integer/bigint | decimal digits |
/// | decimal | numeric | `Decimal`'s description |
/// | double, float | double precision, real | shortest exact text, `NaN`, `Infinity` |
/// | string, URI | text | the string, the URL's absolute string |
/// | boolean | boolean | `true`/`false` |
/// | date | double precision | seconds since 2001-01-01 UTC (see below) |
/// | binary, transformable | bytea | `\x` hex (transformable: the transformer's data) |
/// | UUID | uuid | lowercase |
///
/// Dates are not `timestamptz`: it keeps microseconds, a `Date` keeps a
/// `Double` of seconds, so a value written and read back would differ from
/// the store's and every round would send it again. The column holds what
/// Core Data's SQLite column holds (seconds since the reference date).
///
/// ```swift
/// let text = try PostgreSQLValueCodec.text(Int32(7), for: attribute)     // "7"
/// let value = try PostgreSQLValueCodec.value(text, for: attribute)       // Int32(7)
/// ```
enum PostgreSQLValueCodec {
    /// Made once: a locale per decoded decimal was most of a large read's time.
    static let posix = Locale(identifier: "en_US_POSIX")

    /// The column type of an attribute type.
    /// - Throws: 134060 for types that have no stored value (undefined, objectID).
    static func columnType(_ attribute: AttributeDescription, entity: String) throws -> String {
        switch attribute.attributeType {
        case .integer16: return "smallint"
        case .integer32: return "integer"
        case .integer64: return "bigint"
        case .decimal: return "numeric"
        case .double, .date: return "double precision"
        case .float: return "real"
        case .string, .uri: return "text"
        case .boolean: return "boolean"
        case .binaryData, .transformable: return "bytea"
        case .uuid: return "uuid"
        case .undefined, .objectID:
            throw CoreDataError(.coreData, "\(entity).\(attribute.name) is a stored attribute of type \(attribute.attributeType.xcodeName), which the PostgreSQL hub cannot store")
        }
    }

    /// The text of a value (nil: NULL).
    /// - Throws: 134030 when the value is not of the attribute's type, or is
    ///   a string with a NUL character (PostgreSQL text cannot hold one).
    static func text(_ value: Any?, for attribute: AttributeDescription, entity: String) throws -> String? {
        guard let value, !(value is NSNull) else { return nil }
        func mismatch(_ why: String? = nil) -> CoreDataError {
            CoreDataError(.persistentStoreSave,
                          why ?? "value \(value) (\(type(of: value))) cannot be stored in \(entity).\(attribute.name) of type \(attribute.attributeType.xcodeName)",
                          userInfo: [CoreDataError.propertyNameErrorKey: attribute.name])
        }
        func integer(_ v: Any) -> Int64? {
            switch v {
            case let n as Int: return Int64(n)
            case let n as Int8: return Int64(n)
            case let n as Int16: return Int64(n)
            case let n as Int32: return Int64(n)
            case let n as Int64: return n
            case let n as UInt8: return Int64(n)
            case let n as UInt16: return Int64(n)
            case let n as UInt32: return Int64(n)
            default: return nil
            }
        }
        switch attribute.attributeType {
        case .integer16, .integer32, .integer64:
            guard let n = integer(value), attribute.attributeType.integerRange?.contains(n) ?? true else { throw mismatch() }
            return String(n)
        case .boolean:
            if let b = value as? Bool { return b ? "true" : "false" }
            guard let n = integer(value) else { throw mismatch() }
            return n == 0 ? "false" : "true"
        case .decimal:
            if let d = value as? Decimal { return d.isNaN ? "NaN" : d.description }
            if let n = integer(value) { return String(n) }
            if let d = value as? Double, d.isFinite { return Decimal(d).description }
            throw mismatch()
        case .double:
            if let d = value as? Double { return floatText(d) }
            if let f = value as? Float { return floatText(Double(f)) }
            if let n = integer(value) { return floatText(Double(n)) }
            throw mismatch()
        case .float:
            if let f = value as? Float { return floatText(f) }
            if let d = value as? Double { return floatText(Float(d)) }
            if let n = integer(value) { return floatText(Float(n)) }
            throw mismatch()
        case .string:
            guard let s = value as? String else { throw mismatch() }
            if s.utf8.contains(0) { throw mismatch("\(entity).\(attribute.name) holds a string with a NUL character, which PostgreSQL text cannot store") }
            return s
        case .uri:
            guard let u = value as? URL else { throw mismatch() }
            return u.absoluteString
        case .date:
            guard let d = value as? Date else { throw mismatch() }
            return floatText(d.timeIntervalSinceReferenceDate)
        case .binaryData:
            guard let d = value as? Data else { throw mismatch() }
            return hex(d)
        case .uuid:
            guard let u = value as? UUID else { throw mismatch() }
            return u.uuidString.lowercased()
        case .transformable:
            switch try SQLiteValueCodec.encode(value, for: attribute) {
            case .blob(let d): return hex(d)
            case .null: return nil
            default: throw mismatch()
            }
        case .undefined, .objectID:
            throw mismatch()
        }
    }

    /// The value of a column's (or the history's) text.
    /// - Throws: 134060 when the text is not a value of the attribute's type.
    static func value(_ text: String?, for attribute: AttributeDescription, entity: String) throws -> Any? {
        guard let text else { return nil }
        func unreadable() -> CoreDataError {
            CoreDataError(.coreData, "stored value '\(text.prefix(80))' of \(entity).\(attribute.name) is not a \(attribute.attributeType.xcodeName)",
                          userInfo: [CoreDataError.propertyNameErrorKey: attribute.name])
        }
        switch attribute.attributeType {
        case .integer16: guard let n = Int16(text) else { throw unreadable() }; return n
        case .integer32: guard let n = Int32(text) else { throw unreadable() }; return n
        case .integer64: guard let n = Int64(text) else { throw unreadable() }; return n
        case .boolean:
            switch text {
            case "t", "true": return true
            case "f", "false": return false
            default: throw unreadable()
            }
        case .decimal:
            if text == "NaN" { return Decimal.nan }
            guard let d = Decimal(string: text, locale: posix) else { throw unreadable() }
            return d
        case .double: guard let d = double(text) else { throw unreadable() }; return d
        case .float: guard let d = double(text) else { throw unreadable() }; return Float(d)
        case .string: return text
        case .uri: guard let u = URL(string: text) else { throw unreadable() }; return u
        case .date: guard let d = double(text) else { throw unreadable() }; return Date(timeIntervalSinceReferenceDate: d)
        case .binaryData: guard let d = data(hex: text) else { throw unreadable() }; return d
        case .uuid: guard let u = UUID(uuidString: text) else { throw unreadable() }; return u
        case .transformable:
            guard let d = data(hex: text) else { throw unreadable() }
            return try SQLiteValueCodec.decode(.blob(d), for: attribute)
        case .undefined, .objectID: throw unreadable()
        }
    }

    /// A value as the attribute's exact Swift type (an `Int` given for an
    /// integer 32 becomes `Int32`), as ObjectGraph's `setValue` coerces it.
    static func normalized(_ value: Any?, for attribute: AttributeDescription, entity: String) throws -> Any? {
        guard let value, !(value is NSNull) else { return nil }
        // Already the exact type (the common case): kept, not made into text and back.
        switch attribute.attributeType {
        case .integer16 where value is Int16, .integer32 where value is Int32, .integer64 where value is Int64,
             .double where value is Double, .float where value is Float, .boolean where value is Bool, .date where value is Date,
             .binaryData where value is Data, .uuid where value is UUID, .uri where value is URL:
            return value
        case .string:
            if let string = value as? String, !string.utf8.contains(0) { return string }
        case .transformable:
            // Checked now (the transformer takes it), kept as given, as a context keeps it until it is read again.
            _ = try text(value, for: attribute, entity: entity)
            return value
        default: break
        }
        return try Self.value(try text(value, for: attribute, entity: entity), for: attribute, entity: entity)
    }

    static func floatText(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        return d.description
    }

    static func floatText(_ f: Float) -> String {
        if f.isNaN { return "NaN" }
        if f.isInfinite { return f < 0 ? "-Infinity" : "Infinity" }
        return f.description
    }

    static func double(_ text: String) -> Double? {
        switch text {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default: return Double(text)
        }
    }

    static func hex(_ data: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        bytes.reserveCapacity(2 + data.count * 2)
        for byte in data {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func data(hex text: String) -> Data? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var out = Data(capacity: (utf8.count - 2) / 2)
        var i = 2
        while i < utf8.count {
            guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    /// A PostgreSQL array literal of uuids (`{…}`), for `= ANY($1::uuid[])`.
    static func uuidArray<S: Sequence>(_ gids: S) -> String where S.Element == UUID {
        "{" + gids.map { $0.uuidString.lowercased() }.joined(separator: ",") + "}"
    }

    static func int64Array<S: Sequence>(_ values: S) -> String where S.Element == Int64 {
        "{" + values.map(String.init).joined(separator: ",") + "}"
    }
}
