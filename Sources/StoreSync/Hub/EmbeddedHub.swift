import Foundation
import ObjectGraph

/// The embedded hub: an ObjectGraph SQLite store (`hub.sqlite` in the
/// group's state directory) of the group's model plus three bookkeeping
/// entities, with persistent history on. A hub transaction is one context
/// save, so data, history, cursors, conflicts and pending pushes commit
/// together.
///
/// ```swift
/// let hub = try EmbeddedHub(model: model, directory: stateDirectory)
/// let position = try hub.currentPosition()
/// ```
public final class EmbeddedHub: SyncHub {
    static let cursorEntity = "StoreSyncCursor"
    static let conflictEntity = "StoreSyncConflict"
    static let pendingEntity = "StoreSyncPending"
    static let bookkeeping: Set<String> = [cursorEntity, conflictEntity, pendingEntity]
    /// The author of every hub transaction; the context name says which pull wrote it.
    static let author = "storesync"

    public let url: URL
    public var displayName: String { "the hub \(url.path)" }
    let coordinator: PersistentStoreCoordinator
    let store: PersistentStore
    let access: GraphAccess
    private var context: ManagedObjectContext { access.context }

    /// Opens (or creates) the hub in `directory`.
    /// - Throws: 134060 when the model already has an entity named like
    ///   the engine's bookkeeping; the store's errors otherwise.
    public convenience init(model: ManagedObjectModel, directory: URL) throws {
        try self.init(model: model, directory: directory, pragmas: [:])
    }

    /// Opens the hub with SQLite pragmas for its connection. Internal: a test
    /// seam, so a hub that cannot grow (`max_page_count`, i.e. a full disk)
    /// can be simulated without touching the process's limits, which the
    /// tests running in parallel share.
    init(model: ManagedObjectModel, directory: URL, pragmas: [String: String]) throws {
        for name in Self.bookkeeping where model.entitiesByName[name] != nil {
            throw CoreDataError(.coreData, "the group's model has an entity named \(name), which the sync hub reserves")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        url = directory.appendingPathComponent("hub.sqlite")
        coordinator = try PersistentStoreCoordinator(managedObjectModel: Self.hubModel(model))
        store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                                   options: [PersistentStore.persistentHistoryTrackingKey: true, SQLiteStoreOptions.pragmasKey: pragmas])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = Self.author
        access = GraphAccess(context: context)
    }

    /// The group's model with the bookkeeping entities added.
    static func hubModel(_ model: ManagedObjectModel) -> ManagedObjectModel {
        let copy = model.copy()
        func entity(_ name: String, _ attributes: [(String, AttributeType)]) -> EntityDescription {
            let e = EntityDescription(name: name)
            e.properties = attributes.map { AttributeDescription(name: $0.0, type: $0.1) }
            return e
        }
        copy.entities += [
            entity(cursorEntity, [("store", .string), ("pulledThrough", .integer64), ("base", .integer64),
                                  ("pushedThrough", .integer64), ("needsFullPush", .boolean)]),
            entity(conflictEntity, [("number", .integer64), ("store", .string), ("object", .string), ("entityName", .string),
                                    ("kind", .string), ("basePosition", .integer64), ("hubPosition", .integer64),
                                    ("base", .binaryData), ("incoming", .binaryData), ("hub", .binaryData),
                                    ("created", .date), ("resolution", .string)]),
            entity(pendingEntity, [("store", .string), ("object", .string)]),
        ]
        return copy
    }

    // MARK: - Reading

    public func currentPosition() throws -> Int64 {
        try coordinator.currentPersistentHistoryToken(fromStores: [store])?.position ?? 0
    }

    public func state(of object: UUID) throws -> ObjectState? {
        try states(of: [object])[object]
    }

    public func states(of objects: [UUID]) throws -> [UUID: ObjectState] {
        guard !objects.isEmpty else { return [:] }
        return try context.performAndWait {
            // Read, then forgotten: what the hub context holds stays bounded by a batch.
            defer { access.reset() }
            try access.load(objects)
            var found: [(UUID, ManagedObject)] = []
            for gid in objects {
                if let object = try access.object(gid), !Self.bookkeeping.contains(object.entity.name) { found.append((gid, object)) }
            }
            let states = try access.states(of: found.map(\.1))
            var out: [UUID: ObjectState] = [:]
            out.reserveCapacity(found.count)
            for (i, entry) in found.enumerated() { out[entry.0] = states[i] }
            return out
        }
    }

