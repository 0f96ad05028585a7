import Foundation

/// Managed objects are what predicates and sort descriptors read.
extension ManagedObject: KeyValueCoding {}

/// String-keyed access (KVC-*), primitive access (PRIM-*) and the
/// relationship mechanics that keep inverses in step (REL-05, KVC-02).
extension ManagedObject {
    // MARK: - Public KVC

    /// The value of a modeled attribute or relationship, firing the fault
    /// first (KVC-01, FLT-01). To-many relationships read as an immutable
    /// `Set<ManagedObject>` (an array when ordered) (ACC-10). Unmodeled keys go
    /// to `value(forUndefinedKey:)`, which throws by default (KVC-03).
    ///
    /// ```swift
    /// let name = try employee.value(forKey: "firstName") as? String
    /// ```
    public final func value(forKey key: String) throws -> Any? {
        // One lookup finds the slot; the property comes from the slot.
        guard let slot = layout.slotIndex[key] else {
            if let fetched = layout.fetchedPropertiesByName[key] {
                guard let context = managedObjectContext else { return nil }
                return try context.fetchedPropertyValue(fetched, of: self)
            }
            return try value(forUndefinedKey: key)
        }
        if isFault { try fireFaultIfNeeded() }
        if let rel = layout.slotRelationships[slot] {
            if rel.isToMany {
                try loadToMany(rel)
                return ManagedObject.publicValue(storage[slot: slot], rel)
            }
            // Unresolvable only without a context: an invalid object's to-one is nil.
            let destination = storage[slot: slot]
            return destination is ManagedObjectID ? nil : destination
        }
        // An attribute: reading it needs no to-one resolved.
        return rawStorage[slot: slot]
    }

    /// Sets a modeled property with change notification, change tracking and
    /// inverse maintenance (KVC-02). Throws for an unknown key (KVC-03), a
    /// read-only property, or a value of the wrong Swift type; integer and
    /// floating-point values are converted when exact (KVC-06, VAL-02).
    ///
    /// ```swift
    /// try employee.setValue(Int32(7), forKey: "employeeID")
    /// try employee.setValue(sales, forKey: "department")   // also adds to sales.employees
    /// ```
    public final func setValue(_ value: Any?, forKey key: String) throws {
        // One lookup: every settable modeled property has a slot (fetched
        // properties have none, and are read-only).
        let slot = layout.slotIndex[key]
        // A value of the attribute's exact type is no Optional to look through.
        let value: Any? = if let value, let slot, let exact = layout.slotExactTypes[slot], Swift.type(of: value) == exact {
            value
        } else {
            ManagedObject.flatten(value)
        }
        guard let property = slot.map({ layout.slotProperties[$0] }) ?? layout.propertiesByName[key] else {
            if type(of: self).automaticallyNotifiesObservers(forKey: key) {
                willChangeValue(forKey: key)
                defer { didChangeValue(forKey: key) }
                return try setValue(value, forUndefinedKey: key)
            }
            return try setValue(value, forUndefinedKey: key)
        }
        // A property with a slot is an attribute or relationship, never a
        // fetched property: no type check per call for those.
        if property.isReadOnly || (slot == nil && property is FetchedPropertyDescription) {
            throw CoreDataError(.managedObjectValidation, "The property '\(key)' of entity \(entity.name) is read-only", userInfo: [CoreDataError.validationKeyErrorKey: key])
        }
        try ensureUsable()
        if isFault { try fireFaultIfNeeded() }
        if let slot, let attribute = layout.slotAttributes[slot] {
            let coerced = try coerce(value, slot: slot, attribute)
            if ManagedObject.valuesEqual(rawStorage[slot: slot], coerced) { return }
            willChangeValue(forKey: key)
            rawStorage[slot: slot] = coerced
            didChangeValue(forKey: key, slot: slot)
        } else if let rel = property as? RelationshipDescription {
            if rel.isToMany {
                // Core Data takes any collection, its own mutable set proxy
                // included (`setValue(other.mutableSetValue(forKey:), forKey:)`);
                // the proxy's members are read before anything changes.
                let members: [ManagedObject]
                if let view = value as? MutableRelationshipSet {
                    members = try view.allObjects()
                } else if let objects = ManagedObject.objects(in: value) {
                    members = objects
                } else {
                    throw wrongType(key, value, expected: "a collection of managed objects")
                }
                for member in members { try checkDestination(member, rel) }
                try replaceToMany(rel, with: members)
            } else {
                let destination: ManagedObject?
                if nilIfNSNull(value) == nil { destination = nil }
                else if let object = value as? ManagedObject { destination = object }
                else { throw wrongType(key, value, expected: rel.destinationEntity?.name ?? "a managed object") }
                if let destination { try checkDestination(destination, rel) }
                try setToOne(rel, destination, maintainInverse: true)
            }
        }
    }

