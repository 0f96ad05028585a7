import Foundation

/// The type of a computed column: Core Data types an expression description's
/// result with the attribute types (`NSAttributeType`, including objectID =
/// 2000), so this is the model's `AttributeType` (XD-04).
///
/// ```swift
/// ExpressionResultType.integer64.rawValue // 300
/// try ExpressionResultType.integer64.coerce(42) as? Int64 // 42
/// ```
public typealias ExpressionResultType = AttributeType

extension AttributeType {
    /// Converts an evaluated value to this type's Swift type (Int16, Int32,
    /// Int64, Decimal, Double, Float, String, Bool, Date, Data, UUID, URL).
    /// `undefined`, `transformable` and `objectID` pass values through.
    ///
    /// - Throws: ``PredicateEvaluationError`` when the value does not fit.
    public func coerce(_ value: Any?) throws -> Any? {
        let scalar = Scalar(any: value)
        if case .null = scalar { return nil }
        func fail() -> PredicateEvaluationError {
            PredicateEvaluationError(.typeMismatch, operatorName: "expressionResultType",
                                     reason: "cannot return \(scalar.typeName) \(scalar.errorDescription) as \(self)")
        }
        func integer() throws -> Int64 {
            switch scalar {
            case let .int(v): return v
            case let .bool(v): return v ? 1 : 0
            case let .double(v):
                guard let i = Int64(exactly: v.rounded(.towardZero)) else { throw fail() }
                return i
            case let .decimal(v):
                guard let i = Int64(exactly: NSDecimalNumber(decimal: v).doubleValue.rounded(.towardZero)) else { throw fail() }
                return i
            default: throw fail()
            }
        }
        switch self {
        case .undefined, .transformable, .objectID:
            return scalar.anyValue
        case .integer16:
            guard let v = Int16(exactly: try integer()) else { throw fail() }
            return v
        case .integer32:
            guard let v = Int32(exactly: try integer()) else { throw fail() }
            return v
        case .integer64:
            return try integer()
        case .decimal:
            guard scalar.isNumeric, let v = scalar.decimalValue else { throw fail() }
            return v
        case .double:
            guard scalar.isNumeric, let v = scalar.doubleValue else { throw fail() }
            return v
        case .float:
            guard scalar.isNumeric, let v = scalar.doubleValue else { throw fail() }
            return Float(v)
        case .string:
            guard case let .string(s) = scalar else { throw fail() }
            return s
        case .boolean:
            if case let .bool(b) = scalar { return b }
            return try integer() != 0
        case .date:
            guard case let .date(d) = scalar else { throw fail() }
            return d
        case .binaryData:
            guard case let .data(d) = scalar else { throw fail() }
            return d
        case .uuid:
            guard case let .uuid(u) = scalar else { throw fail() }
            return u
        case .uri:
            guard case let .url(u) = scalar else { throw fail() }
            return u
        }
    }
}
