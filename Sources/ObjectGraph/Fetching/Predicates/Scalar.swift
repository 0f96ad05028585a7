import Foundation

/// A value sorted into the kinds the evaluator compares. Classifying once per
/// operand keeps comparisons to a switch instead of repeated dynamic casts.
enum Scalar {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case decimal(Decimal)
    case string(String)
    case date(Date)
    case uuid(UUID)
    case data(Data)
    case url(URL)
    case collection([Any?])
    /// A collection whose elements are already classified: a literal
    /// aggregate of constants, prepared once by a comparison.
    case list([Scalar])
    case other(Any)

    init(_ value: FetchValue) {
        switch value {
        case .null: self = .null
        case let .bool(v): self = .bool(v)
        case let .int(v): self = .int(v)
        case let .double(v): self = .double(v)
        case let .decimal(v): self = .decimal(v)
        case let .string(v): self = .string(v)
        case let .date(v): self = .date(v)
        case let .uuid(v): self = .uuid(v)
        case let .data(v): self = .data(v)
        case let .url(v): self = .url(v)
        case let .object(v): self = .other(v)
        case let .other(v): self = .other(v.base)
        }
    }

    /// Classifies a value read from an object. The casts are ordered by how
    /// often each type appears in rows, so the common ones are found first.
    @inline(__always)
    init(any value: Any?) {
        guard let value else { self = .null; return }
        if let v = value as? Int { self = .int(Int64(v)); return }
        if let v = value as? String { self = .string(v); return }
        if let v = value as? Double { self = .double(v); return }
        if let v = value as? Bool { self = .bool(v); return }
        if let v = value as? Date { self = .date(v); return }
        self = Scalar.classifySlow(value)
    }

    /// True when the value is a class instance. Casting a Swift value to a
    /// Foundation class (`is NSNull`, `as? NSArray`) bridges it first, which
    /// for a dictionary or array allocates a whole Foundation copy; class casts
    /// are therefore only tried on values that are objects already.
    @inline(__always)
    static func isObject(_ value: Any) -> Bool {
        type(of: value) is AnyClass
    }

    @inline(__always)
    static func isNull(_ value: Any) -> Bool {
        isNSNull(value)
    }

    private static func classifySlow(_ value: Any) -> Scalar {
        if isObject(value) {
            if value is NSNull { return .null }
            if let v = value as? NSNumber { return Scalar(fetchValue(of: v)) }
        }
        switch value {
        case let v as Int64: return .int(v)
        case let v as Int32: return .int(Int64(v))
        case let v as Int16: return .int(Int64(v))
        case let v as Int8: return .int(Int64(v))
        case let v as UInt8: return .int(Int64(v))
        case let v as UInt16: return .int(Int64(v))
        case let v as UInt32: return .int(Int64(v))
        case let v as UInt: return Int64(exactly: v).map(Scalar.int) ?? .double(Double(v))
        case let v as UInt64: return Int64(exactly: v).map(Scalar.int) ?? .double(Double(v))
        case let v as Float: return .double(Double(v))
        case let v as Decimal: return .decimal(v)
        case let v as UUID: return .uuid(v)
        case let v as Data: return .data(v)
        case let v as URL: return .url(v)
        case let v as Substring: return .string(String(v))
        case let v as FetchValue: return Scalar(v)
        default:
            if let items = collectionElements(value) { return .collection(items) }
            if let optional = value as? OptionalUnwrapping { return Scalar(any: optional.unwrappedAny) }
            return .other(value)
        }
    }

    /// The elements of a to-many value (any Array, Set, NSArray, NSSet or
    /// NSOrderedSet), or nil if the value is not one.
    static func collectionElements(_ value: Any) -> [Any?]? {
        if isObject(value) {
            if let a = value as? NSArray { return a.map { Optional($0) } }
            if let s = value as? NSSet { return s.map { Optional($0) } }
            if let s = value as? NSOrderedSet { return s.map { Optional($0) } }
            return nil
        }
        let t = type(of: value)
        // The common scalar types are rejected without trying any cast.
        if t == String.self || t == Int.self || t == Double.self || t == Bool.self || t == Date.self
            || t == [String: Any].self || t == Decimal.self || t == UUID.self || t == Data.self {
            return nil
        }
        if let a = value as? [Any?] { return a }
        if let a = value as? [Any] { return a.map { Optional($0) } }
        if let s = value as? Set<AnyHashable> { return s.map { Optional($0.base) } }
        return nil
    }

    static func isCollection(_ value: Any) -> Bool {
        collectionElements(value) != nil
    }

    /// NSNumber keeps its C type; a Bool stays a Bool and a double a Double.
    static func fetchValue(of number: NSNumber) -> FetchValue {
        let type = String(cString: number.objCType)
        switch type {
        case "d", "f": return .double(number.doubleValue)
        case "B": return .bool(number.boolValue)
        case "c":
            // JSONSerialization's true/false are NSNumber subclasses with C type char.
            if Swift.String(describing: Swift.type(of: number)).contains("Boolean") { return .bool(number.boolValue) }
            return .int(number.int64Value)
        case "Q", "L", "I", "S":
            let u = number.uint64Value
            return Int64(exactly: u).map(FetchValue.int) ?? .double(Double(u))
        default: return .int(number.int64Value)
        }
    }

