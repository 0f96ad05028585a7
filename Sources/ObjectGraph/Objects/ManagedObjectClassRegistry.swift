import Foundation

/// Maps an entity's `managedObjectClassName` to the `ManagedObject` subclass
/// a context instantiates for it (OBJ-06, OBJ-11). Swift cannot look classes
/// up by name on Linux, so subclasses are registered once at start-up.
/// Matching ignores a leading "." (Xcode's module-relative names) and a
/// module prefix ("MyApp.Employee" matches a class registered as "Employee").
///
/// ```swift
/// ManagedObjectClassRegistry.shared.register(Employee.self)
/// ManagedObjectClassRegistry.shared.register(Manager.self, forClassName: ".Boss")
/// ```
public final class ManagedObjectClassRegistry: @unchecked Sendable {
    public static let shared = ManagedObjectClassRegistry()
    private let lock = NSLock()
    private var classes: [String: ManagedObject.Type] = [:]

    public init() {}

    /// Registers `type` under `className` (default: the Swift type's name).
    public func register(_ type: ManagedObject.Type, forClassName className: String? = nil) {
        let name = Self.normalize(className ?? String(describing: type))
        lock.lock(); defer { lock.unlock() }
        classes[name] = type
    }

    public func unregister(className: String) {
        lock.lock(); defer { lock.unlock() }
        classes[Self.normalize(className)] = nil
    }

    /// The class for an entity; `ManagedObject` itself for the generic class
    /// name or an unregistered one.
    public func objectClass(for entity: EntityDescription) -> ManagedObject.Type {
        let name = Self.normalize(entity.managedObjectClassName)
        if name == EntityDescription.genericClassName || name == "ManagedObject" { return ManagedObject.self }
        lock.lock(); defer { lock.unlock() }
        return classes[name] ?? ManagedObject.self
    }

    static func normalize(_ name: String) -> String {
        let trimmed = name.hasPrefix(".") ? String(name.dropFirst()) : name
        return trimmed.split(separator: ".").last.map(String.init) ?? trimmed
    }
}