    /// The value at a dotted key path; through a to-many relationship it
    /// collects the values of every member (FLT-04). As in Foundation's
    /// key-value coding, a collection operator (`@count`, `@sum`, `@avg`,
    /// `@min`, `@max`, `@unionOfObjects`, `@distinctUnionOfObjects`) applies
    /// to the to-many before it, and `length` of a string or data value is
    /// its `NSString`/`NSData` length.
    ///
    /// ```swift
    /// let headcount = try department.value(forKeyPath: "employees.@count") as? Int
    /// let payroll = try department.value(forKeyPath: "employees.@sum.salary")
    /// let nameLength = try employee.value(forKeyPath: "lastName.length") as? Int
    /// ```
    public final func value(forKeyPath keyPath: String) throws -> Any? {
        var parts = keyPath.split(separator: ".").map(String.init)
        guard !parts.isEmpty else { throw unknownKey(keyPath) }
        let first = parts.removeFirst()
        let head = try value(forKey: first)
        if parts.isEmpty { return head }
        if parts[0].hasPrefix("@") {
            do {
                return try KeyPathResolver.collectionOperator(parts[0], on: head, rest: Array(parts.dropFirst()), fullPath: [first] + parts)
            } catch let error as PredicateEvaluationError {
                throw CoreDataError(.managedObjectValidation, "Key path '\(keyPath)' of entity \(entity.name): \(error.reason)",
                                    userInfo: [CoreDataError.validationKeyErrorKey: keyPath, CoreDataError.entityNameErrorKey: entity.name])
            }
        }
        let rest = parts.joined(separator: ".")
        switch head {
        case nil: return nil
        case let object as ManagedObject: return try object.value(forKeyPath: rest)
        case let set as Set<ManagedObject>: return try set.map { try $0.value(forKeyPath: rest) ?? NSNull() }
        case let array as [ManagedObject]: return try array.map { try $0.value(forKeyPath: rest) ?? NSNull() }
        case let value?:
            if parts.count == 1, let length = KeyPathResolver.length(of: value, key: parts[0]) { return length }
            throw unknownKey(keyPath)
        }
    }

    /// Sets the value at a dotted key path; every step but the last must be a to-one.
    public final func setValue(_ value: Any?, forKeyPath keyPath: String) throws {
        guard let dot = keyPath.firstIndex(of: ".") else { return try setValue(value, forKey: keyPath) }
        let first = String(keyPath[..<dot])
        guard let target = try self.value(forKey: first) as? ManagedObject else {
            throw CoreDataError(.managedObjectValidation, "Key path '\(keyPath)' of entity \(entity.name) does not lead through a to-one relationship", userInfo: [CoreDataError.validationKeyErrorKey: keyPath])
        }
        try target.setValue(value, forKeyPath: String(keyPath[keyPath.index(after: dot)...]))
    }

    /// The values of several keys; nil values appear as `NSNull` (KVC-08, CPY-02).
    public final func dictionaryWithValues(forKeys keys: [String]) throws -> [String: Any] {
        var out: [String: Any] = [:]
        for key in keys { out[key] = try value(forKey: key) ?? NSNull() }
        return out
    }

    /// Sets each entry through `setValue(_:forKey:)`; `NSNull` means nil (KVC-08).
    public final func setValuesForKeys(_ values: [String: Any]) throws {
        for (key, value) in values { try setValue(nilIfNSNull(value), forKey: key) }
    }

    /// A live, mutable view of an unordered to-many relationship: changes go
    /// through the normal tracking and keep inverses in step (TM-01, TM-02).
    ///
    /// ```swift
    /// try dept.mutableSetValue(forKey: "employees").insert(newHire)
    /// ```
    public final func mutableSetValue(forKey key: String) throws -> MutableRelationshipSet {
        guard let rel = layout.relationshipsByName[key], rel.isToMany else {
            if layout.propertiesByName[key] == nil { throw unknownKey(key) }
            throw CoreDataError(.managedObjectValidation, "'\(key)' of entity \(entity.name) is not a to-many relationship", userInfo: [CoreDataError.validationKeyErrorKey: key])
        }
        return MutableRelationshipSet(object: self, relationship: rel)
    }

