import Foundation
import ObjectGraph

/// Reads and writes objects of one context by global identifier: what the
/// hub and every store are accessed through. Objects inserted and not yet
/// saved are found by the identifier they were given.
final class GraphAccess {
    let context: ManagedObjectContext
    private var inserted: [UUID: ManagedObject] = [:]
    private var known: [ManagedObjectID: UUID] = [:]
    /// Objects `load(_:)` fetched, and identifiers it found no object for.
    private var loaded: [UUID: ManagedObject] = [:]
    private var absent: Set<UUID> = []
    /// Set by `apply(_:to:)` when a destination or member it was given is not
    /// in this context's store (yet): the caller writes the object again once
    /// the rest is there.
    private(set) var missedReference = false

    init(context: ManagedObjectContext) { self.context = context }

    /// Fetches the objects of many identifiers at once (one identifier query
    /// per few hundred, one fetch per entity and few hundred objects), so
    /// `object(_:)` then answers from memory instead of two queries each.
    func load(_ gids: [UUID]) throws {
        let wanted = gids.filter { inserted[$0] == nil && loaded[$0] == nil && !absent.contains($0) }
        guard !wanted.isEmpty else { return }
        let ids = try context.objectIDs(forGlobalIdentifiers: wanted)
        var objects: [UUID: ManagedObject] = [:]
        for (gid, id) in ids {
            known[id] = gid
            objects[gid] = context.object(with: id)
        }
        try context.prefetch([], for: Array(objects.values))
        for gid in wanted {
            // Still a fault: its row went away after the identifier was read.
            if let object = objects[gid], !object.isFault { loaded[gid] = object } else { absent.insert(gid) }
        }
    }

    /// The live object with this identifier (nil: none, or deleted in this context).
    func object(_ gid: UUID) throws -> ManagedObject? {
        if let pending = inserted[gid] { return pending.isDeleted ? nil : pending }
        if let found = loaded[gid] { return found.isDeleted ? nil : found }
        if absent.contains(gid) { return nil }
        guard let object = try context.existingObject(withGlobalIdentifier: gid) else { return nil }
        known[object.objectID] = gid
        return object.isDeleted ? nil : object
    }

    func globalIdentifier(of object: ManagedObject) throws -> UUID? {
        if let gid = known[object.objectID] { return gid }
        if let entry = inserted.first(where: { $0.value === object }) { return entry.key }
        let found = try context.persistentStoreCoordinator.globalIdentifiers(for: [object.objectID])[object.objectID]
        if let found { known[object.objectID] = found }
        return found
    }

    /// The states of many objects: their to-many members are loaded for all
    /// of them at once and the identifiers of every destination and member
    /// asked in one call, instead of per relationship and per object.
    func states(of objects: [ManagedObject]) throws -> [ObjectState] {
        var toMany: Set<String> = []
        for object in objects {
            for case let rel as RelationshipDescription in object.entity.properties where rel.isToMany && !rel.isTransient { toMany.insert(rel.name) }
        }
        if !toMany.isEmpty {
            var byEntity: [ObjectIdentifier: [ManagedObject]] = [:]
            for object in objects { byEntity[ObjectIdentifier(object.entity), default: []].append(object) }
            for group in byEntity.values {
                let names = group[0].entity.properties.compactMap { ($0 as? RelationshipDescription).flatMap { $0.isToMany && !$0.isTransient ? $0.name : nil } }
                if !names.isEmpty { try context.prefetch(names, for: group) }
            }
        }
        _ = try relatedObjects(of: objects)
        return try objects.map(state(of:))
    }

    /// The global identifiers of every object of these root entities, from
    /// object IDs alone (no row is read into an object).
    func globalIdentifiersOfAllObjects(of entities: [EntityDescription]) throws -> [UUID] {
        var ids: [ManagedObjectID] = []
        for entity in entities {
            let request = FetchRequest(entityName: entity.name)
            request.resultType = .managedObjectID
            ids += try context.execute(request).compactMap { $0 as? ManagedObjectID }
        }
        let gids = try context.persistentStoreCoordinator.globalIdentifiers(for: ids)
        return ids.compactMap { gids[$0] }
    }

    /// Every destination and member of the objects' stored relationships,
    /// their identifiers asked in one call (`globalIdentifier(of:)` then
    /// answers from memory).
    func relatedObjects(of objects: [ManagedObject]) throws -> [ManagedObject] {
        try relatedObjectsByObject(of: objects).flatMap(\.self)
    }

    /// The same, object by object (in the order of `objects`).
    func relatedObjectsByObject(of objects: [ManagedObject]) throws -> [[ManagedObject]] {
        var out: [[ManagedObject]] = []
        for object in objects {
            var related: [ManagedObject] = []
            for case let rel as RelationshipDescription in object.entity.properties where !rel.isTransient {
                let value = try object.value(forKey: rel.name)
                related += (value as? ManagedObject).map { [$0] } ?? (value as? [ManagedObject]) ?? (value as? Set<ManagedObject>).map(Array.init) ?? []
            }
            out.append(related)
        }
        try learnGlobalIdentifiers(of: out.flatMap(\.self))
        return out
    }

