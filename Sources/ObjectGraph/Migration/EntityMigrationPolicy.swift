import Foundation

/// Customises how one entity mapping runs (MP-01…10): Core Data's
/// `NSEntityMigrationPolicy`. A migration calls, for each entity mapping,
/// `begin`, then `createDestinationInstances(forSource:in:manager:)` for each
/// source instance, `endInstanceCreation`, then (after every mapping has
/// created its instances) `createRelationships(forDestination:in:manager:)`
/// for each destination instance, `endRelationshipCreation`, then
/// `performCustomValidation`, and last `end` (MP-01, MG-09).
///
/// Subclasses are found by the name in `EntityMapping.entityMigrationPolicyClassName`,
/// under which they must be registered (Swift has no class lookup by name, EM-08).
/// A subclass's methods can be called from value expressions with
/// `FUNCTION($entityPolicy, 'selector:', …)` by overriding `evaluateFunction(_:arguments:)`.
///
/// ```swift
/// final class SplitNamePolicy: EntityMigrationPolicy {
///     override func createDestinationInstances(forSource source: ManagedObject, in mapping: EntityMapping,
///                                              manager: MigrationManager) throws {
///         let person = try manager.destinationContext!.insertNewObject(forEntityName: "Person")
///         let parts = (try source.value(forKey: "name") as? String ?? "").split(separator: " ", maxSplits: 1)
///         try person.setValue(parts.first.map(String.init), forKey: "firstName")
///         try person.setValue(parts.dropFirst().first.map(String.init), forKey: "lastName")
///         manager.associate(sourceInstance: source, withDestinationInstance: person, for: mapping)
///     }
/// }
/// EntityMigrationPolicy.register(SplitNamePolicy.self, as: "SplitNamePolicy")
/// ```
open class EntityMigrationPolicy: ExpressionFunctionTarget {
    public required init() {}

    // MARK: - Registry (EM-08)

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [String: EntityMigrationPolicy.Type] = [:]

    /// Makes `type` available to entity mappings under `name` (for example
    /// the class name a mapping file records). Registering a name again
    /// replaces it.
    public static func register(_ type: EntityMigrationPolicy.Type, as name: String) {
        registryLock.lock(); defer { registryLock.unlock() }
        registry[name] = type
    }

    /// The policy class registered as `name`; the base class for
    /// `"NSEntityMigrationPolicy"` and `"EntityMigrationPolicy"`.
    public static func policyType(named name: String) -> EntityMigrationPolicy.Type? {
        if name == "NSEntityMigrationPolicy" || name == "EntityMigrationPolicy" { return EntityMigrationPolicy.self }
        registryLock.lock(); defer { registryLock.unlock() }
        return registry[name]
    }

    // MARK: - Stage 1: creating destination instances

    /// Before the mapping's first instance is created (MP-03).
    open func begin(_ mapping: EntityMapping, with manager: MigrationManager) throws {}

    /// Creates the destination instance(s) of one source instance (MP-04).
    /// The default inserts one instance of the mapping's destination entity
    /// (nothing for a `remove` mapping), sets each attribute mapping's value
    /// in order (EM-09; a nil value for a required attribute with a default
    /// keeps the default), and associates it with the source instance. An
    /// override that does not call super must associate its instances itself.
    open func createDestinationInstances(forSource sourceInstance: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
        guard let entity = manager.destinationEntity(for: mapping), let context = manager.destinationContext else { return }
        let destination = try context.insertNewObject(forEntityName: entity.name)
        for property in mapping.attributeMappings {
            guard let expression = property.valueExpression else { continue }
            let value = try manager.evaluate(expression, source: sourceInstance, destination: destination, mapping: mapping, property: property, policy: self)
            if Self.isNil(value), let attribute = entity.attributesByName[property.name], !attribute.isOptional, attribute.defaultValue != nil { continue }
            try destination.setValue(value, forKey: property.name)
        }
        manager.associate(sourceInstance: sourceInstance, withDestinationInstance: destination, for: mapping)
    }

