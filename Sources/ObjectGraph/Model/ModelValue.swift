import Foundation

/// Conversions and comparisons for the values a model holds (default values,
/// bounds), shared by the model's equality and the Xcode file reader/writer.
enum ModelValue {
    /// Value equality across the Swift types attribute values use. Numbers of
    /// one attribute type are stored in one Swift type, so no cross-type rules.
    static func equal(_ a: Any?, _ b: Any?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (nil, _), (_, nil): return false
        case let (x?, y?):
            if let same = sameTypeEqual(x, y) { return same }
            guard let x = x as? AnyHashable, let y = y as? AnyHashable else { return false }
            return x == y
        }
    }

    /// Equality of two attribute values of the same common Swift type,
    /// decided by comparing type identities and casting to that exact type;
    /// nil when the types differ or are not among them. Casting an `Any` to
    /// `AnyHashable` (or to a class, which on Linux tries bridging) costs far
    /// more, and every `setValue` compares the new value with the old one.
    static func sameTypeEqual(_ a: Any, _ b: Any) -> Bool? {
        let type = Swift.type(of: a)
        guard type == Swift.type(of: b) else { return nil }
        if type == String.self { return (a as! String) == (b as! String) }
        if type == Int64.self { return (a as! Int64) == (b as! Int64) }
        if type == Double.self { return (a as! Double).bitPattern == (b as! Double).bitPattern || (a as! Double) == (b as! Double) }
        if type == Int32.self { return (a as! Int32) == (b as! Int32) }
        if type == Int16.self { return (a as! Int16) == (b as! Int16) }
        if type == Int.self { return (a as! Int) == (b as! Int) }
        if type == Bool.self { return (a as! Bool) == (b as! Bool) }
        if type == Date.self { return (a as! Date) == (b as! Date) }
        if type == Float.self { return (a as! Float).bitPattern == (b as! Float).bitPattern || (a as! Float) == (b as! Float) }
        if type == Decimal.self { return (a as! Decimal) == (b as! Decimal) }
        if type == Data.self { return (a as! Data) == (b as! Data) }
        if type == UUID.self { return (a as! UUID) == (b as! UUID) }
        if type == URL.self { return (a as! URL) == (b as! URL) }
        return nil
    }

    /// True when `value`'s type is one of the plain attribute value types
    /// (`exactSwiftType`, and `Int`), by type identity alone: never an
    /// optional, collection or object.
    static func isPlainValue(_ value: Any) -> Bool {
        plainTypes.contains(ObjectIdentifier(Swift.type(of: value)))
    }

    private static let plainTypes: [ObjectIdentifier] =
        AttributeType.allCases.compactMap { exactSwiftType($0).map(ObjectIdentifier.init) } + [ObjectIdentifier(Int.self)]

    /// Parses Xcode's `defaultValueString` for an attribute type.
    static func parseDefault(_ string: String, type: AttributeType) -> Any?? {
        switch type {
        case .integer16: return Int16(string).map { .some($0) }
        case .integer32: return Int32(string).map { .some($0) }
        case .integer64: return Int64(string).map { .some($0) }
        case .decimal: return Decimal(string: string, locale: Locale(identifier: "en_US_POSIX")).map { .some($0) }
        case .double: return Double(string).map { .some($0) }
        case .float: return Float(string).map { .some($0) }
        case .string: return .some(string)
        case .boolean:
            switch string.uppercased() {
            case "YES", "TRUE", "1": return .some(true)
            case "NO", "FALSE", "0": return .some(false)
            default: return nil
            }
        case .uuid: return UUID(uuidString: string).map { .some($0) }
        case .uri: return URL(string: string).map { .some($0) }
        case .date: return Double(string).map { .some(Date(timeIntervalSinceReferenceDate: $0)) }
        case .binaryData, .transformable, .objectID, .undefined: return nil
        }
    }

    /// Formats a default value as Xcode's `defaultValueString`, or nil when the
    /// type has no string form in a model file.
    static func formatDefault(_ value: Any, type: AttributeType) -> String? {
        switch (type, value) {
        case (.boolean, let b as Bool): return b ? "YES" : "NO"
        case (.decimal, let d as Decimal): return NSDecimalNumber(decimal: d).stringValue
        case (.uuid, let u as UUID): return u.uuidString
        case (.uri, let u as URL): return u.absoluteString
        case (.date, let d as Date): return String(d.timeIntervalSinceReferenceDate)
        case (.string, let s as String): return s
        case (.integer16, let n as Int16): return String(n)
        case (.integer32, let n as Int32): return String(n)
        case (.integer64, let n as Int64): return String(n)
        case (.double, let n as Double): return String(n)
        case (.float, let n as Float): return String(n)
        default: return nil
        }
    }

    /// True when `value` is of the Swift type an attribute of `type` holds.
    static func isValid(_ value: Any, for type: AttributeType) -> Bool {
        // The exact type, by identity, answers the common case without a cast.
        if let exact = exactSwiftType(type), Swift.type(of: value) == exact { return true }
        switch type {
        case .integer16: return value is Int16
        case .integer32: return value is Int32
        case .integer64: return value is Int64
        case .decimal: return value is Decimal
        case .double: return value is Double
        case .float: return value is Float
        case .string: return value is String
        case .boolean: return value is Bool
        case .date: return value is Date
        case .binaryData: return value is Data
        case .uuid: return value is UUID
        case .uri: return value is URL
        case .transformable, .objectID, .undefined: return true
        }
    }

    /// The one Swift type values of an attribute type have, when there is one.
    static func exactSwiftType(_ type: AttributeType) -> Any.Type? {
        switch type {
        case .integer16: return Int16.self
        case .integer32: return Int32.self
        case .integer64: return Int64.self
        case .decimal: return Decimal.self
        case .double: return Double.self
        case .float: return Float.self
        case .string: return String.self
        case .boolean: return Bool.self
        case .date: return Date.self
        case .binaryData: return Data.self
        case .uuid: return UUID.self
        case .uri: return URL.self
        case .transformable, .objectID, .undefined: return nil
        }
    }
}