    /// The ordered variant of `mutableSetValue(forKey:)`, for ordered to-many
    /// relationships; the returned view also inserts and removes by index.
    public final func mutableOrderedSetValue(forKey key: String) throws -> MutableRelationshipSet {
        let view = try mutableSetValue(forKey: key)
        guard view.relationship.isOrdered else {
            throw CoreDataError(.managedObjectValidation, "'\(key)' of entity \(entity.name) is not an ordered relationship; use mutableSetValue(forKey:)", userInfo: [CoreDataError.validationKeyErrorKey: key])
        }
        return view
    }

    // MARK: - Primitive access (PRIM-*)

    /// The stored value with no access notification (PRIM-01); nil when unset.
    /// Unmodeled keys throw (PRIM-03).
    public final func primitiveValue(forKey key: String) throws -> Any? {
        guard let property = layout.propertiesByName[key], !(property is FetchedPropertyDescription) else { throw unknownKey(key) }
        try fireFaultIfNeeded()
        if let rel = property as? RelationshipDescription, rel.isToMany {
            try loadToMany(rel)
            return ManagedObject.publicValue(storage[key], rel)
        }
        return storage[key]
    }

    /// Writes storage with no notification, tracking, undo or inverse
    /// maintenance (PRIM-02, PRIM-04, PRIM-05). To-many values replace the
    /// whole membership (PRIM-06: replacement works).
    public final func setPrimitiveValue(_ value: Any?, forKey key: String) throws {
        let value = ManagedObject.flatten(value)
        guard let property = layout.propertiesByName[key], !(property is FetchedPropertyDescription) else { throw unknownKey(key) }
        if let attribute = property as? AttributeDescription {
            storage[key] = try ManagedObject.coerce(value, for: attribute, entityName: entity.name)
        } else if let rel = property as? RelationshipDescription {
            if rel.isToMany {
                guard let members = ManagedObject.objects(in: value) else { throw wrongType(key, value, expected: "a collection of managed objects") }
                unloadedToMany.remove(key)
                storage[key] = ManagedObject.unique(members)
            } else {
                if let value, !isNSNull(value), !(value is ManagedObject) { throw wrongType(key, value, expected: "a managed object") }
                storage[key] = value as? ManagedObject
            }
        }
    }

    // MARK: - Relationship mechanics

    func setToOne(_ rel: RelationshipDescription, _ destination: ManagedObject?, maintainInverse: Bool) throws {
        let old = storage[rel.name] as? ManagedObject
        if old === destination { return }
        willChangeValue(forKey: rel.name)
        storage[rel.name] = destination
        didChangeValue(forKey: rel.name)
        guard maintainInverse, let inverse = rel.inverseRelationship, managedObjectContext?.maintainsInverses ?? true else { return }
        if let old { try old.removeOneSide(inverse, self) }
        if let destination { try destination.addOneSide(inverse, self) }
    }

    /// Removes `member` from this side of `rel` only.
    func removeOneSide(_ rel: RelationshipDescription, _ member: ManagedObject) throws {
        try fireFaultIfNeeded()
        if rel.isToMany {
            try loadToMany(rel)
            guard position(of: member, in: rel) != nil else { return }
            willChangeValue(forKey: rel.name, withSetMutation: .minus, using: [member])
            removeMembers([member], from: rel)
            didChangeValue(forKey: rel.name, withSetMutation: .minus, using: [member])
        } else if storage[rel.name] as? ManagedObject === member {
            willChangeValue(forKey: rel.name)
            storage[rel.name] = nil
            didChangeValue(forKey: rel.name)
        }
    }