    var isNumeric: Bool {
        switch self {
        case .bool, .int, .double, .decimal: return true
        default: return false
        }
    }

    /// The value back as a Swift value.
    var anyValue: Any? {
        switch self {
        case .null: return nil
        case let .bool(v): return v
        case let .int(v): return Int(exactly: v) ?? v
        case let .double(v): return v
        case let .decimal(v): return v
        case let .string(v): return v
        case let .date(v): return v
        case let .uuid(v): return v
        case let .data(v): return v
        case let .url(v): return v
        case let .collection(v): return v
        case let .list(v): return v.map { $0.anyValue }
        case let .other(v): return v
        }
    }

    /// The elements of a to-many value, classified; nil if not one.
    var elementScalars: [Scalar]? {
        switch self {
        case let .collection(items): return items.map { Scalar(any: $0) }
        case let .list(items): return items
        default: return nil
        }
    }

    /// The type name error messages use.
    var typeName: String {
        switch self {
        case .null: return "nil"
        case .bool: return "Bool"
        case .int: return "Int"
        case .double: return "Double"
        case .decimal: return "Decimal"
        case .string: return "String"
        case .date: return "Date"
        case .uuid: return "UUID"
        case .data: return "Data"
        case .url: return "URL"
        case .collection, .list: return "collection"
        case let .other(v): return String(describing: type(of: v))
        }
    }

    /// A short rendering of the value for error messages.
    var errorDescription: String {
        switch self {
        case .null: return "nil"
        case let .string(s):
            let short = s.count > 40 ? String(s.prefix(40)) + "…" : s
            return "\"\(short)\""
        case let .collection(c): return "collection of \(c.count)"
        case let .list(c): return "collection of \(c.count)"
        default:
            let text = Scalar.describe(anyValue)
            return text.count > 40 ? String(text.prefix(40)) + "…" : text
        }
    }

    /// `String(describing:)` that is safe for every value: Foundation traps
    /// describing a Date whose interval is NaN or infinite, and such dates
    /// can come out of arithmetic on user data.
    static func describe(_ value: Any?) -> String {
        guard let value = unwrapOptional(value) else { return "nil" }
        if let date = value as? Date {
            let t = date.timeIntervalSinceReferenceDate
            if t.isNaN { return "invalid date (NaN)" }
            return t.isFinite ? String(describing: date) : "invalid date (\(t))"
        }
        return String(describing: value)
    }

    // MARK: - Numbers

    /// Compares two numeric scalars by value, whatever their kinds; nil when
    /// either is not a number or the comparison is unordered (NaN).
    static func compareNumbers(_ a: Scalar, _ b: Scalar) -> ComparisonResult? {
        switch (a, b) {
        case let (.int(x), .int(y)): return order(x, y)
        case let (.double(x), .double(y)): return x.isNaN || y.isNaN ? nil : order(x, y)
        case let (.int(x), .double(y)): return compare(x, y)
        case let (.double(x), .int(y)): return compare(y, x).map(reverse)
        case let (.bool(x), _): return compareNumbers(.int(x ? 1 : 0), b)
        case let (_, .bool(y)): return compareNumbers(a, .int(y ? 1 : 0))
        case let (.decimal(x), _):
            guard let y = b.decimalValue else { return nil }
            return order(x, y)
        case let (_, .decimal(y)):
            guard let x = a.decimalValue else { return nil }
            return order(x, y)
        default: return nil
        }
    }

    var decimalValue: Decimal? {
        switch self {
        case let .int(v): return Decimal(v)
        case let .double(v): return v.isFinite ? Decimal(v) : nil
        case let .decimal(v): return v
        case let .bool(v): return v ? 1 : 0
        default: return nil
        }
    }

    var doubleValue: Double? {
        switch self {
        case let .int(v): return Double(v)
        case let .double(v): return v
        case let .decimal(v): return NSDecimalNumber(decimal: v).doubleValue
        case let .bool(v): return v ? 1 : 0
        default: return nil
        }
    }

    @inline(__always)
    static func order<T: Comparable>(_ x: T, _ y: T) -> ComparisonResult {
        x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
    }

    private static func reverse(_ r: ComparisonResult) -> ComparisonResult {
        switch r {
        case .orderedAscending: return .orderedDescending
        case .orderedDescending: return .orderedAscending
        case .orderedSame: return .orderedSame
        }
    }

    /// Exact Int64-versus-Double comparison: converting the integer to Double
    /// would round large values and make unequal numbers compare equal.
    private static func compare(_ i: Int64, _ d: Double) -> ComparisonResult? {
        if d.isNaN { return nil }
        if d >= 9_223_372_036_854_775_808.0 { return .orderedAscending }
        if d < -9_223_372_036_854_775_808.0 { return .orderedDescending }
        let whole = d.rounded(.down)
        let w = Int64(whole)
        if i < w { return .orderedAscending }
        if i > w { return .orderedDescending }
        return whole == d ? .orderedSame : .orderedAscending
    }
}
