import Foundation

/// A constant held by a ``FetchExpression``: the value of a literal in a format
/// string or of a `%@` argument.
///
/// Literal kinds are kept apart (an `.int(1)` is not the same constant as a
/// `.double(1)`) so that formatting and re-parsing gives back exactly the same
/// predicate; evaluation compares numbers by value regardless of kind.
///
/// ```swift
/// let p = FetchPredicate.comparison(.init(.keyPath("age"), .greaterThan, .constant(.int(30))))
/// p.predicateFormat // "age > 30"
/// ```
public enum FetchValue: Equatable, CustomStringConvertible, @unchecked Sendable {
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
    /// A class instance, such as a managed object; compared by identity.
    case object(AnyObject)
    /// Any other hashable value, such as an object ID struct; compared with `==`.
    case other(AnyHashable)

    /// The value as a plain Swift value, as evaluation hands it out.
    public var anyValue: Any? { Scalar(self).anyValue }

    public static func == (lhs: FetchValue, rhs: FetchValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        // Bit equality keeps NaN == NaN, so a parsed NaN constant round-trips.
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern || a == b
        case let (.decimal(a), .decimal(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.date(a), .date(b)): return a == b
        case let (.uuid(a), .uuid(b)): return a == b
        case let (.data(a), .data(b)): return a == b
        case let (.url(a), .url(b)): return a == b
        case let (.object(a), .object(b)): return a === b
        case let (.other(a), .other(b)): return a == b
        default: return false
        }
    }

    public var description: String { PredicateFormatter.format(self) }

    /// Converts a Swift value (a `%@` argument) to a constant. Returns nil for
    /// collections, which become aggregate expressions instead.
    static func from(_ value: Any?) -> FetchValue? {
        // Checked by class first: a boolean NSNumber (JSON's true) must stay a
        // Boolean constant, which the evaluator's classification need not keep.
        if let value = unwrapOptional(value), type(of: value) is NSNumber.Type, let number = value as? NSNumber {
            return Scalar.fetchValue(of: number)
        }
        // Everything else: the evaluator's classification, shared.
        switch Scalar(any: value) {
        case .null: return .null
        case let .bool(v): return .bool(v)
        case let .int(v): return .int(v)
        case let .double(v): return .double(v)
        case let .decimal(v): return .decimal(v)
        case let .string(v): return .string(v)
        case let .date(v): return .date(v)
        case let .uuid(v): return .uuid(v)
        case let .data(v): return .data(v)
        case let .url(v): return .url(v)
        case .collection, .list: return nil
        case let .other(v):
            if type(of: v) is AnyClass { return .object(v as AnyObject) }
            if let h = v as? AnyHashable { return .other(h) }
            return .object(v as AnyObject)
        }
    }
}

/// Lets a value typed `Any` that secretly holds an `Optional` be unwrapped
/// without reflection.
protocol OptionalUnwrapping {
    var unwrappedAny: Any? { get }
}

extension Optional: OptionalUnwrapping {
    var unwrappedAny: Any? {
        switch self {
        case .none: return nil
        case let .some(wrapped): return unwrapOptional(wrapped)
        }
    }
}

/// Flattens `Any` holding `Optional<T>` (and nested optionals) to `Any?`.
@inline(__always)
func unwrapOptional(_ value: Any?) -> Any? {
    guard let value else { return nil }
    if let optional = value as? OptionalUnwrapping { return optional.unwrappedAny }
    return value
}