    /// Asks the identifiers of the objects not known yet in one call, so
    /// `globalIdentifier(of:)` then answers each from memory.
    func learnGlobalIdentifiers(of objects: [ManagedObject]) throws {
        let unknown = objects.map(\.objectID).filter { known[$0] == nil && !$0.isTemporaryID }
        guard !unknown.isEmpty else { return }
        for (id, gid) in try context.persistentStoreCoordinator.globalIdentifiers(for: unknown) { known[id] = gid }
    }

    func insert(_ entityName: String, gid: UUID) throws -> ManagedObject {
        let object = try context.insertNewObject(forEntityName: entityName)
        try context.assignGlobalIdentifier(gid, to: object)
        inserted[gid] = object
        return object
    }

    /// Every stored attribute and relationship of `object`.
    func state(of object: ManagedObject) throws -> ObjectState {
        var values: [String: SyncValue] = [:]
        for property in object.entity.properties where !property.isTransient {
            switch property {
            case let attribute as AttributeDescription:
                values[attribute.name] = .attribute(try object.value(forKey: attribute.name))
            case let rel as RelationshipDescription where rel.isToMany:
                let value = try object.value(forKey: rel.name)
                let members = (value as? [ManagedObject]) ?? (value as? Set<ManagedObject>).map(Array.init) ?? []
                var gids = try members.compactMap(globalIdentifier(of:))
                if !rel.isOrdered { gids.sort { $0.uuidString < $1.uuidString } }
                values[rel.name] = .members(gids)
            case let rel as RelationshipDescription:
                values[rel.name] = .toOne(try (try object.value(forKey: rel.name) as? ManagedObject).flatMap(globalIdentifier(of:)))
            default: continue
            }
        }
        return ObjectState(entityName: object.entity.name, values: values)
    }

    /// Sets values on `object`; a member or destination this context does
    /// not hold is left out. A change of a to-many kept through its inverse
    /// to-one comes with the members' own to-one changes and is not applied
    /// twice (only the positions of an ordered one).
    func apply(_ values: [String: SyncValue], to object: ManagedObject) throws {
        for (name, value) in values {
            guard let property = object.entity.propertiesByName[name], !property.isTransient else { continue }
            let rel = property as? RelationshipDescription
            switch value {
            case .attribute(let v):
                guard property is AttributeDescription else { continue }
                // Setting an unchanged value would still mark the object updated.
                if !ObjectState.sameAttribute(try object.value(forKey: name), v) { try object.setValue(v, forKey: name) }
            case .toOne(let gid):
                guard let rel, !rel.isToMany else { continue }
                let target = try gid.flatMap(self.object)
                if gid != nil && target == nil { missedReference = true }
                if (try object.value(forKey: name) as? ManagedObject) !== target { try object.setValue(target, forKey: name) }
            case .members(let gids):
                // A complete membership (a whole object copied: a push, a
                // resolution, overwrite) is applied even when the inverse to-ones
                // keep it: the members' own states may not travel with it.
                guard let rel, rel.isToMany else { continue }
                let members = try gids.compactMap(self.object)
                if members.count != gids.count { missedReference = true }
                try object.setValue(rel.isOrdered ? members as Any : Set(members) as Any, forKey: name)
            case .memberChange(let added, let removed, let positions):
                guard let rel, rel.isToMany else { continue }
                let keptByInverse = rel.inverseRelationship.map { !$0.isToMany } ?? false
                if !keptByInverse {
                    let set = try object.mutableSetValue(forKey: name)
                    for gid in added { if let member = try self.object(gid) { try set.insert(member) } else { missedReference = true } }
                    for gid in removed { if let member = try self.object(gid) { try set.remove(member) } }
                }
                if rel.isOrdered && !positions.isEmpty { try reorder(object, rel, positions) }
            }
        }
    }

    /// Sorts an ordered to-many by the positions given for some members;
    /// members without one keep their relative order after them.
    private func reorder(_ owner: ManagedObject, _ rel: RelationshipDescription, _ positions: [UUID: Int]) throws {
        let members = try owner.value(forKey: rel.name) as? [ManagedObject] ?? []
        var keyed: [(Int, Int, ManagedObject)] = []
        for (offset, member) in members.enumerated() {
            let position = try globalIdentifier(of: member).flatMap { positions[$0] } ?? Int.max
            keyed.append((position, offset, member))
        }
        let sorted = keyed.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
        if sorted.map(ObjectIdentifier.init) != members.map(ObjectIdentifier.init) { try owner.setValue(sorted, forKey: rel.name) }
    }

    /// Forgets objects between batches: the context is reset and the
    /// coordinator's row cache emptied, so memory stays bounded by a batch.
    func reset() {
        inserted = [:]
        known = [:]
        loaded = [:]
        absent = []
        missedReference = false
        context.reset()
        context.persistentStoreCoordinator.discardCachedRows()
    }

    /// Clears `missedReference` before the next object.
    func clearMissedReference() { missedReference = false }
}

extension PersistentHistoryChange {
    /// The change's values as the engine carries them.
    var syncValues: [String: SyncValue] {
        var out: [String: SyncValue] = [:]
        for (name, value) in values {
            switch entity.propertiesByName[name] {
            case let rel as RelationshipDescription where rel.isToMany:
                out[name] = .memberChange(added: value.addedMembers, removed: value.removedMembers, positions: value.memberPositions)
            case is RelationshipDescription:
                out[name] = .toOne(value.newValue as? UUID)
            case is AttributeDescription:
                out[name] = .attribute(value.newValue)
            default: continue
            }
        }
        return out
    }
}
