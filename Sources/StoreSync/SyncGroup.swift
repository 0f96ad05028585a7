import Foundation
import ObjectGraph

/// A sync group: stores of one model, kept identical through a hub that
/// serialises every change and decides every conflict once (docs/SYNC.md).
///
/// The engine is a library: a test or the daemon opens a group and runs
/// rounds (`runRound()`), or pulls and pushes one store when its file
/// changes. It has no event loop, no sockets and no signals.
///
/// ```swift
/// let group = try SyncGroup(configuration: configuration)
/// try group.runRound()                       // pull every store, then push to every store
/// for conflict in try group.conflicts() { try group.resolve(conflict.id, taking: .incoming) }
/// ```
public final class SyncGroup {
    /// The author of every transaction the engine writes into a store: a
    /// pull skips them (no echo).
    public static let author = "storesync"
    static func metadataKey(_ group: String, _ field: String) -> String { "StoreSync.\(group).\(field)" }

    public let configuration: SyncGroupConfiguration
    public let hub: SyncHub

    /// One store of the group as the engine holds it.
    final class Member {
        let configuration: SyncStoreConfiguration
        let coordinator: PersistentStoreCoordinator
        let store: PersistentStore
        let access: GraphAccess
        var paused = false
        var lastError: String?
        var failed = false
        var name: String { configuration.name }
        var context: ManagedObjectContext { access.context }

        init(_ configuration: SyncStoreConfiguration, model: ManagedObjectModel) throws {
            self.configuration = configuration
            coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                       configurationName: configuration.configurationName, at: configuration.url,
                                                       options: [PersistentStore.persistentHistoryTrackingKey: true])
            let context = ManagedObjectContext(coordinator: coordinator)
            context.transactionAuthor = SyncGroup.author
            // A writer committing between the engine's read and its write
            // fails the push; it is retried after that change is pulled.
            context.mergePolicy = .error
            // Applications write these files too: never trust a cached row.
            context.stalenessInterval = 0
            access = GraphAccess(context: context)
        }

