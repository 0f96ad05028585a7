import Foundation

/// Uniqueness constraints at save (entity `uniquenessConstraints`, Core
/// Data's unique constraints): a save may not leave two objects of one entity
/// hierarchy in one store with equal values for a constraint's properties.
///
/// The check runs in the save after `willSave` (and, with several stores,
/// after optimistic-locking conflicts are resolved, which Apple's header
/// orders first), over the inserted objects and the updated objects that
/// changed a constrained property, against each other and against the rows
/// their store already holds. A tuple with a nil value never conflicts (as
/// NULL in a SQL unique index). Rows of objects this save deletes, or changes
/// to other values, do not count.
///
/// Under `.error` the save fails with 133021 and a `conflictList` of
/// `ConstraintConflict`s, nothing written or changed. Under the other
/// policies each set of duplicates is merged into one survivor and the save
/// goes on (see `MergePolicy` and docs/ARCHITECTURE.md, "Uniqueness
/// constraints", for the rules).
extension ManagedObjectContext {
    /// One constraint and the entity hierarchy it holds in.
    struct UniquenessConstraint {
        let entity: EntityDescription
        let keys: [String]
        /// The keys a store can be asked about (attributes); to-ones are
        /// compared on the rows that come back.
        let attributeKeys: [String]
    }

    /// The model's constraints, each once: a subentity that lists its
    /// ancestor's constraint again is covered by the ancestor's, whose scope
    /// includes it (Apple: "all constraint violations for that constraint
    /// will be collapsed into a single report").
    static func uniquenessConstraints(of model: ManagedObjectModel) -> [UniquenessConstraint] {
        var out: [UniquenessConstraint] = []
        for entity in model.entities {
            for keys in entity.uniquenessConstraints where !keys.isEmpty {
                var ancestor = entity.superentity
                var inherited = false
                while let parent = ancestor {
                    if parent.uniquenessConstraints.contains(where: { Set($0) == Set(keys) }) { inherited = true; break }
                    ancestor = parent.superentity
                }
                if inherited { continue }
                let attributes = EntityLayout.of(entity).attributesByName
                out.append(UniquenessConstraint(entity: entity, keys: keys, attributeKeys: keys.filter { attributes[$0] != nil }))
            }
        }
        return out
    }

    /// Objects of one save, and rows of one store, sharing a constraint's values.
    struct ConstraintGroup {
        let constraint: UniquenessConstraint
        let values: [String: Any]
        /// The conflicting objects of the save: updated ones first, each
        /// list in the order its objects changed.
        var objects: [ManagedObject]
        /// Other stored rows with the values, lowest primary key first.
        var rows: [StoreSnapshot]
        var isConflict: Bool { objects.count > 1 || !rows.isEmpty }
    }

    /// Finds the save's uniqueness conflicts and applies the merge policy;
    /// true when it changed anything.
    @discardableResult
    func resolveUniquenessConflicts() throws -> Bool {
        if cachedUniquenessConstraints == nil { cachedUniquenessConstraints = Self.uniquenessConstraints(of: persistentStoreCoordinator.managedObjectModel) }
        guard let constraints = cachedUniquenessConstraints, !constraints.isEmpty else { return false }
        var changed = false
        // Merging can make new duplicates (a survivor takes values another
        // constraint covers); each round settles at least one group.
        for _ in 0..<16 {
            let groups = try constraintConflicts(constraints)
            if groups.isEmpty {
                if changed { propagateDeletes() }
                return changed
            }
            if mergePolicy == .error { throw constraintMergeError(groups) }
            try merge(groups)
            changed = true
        }
        throw CoreDataError(.managedObjectConstraintMerge, "Uniqueness constraint conflicts kept appearing while the merge policy resolved them; save again",
                            userInfo: [ConstraintConflict.conflictListKey: [ConstraintConflict]()])
    }

    // MARK: - Finding conflicts

