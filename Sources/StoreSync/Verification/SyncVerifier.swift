import Foundation
import ObjectGraph

/// One way a store differs from its group's hub.
public struct SyncDifference: Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The hub has the object; the store does not.
        case missingObject = "missing-object"
        /// The store has an object the hub does not.
        case unexpectedObject = "unexpected-object"
        /// Both have the object, as different entities.
        case entity
        /// An attribute's values differ.
        case value
        /// A relationship's destinations differ (compared by global identifier).
        case relationship
        /// The store could not be read at all (no file, no history, another
        /// model): nothing of it was compared.
        case unreadableStore = "unreadable-store"
    }

    public var store: String
    public var kind: Kind
    /// The object's entity (the hub's when both have it); nil for `unreadableStore`.
    public var entity: String?
    public var globalIdentifier: UUID?
    /// The attribute or relationship (`value`, `relationship`).
    public var property: String?
    /// The store's and the hub's value (`value`, `relationship`, `entity`).
    public var storeValue: StoredValue?
    public var hubValue: StoredValue?
    /// An unresolved conflict of this store on this object: the difference is
    /// expected until it is resolved.
    public var conflict: Int64?
    /// Why the store could not be read (`unreadableStore`).
    public var reason: String?

    public init(store: String, kind: Kind, entity: String? = nil, globalIdentifier: UUID? = nil, property: String? = nil,
                storeValue: StoredValue? = nil, hubValue: StoredValue? = nil, conflict: Int64? = nil, reason: String? = nil) {
        self.store = store
        self.kind = kind
        self.entity = entity
        self.globalIdentifier = globalIdentifier
        self.property = property
        self.storeValue = storeValue
        self.hubValue = hubValue
        self.conflict = conflict
        self.reason = reason
    }

    public var description: String {
        let object = [entity, globalIdentifier?.uuidString].compactMap { $0 }.joined(separator: " ")
        let note = conflict.map { " (conflict \($0) waits)" } ?? ""
        switch kind {
        case .missingObject: return "store \(store): \(object) is missing (the hub has it)\(note)"
        case .unexpectedObject: return "store \(store): \(object) is not in the hub\(note)"
        case .entity: return "store \(store): \(object) is a \(storeValue?.text ?? "?") in the store, a \(hubValue?.text ?? "?") in the hub\(note)"
        case .value, .relationship:
            return "store \(store): \(object) \(property ?? ""): store \(storeValue?.text ?? "?"), hub \(hubValue?.text ?? "?")\(note)"
        case .unreadableStore: return "store \(store): cannot be read: \(reason ?? "")"
        }
    }

    /// The difference as a JSON object (docs/CHANGELOG-FORMAT.md, "verify").
    public var jsonObject: [String: Any] {
        ["store": store, "kind": kind.rawValue, "entity": entity ?? NSNull(), "object": globalIdentifier?.uuidString ?? NSNull(),
         "property": property ?? NSNull(), "storeValue": storeValue?.jsonValue ?? NSNull(), "hubValue": hubValue?.jsonValue ?? NSNull(),
         "conflict": conflict ?? NSNull(), "reason": reason ?? NSNull()]
    }
}

/// What `SyncVerifier.verify()` found for one group.
public struct SyncVerification: Sendable {
    public var group: String
    /// Stores compared with the hub, in configuration order.
    public var stores: [String]
    /// Objects the hub holds (the engine's bookkeeping left out).
    public var hubObjects: Int
    /// Every difference, by store (configuration order), entity, object, property.
    public var differences: [SyncDifference]
    /// True when every store holds exactly the hub's objects and values.
    public var agrees: Bool { differences.isEmpty }
}

/// Compares a sync group's stores with its hub object by object, matched by
/// global identifier: which objects each holds, their entity, every stored
/// attribute, and every relationship as the related objects' global
/// identifiers (to-manys as sets, ordered ones in order).
///
/// Files are opened read-only through ObjectGraph (like the change log), so
/// verifying is safe while the daemon and applications write; a store being
/// written during the comparison may of course show a difference that the
/// next round removes. Memory: one root entity's objects of the hub and one
/// store at a time.
///
/// ```swift
/// let verification = try SyncVerifier(configuration: configuration).verify()
/// for difference in verification.differences { print(difference) }
/// exit(verification.agrees ? 0 : 1)
/// ```
public struct SyncVerifier {
    public let configuration: SyncGroupConfiguration

