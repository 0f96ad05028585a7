import Foundation
import ObjectGraph
import StoreSync

/// Compares stores (and a group's hub) with writers' logs
/// (docs/WORKLOAD.md, "Checking"). Every object is matched by global
/// identifier; each writer owns the objects it created, so:
///
/// - **lost**: an object the logs leave alive is missing from a place;
/// - **extra**: a place holds an object the logs deleted or never made;
/// - **duplicated**: a name (unique per writer) is on more than one row of a place;
/// - **stale**: an object's name, `a` or folder differs from its last logged state;
/// - **echoed**: the hub applied a change pulled from store S to an object
///   S's writer does not own, or the engine wrote a change into S to an
///   object S's writer owns (a change carried back to where it came from);
/// - **repeated**: the hub holds more changes from S to an object than S's
///   writer made to it (a store transaction applied twice), or store S holds
///   more engine changes to an object than the hub has changes to it from
///   elsewhere (a push delivered twice).
///
/// The history checks need the history kept (no purge, or a retention
/// longer than the run).
public enum WorkloadCheck {
    public struct Place: Codable, Sendable {
        public var name: String
        public var objects = 0
        public var expected = 0
        public var lost = 0
        public var extra = 0
        public var duplicated = 0
        public var stale = 0
        public var echoed = 0
        public var repeated = 0
        /// Transactions or changes the engine wrote (store: pushes; hub: pulls and resolutions).
        public var engineChanges = 0
        /// Up to ten examples of each problem.
        public var examples: [String] = []

        public var problems: Int { lost + extra + duplicated + stale + echoed + repeated }
    }

    public struct Report: Codable, Sendable {
        public var writers = 0
        public var saves = 0
        public var ops = 0
        public var liveObjects = 0
        public var deletedObjects = 0
        public var hubChecked = false
        public var places: [Place] = []
        public var lost: Int { places.reduce(0) { $0 + $1.lost } }
        public var extra: Int { places.reduce(0) { $0 + $1.extra } }
        public var duplicated: Int { places.reduce(0) { $0 + $1.duplicated } }
        public var stale: Int { places.reduce(0) { $0 + $1.stale } }
        public var echoed: Int { places.reduce(0) { $0 + $1.echoed } }
        public var repeated: Int { places.reduce(0) { $0 + $1.repeated } }
        public var isClean: Bool { places.allSatisfy { $0.problems == 0 } }

        public var summary: String {
            "\(writers) writers, \(saves) saves, \(ops) changes, \(liveObjects) objects alive, \(deletedObjects) deleted; "
                + "lost \(lost), duplicated \(duplicated), extra \(extra), stale \(stale), echoed \(echoed), repeated \(repeated)"
                + (hubChecked ? "" : " (stores only)")
        }

        public var json: String {
            struct Output: Encodable {
                var report: Report
                var lost, duplicated, extra, stale, echoed, repeated: Int
                var clean: Bool
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let output = Output(report: self, lost: lost, duplicated: duplicated, extra: extra, stale: stale, echoed: echoed, repeated: repeated, clean: isClean)
            return String(decoding: (try? encoder.encode(output)) ?? Data(), as: UTF8.self)
        }
    }

    /// An object as a place holds it.
    struct Observed {
        var entity: String
        var name: String?
        var a: Int64?
        var folder: UUID?
    }

    /// What the logs say, by global identifier.
    struct Expected {
        var objects: [UUID: WriterState.Object] = [:]
        var gidByName: [String: UUID] = [:]
    }

    /// Reads every log, then each store and (with `hubDirectory`) the hub.
    /// With `includeHistory` false only contents are compared (lost,
    /// extra, duplicated, stale): cheap enough to poll while a daemon runs.
    /// With `onlyWritersObjects` the places may hold other objects too
    /// (made by applications that log nothing): only objects named as the
    /// logs' writers name theirs (`<writer>-…`) are compared.
    public static func run(model: ManagedObjectModel, stores: [(name: String, url: URL)], hubDirectory: URL?, logs: [URL],
                           includeHistory: Bool = true, onlyWritersObjects: Bool = false) throws -> Report {
        guard let hubDirectory else {
            return try run(model: model, stores: stores, hub: nil, logs: logs, includeHistory: includeHistory, onlyWritersObjects: onlyWritersObjects)
        }
        let hub = try EmbeddedHub(model: model, directory: hubDirectory)
        defer { try? hub.close() }
        return try run(model: model, stores: stores, hub: hub, logs: logs, includeHistory: includeHistory, onlyWritersObjects: onlyWritersObjects)
    }