    public func allObjects() throws -> [UUID] {
        try context.performAndWait {
            let roots = coordinator.managedObjectModel.entities.filter { $0.superentity == nil && !Self.bookkeeping.contains($0.name) }
            return try access.globalIdentifiersOfAllObjects(of: roots)
        }
    }

    public func changes(after position: Int64, excludingOrigin: String?, changeLimit: Int) throws -> (changes: [HubChange], through: Int64) {
        // First the transactions alone (no value decoded): their context
        // names say their origin, so a store's own pulls are skipped unread.
        let scan = PersistentHistoryChangeRequest.fetchHistory(after: token(position))
        scan.resultType = .transactionsOnly
        scan.changeLimit = changeLimit
        let transactions = try coordinator.execute(scan).transactions
        guard let last = transactions.last else { return ([], position) }
        var out: [HubChange] = []
        var runStart = position
        var runLength = 0
        func readRun() throws {
            guard runLength > 0 else { return }
            let request = PersistentHistoryChangeRequest.fetchHistory(after: token(runStart))
            request.fetchLimit = runLength
            out += Self.hubChanges(try coordinator.execute(request).transactions)
            runLength = 0
        }
        var previous = position
        for transaction in transactions {
            let origin = transaction.contextName.flatMap(Self.origin(ofContextName:))
            if let excludingOrigin, origin == excludingOrigin {
                try readRun()
            } else {
                if runLength == 0 { runStart = previous }
                runLength += 1
            }
            previous = transaction.token.position
        }
        try readRun()
        return (out, last.token.position)
    }

    private func token(_ position: Int64) -> PersistentHistoryToken {
        PersistentHistoryToken(storeIdentifier: store.identifier, position: position)
    }

    private static func hubChanges(_ transactions: [PersistentHistoryTransaction]) -> [HubChange] {
        var out: [HubChange] = []
        for transaction in transactions {
            let origin = transaction.contextName.flatMap(Self.origin(ofContextName:))
            for change in transaction.changes where !Self.bookkeeping.contains(change.entity.name) {
                var changed: [String: Any?] = [:]
                for (name, value) in change.values where !((change.entity.propertiesByName[name] as? RelationshipDescription)?.isToMany ?? false) {
                    changed[name] = value.oldValue
                }
                if change.changeType == .delete, let tombstone = change.tombstone {
                    for (name, value) in tombstone { changed[name] = value }
                }
                out.append(HubChange(position: change.changeID, origin: origin, globalIdentifier: change.globalIdentifier,
                                     entityName: change.entity.name, isInsert: change.changeType == .insert,
                                     isDelete: change.changeType == .delete, changedProperties: changed))
            }
        }
        return out
    }

    /// "pull:NAME" → NAME.
    static func origin(ofContextName name: String) -> String? {
        name.hasPrefix("pull:") ? String(name.dropFirst(5)) : nil
    }

    // What the bookkeeping tables hold, kept after the first read: only this
    // hub's own commits write them, and a commit that touches them updates or
    // drops these. Every round asks for each store's cursor, pending objects
    // and conflicts several times; each was a fetch.
    private var cursorCache: [String: SyncCursor?] = [:]
    private var pendingCache: [String: Set<UUID>] = [:]
    /// Unresolved conflicts by store (nil: every store's).
    private var conflictCache: [String?: [SyncConflict]] = [:]

    public func cursor(for storeName: String) throws -> SyncCursor? {
        if let cached = cursorCache[storeName] { return cached }
        let found = try readCursor(storeName)
        cursorCache[storeName] = .some(found)
        return found
    }

    private func readCursor(_ storeName: String) throws -> SyncCursor? {
        try context.performAndWait {
            guard let row = try cursorObject(storeName) else { return nil }
            return SyncCursor(store: storeName,
                              pulledThrough: (try row.value(forKey: "pulledThrough") as? Int64) ?? 0,
                              base: (try row.value(forKey: "base") as? Int64) ?? 0,
                              pushedThrough: (try row.value(forKey: "pushedThrough") as? Int64) ?? 0,
                              needsFullPush: (try row.value(forKey: "needsFullPush") as? Bool) ?? false)
        }
    }

    private func cursorObject(_ storeName: String) throws -> ManagedObject? {
        let request = FetchRequest(entityName: Self.cursorEntity)
        request.predicate = try FetchPredicate(format: "store == %@", argumentArray: [storeName])
        return try context.fetch(request).first
    }