    public init(configuration: SyncGroupConfiguration) { self.configuration = configuration }

    /// - Throws: 260 when the group has no hub yet (the engine never ran),
    ///   the hub's errors when it cannot be read. A store that cannot be read
    ///   is a difference (`unreadableStore`), not an error.
    public func verify() throws -> SyncVerification {
        let hubURL = configuration.stateDirectory.appendingPathComponent("hub.sqlite")
        guard FileManager.default.fileExists(atPath: hubURL.path) else {
            throw CoreDataError(.fileReadNoSuchFile, "sync group \(configuration.name) has no hub at \(hubURL.path) (the engine has not run the group yet)",
                                userInfo: [CoreDataError.filePathErrorKey: hubURL.path])
        }
        let hub = try ObjectReader(file: ReadOnlyStoreFile(url: hubURL, model: EmbeddedHub.hubModel(configuration.model)))
        defer { hub.file.close() }
        let waiting = try hub.unresolvedConflicts()

        var differences: [SyncDifference] = []
        var stores: [ObjectReader?] = []
        for store in configuration.stores {
            do {
                let file = try ReadOnlyStoreFile(url: store.url, model: configuration.model, configurationName: store.configurationName)
                guard file.recordsHistory else {
                    file.close()
                    throw CoreDataError(.persistentStoreOperation, "\(store.url.path) records no history, so its objects have no global identifiers (the store is not attached)")
                }
                stores.append(ObjectReader(file: file))
            } catch {
                differences.append(SyncDifference(store: store.name, kind: .unreadableStore, reason: (error as? CoreDataError)?.message ?? "\(error)"))
                stores.append(nil)
            }
        }
        defer { for reader in stores { reader?.file.close() } }

        var hubObjects = 0
        for entity in configuration.model.entities where entity.superentity == nil {
            let hubStates = try hub.states(of: entity.name)
            hubObjects += hubStates.count
            for (store, reader) in zip(configuration.stores, stores) {
                guard let reader else { continue }
                // A store of a model configuration holds only its entities.
                if let name = store.configurationName, !(configuration.model.entities(forConfiguration: name) ?? []).contains(where: { $0.name == entity.name }) { continue }
                let storeStates = try reader.states(of: entity.name)
                differences += Self.compare(store: store.name, hub: hubStates, store: storeStates, waiting: waiting)
            }
        }
        let order = Dictionary(uniqueKeysWithValues: configuration.stores.enumerated().map { ($0.element.name, $0.offset) })
        differences.sort { a, b in
            (order[a.store] ?? 0, a.entity ?? "", a.globalIdentifier?.uuidString ?? "", a.property ?? "")
                < (order[b.store] ?? 0, b.entity ?? "", b.globalIdentifier?.uuidString ?? "", b.property ?? "")
        }
        return SyncVerification(group: configuration.name, stores: configuration.stores.map(\.name), hubObjects: hubObjects, differences: differences)
    }

    /// An object's entity and stored values, relationships as global identifiers.
    struct ObjectValues: Equatable {
        var entity: String
        var values: [String: StoredValue]
        var relationships: Set<String>
    }

    static func compare(store: String, hub: [UUID: ObjectValues], store storeObjects: [UUID: ObjectValues],
                        waiting: [String: [UUID: Int64]]) -> [SyncDifference] {
        var out: [SyncDifference] = []
        let held = waiting[store] ?? [:]
        for (gid, hubObject) in hub {
            guard let storeObject = storeObjects[gid] else {
                out.append(SyncDifference(store: store, kind: .missingObject, entity: hubObject.entity, globalIdentifier: gid, conflict: held[gid]))
                continue
            }
            guard storeObject.entity == hubObject.entity else {
                out.append(SyncDifference(store: store, kind: .entity, entity: hubObject.entity, globalIdentifier: gid,
                                          storeValue: .string(storeObject.entity), hubValue: .string(hubObject.entity), conflict: held[gid]))
                continue
            }
            for name in Set(hubObject.values.keys).union(storeObject.values.keys).sorted() {
                let a = storeObject.values[name] ?? .null, b = hubObject.values[name] ?? .null
                guard a != b else { continue }
                out.append(SyncDifference(store: store, kind: hubObject.relationships.contains(name) ? .relationship : .value,
                                          entity: hubObject.entity, globalIdentifier: gid, property: name,
                                          storeValue: a, hubValue: b, conflict: held[gid]))
            }
        }
        for (gid, storeObject) in storeObjects where hub[gid] == nil {
            out.append(SyncDifference(store: store, kind: .unexpectedObject, entity: storeObject.entity, globalIdentifier: gid, conflict: held[gid]))
        }
        return out
    }