    /// Adds `member` on this side of `rel` only; a to-one side first detaches
    /// its previous partner from that partner's inverse.
    func addOneSide(_ rel: RelationshipDescription, _ member: ManagedObject) throws {
        try fireFaultIfNeeded()
        if rel.isToMany {
            try loadToMany(rel)
            guard position(of: member, in: rel) == nil else { return }
            willChangeValue(forKey: rel.name, withSetMutation: .union, using: [member])
            appendMembers([member], to: rel)
            didChangeValue(forKey: rel.name, withSetMutation: .union, using: [member])
        } else {
            let previous = storage[rel.name] as? ManagedObject
            if previous === member { return }
            willChangeValue(forKey: rel.name)
            storage[rel.name] = member
            didChangeValue(forKey: rel.name)
            if let previous, let inverse = rel.inverseRelationship { try previous.removeOneSide(inverse, self) }
        }
    }

    /// Adds and removes members of a to-many relationship, keeping inverses in step.
    func mutateToMany(_ rel: RelationshipDescription, adding: [ManagedObject], removing: [ManagedObject]) throws {
        try ensureUsable()
        try fireFaultIfNeeded()
        try loadToMany(rel)
        // A member being removed is a member, so it is never also added.
        let removed = ManagedObject.unique(removing).filter { position(of: $0, in: rel) != nil }
        let added = ManagedObject.unique(adding).filter { position(of: $0, in: rel) == nil }
        let inverse = (managedObjectContext?.maintainsInverses ?? true) ? rel.inverseRelationship : nil
        if !removed.isEmpty {
            willChangeValue(forKey: rel.name, withSetMutation: .minus, using: removed)
            removeMembers(removed, from: rel)
            didChangeValue(forKey: rel.name, withSetMutation: .minus, using: removed)
            if let inverse { for r in removed { try r.removeOneSide(inverse, self) } }
        }
        if !added.isEmpty {
            willChangeValue(forKey: rel.name, withSetMutation: .union, using: added)
            appendMembers(added, to: rel)
            didChangeValue(forKey: rel.name, withSetMutation: .union, using: added)
            if let inverse { for a in added { try a.addOneSide(inverse, self) } }
        }
    }

    func replaceToMany(_ rel: RelationshipDescription, with newMembers: [ManagedObject]) throws {
        try loadToMany(rel)
        let current = storage[rel.name] as? [ManagedObject] ?? []
        let wanted = ManagedObject.unique(newMembers)
        let currentIDs = Set(current.map(ObjectIdentifier.init)), wantedIDs = Set(wanted.map(ObjectIdentifier.init))
        try mutateToMany(rel, adding: wanted.filter { !currentIDs.contains(ObjectIdentifier($0)) },
                         removing: current.filter { !wantedIDs.contains(ObjectIdentifier($0)) })
        if rel.isOrdered, let now = storage[rel.name] as? [ManagedObject], !zip(now, wanted).allSatisfy({ $0 === $1 }) {
            willChangeValue(forKey: rel.name)
            storage[rel.name] = wanted
            didChangeValue(forKey: rel.name)
        }
    }

    func checkDestination(_ object: ManagedObject, _ rel: RelationshipDescription) throws {
        if let destination = rel.destinationEntity, !object.entity.isKindOf(entity: destination) {
            throw wrongType(rel.name, object, expected: destination.name)
        }
        if let mine = managedObjectContext, let theirs = object.managedObjectContext, mine !== theirs {
            throw CoreDataError(.managedObjectContextExternalRelationship, "Cannot relate \(entity.name).\(rel.name) to an object of another context", userInfo: [CoreDataError.validationKeyErrorKey: rel.name])
        }
    }

    /// Objects a context forgot (reset, rolled-back insert, saved delete) keep
    /// their values but can no longer change: nothing would track the change.
    func ensureUsable() throws {
        if wasForgotten && !managedObjectContextReference.isSet {
            throw CoreDataError(.managedObjectContextReferentialIntegrity, "The \(entity.name) object \(objectID) is no longer registered with a context (reset, rolled back or deleted) and cannot be changed")
        }
    }

    // MARK: - Helpers

    func unknownKey(_ key: String) -> CoreDataError {
        CoreDataError(.managedObjectValidation, "The entity \(entity.name) has no property '\(key)' (this class is not key value coding-compliant for the key '\(key)')",
                      userInfo: [CoreDataError.validationKeyErrorKey: key, CoreDataError.entityNameErrorKey: entity.name])
    }

