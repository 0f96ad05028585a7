import Foundation
import Synchronization

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
    /// Answers per entity, since every fetched row asks: normalising the
    /// class name each time showed up in fetch profiles. Keyed by entity
    /// identity and checked against the class name, which may still change
    /// while the model is editable; emptied whenever a class is (un)registered.
    private var resolved: [ObjectIdentifier: (className: String, type: ManagedObject.Type)] = [:]

    /// Bumped by every (un)registration, read without the lock: a context
    /// keeps the class it last resolved for an entity while it is unchanged.
    private let changes = Atomic<Int>(0)
    var generation: Int { changes.load(ordering: .acquiring) }

    public init() {}

    /// Registers `type` under `className` (default: the Swift type's name).
    public func register(_ type: ManagedObject.Type, forClassName className: String? = nil) {
        let name = Self.normalize(className ?? String(describing: type))
        lock.lock(); defer { lock.unlock() }
        classes[name] = type
        resolved.removeAll()
        changes.add(1, ordering: .releasing)
    }

    public func unregister(className: String) {
        lock.lock(); defer { lock.unlock() }
        classes[Self.normalize(className)] = nil
        resolved.removeAll()
        changes.add(1, ordering: .releasing)
    }

    /// The class for an entity; `ManagedObject` itself for the generic class
    /// name or an unregistered one.
    public func objectClass(for entity: EntityDescription) -> ManagedObject.Type {
        let className = entity.managedObjectClassName
        lock.lock(); defer { lock.unlock() }
        if let hit = resolved[ObjectIdentifier(entity)], hit.className == className { return hit.type }
        let name = Self.normalize(className)
        let type: ManagedObject.Type
        if name == EntityDescription.genericClassName || name == "ManagedObject" { type = ManagedObject.self }
        else { type = classes[name] ?? ManagedObject.self }
        resolved[ObjectIdentifier(entity)] = (className, type)
        return type
    }

    static func normalize(_ name: String) -> String {
        let trimmed = name.hasPrefix(".") ? String(name.dropFirst()) : name
        return trimmed.split(separator: ".").last.map(String.init) ?? trimmed
    }
}
