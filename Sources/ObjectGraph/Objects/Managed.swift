import Foundation

/// Declares a typed property of a `ManagedObject` subclass backed by the
/// object's modeled storage (ACC-01, ACC-12): reads and writes go through
/// `value(forKey:)`/`setValue(_:forKey:)`, so they fire faults, notify
/// observers, track changes and keep inverses in step like any KVC access.
///
/// The key is the property's name (found once per class by reflection) unless
/// given explicitly. To-many relationships are `Set<Destination>` (or an
/// array when ordered); the setter replaces the membership.
///
/// ```swift
/// final class Employee: ManagedObject {
///     @Managed var firstName: String?
///     @Managed var salary: Decimal
///     @Managed("department") var dept: Department?
///     @Managed var directReports: Set<Employee>
/// }
/// ```
///
/// A value the model cannot hold (wrong type, unknown key, read of a deleted
/// record) is a programming error here and traps with the thrown error's
/// message; use the throwing KVC methods to handle it instead.
@propertyWrapper
public struct Managed<Value>: ManagedPropertyTagged {
    let explicitKey: String?
    /// Zero except while the property's name is being found by reflection.
    var resolutionTag = 0

    public init(_ key: String? = nil) { self.explicitKey = key }

    // Traps kept (issue 28 audit): unreachable, the accessor is unavailable at compile time.
    @available(*, unavailable, message: "@Managed is only available on ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unreachable") }
        set { fatalError("unreachable") }
    }

    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) -> Value {
        get {
            let key = Self.key(in: object, storageKeyPath)
            let raw: Any?
            // Trap kept (issue 28 audit): a key the model lacks, or a fault whose row is gone, which
            // Core Data's accessors raise on too ("could not fulfill a fault"); KVC throws instead.
            do { raw = try object.value(forKey: key) } catch { preconditionFailure("ObjectGraph: reading \(object.entity.name).\(key): \(error)") }
            if let raw, let typed = raw as? Value { return typed }
            if raw == nil, let nilType = Value.self as? ExpressibleByNilLiteral.Type { return nilType.init(nilLiteral: ()) as! Value }
            if raw == nil, let empty = ManagedPropertyMarker.emptyValue(of: Value.self) { return empty }
            if let raw, let typed = ManagedPropertyMarker.convertCollection(raw, to: Value.self) { return typed }
            // A programming error, as in Core Data: the subclass declares a
            // type the model's values do not have (the setter refuses them).
            if raw is Set<ManagedObject> || raw is [ManagedObject] {
                preconditionFailure("ObjectGraph: \(object.entity.name).\(key) holds objects that are not all of the element type of \(Value.self) (is every destination's class registered?)")
            }
            // Left: nil read as a non-optional Date, UUID, URL or class, which
            // Core Data's Swift accessors trap on too (their bridging forces
            // the value); numbers, Bool, strings, data and collections read as
            // their empty value above.
            preconditionFailure("ObjectGraph: \(object.entity.name).\(key) holds \(raw.map { "a \(type(of: $0))" } ?? "nil"), which a property of type \(Value.self) cannot represent; make the property optional or give the attribute a default")
        }
        set {
            let key = Self.key(in: object, storageKeyPath)
            // Trap kept (issue 28 audit): a value or object the model refuses, which Core Data's setters raise on; KVC throws instead.
            do { try object.setValue(newValue, forKey: key) } catch { preconditionFailure("ObjectGraph: setting \(object.entity.name).\(key): \(error)") }
        }
    }

    static func key<Object: ManagedObject>(in object: Object, _ storageKeyPath: ReferenceWritableKeyPath<Object, Managed<Value>>) -> String {
        if let explicit = object[keyPath: storageKeyPath].explicitKey { return explicit }
        if let cached = ManagedPropertyMarker.cachedKey(for: storageKeyPath) { return cached }
        // Tag this declaration's storage, find the tagged child by reflection.
        let tag = Int.random(in: 1...Int.max)
        object[keyPath: storageKeyPath].resolutionTag = tag
        defer { object[keyPath: storageKeyPath].resolutionTag = 0 }
        return ManagedPropertyMarker.resolveKey(tag: tag, storageKeyPath: storageKeyPath, in: object)
    }
}

/// The storage of a `@Managed` property, as reflection sees it.
protocol ManagedPropertyTagged {
    var resolutionTag: Int { get }
}

/// Finds and caches the names of `@Managed` properties, per declaration.
enum ManagedPropertyMarker {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var keys: [AnyKeyPath: String] = [:]

    static func cachedKey(for storageKeyPath: AnyKeyPath) -> String? {
        lock.lock(); defer { lock.unlock() }
        return keys[storageKeyPath]
    }

    static func resolveKey(tag: Int, storageKeyPath: AnyKeyPath, in object: ManagedObject) -> String {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for child in current.children {
                guard let label = child.label, label.hasPrefix("_"),
                      let tagged = child.value as? ManagedPropertyTagged, tagged.resolutionTag == tag else { continue }
                let key = String(label.dropFirst())
                lock.lock(); keys[storageKeyPath] = key; lock.unlock()
                return key
            }
            mirror = current.superclassMirror
        }
        // Trap kept (issue 28 audit): a declaration reflection cannot name, fixed by passing the key.
        preconditionFailure("ObjectGraph: could not find the name of a @Managed property of \(type(of: object)); pass the key explicitly: @Managed(\"name\")")
    }

    /// What a non-optional property of `type` reads when its value is nil,
    /// as Core Data's Swift accessors answer: scalar accessors give 0 and
    /// false (numbers, Bool, Decimal), and Foundation bridges a nil string,
    /// data or collection to an empty one. Nil for types with no such value
    /// (Date, UUID, URL, classes).
    static func emptyValue<Value>(of type: Value.Type) -> Value? {
        if type == Bool.self { return false as? Value }
        if let numeric = type as? any AdditiveArithmetic.Type { return zero(numeric) as? Value }
        if let collection = type as? any RangeReplaceableCollection.Type { return empty(collection) as? Value }
        if let set = type as? any SetAlgebra.Type { return empty(set) as? Value }
        return nil
    }

    private static func zero<T: AdditiveArithmetic>(_: T.Type) -> T { .zero }
    private static func empty<T: RangeReplaceableCollection>(_: T.Type) -> T { T() }
    private static func empty<T: SetAlgebra>(_: T.Type) -> T { T() }

    /// Sets and arrays of managed objects typed as a subclass collection.
    static func convertCollection<Value>(_ raw: Any, to type: Value.Type) -> Value? {
        if let set = raw as? Set<ManagedObject> { return (Array(set) as Any) as? Value ?? (set as Any) as? Value }
        if let array = raw as? [ManagedObject] { return (Set(array) as Any) as? Value }
        return nil
    }
}