    public func pending(for storeName: String) throws -> Set<UUID> {
        if let cached = pendingCache[storeName] { return cached }
        let found = try readPending(storeName)
        pendingCache[storeName] = found
        return found
    }

    private func readPending(_ storeName: String) throws -> Set<UUID> {
        try context.performAndWait {
            let request = FetchRequest(entityName: Self.pendingEntity)
            request.predicate = try FetchPredicate(format: "store == %@", argumentArray: [storeName])
            return Set(try context.fetch(request).compactMap { (try $0.value(forKey: "object") as? String).flatMap(UUID.init(uuidString:)) })
        }
    }

    public func conflicts(store storeName: String?, includingResolved: Bool) throws -> [SyncConflict] {
        // Unresolved ones (a store's, or all: the daemon asks after every job)
        // are what rounds ask for; resolved ones are read each time.
        guard !includingResolved else { return try readConflicts(store: storeName, includingResolved: true) }
        if let cached = conflictCache[storeName] { return cached }
        let found = try readConflicts(store: storeName, includingResolved: false)
        conflictCache[storeName] = found
        return found
    }

    private func readConflicts(store storeName: String?, includingResolved: Bool) throws -> [SyncConflict] {
        try context.performAndWait {
            let request = FetchRequest(entityName: Self.conflictEntity)
            var conditions: [String] = []
            var arguments: [Any] = []
            if let storeName { conditions.append("store == %@"); arguments.append(storeName) }
            if !includingResolved { conditions.append("resolution == nil") }
            if !conditions.isEmpty { request.predicate = try FetchPredicate(format: conditions.joined(separator: " AND "), argumentArray: arguments) }
            request.sortDescriptors = [FetchSortDescriptor(key: "number", ascending: true)]
            return try context.fetch(request).map(Self.conflict(from:))
        }
    }

    private static func conflict(from row: ManagedObject) throws -> SyncConflict {
        func text(_ key: String) throws -> String { (try row.value(forKey: key) as? String) ?? "" }
        func values(_ key: String) throws -> [String: String] {
            guard let data = try row.value(forKey: key) as? Data else { return [:] }
            return (try? PropertyListSerialization.propertyList(from: data, format: nil)) as? [String: String] ?? [:]
        }
        return SyncConflict(id: (try row.value(forKey: "number") as? Int64) ?? 0, store: try text("store"),
                            globalIdentifier: UUID(uuidString: try text("object")) ?? UUID(),
                            entityName: try text("entityName"), kind: SyncConflict.Kind(rawValue: try text("kind")) ?? .update,
                            basePosition: (try row.value(forKey: "basePosition") as? Int64) ?? 0,
                            hubPosition: (try row.value(forKey: "hubPosition") as? Int64) ?? 0,
                            base: try values("base"), incoming: try values("incoming"), hub: try values("hub"),
                            created: (try row.value(forKey: "created") as? Date) ?? Date(timeIntervalSinceReferenceDate: 0))
    }

    // MARK: - Writing

    /// Objects per save of a large hub transaction (see `commit(_:)`).
    var partSize = 2_000

    /// Commits made inside `transaction { }` are parts of one hub transaction.
    public var takesTransactionsInParts: Bool { true }

    /// True while `transaction { }` runs: commits join its SQLite transaction.
    private var inTransaction = false
    /// What commits inside the open transaction could not point to yet (an
    /// object a later part brings), by object: written again before it commits.
    private var deferredReferences: [UUID: [String: SyncValue]] = [:]

