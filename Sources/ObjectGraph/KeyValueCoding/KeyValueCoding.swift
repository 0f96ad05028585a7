import Foundation

/// Key-value coding, the Swift stand-in for Objective-C's `valueForKey:`.
///
/// swift-corelibs-foundation has no KVC, so anything a predicate, a sort
/// descriptor or an expression description reads through a key path must
/// expose its properties through this protocol. Managed objects conform;
/// plain `[String: Any]` dictionaries are read directly by the evaluator and
/// need no conformance.
///
/// ```swift
/// struct Person: KeyValueCoding {
///     var name: String
///     func value(forKey key: String) throws -> Any? {
///         switch key {
///         case "name": return name
///         default: throw KeyValueCodingError.unknownKey(key, typeName: "Person")
///         }
///     }
/// }
/// let ann = Person(name: "Ann")
/// try FetchPredicate(format: "name BEGINSWITH 'A'").evaluate(with: ann) // true
/// ```
public protocol KeyValueCoding {
    /// The value of the property named `key`. Throw
    /// ``KeyValueCodingError/unknownKey(_:typeName:)`` for a key the object
    /// does not have (KVC-03), so predicate evaluation can report it by name.
    func value(forKey key: String) throws -> Any?

    /// The value at a dotted key path. The default walks the path one key at a
    /// time; through to-many values it collects the values of every element,
    /// as KVC does for sets and arrays.
    func value(forKeyPath keyPath: String) throws -> Any?
}

extension KeyValueCoding {
    public func value(forKeyPath keyPath: String) throws -> Any? {
        let components = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        return try KeyPathResolver.value(of: self, keyPath: components)
    }
}
