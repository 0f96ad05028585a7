import Foundation

/// Turns a transformable attribute's value into `Data` for storage and back
/// (AD-10…AD-12). Linux Foundation has no `ValueTransformer`, so ObjectGraph
/// defines this protocol and a registry of transformers by name.
///
/// ```swift
/// struct ColorTransformer: AttributeValueTransformer {
///     func transformedValue(_ value: Any?) throws -> Data? { ... }
///     func reverseTransformedValue(_ data: Data?) throws -> Any? { ... }
/// }
/// ValueTransformerRegistry.shared.register(ColorTransformer(), forName: "ColorTransformer")
/// ```
public protocol AttributeValueTransformer {
    /// Stored values must come back, so a transformer that cannot reverse is
    /// refused at registration (AD-11).
    var allowsReverseTransformation: Bool { get }
    func transformedValue(_ value: Any?) throws -> Data?
    func reverseTransformedValue(_ data: Data?) throws -> Any?
}

extension AttributeValueTransformer {
    public var allowsReverseTransformation: Bool { true }
}

/// The process-wide table of named transformers. Thread-safe.
public final class ValueTransformerRegistry: @unchecked Sendable {
    public static let shared = ValueTransformerRegistry()

    /// Core Data's names for the archiving transformers; both map to the
    /// keyed-archiver transformer here.
    public static let keyedUnarchiveFromDataName = "NSKeyedUnarchiveFromData"
    public static let secureUnarchiveFromDataName = "NSSecureUnarchiveFromData"
    /// A transformer for property-list values (strings, numbers, dates, data,
    /// arrays and dictionaries of them), stored as a binary property list.
    public static let propertyListName = "ObjectGraphPropertyList"

    private let lock = NSLock()
    private var transformers: [String: AttributeValueTransformer] = [:]

    init() {
        let keyed = KeyedArchiveTransformer()
        transformers[Self.keyedUnarchiveFromDataName] = keyed
        transformers[Self.secureUnarchiveFromDataName] = keyed
        transformers[Self.propertyListName] = PropertyListTransformer()
    }

    /// Registers a transformer under a name, replacing any earlier one.
    /// - Throws: `CoreDataError` 134060 if the transformer cannot reverse (AD-11).
    public func register(_ transformer: AttributeValueTransformer, forName name: String) throws {
        guard transformer.allowsReverseTransformation else {
            throw CoreDataError(.coreData, "value transformer '\(name)' does not allow reverse transformation; stored values could not be read back (AD-11)")
        }
        lock.lock(); defer { lock.unlock() }
        transformers[name] = transformer
    }

    /// The transformer registered under `name`, or nil.
    public func transformer(forName name: String) -> AttributeValueTransformer? {
        lock.lock(); defer { lock.unlock() }
        return transformers[name]
    }

    /// The transformer for an attribute: its named one, or the default
    /// keyed-archiver transformer when it names none (AD-12).
    public func transformer(for attribute: AttributeDescription) -> AttributeValueTransformer? {
        transformer(forName: attribute.valueTransformerName ?? Self.keyedUnarchiveFromDataName)
    }
}

/// Archives `NSCoding` objects (and values Foundation bridges to them) with
/// `NSKeyedArchiver`, the format Core Data uses for transformable attributes.
struct KeyedArchiveTransformer: AttributeValueTransformer {
    func transformedValue(_ value: Any?) throws -> Data? {
        guard let value else { return nil }
        return try NSKeyedArchiver.archivedData(withRootObject: value, requiringSecureCoding: false)
    }

    func reverseTransformedValue(_ data: Data?) throws -> Any? {
        guard let data else { return nil }
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
        unarchiver.requiresSecureCoding = false
        defer { unarchiver.finishDecoding() }
        return unarchiver.decodeObject(forKey: NSKeyedArchiveRootObjectKey)
    }
}

/// Stores property-list values as a binary property list.
struct PropertyListTransformer: AttributeValueTransformer {
    func transformedValue(_ value: Any?) throws -> Data? {
        guard let value else { return nil }
        return try PropertyListSerialization.data(fromPropertyList: value, format: .binary, options: 0)
    }

    func reverseTransformedValue(_ data: Data?) throws -> Any? {
        guard let data else { return nil }
        return try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
    }
}