    /// The same over any hub, e.g. a PostgreSQL hub several hosts share.
    /// There a change pulled from another host's store has the origin
    /// "host/store": origins are compared by their store part, so the
    /// stores of all hosts need distinct names (as their writers do).
    public static func run(model: ManagedObjectModel, stores: [(name: String, url: URL)], hub: SyncHub?, logs: [URL],
                           includeHistory: Bool = true, onlyWritersObjects: Bool = false) throws -> Report {
        var report = Report()
        var expected = Expected()
        var byWriter: [String: [WriterSave]] = [:]
        for log in logs { for save in try WriterLogFile.read(log) { byWriter[save.writer, default: []].append(save) } }
        report.writers = byWriter.count
        let prefixes = byWriter.keys.map { "\($0)-" }
        func inScope(_ name: String?) -> Bool {
            !onlyWritersObjects || name.map { name in prefixes.contains { name.hasPrefix($0) } } ?? false
        }
        for (_, saves) in byWriter {
            let state = WriterState(replaying: saves.sorted { $0.save < $1.save })
            report.saves += state.saves
            report.ops += state.ops
            for object in state.objects.values {
                guard let gid = object.gid else { continue }
                expected.objects[gid] = object
                expected.gidByName[object.name] = gid
            }
        }
        report.liveObjects = expected.objects.values.filter { !$0.deleted }.count
        report.deletedObjects = expected.objects.count - report.liveObjects

        var hubChanges: [HubChange]?
        if let hub {
            var objects: [UUID: Observed] = [:]
            for gid in try hub.allObjects() {
                guard let state = try hub.state(of: gid) else { continue }
                var observed = Observed(entity: state.entityName)
                if case .attribute(let value)? = state.values["name"] { observed.name = value as? String }
                if case .attribute(let value)? = state.values["a"] { observed.a = integer(value) }
                if case .toOne(let folder)? = state.values["folder"] { observed.folder = folder }
                guard inScope(observed.name) else { continue }
                objects[gid] = observed
            }
            var rows: [String: Int] = [:]
            for object in objects.values { if let name = object.name { rows[name, default: 0] += 1 } }
            var place = compare("hub", objects: objects, rows: rows, expected: expected)
            if includeHistory {
                let changes = try hub.changes(after: 0)
                hubChanges = changes
                var fromOwner: [UUID: Int] = [:]
                // A change of a to-many alone (a record moved into or out of a
                // folder) is the record's change seen from the folder: not counted.
                for change in changes where (change.entityName == "Record" || change.entityName == "Folder")
                    && (change.isInsert || change.isDelete || !change.changedProperties.isEmpty) {
                    place.engineChanges += 1
                    guard let origin = change.origin.map(storePart) else { continue }
                    guard let object = expected.objects[change.globalIdentifier] else { continue }   // extra covers it
                    if object.owner != origin {
                        place.echoed += 1
                        note(&place, "echoed: change \(change.position) pulled from \(origin) to \(object.name) (owned by \(object.owner))")
                    } else {
                        fromOwner[change.globalIdentifier, default: 0] += 1
                    }
                }
                for (gid, count) in fromOwner where count > expected.objects[gid]!.changes {
                    place.repeated += count - expected.objects[gid]!.changes
                    note(&place, "repeated: \(expected.objects[gid]!.name) changed \(count) times from \(expected.objects[gid]!.owner), its writer saved it \(expected.objects[gid]!.changes) times")
                }
            }
            report.places.append(place)
            report.hubChecked = true
        }

        for (name, url) in stores {
            var (objects, rows, history) = try read(url, model: model, includeHistory: includeHistory)
            objects = objects.filter { inScope($0.value.name) }
            rows = rows.filter { inScope($0.key) }
            var place = compare(name, objects: objects, rows: rows, expected: expected)
            if includeHistory {
                var delivered: [UUID: Int] = [:]
                for transaction in history where transaction.author == SyncGroup.author {
                    for gid in transaction.gids {
                        place.engineChanges += 1
                        guard let object = expected.objects[gid] else { continue }
                        if object.owner == name {
                            place.echoed += 1
                            note(&place, "echoed: the engine wrote \(object.name) (owned by \(name)) into \(name) (\(transaction.contextName ?? "?"))")
                        } else {
                            delivered[gid, default: 0] += 1
                        }
                    }
                }
                if let hubChanges {
                    var atHub: [UUID: Int] = [:]
                    for change in hubChanges where change.origin.map(storePart) != name && (change.isInsert || change.isDelete || !change.changedProperties.isEmpty) {
                        atHub[change.globalIdentifier, default: 0] += 1
                    }
                    for (gid, count) in delivered where count > atHub[gid, default: 0] {
                        place.repeated += count - atHub[gid, default: 0]
                        note(&place, "repeated: \(expected.objects[gid]!.name) written into \(name) \(count) times, the hub changed it \(atHub[gid, default: 0]) times")
                    }
                }
            }
            report.places.append(place)
        }
        return report
    }