    private func constraintConflicts(_ constraints: [UniquenessConstraint]) throws -> [ConstraintGroup] {
        var out: [ConstraintGroup] = []
        for constraint in constraints {
            struct GroupKey: Hashable { let store: ObjectIdentifier; let values: [AnyHashable] }
            var groups: [GroupKey: ConstraintGroup] = [:]
            var order: [GroupKey] = []
            let updated = updatedInOrder.filter { !deletedSet.contains($0) && !$0.isFault && constraint.keys.contains(where: $0.hasChangedKey) }
            for object in updated + insertedInOrder where object.entity.isKindOf(entity: constraint.entity) {
                guard let values = constraintValues(of: object, constraint.keys) else { continue }
                let key = GroupKey(store: ObjectIdentifier(try store(for: object)), values: values.hashable)
                if groups[key] == nil {
                    groups[key] = ConstraintGroup(constraint: constraint, values: values.byName, objects: [], rows: [])
                    order.append(key)
                }
                groups[key]!.objects.append(object)
            }
            guard !groups.isEmpty else { continue }
            // The stores' rows with any of these values, 200 tuples a query.
            for start in stride(from: 0, to: order.count, by: 200) {
                let chunk = order[start..<min(start + 200, order.count)]
                let request = FetchRequest(entityName: constraint.entity.name)
                request.predicate = Self.predicate(matching: chunk.map { groups[$0]!.values }, attributeKeys: constraint.attributeKeys)
                let rows = try persistentStoreCoordinator.fetchSnapshots(for: constraint.entity, request: request).snapshots
                for row in rows {
                    guard let store = row.objectID.persistentStore ?? persistentStoreCoordinator.store(withIdentifier: row.objectID.storeIdentifier),
                          let values = constraintValues(of: row, constraint.keys) else { continue }
                    let key = GroupKey(store: ObjectIdentifier(store), values: values.hashable)
                    guard let group = groups[key], !group.objects.contains(where: { $0.objectID == row.objectID }) else { continue }
                    // What this save leaves of the row counts, not the row:
                    // deleted, or changed to other values, it is no duplicate.
                    if let registered = registry[row.objectID] {
                        if deletedSet.contains(registered) { continue }
                        if !registered.isFault, constraintValues(of: registered, constraint.keys)?.hashable != values.hashable { continue }
                    }
                    groups[key]!.rows.append(row)
                }
            }
            for key in order {
                var group = groups[key]!
                guard group.isConflict else { continue }
                group.rows.sort { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
                out.append(group)
            }
        }
        return out
    }

    /// A constraint's values of an object, or nil when one is nil.
    private func constraintValues(of object: ManagedObject, _ keys: [String]) -> ConstraintValues? {
        var values = ConstraintValues()
        for key in keys {
            guard let value = object.storage[key] else { return nil }
            values.append(key, (value as? ManagedObject)?.objectID ?? value)
        }
        return values
    }

    private func constraintValues(of row: StoreSnapshot, _ keys: [String]) -> ConstraintValues? {
        var values = ConstraintValues()
        for key in keys {
            guard let value = row[key] else { return nil }
            values.append(key, value)
        }
        return values
    }

    /// Rows whose attribute keys match one of `tuples`: `key IN {…}` for one
    /// key, else an OR of ANDs; nil (every row) when the constraint has only
    /// to-one keys. Rows are matched exactly afterwards either way.
    static func predicate(matching tuples: [[String: Any]], attributeKeys: [String]) -> FetchPredicate? {
        guard !attributeKeys.isEmpty else { return nil }
        if attributeKeys.count == 1 {
            let key = attributeKeys[0]
            return .compare(.key(key), .in, .aggregate(tuples.compactMap { $0[key] }.map { FetchExpression.value($0) }))
        }
        return .or(tuples.map { tuple in
            .and(attributeKeys.map { key in .compare(.key(key), .equalTo, .value(tuple[key])) })
        })
    }

    // MARK: - The error policy

    private func constraintMergeError(_ groups: [ConstraintGroup]) -> CoreDataError {
        var list: [ConstraintConflict] = []
        for group in groups {
            if group.objects.count > 1 {
                list.append(ConstraintConflict(constraint: group.constraint.keys, constraintValues: group.values, databaseObject: nil, databaseSnapshot: nil,
                                               conflictingObjects: group.objects, conflictingSnapshots: group.objects.map(conflictSnapshot)))
            }
            if let row = group.rows.first {
                let databaseObject = objectForID(row.objectID)
                for object in group.objects {
                    list.append(ConstraintConflict(constraint: group.constraint.keys, constraintValues: group.values, databaseObject: databaseObject,
                                                   databaseSnapshot: row.values, conflictingObjects: [object], conflictingSnapshots: [conflictSnapshot(object)]))
                }
            }
        }
        let described = groups.prefix(3).map { group -> String in
            let values = group.constraint.keys.map { "\(group.values[$0].map { "\($0)" } ?? "nil")" }.joined(separator: ", ")
            let place = group.rows.isEmpty ? "\(group.objects.count) objects of this save" : "an object already in the store and \(group.objects.count) of this save"
            return "\(group.constraint.entity.name) (\(group.constraint.keys.joined(separator: ", "))) = (\(values)): \(place)"
        }
        let more = groups.count > 3 ? "; and \(groups.count - 3) more" : ""
        let objects = groups.flatMap(\.objects)
        return CoreDataError(.managedObjectConstraintMerge,
                             "The save would break \(groups.count) uniqueness constraint\(groups.count == 1 ? "" : "s"): \(described.joined(separator: "; "))\(more)",
                             userInfo: [ConstraintConflict.conflictListKey: list, CoreDataError.affectedObjectsErrorKey: objects])
    }

    /// An object's stored values as a conflict reports them; none for an
    /// object this save inserts.
    private func conflictSnapshot(_ object: ManagedObject) -> [String: Any] {
        insertedSet.contains(object) ? [:] : storedValues(of: object, { $0.objectID }, committed: true)
    }

    // MARK: - Merging

    /// Merges each group into one survivor: the object of the stored row when
    /// there is one (it keeps its identity, and what refers to it stays
    /// valid), else the save's first object that is already stored, else its
    /// first inserted object. The others are merged into it and deleted
    /// (an inserted one simply leaves), except that `.rollback` reverts an
    /// already stored object's changes instead.
    private func merge(_ groups: [ConstraintGroup]) throws {
        // A group touching an object an earlier group of this round changed
        // waits for the next round, which finds it again as it is then.
        var touched = Set<ObjectIdentifier>()
        var mergedAway: [ObjectIdentifier: (ManagedObject, survivor: ManagedObject)] = [:]
        for group in groups {
            let survivor: ManagedObject
            var others = group.objects
            if let row = group.rows.first {
                survivor = objectForID(row.objectID)
                if survivor.isFault { survivor.load(values: lazyValues(from: row), version: row.version, context: self) }
            } else {
                survivor = others.removeFirst()
            }
            let members = [survivor] + others
            if members.contains(where: { touched.contains(ObjectIdentifier($0)) }) { continue }
            for object in members { touched.insert(ObjectIdentifier(object)) }
            for other in others {
                if mergePolicy == .rollback && !insertedSet.contains(other) {
                    try revertPersistentChanges(of: other)
                    continue
                }
                try mergeDuplicate(other, into: survivor)
                mergedAway[ObjectIdentifier(other)] = (other, survivor)
                delete(other)
            }
            survivor.awake(fromSnapshotEvents: .mergePolicy)
        }
        if !mergedAway.isEmpty { try repointUninversedReferences(mergedAway) }
    }

    /// Moves `duplicate`'s values and relationships to `survivor`, per the
    /// merge policy, property by property. Attributes and to-ones: under
    /// `.mergeByPropertyObjectTrump` the survivor takes the values the
    /// duplicate changed, under `.overwrite` all of them, under
    /// `.mergeByPropertyStoreTrump` those it has none of itself, under
    /// `.rollback` none. To-many members move to the survivor under every
    /// policy (they are other objects, which would otherwise refer to an
    /// object that is gone), and the duplicate lets go of its to-ones.
    private func mergeDuplicate(_ duplicate: ManagedObject, into survivor: ManagedObject) throws {
        try duplicate.fireFaultIfNeeded()
        try survivor.fireFaultIfNeeded()
        func takes(_ key: String) -> Bool {
            switch mergePolicy {
            case .mergeByPropertyObjectTrump: return duplicate.hasChangedKey(key)
            case .overwrite: return true
            case .mergeByPropertyStoreTrump: return survivor.storage[key] == nil && duplicate.storage[key] != nil
            case .rollback, .error: return false
            }
        }
        for property in survivor.layout.slotProperties where !property.isTransient && !property.isReadOnly {
            // Only what both have: the hierarchy's shared properties.
            guard duplicate.layout.propertiesByName[property.name] === property else { continue }
            let key = property.name
            if property is AttributeDescription {
                if takes(key) && !ManagedObject.valuesEqual(survivor.storage[key], duplicate.storage[key]) {
                    try survivor.setValue(duplicate.storage[key], forKey: key)
                }
            } else if let rel = property as? RelationshipDescription, rel.isToMany {
                try duplicate.loadToMany(rel)
                let members = duplicate.storage[key] as? [ManagedObject] ?? []
                guard !members.isEmpty else { continue }
                try survivor.mutateToMany(rel, adding: members, removing: [])
                try duplicate.mutateToMany(rel, adding: [], removing: members)
            } else if let rel = property as? RelationshipDescription {
                let destination = duplicate.storage[key] as? ManagedObject
                if takes(key) && survivor.storage[key] as? ManagedObject !== destination {
                    try survivor.setToOne(rel, destination, maintainInverse: true)
                }
                if duplicate.storage[key] != nil { try duplicate.setToOne(rel, nil, maintainInverse: true) }
            }
        }
    }

    /// `.rollback` for a stored object whose change broke a constraint: its
    /// attributes and to-ones go back to their stored values (MOC-MP-07).
    private func revertPersistentChanges(of object: ManagedObject) throws {
        for slot in object.changedSlots.slots where slot < object.layout.snapshotSlotCount {
            let property = object.layout.slotProperties[slot]
            if let rel = property as? RelationshipDescription {
                try object.setToOne(rel, object.committed[slot: slot] as? ManagedObject, maintainInverse: true)
            } else {
                try object.setValue(object.committed[slot: slot], forKey: property.name)
            }
        }
        object.awake(fromSnapshotEvents: .mergePolicy)
    }

    /// Relationships without an inverse that still name a merged-away
    /// object: on the save's changed objects, they now name its survivor.
    private func repointUninversedReferences(_ mergedAway: [ObjectIdentifier: (ManagedObject, survivor: ManagedObject)]) throws {
        for object in insertedInOrder + updatedInOrder where !deletedSet.contains(object) {
            for rel in object.layout.relationships where rel.inverseRelationship == nil && !rel.isTransient {
                if rel.isToMany {
                    if object.unloadedToMany.contains(rel.name) { continue }
                    let members = object.storage[rel.name] as? [ManagedObject] ?? []
                    let gone = members.filter { mergedAway[ObjectIdentifier($0)] != nil }
                    guard !gone.isEmpty else { continue }
                    try object.mutateToMany(rel, adding: gone.map { mergedAway[ObjectIdentifier($0)]!.survivor }, removing: gone)
                } else if let destination = object.storage[rel.name] as? ManagedObject, let entry = mergedAway[ObjectIdentifier(destination)] {
                    try object.setToOne(rel, entry.survivor, maintainInverse: false)
                }
            }
        }
    }
}

/// A constraint's values, by name and as one hashable tuple.
struct ConstraintValues {
    private(set) var byName: [String: Any] = [:]
    private(set) var hashable: [AnyHashable] = []

    mutating func append(_ key: String, _ value: Any) {
        byName[key] = value
        hashable.append(Self.hashableValue(value))
    }

    /// Values compare as the model's value types do (`Hashable`); a value
    /// of a type that is not (a transformable's) by its description.
    static func hashableValue(_ value: Any) -> AnyHashable {
        if let hashable = value as? AnyHashable { return hashable }
        return AnyHashable("\(type(of: value)):\(String(describing: value))")
    }
}