        func token(_ position: Int64) -> PersistentHistoryToken {
            PersistentHistoryToken(storeIdentifier: store.identifier, position: position)
        }
    }

    var members: [Member] = []
    /// Stores that could not be opened (another model, a corrupt file, a
    /// missing directory): the reason, shown as failed; opening is tried
    /// again at every round, so a store that is fixed joins then.
    var unopened: [(configuration: SyncStoreConfiguration, reason: String)] = []

    /// Opens the hub and every store (switching history on where it is off).
    /// A store that cannot be opened is kept as failed with the reason; the
    /// others sync.
    public init(configuration: SyncGroupConfiguration, hub: SyncHub? = nil) throws {
        self.configuration = configuration
        var names = Set<String>()
        for store in configuration.stores where !names.insert(store.name).inserted {
            throw CoreDataError(.persistentStoreOperation, "sync group \(configuration.name) names store \(store.name) twice")
        }
        self.hub = try hub ?? EmbeddedHub(model: configuration.model, directory: configuration.stateDirectory)
        unopened = configuration.stores.map { ($0, "not opened yet") }
        openWaitingStores()
    }

    /// Opens the stores not open yet, in configuration order.
    private func openWaitingStores() {
        guard !unopened.isEmpty else { return }
        var still: [(configuration: SyncStoreConfiguration, reason: String)] = []
        for (store, _) in unopened {
            do {
                members.append(try Member(store, model: configuration.model))
            } catch {
                still.append((store, "\(error)"))
            }
        }
        unopened = still
        let order = configuration.stores.map(\.name)
        members.sort { (order.firstIndex(of: $0.name) ?? 0) < (order.firstIndex(of: $1.name) ?? 0) }
    }

    func member(_ name: String) throws -> Member {
        guard let member = members.first(where: { $0.name == name }) else {
            if let waiting = unopened.first(where: { $0.configuration.name == name }) {
                throw CoreDataError(.persistentStoreOperation, "store \(name) of sync group \(configuration.name) is not open: \(waiting.reason)")
            }
            throw CoreDataError(.persistentStoreOperation, "sync group \(configuration.name) has no store named \(name)")
        }
        return member
    }

    // MARK: - Rounds

    /// Pulls every store's new changes into the hub, then pushes the hub's
    /// changes to every store. A failing store is marked failed with the
    /// reason; the others go on.
    /// - Returns: true when anything moved.
    @discardableResult
    public func runRound() throws -> Bool {
        openWaitingStores()
        var moved = false
        for member in members where !member.paused { moved = attempt(member) { try pull(member) } || moved }
        for member in members where !member.paused { moved = attempt(member) { try push(member) } || moved }
        return moved
    }

    /// Rounds until nothing moves (at most `limit`).
    public func runUntilIdle(limit: Int = 50) throws {
        for _ in 0..<limit {
            let moved = try runRound()
            // Idle: nothing moved and no store is failing or waiting to open
            // (those are retried, up to `limit`, as before).
            if !moved && unopened.isEmpty && !members.contains(where: \.failed) { return }
        }
    }

    private func attempt(_ member: Member, _ body: () throws -> Bool) -> Bool {
        // An open connection keeps working on a file that was deleted or
        // replaced: check the path itself so writes never go nowhere.
        guard FileManager.default.fileExists(atPath: member.configuration.url.path) else {
            member.lastError = "the store file \(member.configuration.url.path) is missing"
            member.failed = true
            return false
        }
        do {
            let moved = try body()
            member.lastError = nil
            member.failed = false
            return moved
        } catch {
            member.lastError = "\(error)"
            member.failed = true
            return false
        }
    }

    /// The daemon's entry point when a store's files changed: pull it, then
    /// push what the hub has to every store.
    public func storeDidChange(_ name: String) throws {
        let changed = try member(name)
        guard !changed.paused else { return }
        _ = attempt(changed) { try pull(changed) }
        for member in members where !member.paused { _ = attempt(member) { try push(member) } }
    }

    public func pause(_ name: String) throws { try member(name).paused = true }
    public func resume(_ name: String) throws { try member(name).paused = false }

    // MARK: - Pull

    /// Applies the store's history after its cursor to the hub, one hub
    /// transaction per store transaction (cursor included).
    @discardableResult
    func pull(_ member: Member) throws -> Bool {
        guard var cursor = try hub.cursor(for: member.name) else {
            try bootstrap(member)
            return true
        }
        let transactions = try member.coordinator.execute(.fetchHistory(after: member.token(cursor.pulledThrough))).transactions
        guard !transactions.isEmpty else { return false }
        let marks = try pushMarks(member)
        let hubLog = try hub.changes(after: cursor.base)
        let held = Set(try hub.conflicts(store: member.name, includingResolved: false).map(\.globalIdentifier))
        var moved = false
        for transaction in transactions {
            // The base moves with each push the store received (no echo: pushes are not applied back).
            for mark in marks where mark.storePosition < transaction.token.position { cursor.base = max(cursor.base, mark.hubPosition) }
            var batch = HubBatch(origin: member.name)
            if transaction.author == Self.author {
                if let position = transaction.contextName.flatMap(Self.pushedPosition) { cursor.base = max(cursor.base, position) }
            } else {
                let base = cursor.base
                let log = hubLog.filter { $0.position > base && $0.origin != member.name }
                for change in transaction.changes where !held.contains(change.globalIdentifier) {
                    try settle(change, from: member, base: base, hubLog: log, into: &batch)
                }
            }
            cursor.pulledThrough = transaction.token.position
            batch.cursor = cursor
            try hub.commit(batch)
            moved = true
        }
        return moved
    }

    /// "push:POSITION" → POSITION.
    static func pushedPosition(_ contextName: String) -> Int64? {
        contextName.hasPrefix("push:") ? Int64(contextName.dropFirst(5)) : nil
    }

    /// Decides one store change against the hub (the policy table in docs/SYNC.md).
    private func settle(_ change: PersistentHistoryChange, from member: Member, base: Int64, hubLog: [HubChange],
                        into batch: inout HubBatch) throws {
        let gid = change.globalIdentifier
        let policy = member.configuration.policy
        let hubState = try hub.state(of: gid)
        let hubChanges = hubLog.filter { $0.globalIdentifier == gid }
        var hubChanged: [String: Any?] = [:]
        for entry in hubChanges.reversed() { for (name, old) in entry.changedProperties { hubChanged[name] = old } }
        let storeChanged = Set(change.values.keys.filter { name in
            !((change.entity.propertiesByName[name] as? RelationshipDescription)?.isToMany ?? false)
        })

        func conflict(_ kind: SyncConflict.Kind, incoming: [String: String]) throws {
            let hubValues = hubState.map { Self.describe($0.values) } ?? [:]
            var baseValues: [String: String] = [:]
            for (name, old) in hubChanged { baseValues[name] = ObjectState.canonical(old) }
            batch.newConflicts.append(SyncConflict(id: 0, store: member.name, globalIdentifier: gid, entityName: change.entity.name,
                                                   kind: kind, basePosition: base, hubPosition: try hub.currentPosition(),
                                                   base: baseValues, incoming: incoming, hub: hubValues, created: Date()))
        }

        switch change.changeType {
        case .insert:
            if hubState == nil {
                batch.inserts.append((gid, ObjectState(entityName: change.entity.name, values: change.syncValues)))
            } else {
                batch.updates.append((gid, change.syncValues))
            }
        case .update:
            guard hubState != nil else {
                if hubChanges.contains(where: \.isDelete) {
                    // Updated in the store, deleted at the hub (MOC-MP-10 ii).
                    switch policy {
                    case .storeTrump, .rollback: batch.pendingAdded.append((member.name, gid))
                    case .objectTrump, .overwrite:
                        if let object = try member.context.performAndWait({ try member.access.object(gid).map(member.access.state) }) {
                            batch.inserts.append((gid, object))
                        }
                    case .error: try conflict(.updateVersusDelete, incoming: Self.describe(change.syncValues))
                    }
                }
                return
            }
            let conflicting = storeChanged.intersection(hubChanged.keys)
            if conflicting.isEmpty {
                batch.updates.append((gid, change.syncValues))
                return
            }
            switch policy {
            case .storeTrump:
                batch.updates.append((gid, change.syncValues.filter { !conflicting.contains($0.key) }))
                batch.pendingAdded.append((member.name, gid))
            case .objectTrump:
                batch.updates.append((gid, change.syncValues))
            case .overwrite:
                // The store's object whole: its current values, every property.
                if let object = try member.context.performAndWait({ try member.access.object(gid).map(member.access.state) }) {
                    batch.updates.append((gid, object.values))
                } else {
                    batch.updates.append((gid, change.syncValues))
                }
            case .rollback:
                batch.pendingAdded.append((member.name, gid))
            case .error:
                try conflict(.update, incoming: Self.describe(change.syncValues))
            }
        case .delete:
            guard hubState != nil else { return }
            let updatedAtHub = hubChanges.contains { !$0.isDelete && !$0.isInsert }
            guard updatedAtHub else {
                batch.deletes.append(gid)
                return
            }
            // Deleted in the store, updated at the hub (MOC-MP-10 i).
            switch policy {
            case .storeTrump, .rollback: batch.pendingAdded.append((member.name, gid))
            case .objectTrump, .overwrite: batch.deletes.append(gid)
            case .error: try conflict(.deleteVersusUpdate, incoming: ["(deleted)": "true"])
            }
        }
    }

    static func describe(_ values: [String: SyncValue]) -> [String: String] {
        var out: [String: String] = [:]
        for (name, value) in values {
            switch value {
            case .attribute(let v): out[name] = ObjectState.canonical(v)
            case .toOne(let gid): out[name] = gid?.uuidString ?? "nil"
            case .members(let gids): out[name] = gids.map(\.uuidString).joined(separator: ",")
            case .memberChange(let added, let removed, _):
                out[name] = (added.map { "+" + $0.uuidString } + removed.map { "-" + $0.uuidString }).joined(separator: ",")
            }
        }
        return out
    }

    /// A store joining the group: its objects (all of which got global
    /// identifiers when history was switched on) are merged into the hub by
    /// the same rules, and the hub's whole contents are pushed back to it.
    private func bootstrap(_ member: Member) throws {
        let start = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
        var batch = HubBatch(origin: member.name)
        try member.context.performAndWait {
            defer { member.access.reset() }
            for entity in configuration.model.entities where entity.superentity == nil {
                for object in try member.context.fetch(FetchRequest(entityName: entity.name)) {
                    guard let gid = try member.access.globalIdentifier(of: object) else { continue }
                    let state = try member.access.state(of: object)
                    if let existing = try hub.state(of: gid) {
                        let differing = state.values.filter { !ObjectState.same($0.value, existing.values[$0.key]) }
                        guard !differing.isEmpty else { continue }
                        switch member.configuration.policy {
                        case .objectTrump, .overwrite: batch.updates.append((gid, differing))
                        case .storeTrump, .rollback, .error: batch.pendingAdded.append((member.name, gid))
                        }
                    } else {
                        batch.inserts.append((gid, state))
                    }
                }
            }
        }
        batch.cursor = SyncCursor(store: member.name, pulledThrough: start, base: 0, pushedThrough: 0, needsFullPush: true)
        try hub.commit(batch)
    }

    // MARK: - Push

    /// Writes into the store every hub change it has not seen (except its
    /// own pulled changes) and every object pending for it, in one store
    /// transaction that also records the hub position applied.
    @discardableResult
    func push(_ member: Member) throws -> Bool {
        guard var cursor = try hub.cursor(for: member.name) else { return false }
        // A store change not pulled yet is settled at the hub first; its result comes back next round.
        let unpulled = try member.coordinator.execute(.fetchHistory(after: member.token(cursor.pulledThrough))).transactions
        if unpulled.contains(where: { $0.author != Self.author }) { return false }

        let hubPosition = try hub.currentPosition()
        let pushedKey = Self.metadataKey(configuration.name, "pushedThrough")
        let pushed = (member.store.metadata[pushedKey] as? Int).map(Int64.init) ?? (member.store.metadata[pushedKey] as? Int64) ?? 0
        let pending = try hub.pending(for: member.name)
        var objects = Set<UUID>()
        if cursor.needsFullPush {
            objects = Set(try hub.allObjects())
        } else {
            guard hubPosition > pushed || !pending.isEmpty else { return false }
            do {
                for change in try hub.changes(after: pushed) where change.origin != member.name { objects.insert(change.globalIdentifier) }
            } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired {
                objects = Set(try hub.allObjects())
            }
        }
        objects.formUnion(pending)
        // An object in conflict keeps the store's version until resolved.
        objects.subtract(try hub.conflicts(store: member.name, includingResolved: false).map(\.globalIdentifier))
        // Only the hub's bookkeeping moved (cursors of other stores): nothing to write.
        if objects.isEmpty && !cursor.needsFullPush {
            // A store only written by its application receives nothing, so its
            // received position would never move and every pull and push would
            // read the hub's history from there again. Now and then record
            // that it has seen everything up to here (metadata only: no row
            // changes, so no file event loop; a mark keeps its base exact).
            if hubPosition - pushed >= Self.idleAdvanceStep {
                let before = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
                member.store.metadata[pushedKey] = Int(hubPosition)
                try recordPushMark(member, storePosition: before, hubPosition: hubPosition)
            }
            return false
        }

        let before = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
        var wroteRows = false
        try member.context.performAndWait {
            defer { member.access.reset() }
            member.context.name = "push:\(hubPosition)"
            var states: [(UUID, ObjectState)] = []
            // In identifier-text order; each text made once, not per comparison.
            for gid in objects.map({ ($0.uuidString, $0) }).sorted(by: { $0.0 < $1.0 }).map(\.1) {
                if let state = try hub.state(of: gid) {
                    states.append((gid, state))
                } else if let object = try member.access.object(gid) {
                    member.context.delete(object)
                }
            }
            for (gid, state) in states where try member.access.object(gid) == nil { _ = try member.access.insert(state.entityName, gid: gid) }
            for (gid, state) in states { if let object = try member.access.object(gid) { try member.access.apply(state.values, to: object) } }
            member.store.metadata[pushedKey] = Int(hubPosition)
            var saved: ContextChangeSet?
            let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: member.context, queue: nil) {
                saved = $0.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            do {
                try member.context.save()
            } catch {
                member.context.rollback()
                member.store.metadata[pushedKey] = Int(pushed)
                throw error
            }
            wroteRows = saved?.historyTokens[member.store.identifier] != nil
            if !wroteRows {
                // Nothing changed in the store, so no push transaction marks the
                // base in its history: keep a mark in its metadata instead.
                try recordPushMark(member, storePosition: before, hubPosition: hubPosition)
            }
        }
        var batch = HubBatch(origin: nil)
        cursor.pushedThrough = hubPosition
        cursor.needsFullPush = false
        batch.cursor = cursor
        batch.pendingRemoved = pending.map { (member.name, $0) }
        try hub.commit(batch)
        return wroteRows || !objects.isEmpty
    }

    /// How far the hub may move past a store that receives nothing before its
    /// received position is advanced anyway.
    static let idleAdvanceStep: Int64 = 256

    /// Hub positions a store received by pushes that changed nothing in it
    /// (and so left no transaction in its history): (store position, hub position).
    func pushMarks(_ member: Member) throws -> [(storePosition: Int64, hubPosition: Int64)] {
        let raw = member.store.metadata[Self.metadataKey(configuration.name, "marks")] as? [Any] ?? []
        return raw.compactMap { entry in
            guard let pair = entry as? [Any], pair.count == 2 else { return nil }
            func number(_ v: Any) -> Int64? { (v as? Int).map(Int64.init) ?? (v as? Int64) ?? (v as? NSNumber)?.int64Value }
            guard let s = number(pair[0]), let h = number(pair[1]) else { return nil }
            return (s, h)
        }
    }

    private func recordPushMark(_ member: Member, storePosition: Int64, hubPosition: Int64) throws {
        let cursor = try hub.cursor(for: member.name)
        // Marks the pull has passed are no longer needed.
        var marks = try pushMarks(member).filter { $0.storePosition >= (cursor?.pulledThrough ?? 0) }
        marks.append((storePosition, hubPosition))
        member.store.metadata[Self.metadataKey(configuration.name, "marks")] = marks.map { [Int($0.storePosition), Int($0.hubPosition)] }
        try member.store.save(StoreSaveRequest())
    }

    // MARK: - Conflicts

    public func conflicts(includingResolved: Bool = false) throws -> [SyncConflict] {
        try hub.conflicts(store: nil, includingResolved: includingResolved)
    }

    /// Resolves a conflict: `.incoming` takes the store's current object
    /// (or its deletion) to the hub and so to every store; `.hub` sends the
    /// hub's object back to the store. The object's held changes resume.
    public func resolve(_ id: Int64, taking resolution: ConflictResolution) throws {
        guard let conflict = try hub.conflicts(store: nil, includingResolved: false).first(where: { $0.id == id }) else {
            throw CoreDataError(.persistentStoreOperation, "sync group \(configuration.name) has no unresolved conflict \(id)")
        }
        let member = try member(conflict.store)
        var batch = HubBatch(origin: member.name)
        batch.resolvedConflicts = [(id, resolution)]
        switch resolution {
        case .incoming:
            let current = try member.context.performAndWait {
                defer { member.access.reset() }
                return try member.access.object(conflict.globalIdentifier).map(member.access.state)
            }
            if let current {
                if try hub.state(of: conflict.globalIdentifier) == nil { batch.inserts.append((conflict.globalIdentifier, current)) } else {
                    batch.updates.append((conflict.globalIdentifier, current.values))
                }
            } else {
                batch.deletes.append(conflict.globalIdentifier)
            }
        case .hub:
            batch.pendingAdded.append((member.name, conflict.globalIdentifier))
        }
        // Written as a resolution, not as the store's pull: other stores
        // receive it, and so does the store itself where the hub differs.
        batch.origin = nil
        try hub.commit(batch)
    }

    // MARK: - Status and purging

    public func status() throws -> [SyncStoreStatus] {
        let hubPosition = try hub.currentPosition()
        let conflicts = try hub.conflicts(store: nil, includingResolved: false)
        let waiting = unopened.map { entry in
            SyncStoreStatus(name: entry.configuration.name, state: .failed, pulledThrough: 0, storePosition: 0, pushedThrough: 0,
                            hubPosition: hubPosition, conflictsWaiting: 0, lastError: entry.reason, lagSeconds: 0)
        }
        return try waiting + members.map { member in
            let cursor = try hub.cursor(for: member.name)
            let storePosition = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
            var lag = 0.0
            if let cursor, storePosition > cursor.pulledThrough,
               let first = try member.coordinator.execute(.fetchHistory(after: member.token(cursor.pulledThrough))).transactions
                   .first(where: { $0.author != Self.author }) {
                lag = max(0, Date().timeIntervalSince(first.timestamp))
            }
            // Behind the hub: data changes it has not received (the hub's own
            // bookkeeping moves its position too, so positions alone do not say).
            var behind = cursor == nil || cursor?.needsFullPush == true
            if let cursor, !behind, cursor.pushedThrough < hubPosition {
                let pushedKey = Self.metadataKey(configuration.name, "pushedThrough")
                let pushed = (member.store.metadata[pushedKey] as? Int).map(Int64.init) ?? cursor.pushedThrough
                behind = try !hub.pending(for: member.name).isEmpty
                    || hub.changes(after: pushed).contains { $0.origin != member.name }
            }
            let state: SyncStoreStatus.State = member.failed ? .failed : member.paused ? .paused
                : (lag > 0 || behind) ? .catchingUp : .ok
            return SyncStoreStatus(name: member.name, state: state, pulledThrough: cursor?.pulledThrough ?? 0,
                                   storePosition: storePosition, pushedThrough: cursor?.pushedThrough ?? 0, hubPosition: hubPosition,
                                   conflictsWaiting: conflicts.filter { $0.store == member.name }.count,
                                   lastError: member.lastError, lagSeconds: lag)
        }
    }

    /// Deletes history every party has moved past and that is older than
    /// the configuration's `historyRetention`: each store's up to what the
    /// hub pulled, the hub's up to the oldest base or push position a store
    /// can still refer to. Nothing is purged while a store is not open.
    /// - Returns: the number of row changes deleted.
    @discardableResult
    public func purgeHistory(now: Date = Date()) throws -> Int {
        guard unopened.isEmpty else { return 0 }
        let floor = now.addingTimeInterval(-max(0, configuration.historyRetention))
        var hubFloor = Int64.max
        var deleted = 0
        for member in members {
            guard let cursor = try hub.cursor(for: member.name) else { return deleted }
            hubFloor = min(hubFloor, min(cursor.base, cursor.pushedThrough))
            if cursor.pulledThrough > 0 {
                let request = PersistentHistoryChangeRequest.deleteHistory(before: member.token(cursor.pulledThrough))
                request.committedBefore = floor
                if case .deleted(let n) = try member.coordinator.execute(request) { deleted += n }
            }
        }
        if hubFloor != .max { try hub.purgeHistory(through: hubFloor, committedBefore: floor) }
        return deleted
    }

    public func close() throws {
        for member in members {
            for store in member.coordinator.persistentStores { try member.coordinator.remove(store) }
        }
        try hub.close()
    }
}
