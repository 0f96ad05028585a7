import Foundation

/// Inserting and deleting objects, and the delete rules applied when
/// pending changes are processed.
extension ManagedObjectContext {
    // MARK: - Insert and delete

    /// Inserts a new object (MOC-MO-01); traps for an abstract entity or one
    /// outside the coordinator's model (MOC-MO-03). Inserting twice is a no-op.
    public func insert(_ object: ManagedObject) {
        checkConfinement()
        // Trap kept (issue 28 audit): an abstract or foreign entity, or another context's object, which Core Data raises on; insertNewObject throws instead.
        do { try insertChecked(object) } catch { preconditionFailure("ObjectGraph: \(error)") }
    }

    /// Creates and inserts an object of the named entity, of its registered
    /// class (OBJ-06, OBJ-08). Throws for an unknown or abstract entity.
    ///
    /// ```swift
    /// let employee = try context.insertNewObject(forEntityName: "Employee") as! Employee
    /// ```
    @discardableResult
    public func insertNewObject(forEntityName name: String) throws -> ManagedObject {
        checkConfinement()
        guard let entity = persistentStoreCoordinator.managedObjectModel.entitiesByName[name] else {
            throw CoreDataError(.coreData, "The model has no entity named '\(name)'", userInfo: [CoreDataError.entityNameErrorKey: name])
        }
        try checkInsertable(entity)
        return objectClass(for: entity).init(entity: entity, insertInto: self)
    }

    func checkInsertable(_ entity: EntityDescription) throws {
        // The model is frozen once a coordinator uses it, so an entity that
        // passed once passes again: inserting many objects of one entity
        // skips the weak load of its model per object.
        if entity === lastInsertableEntity { return }
        if entity.isAbstract {
            throw CoreDataError(.coreData, "Cannot create an object of the abstract entity \(entity.name) (MOD-05)", userInfo: [CoreDataError.entityNameErrorKey: entity.name])
        }
        guard entity.managedObjectModel === persistentStoreCoordinator.managedObjectModel else {
            throw CoreDataError(.coreData, "The entity \(entity.name) is not from this context's model (OBJ-05)", userInfo: [CoreDataError.entityNameErrorKey: entity.name])
        }
        lastInsertableEntity = entity
    }

    func insertChecked(_ object: ManagedObject) throws {
        if object.belongs(to: self) && registry[object.objectID] === object && !deletedSet.contains(object) { return }
        if object.managedObjectContextReference.isSet && !object.belongs(to: self) {
            throw CoreDataError(.coreData, "The \(object.entity.name) object belongs to another context (MOC-MO-03)")
        }
        try checkInsertable(object.entity)
        register(object)
        object.wasForgotten = false
        if !object.hasAwokenFromInsert {
            for attribute in object.layout.attributesWithDefaults where object.storage[attribute.name] == nil {
                object.storage[attribute.name] = attribute.defaultValue
            }
            for name in object.layout.toManyNames where object.storage[name] == nil { object.storage[name] = [ManagedObject]() }
            object.unloadedToMany = []
            object.isFault = false
        }
        if insertedSet.insert(object).inserted { insertionOrder.note(object) }
        pendingInserted.insert(object)
        recordUndo(.insert(object))
        if !object.hasAwokenFromInsert {
            object.hasAwokenFromInsert = true
            object.awakeFromInsert()
        }
    }

    /// Marks an object for deletion at the next save (MOC-MO-04); a never-saved
    /// object simply leaves the context (MOC-MO-05). `prepareForDeletion` runs
    /// at once (LIFE-25); delete rules run at the end of the event or at save
    /// (MOC-MO-06, MOC-DP-*).
    public func delete(_ object: ManagedObject) {
        checkConfinement()
        guard object.belongs(to: self), !deletedSet.contains(object) else { return }
        try? object.fireFaultIfNeeded()
        object.prepareForDeletion()
        if insertedSet.contains(object) {
            insertedSet.remove(object)
            pendingInserted.remove(object)
        } else {
            if deletedSet.insert(object).inserted { deletionOrder.note(object) }
            updatedSet.remove(object)
            pendingDeleted.insert(object)
        }
        recordUndo(.delete(object))
        deletesToPropagate.append(object)
    }

    /// Applies delete rules to the objects deleted since the last call.
    func propagateDeletes() {
        // In order, by index: cascades append while the loop runs, and
        // removing from the front each time made deleting n objects O(n²).
        var next = 0
        defer { deletesToPropagate.removeAll() }
        while next < deletesToPropagate.count {
            let object = deletesToPropagate[next]
            next += 1
            for rel in object.layout.relationships {
                let destinations: [ManagedObject]
                if rel.isToMany {
                    try? object.loadToMany(rel)
                    destinations = object.storage[rel.name] as? [ManagedObject] ?? []
                } else {
                    destinations = (object.storage[rel.name] as? ManagedObject).map { [$0] } ?? []
                }
                switch rel.deleteRule {
                case .nullify:
                    guard let inverse = rel.inverseRelationship else { continue }
                    for d in destinations { try? d.removeOneSide(inverse, object) }
                case .cascade:
                    for d in destinations where !deletedSet.contains(d) && d.belongs(to: self) { delete(d) }
                case .deny, .noAction:
                    continue
                }
            }
            // An inserted-then-deleted object is gone once its rules have run.
            if !deletedSet.contains(object) && !insertedSet.contains(object) && object.objectID.isTemporaryID && !isApplyingUndo {
                forgottenInserts.append(object)
            }
        }
    }
}