    /// Runs `body` in one SQLite transaction of the hub (`BEGIN IMMEDIATE`):
    /// every commit in it is one part of a single hub transaction, kept or
    /// lost together, and reads in it see the parts written before. This is
    /// what lets a pull settle a store transaction too large to hold decoded
    /// in parts and still commit it atomically with its cursor. A reference
    /// a part could not set (its object comes in a later part) is set again
    /// before the transaction commits. Inside an open one, just runs `body`.
    ///
    /// ```swift
    /// try hub.transaction {
    ///     try hub.commit(firstPart)
    ///     try hub.commit(lastPartWithTheCursor)
    /// }
    /// ```
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        guard !inTransaction, let sqlite = store as? SQLiteStore else { return try body() }
        inTransaction = true
        deferredReferences = [:]
        defer {
            inTransaction = false
            deferredReferences = [:]
        }
        do {
            return try sqlite.performInTransaction {
                let result = try body()
                try writeDeferredReferences()
                return result
            }
        } catch {
            // Nothing of it is in the file: forget what its commits cached.
            cursorCache = [:]
            pendingCache = [:]
            conflictCache = [:]
            coordinator.discardCachedRows(in: [store])
            throw error
        }
    }

    /// Sets again the references parts of the open transaction missed. Only
    /// relationships are kept (`deferReferences`): an attribute a later part
    /// changed again must keep that part's value. What still misses (the
    /// object is gone from the hub) stays unset, as in a single save.
    private func writeDeferredReferences() throws {
        // In identifier order: the same hub history for the same pull, run after run.
        let references = deferredReferences.sorted { $0.key.uuidString < $1.key.uuidString }.map { Operation.update($0.key, $0.value) }
        deferredReferences = [:]
        guard !references.isEmpty else { return }
        let origin = lastOrigin
        var start = 0
        while start < references.count {
            _ = try save(Array(references[start..<min(start + partSize, references.count)]), bookkeeping: nil, origin: origin)
            start += partSize
        }
    }

    /// Records a commit made inside the open transaction: what it writes
    /// supersedes the references deferred earlier for the same objects (set
    /// again at the end, an older value would undo it), then what it missed
    /// is deferred in turn.
    private func deferReferences(after batch: HubBatch, missed: [(UUID, [String: SyncValue])]) {
        guard inTransaction else { return }
        for gid in batch.deletes { deferredReferences[gid] = nil }
        for (gid, values) in batch.inserts.map({ ($0.0, $0.1.values) }) + batch.updates {
            guard var deferred = deferredReferences[gid] else { continue }
            for (name, later) in values { deferred[name] = deferred[name].flatMap { Self.reference($0, leftBy: later) } }
            deferredReferences[gid] = deferred.isEmpty ? nil : deferred
        }
        for (gid, values) in missed {
            let references = values.filter { if case .attribute = $0.value { return false } else { return true } }
            guard !references.isEmpty else { continue }
            deferredReferences[gid, default: [:]].merge(references) { earlier, later in Self.reference(earlier, leftBy: later).map { Self.joined($0, later) } ?? later }
        }
    }

    /// What of a deferred reference a later write of the same relationship
    /// leaves to set again: nothing, but the members a later member change
    /// did not touch.
    private static func reference(_ deferred: SyncValue, leftBy later: SyncValue) -> SyncValue? {
        guard case .memberChange(let added, let removed, let positions) = deferred,
              case .memberChange(let laterAdded, let laterRemoved, _) = later else { return nil }
        let touched = Set(laterAdded + laterRemoved)
        let left = (added.filter { !touched.contains($0) }, removed.filter { !touched.contains($0) })
        guard !left.0.isEmpty || !left.1.isEmpty else { return nil }
        return .memberChange(added: left.0, removed: left.1, positions: positions.filter { !touched.contains($0.key) })
    }

    /// Two member changes of one relationship (touching different members) as one.
    private static func joined(_ earlier: SyncValue, _ later: SyncValue) -> SyncValue {
        guard case .memberChange(let a1, let r1, let p1) = earlier, case .memberChange(let a2, let r2, let p2) = later else { return later }
        return .memberChange(added: a1 + a2, removed: r1 + r2, positions: p1.merging(p2) { $1 })
    }

    /// The origin of the last commit (the pull whose references are written again).
    private var lastOrigin: String?

    private enum Operation {
        case insert(UUID, ObjectState)
        case update(UUID, [String: SyncValue])
        case delete(UUID)
    }

    /// Commits a batch in one hub transaction. A batch of more than
    /// `partSize` objects (one large store transaction) is written as several
    /// saves inside that one SQLite transaction, so the hub's context and each
    /// hub history transaction stay bounded (and with them what a push reads
    /// at once); an object whose destination or member comes in a later
    /// save is written again once all are there.
    @discardableResult
    public func commit(_ batch: HubBatch) throws -> Int64 {
        // Whatever happens (a failed commit may have written nothing or, in
        // principle, not told), the caches of what the batch touches go.
        for cursor in batch.cursors { cursorCache[cursor.store] = nil }
        if !batch.pendingAdded.isEmpty || !batch.pendingRemoved.isEmpty { pendingCache = [:] }
        if !batch.newConflicts.isEmpty || !batch.resolvedConflicts.isEmpty { conflictCache = [:] }
        var operations = batch.inserts.map { Operation.insert($0.0, $0.1) } + batch.updates.map { Operation.update($0.0, $0.1) }
        operations += batch.deletes.map { Operation.delete($0) }
        lastOrigin = batch.origin
        if operations.count > partSize {
            // Written in several saves: inserts after the inserts their to-ones
            // point at, so none is written again for a destination a later save
            // brings (two hub changes for the store's one, `ReferenceOrder`).
            var dependencies: [UUID: [UUID]] = [:]
            for (gid, state) in batch.inserts {
                let destinations = ReferenceOrder.toOneDestinations(state.values)
                if !destinations.isEmpty { dependencies[gid] = destinations }
            }
            let byObject = Dictionary(batch.inserts.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
            // (An object inserted twice in one batch keeps the batch's order.)
            if !dependencies.isEmpty && byObject.count == batch.inserts.count {
                let order = ReferenceOrder.destinationsFirst(batch.inserts.map(\.0), dependencies: dependencies)
                operations.replaceSubrange(0..<batch.inserts.count, with: order.map { Operation.insert($0, byObject[$0]!) })
            }
        }
        guard operations.count > partSize, let sqlite = store as? SQLiteStore else {
            let saved = try save(operations, bookkeeping: batch, origin: batch.origin)
            deferReferences(after: batch, missed: saved.missed)
            return saved.position
        }
        return try sqlite.performInTransaction {
            var missed: [(UUID, [String: SyncValue])] = []
            var start = 0
            // Deletes come last; those of later parts, for `save` to pull forward.
            let firstDelete = operations.count - batch.deletes.count
            while start < operations.count {
                let end = min(start + partSize, operations.count)
                let later = Set(batch.deletes[max(end, firstDelete) - firstDelete..<batch.deletes.count])
                missed += try save(Array(operations[start..<end]), bookkeeping: nil, origin: batch.origin, laterDeletes: later).missed
                start += partSize
            }
            let again = missed.map { Operation.update($0.0, $0.1) }
            start = 0
            while start + partSize < again.count {
                _ = try save(Array(again[start..<(start + partSize)]), bookkeeping: nil, origin: batch.origin)
                start += partSize
            }
            let last = try save(Array(again[start...]), bookkeeping: batch, origin: batch.origin)
            // Still missing: a later part of the open transaction may bring it.
            deferReferences(after: batch, missed: last.missed)
            return last.position
        }
    }

    /// One context save of the hub: `operations` in order (objects inserted
    /// first, so they can refer to each other), and the batch's bookkeeping
    /// when given. Returns the hub position after it and the objects whose
    /// destinations or members were not there (yet), with their values.
    ///
    /// `laterDeletes`: objects the same batch deletes in a later save. One
    /// related to an object deleted here is deleted here too: deleting only
    /// this one would make its delete rule change the other (a nulled
    /// relationship recorded as the other's change, which the store never
    /// made) before the later save deletes it.
    private func save(_ operations: [Operation], bookkeeping batch: HubBatch?,
                      origin: String?, laterDeletes: Set<UUID> = []) throws -> (position: Int64, missed: [(UUID, [String: SyncValue])]) {
        try context.performAndWait {
            defer { access.reset() }
            context.name = origin.map { "pull:\($0)" } ?? "hub"
            var missed: [(UUID, [String: SyncValue])] = []
            do {
                var referenced: [UUID] = []
                for operation in operations {
                    switch operation {
                    case .insert(let gid, let state): referenced.append(gid); referenced += ObjectState.references(state.values)
                    case .update(let gid, let values): referenced.append(gid); referenced += ObjectState.references(values)
                    case .delete(let gid): referenced.append(gid)
                    }
                }
                try access.load(referenced)
                for case .insert(let gid, let state) in operations where try access.object(gid) == nil {
                    _ = try access.insert(state.entityName, gid: gid)
                }
                func apply(_ gid: UUID, _ values: [String: SyncValue]) throws {
                    guard let object = try access.object(gid) else { return }
                    access.clearMissedReference()
                    try access.apply(values, to: object)
                    if access.missedReference { missed.append((gid, values)) }
                }
                for case .insert(let gid, let state) in operations { try apply(gid, state.values) }
                for case .update(let gid, let values) in operations { try apply(gid, values) }
                var deleting: [ManagedObject] = []
                for case .delete(let gid) in operations { if let object = try access.object(gid) { deleting.append(object) } }
                if !laterDeletes.isEmpty { deleting += try relatedLaterDeletes(of: deleting, laterDeletes) }
                for object in deleting { context.delete(object) }
                if let batch { try writeBookkeeping(batch) }
                try context.save()
            } catch {
                context.rollback()
                throw error
            }
            return (try currentPosition(), missed)
        }
    }

    /// The objects among `later` reachable from `objects` through
    /// relationships, each reached object's own relationships followed too.
    private func relatedLaterDeletes(of objects: [ManagedObject], _ later: Set<UUID>) throws -> [ManagedObject] {
        var found: [ManagedObject] = []
        var taken = Set<UUID>()
        var frontier = objects
        while !frontier.isEmpty {
            let related = try access.relatedObjects(of: frontier)
            frontier = []
            for object in related where !object.isDeleted {
                guard let gid = try access.globalIdentifier(of: object), later.contains(gid), taken.insert(gid).inserted else { continue }
                frontier.append(object)
            }
            found += frontier
        }
        return found
    }

    private func writeBookkeeping(_ batch: HubBatch) throws {
        for cursor in batch.cursors {
            let row = try cursorObject(cursor.store) ?? context.insertNewObject(forEntityName: Self.cursorEntity)
            try row.setValue(cursor.store, forKey: "store")
            try row.setValue(cursor.pulledThrough, forKey: "pulledThrough")
            try row.setValue(cursor.base, forKey: "base")
            try row.setValue(cursor.pushedThrough, forKey: "pushedThrough")
            try row.setValue(cursor.needsFullPush, forKey: "needsFullPush")
        }
        if !batch.newConflicts.isEmpty {
            var number = try nextConflictNumber()
            for conflict in batch.newConflicts {
                let row = try context.insertNewObject(forEntityName: Self.conflictEntity)
                let fields: [String: Any?] = [
                    "number": number, "store": conflict.store, "object": conflict.globalIdentifier.uuidString,
                    "entityName": conflict.entityName, "kind": conflict.kind.rawValue, "basePosition": conflict.basePosition,
                    "hubPosition": conflict.hubPosition, "created": conflict.created,
                    "base": try PropertyListSerialization.data(fromPropertyList: conflict.base, format: .binary, options: 0),
                    "incoming": try PropertyListSerialization.data(fromPropertyList: conflict.incoming, format: .binary, options: 0),
                    "hub": try PropertyListSerialization.data(fromPropertyList: conflict.hub, format: .binary, options: 0),
                ]
                for (key, value) in fields { try row.setValue(value, forKey: key) }
                number += 1
            }
        }
        for (number, resolution) in batch.resolvedConflicts {
            let request = FetchRequest(entityName: Self.conflictEntity)
            request.predicate = try FetchPredicate(format: "number == %@", argumentArray: [number])
            for row in try context.fetch(request) { try row.setValue(resolution.rawValue, forKey: "resolution") }
        }
        for (storeName, gid) in batch.pendingAdded where try pendingRows(storeName, gid).isEmpty {
            let row = try context.insertNewObject(forEntityName: Self.pendingEntity)
            try row.setValue(storeName, forKey: "store")
            try row.setValue(gid.uuidString, forKey: "object")
        }
        for (storeName, gid) in batch.pendingRemoved {
            for row in try pendingRows(storeName, gid) { context.delete(row) }
        }
    }

    private func pendingRows(_ storeName: String, _ gid: UUID) throws -> [ManagedObject] {
        let request = FetchRequest(entityName: Self.pendingEntity)
        request.predicate = try FetchPredicate(format: "store == %@ AND object == %@", argumentArray: [storeName, gid.uuidString])
        return try context.fetch(request)
    }

    private func nextConflictNumber() throws -> Int64 {
        let request = FetchRequest(entityName: Self.conflictEntity)
        request.sortDescriptors = [FetchSortDescriptor(key: "number", ascending: false)]
        request.fetchLimit = 1
        return ((try context.fetch(request).first?.value(forKey: "number") as? Int64) ?? 0) + 1
    }

    public func purgeHistory(through position: Int64, committedBefore: Date?) throws {
        guard position > 0 else { return }
        let request = PersistentHistoryChangeRequest.deleteHistory(before: PersistentHistoryToken(storeIdentifier: store.identifier, position: position))
        request.committedBefore = committedBefore
        _ = try coordinator.execute(request)
    }

    public func close() throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }
}