    func wrongType(_ key: String, _ value: Any?, expected: String) -> CoreDataError {
        CoreDataError(.managedObjectValidation, "Cannot set \(entity.name).\(key) to a value of type \(value.map { String(describing: type(of: $0)) } ?? "nil"); expected \(expected)",
                      userInfo: [CoreDataError.validationKeyErrorKey: key, CoreDataError.validationValueErrorKey: value as Any])
    }

    static func objects(in value: Any?) -> [ManagedObject]? {
        if nilIfNSNull(value) == nil { return [] }
        switch value {
        case nil: return []
        case let array as [ManagedObject]: return array
        case let set as Set<ManagedObject>: return Array(set)
        case let view as MutableRelationshipSet: return try? view.allObjects()
        case let sequence as [Any]: return sequence.compactMap { $0 as? ManagedObject }.count == sequence.count ? sequence.map { $0 as! ManagedObject } : nil
        default:
            let mirror = Mirror(reflecting: value!)
            guard mirror.displayStyle == .set || mirror.displayStyle == .collection else { return nil }
            var out: [ManagedObject] = []
            for child in mirror.children {
                guard let object = child.value as? ManagedObject else { return nil }
                out.append(object)
            }
            return out
        }
    }

    /// Unwraps an optional hidden inside `Any?` (a typed `String?` passed on).
    static func flatten(_ value: Any?) -> Any? {
        guard let value else { return nil }
        if ModelValue.isPlainValue(value) { return value }
        // A protocol cast, not `Mirror`: reflection allocated on every setValue.
        guard let optional = value as? OptionalValue else { return value }
        return flatten(optional.wrappedAny)
    }

    static func unique(_ objects: [ManagedObject]) -> [ManagedObject] {
        var seen = Set<ObjectIdentifier>()
        return objects.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }

    /// Converts a value to the Swift type of an attribute when that is exact
    /// (VAL-02, KVC-06), else throws naming entity and key.
    /// `coerce(_:for:entityName:)` for the attribute in `slot`, with the
    /// common case (a value already of the attribute's type) answered from
    /// the layout, without reading the description.
    @inline(__always)
    func coerce(_ value: Any?, slot: Int, _ attribute: AttributeDescription) throws -> Any? {
        if let value, let exact = layout.slotExactTypes[slot], Swift.type(of: value) == exact { return value }
        return try ManagedObject.coerce(value, for: attribute, entityName: entity.name)
    }

    static func coerce(_ value: Any?, for attribute: AttributeDescription, entityName: String) throws -> Any? {
        guard let value else { return nil }
        let type = attribute.attributeType
        if let exact = ModelValue.exactSwiftType(type), Swift.type(of: value) == exact { return value }
        if isNSNull(value) { return nil }
        if ModelValue.isValid(value, for: type) { return value }
        var converted: Any?
        func integer(_ v: Any) -> Int64? {
            switch v {
            case let n as Int: return Int64(n)
            case let n as Int8: return Int64(n)
            case let n as Int16: return Int64(n)
            case let n as Int32: return Int64(n)
            case let n as Int64: return n
            case let n as UInt8: return Int64(n)
            case let n as UInt16: return Int64(n)
            case let n as UInt32: return Int64(n)
            default: return nil
            }
        }
        switch type {
        case .integer16: converted = integer(value).flatMap { Int16(exactly: $0) }
        case .integer32: converted = integer(value).flatMap { Int32(exactly: $0) }
        case .integer64: converted = integer(value)
        case .double:
            if let n = integer(value) { converted = Double(n) } else if let f = value as? Float { converted = Double(f) }
        case .float:
            if let n = integer(value) { converted = Float(n) } else if let d = value as? Double { converted = Float(d) }
        case .decimal:
            if let n = integer(value) { converted = Decimal(n) } else if let d = value as? Double { converted = Decimal(d) }
        default: break
        }
        if let converted { return converted }
        throw CoreDataError(.managedObjectValidation, "Cannot set \(entityName).\(attribute.name) (\(type.xcodeName)) to a value of type \(Swift.type(of: value))",
                            userInfo: [CoreDataError.validationKeyErrorKey: attribute.name, CoreDataError.validationValueErrorKey: value])
    }
}

/// Lets `flatten` see through an `Optional` hidden in an `Any`.
private protocol OptionalValue { var wrappedAny: Any? { get } }
extension Optional: OptionalValue {
    fileprivate var wrappedAny: Any? {
        switch self {
        case .some(let wrapped): return wrapped
        case .none: return nil
        }
    }
}