    /// Reads one file's objects with their values, relationships by global identifier.
    final class ObjectReader {
        let file: ReadOnlyStoreFile
        /// Object IDs already mapped to global identifiers (relationship ends
        /// reach across entities, so the map is kept for the whole file).
        private var identifiers: [ManagedObjectID: UUID] = [:]

        init(file: ReadOnlyStoreFile) { self.file = file }

        /// Every object of a root entity (and its sub-entities) by global identifier.
        func states(of entityName: String) throws -> [UUID: ObjectValues] {
            let context = file.context
            return try context.performAndWait {
                defer { context.reset() }
                guard let entity = file.coordinator.managedObjectModel.entitiesByName[entityName] else { return [:] }
                let request = FetchRequest(entityName: entityName)
                request.relationshipKeyPathsForPrefetching = entity.properties.compactMap { ($0 as? RelationshipDescription)?.isToMany == true ? $0.name : nil }
                let objects = try context.fetch(request)
                var related: [ManagedObjectID] = objects.map(\.objectID)
                var raw: [(ManagedObject, [String: Any?], [String: [ManagedObjectID]], [String: ManagedObjectID?])] = []
                for object in objects {
                    var attributes: [String: Any?] = [:], toManys: [String: [ManagedObjectID]] = [:], toOnes: [String: ManagedObjectID?] = [:]
                    for property in object.entity.properties where !property.isTransient {
                        switch property {
                        case let attribute as AttributeDescription:
                            attributes[attribute.name] = try object.value(forKey: attribute.name)
                        case let rel as RelationshipDescription where rel.isToMany:
                            let value = try object.value(forKey: rel.name)
                            let members = (value as? [ManagedObject]) ?? (value as? Set<ManagedObject>).map(Array.init) ?? []
                            toManys[rel.name] = members.map(\.objectID)
                            related += members.map(\.objectID)
                        case let rel as RelationshipDescription:
                            let destination = (try object.value(forKey: rel.name) as? ManagedObject)?.objectID
                            toOnes[rel.name] = destination
                            if let destination { related.append(destination) }
                        default: continue
                        }
                    }
                    raw.append((object, attributes, toManys, toOnes))
                }
                let unknown = related.filter { identifiers[$0] == nil }
                if !unknown.isEmpty {
                    for (id, gid) in try file.coordinator.globalIdentifiers(for: Array(Set(unknown))) { identifiers[id] = gid }
                }
                var out: [UUID: ObjectValues] = [:]
                for (object, attributes, toManys, toOnes) in raw {
                    guard let gid = identifiers[object.objectID] else { continue }
                    var values: [String: StoredValue] = [:]
                    for (name, value) in attributes { values[name] = StoredValue(attributeValue: value) }
                    for (name, destination) in toOnes { values[name] = StoredValue(destination: destination.flatMap { identifiers[$0] }) }
                    for (name, members) in toManys {
                        var gids = members.compactMap { identifiers[$0] }
                        let ordered = (object.entity.propertiesByName[name] as? RelationshipDescription)?.isOrdered ?? false
                        if !ordered { gids.sort { $0.uuidString < $1.uuidString } }
                        values[name] = .objects(gids)
                    }
                    out[gid] = ObjectValues(entity: object.entity.name, values: values, relationships: Set(toOnes.keys).union(toManys.keys))
                }
                return out
            }
        }

        /// The hub's unresolved conflicts: store → object → conflict number.
        func unresolvedConflicts() throws -> [String: [UUID: Int64]] {
            let context = file.context
            return try context.performAndWait {
                defer { context.reset() }
                let request = FetchRequest(entityName: EmbeddedHub.conflictEntity)
                request.predicate = try FetchPredicate(format: "resolution == nil")
                var out: [String: [UUID: Int64]] = [:]
                for row in try context.fetch(request) {
                    guard let store = try row.value(forKey: "store") as? String, let id = try row.value(forKey: "number") as? Int64,
                          let object = (try row.value(forKey: "object") as? String).flatMap(UUID.init(uuidString:)) else { continue }
                    out[store, default: [:]][object] = id
                }
                return out
            }
        }
    }
}
