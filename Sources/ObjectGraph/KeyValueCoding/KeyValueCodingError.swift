import Foundation

/// Why a key-value coding read failed.
///
/// Conforming types throw ``unknownKey(_:typeName:)`` instead of trapping, so a
/// bad key in a user's predicate becomes an error that names it (KVC-03).
///
/// ```swift
/// throw KeyValueCodingError.unknownKey("nmae", typeName: "Person")
/// ```
public enum KeyValueCodingError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The object has no property with this key.
    case unknownKey(String, typeName: String)

    public var description: String {
        switch self {
        case let .unknownKey(key, typeName):
            return "\(typeName) has no key '\(key)'"
        }
    }
}