    /// After the mapping's last instance was created (MP-05).
    open func endInstanceCreation(forMapping mapping: EntityMapping, manager: MigrationManager) throws {}

    // MARK: - Stage 2: relationships

    /// Sets the relationships of one destination instance (MP-06): each
    /// relationship mapping's value, evaluated with `$source` the instance's
    /// (first) source instance. A to-one takes an object (or the first of a
    /// collection), a to-many a collection (an array keeps an ordered
    /// relationship's order).
    open func createRelationships(forDestination destinationInstance: ManagedObject, in mapping: EntityMapping, manager: MigrationManager) throws {
        guard !mapping.relationshipMappings.isEmpty else { return }
        let source = try manager.sourceInstances(forEntityMappingName: mapping.name, destinationInstances: [destinationInstance]).first
        for property in mapping.relationshipMappings {
            guard let expression = property.valueExpression,
                  let relationship = destinationInstance.entity.relationshipsByName[property.name] else { continue }
            let value = try manager.evaluate(expression, source: source, destination: destinationInstance, mapping: mapping, property: property, policy: self)
            let objects = Self.managedObjects(in: value)
            if relationship.isToMany {
                try destinationInstance.setValue(objects ?? [], forKey: property.name)
            } else {
                try destinationInstance.setValue(objects?.first, forKey: property.name)
            }
        }
    }

    /// After every destination instance's relationships were set (MP-07).
    open func endRelationshipCreation(forMapping mapping: EntityMapping, manager: MigrationManager) throws {}

    // MARK: - Stage 3: validation

    /// Checks the mapping's destination instances, before the destination
    /// context's own validation at save (MP-08); fetch them yourself.
    open func performCustomValidation(forMapping mapping: EntityMapping, manager: MigrationManager) throws {}

    /// The last call for the mapping (MP-09).
    open func end(_ mapping: EntityMapping, manager: MigrationManager) throws {}

    // MARK: - FUNCTION($entityPolicy, …)

    /// Runs `FUNCTION($entityPolicy, 'selector:', …)`. The base class knows
    /// one helper, an ObjectGraph addition (NSEntityMigrationPolicy has no
    /// such method): `dateFromISO8601String:` (a `Date` from text such as
    /// `2017-06-07T18:11:11.297Z`, nil for nil). Subclasses add their own
    /// and call super for the rest.
    /// - Throws: `ExpressionFunctionError.unknownSelector` for others.
    open func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
        switch selector {
        case "dateFromISO8601String:":
            guard arguments.count == 1 else { throw ExpressionFunctionError.badArguments(selector, reason: "takes one argument") }
            guard let text = arguments[0] as? String else {
                if Self.isNil(arguments[0]) { return nil }
                throw ExpressionFunctionError.badArguments(selector, reason: "expects a string, got \(type(of: arguments[0]!))")
            }
            return try Self.date(fromISO8601: text)
        default:
            throw ExpressionFunctionError.unknownSelector(selector, receiver: String(describing: type(of: self)))
        }
    }

    static func date(fromISO8601 text: String) throws -> Date {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return date }
        throw ExpressionFunctionError.badArguments("dateFromISO8601String:", reason: "'\(text)' is not an ISO 8601 date")
    }

    // MARK: - Helpers

    static func isNil(_ value: Any?) -> Bool {
        guard let value else { return true }
        if value is NSNull { return true }
        if case Optional<Any>.none = value as Any? { return true }
        let mirror = Mirror(reflecting: value)
        return mirror.displayStyle == .optional && mirror.children.isEmpty
    }

    /// The managed objects a relationship value expression gave: one object,
    /// or any collection of them; nil for nil.
    static func managedObjects(in value: Any?) -> [ManagedObject]? {
        guard let value, !isNil(value) else { return nil }
        if let object = value as? ManagedObject { return [object] }
        if let array = value as? [ManagedObject] { return array }
        if let set = value as? Set<ManagedObject> { return Array(set) }
        if let array = value as? [Any?] { return array.compactMap { $0 as? ManagedObject } }
        if let array = value as? [Any] { return array.compactMap { $0 as? ManagedObject } }
        return nil
    }
}