    /// "host/store" (a shared hub's origin of another host) → "store".
    static func storePart(_ origin: String) -> String {
        origin.split(separator: "/").last.map(String.init) ?? origin
    }

    static func note(_ place: inout Place, _ example: String) {
        if place.examples.count < 10 { place.examples.append(example) }
    }

    static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let v as Int64: return v
        case let v as Int32: return Int64(v)
        case let v as Int16: return Int64(v)
        case let v as Int: return Int64(v)
        case let v as NSNumber: return v.int64Value
        default: return nil
        }
    }

    static func compare(_ name: String, objects: [UUID: Observed], rows: [String: Int], expected: Expected) -> Place {
        var place = Place(name: name)
        place.objects = objects.count
        for (gid, object) in expected.objects where !object.deleted {
            place.expected += 1
            guard let observed = objects[gid] else {
                place.lost += 1
                note(&place, "lost: \(object.entity) \(object.name) \(gid)")
                continue
            }
            var differences: [String] = []
            if observed.entity != object.entity { differences.append("entity \(observed.entity)") }
            if observed.name != object.name { differences.append("name \(observed.name ?? "nil")") }
            if object.entity == "Record" {
                if observed.a != object.a { differences.append("a \(observed.a.map(String.init) ?? "nil"), logged \(object.a.map(String.init) ?? "nil")") }
                let folder = object.folder.flatMap { expected.gidByName[$0] }
                if observed.folder != folder {
                    differences.append("folder \(observed.folder?.uuidString ?? "nil"), logged \(object.folder ?? "nil")")
                }
            }
            if !differences.isEmpty {
                place.stale += 1
                note(&place, "stale: \(object.name): \(differences.joined(separator: ", "))")
            }
        }
        for (gid, observed) in objects where expected.objects[gid]?.deleted != false {
            place.extra += 1
            note(&place, "extra: \(observed.entity) \(observed.name ?? "?") \(gid)\(expected.objects[gid] != nil ? " (deleted by its writer)" : "")")
        }
        for (objectName, count) in rows where count > 1 {
            place.duplicated += count - 1
            note(&place, "duplicated: \(objectName) on \(count) rows")
        }
        return place
    }

    /// A store's Records and Folders by global identifier, rows per name,
    /// and its history (author and objects of each transaction).
    static func read(_ url: URL, model: ManagedObjectModel, includeHistory: Bool) throws
        -> ([UUID: Observed], [String: Int], [(author: String?, contextName: String?, gids: [UUID])]) {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        // A missing store is an error, not a new empty one. Not the
        // read-only option: on a WAL file with an empty -wal it opens the
        // file immutable, which misreads a file a daemon is writing. Without
        // the history option nothing is written; its history is read anyway.
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw CoreDataError(.fileReadNoSuchFile, "no store file at \(url.path)")
        }
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url, options: [:])
        defer { try? coordinator.remove(store) }
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            var fetched: [ManagedObject] = []
            for entity in ["Record", "Folder"] where model.entitiesByName[entity] != nil {
                fetched += try context.fetch(FetchRequest(entityName: entity))
            }
            let gids = try coordinator.globalIdentifiers(for: fetched.map(\.objectID))
            var objects: [UUID: Observed] = [:]
            var rows: [String: Int] = [:]
            for object in fetched {
                let name = try object.value(forKey: "name") as? String
                if let name { rows[name, default: 0] += 1 }
                guard let gid = gids[object.objectID] else { continue }
                var observed = Observed(entity: object.entity.name, name: name)
                if object.entity.name == "Record" {
                    observed.a = integer(try object.value(forKey: "a"))
                    if object.entity.relationshipsByName["folder"] != nil, let folder = try object.value(forKey: "folder") as? ManagedObject {
                        observed.folder = try gids[folder.objectID] ?? coordinator.globalIdentifiers(for: [folder.objectID])[folder.objectID]
                    }
                }
                objects[gid] = observed
            }
            var history: [(author: String?, contextName: String?, gids: [UUID])] = []
            if includeHistory {
                for transaction in try coordinator.execute(.fetchHistory(after: nil)).transactions {
                    let gids = transaction.changes.filter { change in
                        guard ["Record", "Folder"].contains(change.entity.name) else { return false }
                        if change.changeType != .update { return true }
                        // As at the hub: a to-many alone is the other side's change.
                        return change.updatedProperties.contains { !((change.entity.propertiesByName[$0] as? RelationshipDescription)?.isToMany ?? false) }
                    }.map(\.globalIdentifier)
                    history.append((transaction.author, transaction.contextName, gids))
                }
            }
            return (objects, rows, history)
        }
    }
}
