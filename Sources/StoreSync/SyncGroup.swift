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
        /// The store history position up to which, after the cursor, only
        /// the engine's own transactions were found (in memory: a push then
        /// looks for application changes only after it).
        var checkedThrough: Int64 = 0
        /// A pull's advance over the engine's own pushes, not committed to
        /// the hub (`from`: the hub's cursor it starts from; `to`: where
        /// reading those pushes led). See `pull(_:)`.
        var deferredCursor: (from: SyncCursor, to: SyncCursor)?
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
        moved = pushAll(keepingFailureOf: Set(members.filter(\.failed).map(\.name))) || moved
        commitPushBookkeeping()
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

    /// Runs `body` for the store, marking it failed with the error. A success
    /// clears an earlier failure unless `clearsFailure` is false: a push
    /// after a failed pull in the same round (a hub that cannot be written)
    /// must not hide the pull's error.
    private func attempt(_ member: Member, clearsFailure: Bool = true, _ body: () throws -> Bool) -> Bool {
        // An open connection keeps working on a file that was deleted or
        // replaced: check the path itself so writes never go nowhere.
        guard FileManager.default.fileExists(atPath: member.configuration.url.path) else {
            member.lastError = "the store file \(member.configuration.url.path) is missing"
            member.failed = true
            return false
        }
        do {
            let moved = try body()
            if clearsFailure {
                member.lastError = nil
                member.failed = false
            }
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
        _ = attempt(changed) {
            // The event may come from a commit still in flight: SQLite writes
            // a transaction's frames to `-wal` (the event), syncs them, and
            // only then publishes the commit, all under the write lock. Taking
            // that lock once, empty, waits for the commit, so the pull sees it
            // (a pull that read too early lost a delete, and no later event came).
            // Not getting it (a save longer than the busy timeout) is no
            // failure: that commit's own later writes bring another event.
            if let store = changed.store as? SQLiteStore { try? store.performInTransaction {} }
            return try pull(changed)
        }
        pushAll(keepingFailureOf: changed.failed ? [changed.name] : [])
        commitPushBookkeeping()
    }

    /// The daemon's entry point when another process changed the hub (a
    /// notification from a hub in a database server that several hosts
    /// share): push the hub's changes to every store. A store failing its
    /// pull stays failed until a pull works.
    ///
    /// ```swift
    /// for _ in hubConnection.notifications() { try group.hubDidChange() }
    /// ```
    public func hubDidChange() throws {
        pushAll(keepingFailureOf: Set(members.filter(\.failed).map(\.name)))
        commitPushBookkeeping()
    }

    /// Pushes to every store not paused (stores at the same position
    /// together, see `executePushes`); the round's hub bookkeeping is left
    /// for `commitPushBookkeeping`.
    @discardableResult
    private func pushAll(keepingFailureOf pullFailed: Set<String>) -> Bool {
        do {
            // What a push records as received and the states it writes must
            // agree: on a shared hub, another host may commit meanwhile.
            return try hub.snapshot { pushAllNow(keepingFailureOf: pullFailed) }
        } catch {
            // The snapshot could not be opened or closed (the hub is unreachable).
            for member in members where !member.paused {
                member.lastError = "\(error)"
                member.failed = true
            }
            return false
        }
    }

    private func pushAllNow(keepingFailureOf pullFailed: Set<String>) -> Bool {
        var runs: [PushRun] = []
        for member in members where !member.paused {
            _ = attempt(member, clearsFailure: !pullFailed.contains(member.name)) {
                if let run = try pushPlan(member) { runs.append(run) }
                return false
            }
        }
        return executePushes(runs)
    }

    /// Whether the store has application transactions after its pull
    /// cursor: what a pull would still find. The daemon asks after a round
    /// started by a file event, since that round may have read the store
    /// just before a writer's commit became visible (and no later event
    /// comes for it). One history query of at most one transaction, nothing
    /// decoded; false for a paused store (its pulls wait) and for one never
    /// pulled (its first round bootstraps it whole).
    ///
    /// ```swift
    /// try group.storeDidChange("s1")
    /// if try group.hasUnpulledChanges("s1") { try group.storeDidChange("s1") }
    /// ```
    public func hasUnpulledChanges(_ name: String) throws -> Bool {
        let member = try member(name)
        guard !member.paused, let cursor = try hub.cursor(for: member.name) else { return false }
        let request = PersistentHistoryChangeRequest.fetchHistory(after: member.token(max(cursor.pulledThrough, member.checkedThrough)))
        request.resultType = .transactionsOnly
        request.transactionPredicate = try FetchPredicate(format: "author == nil OR author != %@", argumentArray: [Self.author])
        request.fetchLimit = 1
        return !(try member.coordinator.execute(request).transactions.isEmpty)
    }

    /// Whether the store's history still ends where the engine's last push
    /// into it (in this process) ended: a file event then came from that push
    /// and there is nothing to pull, so the daemon runs no round for it. The
    /// store's write lock is taken once first, so a commit in flight is seen.
    /// False when the engine has not pushed into it yet, or a transaction
    /// came after. (Positions only grow; the push checked, under the same
    /// lock, that nothing but its own pushes lay after the pull cursor.)
    ///
    /// ```swift
    /// if try !group.endsWithOwnPush("s2") { try group.storeDidChange("s2") }
    /// ```
    public func endsWithOwnPush(_ name: String) throws -> Bool {
        let member = try member(name)
        guard member.checkedThrough > 0, !member.failed else { return false }
        if let store = member.store as? SQLiteStore { try store.performInTransaction {} }
        return try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position == member.checkedThrough
    }

    public func pause(_ name: String) throws { try member(name).paused = true }
    public func resume(_ name: String) throws { try member(name).paused = false }

    // MARK: - Pull

    /// Row changes per chunk: a pull commits the store transactions it reads
    /// in hub transactions of about this many changes, and a push writes the
    /// hub's changes in saves of about this many, so what the engine holds
    /// at once is bounded by it (and by the largest single store transaction).
    var chunkChanges = 2_000

    /// What the engine did, for tests that check how it worked, not only
    /// the result (counted since the group was opened).
    struct Statistics {
        var hubCommits = 0
        /// The most objects one pull's hub transaction carried.
        var largestPullBatch = 0
        /// The most objects one save of a push wrote.
        var largestPushSave = 0
        /// Store transactions larger than a chunk settled in parts (each
        /// still one hub transaction with its cursor), and their parts.
        var partedTransactions = 0
        var transactionParts = 0
    }
    var statistics = Statistics()

    /// Applies the store's history after its cursor to the hub: the store
    /// transactions are read in chunks and each chunk is committed in one hub
    /// transaction together with the cursor that says what it covers.
    @discardableResult
    func pull(_ member: Member) throws -> Bool {
        guard let hubCursor = try hub.cursor(for: member.name) else {
            try bootstrap(member)
            return true
        }
        // What the hub holds, and where this pull starts: further on when an
        // earlier pull found only the engine's own pushes and kept its advance
        // in memory (valid while the hub's cursor is the one it started from).
        var committed = hubCursor
        var cursor = effectiveCursor(member, hubCursor)
        member.deferredCursor = nil
        var moved = false
        var marks: [(storePosition: Int64, hubPosition: Int64)]?
        var held: Set<UUID>?
        // The hub's changes since the store's base that did not come from it,
        // by object, and the hub position it is read through: read once per
        // pull, then only what other stores' pulls (another host's, on a
        // shared hub) committed since, at the start of each chunk.
        var hubLog: [UUID: [HubChange]]?
        var logThrough: Int64 = 0
        defer { member.context.performAndWait { member.access.reset() } }
        /// One chunk: false when the store's history has nothing after the cursor.
        func pullChunk() throws -> Bool {
            let scan = PersistentHistoryChangeRequest.fetchHistory(after: member.token(cursor.pulledThrough))
            scan.resultType = .transactionsOnly
            scan.changeLimit = chunkChanges
            let transactions = try member.coordinator.execute(scan).transactions
            guard !transactions.isEmpty else { return false }
            var logRefreshed = false
            if marks == nil { marks = try pushMarks(member) }
            if held == nil { held = Set(try hub.conflicts(store: member.name, includingResolved: false).map(\.globalIdentifier)) }
            // The application transactions of the chunk, read whole (the engine's
            // own pushes only move the base), in place of their scanned entries.
            var chunk = transactions
            var runStart = cursor.pulledThrough, runFirst = 0, runLength = 0, previous = cursor.pulledThrough
            // Application transactions of more row changes than a chunk, by
            // index, with the position before them: settled in parts, read
            // part by part, when the hub takes a transaction in parts.
            var large: [Int: Int64] = [:]
            func readRun() throws {
                guard runLength > 0 else { return }
                let request = PersistentHistoryChangeRequest.fetchHistory(after: member.token(runStart))
                request.fetchLimit = runLength
                let read = try member.coordinator.execute(request).transactions
                guard read.count == runLength else {
                    throw CoreDataError(.persistentStoreOperation, "the history of store \(member.name) changed while it was read (after position \(runStart))")
                }
                // A foreign writer's run at the end of the history may have grown
                // since the scan: the read transaction, with its own token, counts.
                for (offset, transaction) in read.enumerated() { chunk[runFirst + offset] = transaction }
                runLength = 0
            }
            for (index, transaction) in transactions.enumerated() {
                if transaction.author == Self.author {
                    try readRun()
                } else if hub.takesTransactionsInParts && transaction.token.position - previous > Int64(chunkChanges) {
                    // A transaction's row changes are numbered consecutively.
                    try readRun()
                    large[index] = previous
                } else {
                    if runLength == 0 { runStart = previous; runFirst = index }
                    runLength += 1
                }
                previous = transaction.token.position
            }
            try readRun()

            var batch = HubBatch(origin: member.name)
            var touched = Set<UUID>()
            var covered = cursor
            var applicationSeen = false
            func commit() throws {
                batch.cursor = covered
                do {
                    try hub.commit(batch)
                } catch {
                    throw hubFailure(error, pulling: member)
                }
                statistics.hubCommits += 1
                statistics.largestPullBatch = max(statistics.largestPullBatch, batch.inserts.count + batch.updates.count + batch.deletes.count)
                finishCommit()
            }
            func finishCommit() {
                cursor = covered
                committed = covered
                moved = true
                batch = HubBatch(origin: member.name)
                touched = []
            }
            func refreshLog(_ base: Int64) throws {
                guard !logRefreshed else { return }
                var log = hubLog ?? [:]
                var from = hubLog == nil ? base : logThrough
                while true {
                    let page = try hub.changes(after: from, excludingOrigin: member.name, changeLimit: chunkChanges)
                    for change in page.changes { log[change.globalIdentifier, default: []].append(change) }
                    if page.through == from { break }
                    from = page.through
                }
                hubLog = log
                logThrough = from
                logRefreshed = true
            }
            /// `presentHere`: objects this store transaction inserted in earlier
            /// parts (written to the hub, or waiting for the last part), settled
            /// as objects the hub has.
            func settleAll(_ changes: [StoreChange], base: Int64, presentHere: Set<UUID> = []) throws {
                let states = try hub.states(of: changes.map(\.globalIdentifier))
                for change in changes {
                    let gid = change.globalIdentifier
                    let log = (hubLog![gid] ?? []).filter { $0.position > base && $0.origin != member.name }
                    let state = states[gid] ?? (presentHere.contains(gid) ? ObjectState(entityName: change.entity.name, values: [:]) : nil)
                    try settle(change, from: member, base: base, hubState: state, hubChanges: log, into: &batch)
                }
                // A conflict holds the object: the store's later changes to it wait for the resolution.
                for conflict in batch.newConflicts { held!.insert(conflict.globalIdentifier) }
            }
            /// A store transaction of more row changes than a chunk, read and
            /// settled a chunk of rows at a time, each part written to the hub
            /// before the next is read (so it is settled against the parts
            /// before it) and dropped; the last part commits the cursor. All
            /// parts are one hub transaction (`takesTransactionsInParts`):
            /// a failure between them leaves the hub and the cursor as they were.
            func settleInParts(_ transaction: PersistentHistoryTransaction, after start: Int64) throws {
                // What came before it in the chunk is its own hub commit, so the
                // parts never meet another transaction's objects in one batch
                // (nothing to commit yet: its cursor goes with the last part).
                if !batch.isEmpty { try commit() }
                try refreshLog(covered.base)
                let base = covered.base
                var from = start
                var parts = 0
                var deletes: [UUID] = []
                // Objects this transaction inserted at the hub in earlier parts,
                // and what waits for the last part (see holdBackForwardReferences).
                var inserted = Set<UUID>()
                var waiting = HubBatch(origin: member.name)
                func readPart(after from: Int64) throws -> PersistentHistoryTransaction {
                    let request = PersistentHistoryChangeRequest.fetchHistory(after: member.token(from))
                    request.fetchLimit = 1
                    // Never past the scanned end: a foreign writer's run there may have grown since.
                    request.changeLimit = Int(min(Int64(chunkChanges), transaction.token.position - from))
                    request.cutsTransactions = true
                    guard let part = try member.coordinator.execute(request).transactions.first,
                          part.transactionNumber == transaction.transactionNumber, part.token.position > from,
                          part.token.position <= transaction.token.position else {
                        throw CoreDataError(.persistentStoreOperation, "the history of store \(member.name) changed while it was read (after position \(from))")
                    }
                    return part
                }
                // First pass: where each object's changes end (identifiers
                // only), so each object's changes are settled once, folded, as
                // reading the transaction whole would give them.
                var plan = PartedTransactionPlan()
                while from < transaction.token.position {
                    let part = try readPart(after: from)
                    plan.note(part.changes.map(StoreChange.init))
                    from = part.token.position
                }
                from = start
                // Changes read in a part before the one they are settled in, folded.
                var folding: [UUID: StoreChange] = [:]
                while from < transaction.token.position {
                    let part = try readPart(after: from)
                    from = part.token.position
                    var ready: [StoreChange] = []
                    for change in part.changes where !held!.contains(change.globalIdentifier) {
                        var folded: StoreChange? = StoreChange(change)
                        if let earlier = folding.removeValue(forKey: change.globalIdentifier) { folded = earlier.folding(folded!) }
                        guard let folded else { continue }
                        if plan.settlingPart(of: folded.globalIdentifier, reading: parts) > parts {
                            folding[folded.globalIdentifier] = folded
                        } else {
                            ready.append(folded)
                        }
                    }
                    parts += 1
                    // The history cannot change under the pull (the part numbers
                    // of both passes are the same); whatever still waits to be
                    // folded is settled with the last part all the same.
                    if from >= transaction.token.position {
                        ready += folding.values.filter { !held!.contains($0.globalIdentifier) }
                        folding = [:]
                    }
                    let presentHere = inserted.union(waiting.inserts.map(\.0))
                    try settleAll(ready, base: base, presentHere: presentHere)
                    statistics.largestPullBatch = max(statistics.largestPullBatch, batch.inserts.count + batch.updates.count + batch.deletes.count)
                    guard from < transaction.token.position else { break }
                    // Not the last part: no cursor, and nothing of it is kept in memory
                    // but its deletes (identifiers): they go with the last part, as
                    // in one save, where deletes come last. Deleting an object here
                    // would make its delete rule change a related object that a
                    // later part deletes (a nulled relationship the store never
                    // recorded: a change of it applied twice to the hub).
                    var written = batch
                    written.cursors = []
                    deletes += written.deletes
                    written.deletes = []
                    try holdBackForwardReferences(&written, inserted: &inserted, waiting: &waiting)
                    do {
                        if !written.isEmpty { try hub.commit(written) }
                    } catch {
                        throw hubFailure(error, pulling: member)
                    }
                    batch = HubBatch(origin: member.name)
                }
                covered.pulledThrough = transaction.token.position
                batch.deletes = deletes + batch.deletes
                batch.inserts = waiting.inserts + batch.inserts
                batch.updates = waiting.updates + batch.updates
                try commit()
                statistics.partedTransactions += 1
                statistics.transactionParts += parts
            }
            for (index, transaction) in chunk.enumerated() {
                // The base moves with each push the store received (no echo: pushes are not applied back).
                for mark in marks! where mark.storePosition < transaction.token.position { covered.base = max(covered.base, mark.hubPosition) }
                if transaction.author == Self.author {
                    if let position = transaction.contextName.flatMap(Self.pushedPosition) { covered.base = max(covered.base, position) }
                } else if let start = large[index] {
                    applicationSeen = true
                    try settleInParts(transaction, after: start)
                } else {
                    applicationSeen = true
                    let changes = transaction.changes.filter { !held!.contains($0.globalIdentifier) }.map(StoreChange.init)
                    let gids = changes.map(\.globalIdentifier)
                    // Transactions of one hub batch must touch different objects:
                    // each is then settled against the hub as it was before the
                    // batch, exactly as if it had been committed alone.
                    if gids.contains(where: touched.contains) { try commit() }
                    let base = covered.base
                    try refreshLog(base)
                    try settleAll(changes, base: base)
                    touched.formUnion(gids)
                }
                covered.pulledThrough = transaction.token.position
            }
            if !applicationSeen && covered.pulledThrough - committed.pulledThrough < Self.idleAdvanceStep {
                // Only the engine's own pushes (the file event of a push, mostly):
                // what reading them gives (cursor and base) is kept in memory,
                // not committed. A hub commit here would cost a write and an
                // fsync per push into every store, and move the hub's position
                // so every store's next push looks for changes again. A crash
                // loses only this advance: the pushes are read again and give
                // the same. The next commit (an application change, or this
                // advance growing past `idleAdvanceStep`, which bounds how far
                // the hub's cursor, and so the store's history purge, lags)
                // carries it.
                cursor = covered
                return true
            }
            // (A store transaction settled in parts last committed it all.)
            if !batch.isEmpty || covered != cursor { try commit() }
            return true
        }
        // Each chunk reads the hub, settles and commits in one hub
        // transaction; a shared hub may run it again after a serialisation
        // failure, from the state it started with.
        var more = true
        while more {
            let start = (cursor: cursor, committed: committed, moved: moved, held: held, hubLog: hubLog, logThrough: logThrough)
            var attempts = 0
            more = try hub.transaction {
                attempts += 1
                if attempts > 1 {
                    (cursor, committed, moved, held, hubLog, logThrough) = start
                    member.context.performAndWait { member.access.reset() }
                }
                return try pullChunk()
            }
        }
        if cursor.pulledThrough != committed.pulledThrough || cursor.base != committed.base {
            member.deferredCursor = (committed, cursor)
        }
        return moved
    }

    /// The store's cursor as the pull would start from it: the hub's, or an
    /// advance over the engine's own pushes kept in memory since (only while
    /// the hub's cursor is still the one that advance started from).
    func effectiveCursor(_ member: Member, _ hubCursor: SyncCursor) -> SyncCursor {
        guard let deferred = member.deferredCursor, deferred.from.pulledThrough == hubCursor.pulledThrough,
              deferred.from.base == hubCursor.base else { return hubCursor }
        var cursor = hubCursor
        cursor.pulledThrough = deferred.to.pulledThrough
        cursor.base = deferred.to.base
        return cursor
    }

    /// Takes out of a part of a store transaction settled in parts, into
    /// `waiting` (which goes with the last part, in the store's order):
    /// - inserts and updates that refer to an object not at the hub yet (a
    ///   to-one destination, a member added; a later part brings it, or it
    ///   waits itself). Written now, such an object would get its
    ///   relationship set again when the destination comes: two hub changes
    ///   for the store's one (the workload checker's "repeated"); and a
    ///   member that missed would be added back at the end even when a later
    ///   part took it out again;
    /// - updates of an object not at the hub yet (its insert comes later);
    /// - every later change of an object with a change waiting: written
    ///   before the waiting one, it would be undone by it at the last part
    ///   (a to-one set twice, the first time forward, would end at the first
    ///   value), and the hub would end other than the store did.
    /// Holds back at worst what the transaction refers forward and what
    /// follows it, never more than reading it whole did.
    private func holdBackForwardReferences(_ part: inout HubBatch, inserted: inout Set<UUID>, waiting: inout HubBatch) throws {
        func destinations(_ values: [String: SyncValue]) -> [UUID] {
            values.values.flatMap { value -> [UUID] in
                switch value {
                case .toOne(let gid?): return [gid]
                case .members(let gids): return gids
                case .memberChange(let added, _, _): return added
                default: return []
                }
            }
        }
        let here = Set(part.inserts.map(\.0))
        var unknown = Set(part.inserts.flatMap { destinations($0.1.values) } + part.updates.flatMap { destinations($0.1) })
        unknown.subtract(inserted)
        unknown.subtract(here)
        let present = unknown.isEmpty ? [:] : try hub.states(of: Array(unknown))
        // Not at the hub, not inserted by this transaction so far: missing;
        // and so is whatever this part holds back (its referrers wait too).
        var missing = unknown.subtracting(present.keys).union(waiting.inserts.map(\.0))
        // Objects with a change waiting keep their later changes behind it.
        var waitingObjects = Set(waiting.inserts.map(\.0)).union(waiting.updates.map(\.0))
        while true {
            let inserts = part.inserts.filter {
                !missing.contains($0.0) && (waitingObjects.contains($0.0) || destinations($0.1.values).contains(where: missing.contains))
            }
            let updates = part.updates.filter {
                missing.contains($0.0) || waitingObjects.contains($0.0) || destinations($0.1).contains(where: missing.contains)
            }
            if inserts.isEmpty && updates.isEmpty { break }
            let heldInserts = Set(inserts.map(\.0)), heldUpdates = Set(updates.map(\.0))
            waiting.inserts += inserts
            waiting.updates += updates
            part.inserts.removeAll { heldInserts.contains($0.0) }
            part.updates.removeAll { heldUpdates.contains($0.0) }
            missing.formUnion(heldInserts)
            waitingObjects.formUnion(heldInserts)
            waitingObjects.formUnion(heldUpdates)
        }
        inserted.formUnion(part.inserts.map(\.0))
    }

    /// A hub commit of a pull that failed, said as the hub's failure (a full
    /// disk, say), keeping Core Data's code: the store is fine, and nothing
    /// moved (the cursor commits with the batch).
    private func hubFailure(_ error: Error, pulling member: Member) -> CoreDataError {
        let hubName = (hub as? EmbeddedHub).map { "the hub \($0.url.path)" } ?? "the hub"
        let code = (error as? CoreDataError)?.code ?? .persistentStoreSave
        let message = (error as? CoreDataError)?.message ?? "\(error)"
        return CoreDataError(code, "\(hubName) could not commit the changes of store \(member.name): \(message)",
                             userInfo: [CoreDataError.underlyingErrorKey: error])
    }

    /// "push:POSITION" → POSITION.
    static func pushedPosition(_ contextName: String) -> Int64? {
        contextName.hasPrefix("push:") ? Int64(contextName.dropFirst(5)) : nil
    }

    /// Decides one store change against the hub (the policy table in docs/SYNC.md).
    private func settle(_ change: StoreChange, from member: Member, base: Int64, hubState: ObjectState?,
                        hubChanges: [HubChange], into batch: inout HubBatch) throws {
        let gid = change.globalIdentifier
        let policy = member.configuration.policy
        var hubChanged: [String: Any?] = [:]
        for entry in hubChanges.reversed() { for (name, old) in entry.changedProperties { hubChanged[name] = old } }
        let storeChanged = change.settableProperties

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
                batch.inserts.append((gid, ObjectState(entityName: change.entity.name, values: change.values)))
            } else {
                batch.updates.append((gid, change.values))
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
                    case .error: try conflict(.updateVersusDelete, incoming: Self.describe(change.values))
                    }
                }
                return
            }
            let conflicting = storeChanged.intersection(hubChanged.keys)
            if conflicting.isEmpty {
                batch.updates.append((gid, change.values))
                return
            }
            switch policy {
            case .storeTrump:
                batch.updates.append((gid, change.values.filter { !conflicting.contains($0.key) }))
                batch.pendingAdded.append((member.name, gid))
            case .objectTrump:
                batch.updates.append((gid, change.values))
            case .overwrite:
                // The store's object whole: its current values, every property.
                if let object = try member.context.performAndWait({ try member.access.object(gid).map(member.access.state) }) {
                    batch.updates.append((gid, object.values))
                } else {
                    batch.updates.append((gid, change.values))
                }
            case .rollback:
                batch.pendingAdded.append((member.name, gid))
            case .error:
                try conflict(.update, incoming: Self.describe(change.values))
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
        // Settled against the hub as it is when committed (see `pull`).
        try hub.transaction {
            var start: Int64 = 0
            var batch = HubBatch(origin: member.name)
            // The position and the objects must be one state of the store: read
            // apart, an application's commit between them (a record moved into a
            // folder read before it) is half in what is read, and pulled again
            // after it. Under the store's write lock no commit comes between.
            let read = {
                start = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
                try self.readWhole(member, into: &batch)
            }
            if let sqlite = member.store as? SQLiteStore { try sqlite.performInTransaction(read) } else { try read() }
            batch.cursor = SyncCursor(store: member.name, pulledThrough: start, base: 0, pushedThrough: 0, needsFullPush: true)
            try hub.commit(batch)
        }
    }

    /// The store's objects merged into `batch` by its policy (see `bootstrap`).
    private func readWhole(_ member: Member, into batch: inout HubBatch) throws {
        try member.context.performAndWait {
            defer { member.access.reset() }
            for entity in configuration.model.entities where entity.superentity == nil {
                let objects = try member.context.fetch(FetchRequest(entityName: entity.name))
                let gids = try member.coordinator.globalIdentifiers(for: objects.map(\.objectID))
                let present = objects.filter { gids[$0.objectID] != nil }
                let states = try member.access.states(of: present)
                let existingStates = try hub.states(of: present.compactMap { gids[$0.objectID] })
                for (object, state) in zip(present, states) {
                    let gid = gids[object.objectID]!
                    if let existing = existingStates[gid] {
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
    }

    // MARK: - Push

    /// What a round's pushes leave for the hub: the positions they took the
    /// stores to and the pending objects they wrote. Committed in one hub
    /// transaction after the round's pushes (`commitPushBookkeeping`); the
    /// store's own metadata is what counts, so losing it in a crash only
    /// means pending objects are written again.
    private var pushBookkeeping: [String: (pushedThrough: Int64, fullPushDone: Bool, pendingWritten: Set<UUID>)] = [:]

    /// One store's push in a round: what it must write, then how it went.
    final class PushRun {
        let member: Member
        let store: SQLiteStore
        let cursor: SyncCursor
        let hubPosition: Int64
        let pushed: Int64
        let pending: Set<UUID>
        let held: Set<UUID>
        var full: Bool
        var skipped = false
        var failure: Error?
        var before: Int64 = 0
        var reached: Int64 = 0
        var wroteObjects = false
        /// Objects whose destination or member was not in the store yet (it
        /// comes in a later save): written again at the end.
        var again: [UUID] = []
        /// Objects left out of a page because a to-one destination was
        /// neither in the store nor written by that page, with those
        /// destinations: written once, at the end, after them.
        var postponed: [UUID: [UUID]] = [:]
        var writing: Bool { !skipped && failure == nil }

        init(member: Member, store: SQLiteStore, cursor: SyncCursor, hubPosition: Int64, pushed: Int64, pending: Set<UUID>,
             held: Set<UUID>, full: Bool) {
            self.member = member
            self.store = store
            self.cursor = cursor
            self.hubPosition = hubPosition
            self.pushed = pushed
            self.pending = pending
            self.held = held
            self.full = full
        }
    }

    /// A failure to read the hub during pushes: every push of the group rolls back.
    struct HubReadFailure: Error { let underlying: Error }

    /// Writes into the store every hub change it has not seen (except its
    /// own pulled changes) and every object pending for it, in one store
    /// transaction that also records the hub position applied (see
    /// `executePushes`).
    @discardableResult
    func push(_ member: Member) throws -> Bool {
        try hub.snapshot {
            guard let run = try pushPlan(member) else { return false }
            executePushes([run])
            if let failure = run.failure { throw failure }
            return run.wroteObjects
        }
    }

    /// Decides what a push must write (nil: nothing). A store that receives
    /// nothing has its received position advanced here now and then.
    func pushPlan(_ member: Member) throws -> PushRun? {
        guard let cursor = try hub.cursor(for: member.name) else { return nil }
        let hubPosition = try hub.currentPosition()
        let pushedKey = Self.metadataKey(configuration.name, "pushedThrough")
        let pushed = (member.store.metadata[pushedKey] as? Int).map(Int64.init) ?? (member.store.metadata[pushedKey] as? Int64) ?? 0
        let pending = try hub.pending(for: member.name)
        var full = cursor.needsFullPush
        if !full && pending.isEmpty {
            guard hubPosition > pushed else { return nil }
            // Anything for this store? Its own pulls are skipped unread.
            var from = pushed, found = false
            do {
                while !found {
                    let page = try hub.changes(after: from, excludingOrigin: member.name, changeLimit: chunkChanges)
                    found = !page.changes.isEmpty
                    if page.through == from { break }
                    from = page.through
                }
            } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired {
                full = true
                found = true
            }
            if !found {
                // Only the store's own changes and the hub's bookkeeping moved.
                // A store only written by its application receives nothing, so its
                // received position would never move and every pull and push would
                // read the hub's history from there again. Now and then record
                // that it has seen everything up to here (metadata only: no row
                // changes, so no file event loop; a mark keeps its base exact).
                if hubPosition - pushed >= Self.idleAdvanceStep {
                    let before = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
                    member.store.metadata[pushedKey] = Int(hubPosition)
                    do {
                        try recordPushMark(member, storePosition: before, hubPosition: hubPosition)
                    } catch {
                        member.store.metadata[pushedKey] = Int(pushed)
                        throw error
                    }
                    notePush(member, hubPosition: hubPosition, fullPushDone: false, pendingWritten: [])
                }
                return nil
            }
        }
        guard let store = member.store as? SQLiteStore else {
            throw CoreDataError(.persistentStoreOperation, "store \(member.name) of sync group \(configuration.name) is not a SQLite store")
        }
        // Positions only grow in one file; a lower one means another file now.
        if try (member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0) < member.checkedThrough {
            member.checkedThrough = 0
        }
        let held = Set(try hub.conflicts(store: member.name, includingResolved: false).map(\.globalIdentifier))
        return PushRun(member: member, store: store, cursor: cursor, hubPosition: hubPosition, pushed: pushed, pending: pending,
                       held: held, full: full)
    }

    /// Runs pushes, each in one store transaction of its own in which the
    /// objects are written in saves of about `chunkChanges` hub changes, so
    /// memory stays bounded and a crash still leaves all or nothing. Stores
    /// that start from the same hub position are pushed together: each page
    /// of the hub's changes and the hub states of its objects are read once
    /// for all of them, and each store gets its part. A store whose write
    /// fails is rolled back alone; a failure to read the hub rolls back the
    /// group. Sets each member's state (failed, last error).
    /// - Returns: true when any push wrote objects.
    @discardableResult
    func executePushes(_ runs: [PushRun]) -> Bool {
        var groups: [[PushRun]] = []
        var byStart: [Int64: Int] = [:]
        for run in runs {
            // First pushes read the whole hub: together with each other only.
            let key = run.full ? Int64.min : run.pushed
            if let index = byStart[key] { groups[index].append(run) } else {
                byStart[key] = groups.count
                groups.append([run])
            }
        }
        var moved = false
        for group in groups {
            do {
                try pushTogether(group, 0)
            } catch let failure as HubReadFailure {
                for run in group where run.failure == nil && !run.skipped { run.failure = failure.underlying }
            } catch {
                for run in group where run.failure == nil && !run.skipped { run.failure = error }
            }
            for run in group {
                let member = run.member
                if let failure = run.failure {
                    member.store.metadata[Self.metadataKey(configuration.name, "pushedThrough")] = Int(run.pushed)
                    member.context.performAndWait { member.access.reset() }
                    member.lastError = "\(failure)"
                    member.failed = true
                    continue
                }
                guard !run.skipped else { continue }
                // Committed: up to here the store's history holds nothing the pull has
                // not seen but this push (a rolled-back write would have left these
                // positions free for an application's next commit).
                member.checkedThrough = run.reached
                notePush(member, hubPosition: run.hubPosition, fullPushDone: run.full || run.cursor.needsFullPush, pendingWritten: run.pending)
                moved = moved || run.wroteObjects
            }
        }
        return moved
    }

    /// Opens the store transactions of `runs[index...]` one inside the other,
    /// writes the pages for all of them, then finishes and commits each.
    private func pushTogether(_ runs: [PushRun], _ index: Int) throws {
        guard index < runs.count else {
            try writePages(runs)
            return
        }
        let run = runs[index]
        var opened = false
        do {
            try run.store.performInTransaction {
                // Inside the store's write lock: no application can commit until the
                // push does, so a change not pulled yet is seen here or not at all.
                // Such a change is settled at the hub first; its result comes next round.
                let unpulled = PersistentHistoryChangeRequest.fetchHistory(after: run.member.token(max(run.cursor.pulledThrough, run.member.checkedThrough)))
                unpulled.resultType = .transactionsOnly
                unpulled.transactionPredicate = try FetchPredicate(format: "author == nil OR author != %@", argumentArray: [Self.author])
                unpulled.fetchLimit = 1
                if !(try run.member.coordinator.execute(unpulled).transactions.isEmpty) {
                    run.skipped = true
                    return
                }
                run.before = try run.member.coordinator.currentPersistentHistoryToken(fromStores: [run.member.store])?.position ?? 0
                opened = true
                try pushTogether(runs, index + 1)
                if let failure = run.failure { throw failure }
                try finishPush(run)
            }
        } catch let failure as HubReadFailure {
            throw failure
        } catch {
            if run.failure == nil { run.failure = error }
        }
        // Skipped or failed before the others started: they go on without this store.
        if !opened { try pushTogether(runs, index + 1) }
    }

    /// The hub states of objects, a read failure marked as the hub's.
    private func hubStates(_ objects: [UUID]) throws -> [UUID: ObjectState] {
        do { return try hub.states(of: objects) } catch { throw HubReadFailure(underlying: error) }
    }

    /// Reads the hub's changes after the runs' common position page by page
    /// (or the whole hub for first pushes) and writes each run its part.
    private func writePages(_ runs: [PushRun]) throws {
        let writing = runs.filter(\.writing)
        guard let lead = writing.first else { return }
        func write(_ page: [UUID], changes: [HubChange]?, first: Bool) throws {
            let current = writing.filter(\.writing)
            var parts: [[UUID]] = []
            var union = Set<UUID>()
            for run in current {
                var gids = changes.map { $0.filter { $0.origin != run.member.name }.map(\.globalIdentifier) } ?? page
                if first { gids += run.pending }
                let objects = Array(Set(gids).subtracting(run.held))
                parts.append(objects)
                union.formUnion(objects)
            }
            guard !union.isEmpty else { return }
            let states = try hubStates(Array(union))
            for (run, objects) in zip(current, parts) {
                do { try writePage(run, objects, states) } catch { run.failure = error }
            }
        }
        if !lead.full {
            var from = lead.pushed
            var first = true
            while true {
                let page: (changes: [HubChange], through: Int64)
                do {
                    // One store alone skips its own pulls unread; several read them and each leaves out its own.
                    page = try hub.changes(after: from, excludingOrigin: writing.count == 1 ? lead.member.name : nil, changeLimit: chunkChanges)
                } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired && first {
                    // Purged past the stores' position: the whole hub instead.
                    for run in writing { run.full = true }
                    break
                } catch {
                    throw HubReadFailure(underlying: error)
                }
                try write([], changes: page.changes, first: first)
                first = false
                if page.through == from || page.through >= lead.hubPosition { break }
                from = page.through
            }
        }
        if lead.full {
            // The stores' first push, or their position was purged: the whole hub.
            let all: [UUID]
            do { all = try hub.allObjects() } catch { throw HubReadFailure(underlying: error) }
            var start = 0
            repeat {
                try write(Array(all[start..<min(start + chunkChanges, all.count)]), changes: nil, first: start == 0)
                start += chunkChanges
            } while start < all.count
            // Written whole, the hub's objects alone would leave in the store
            // those the hub deleted since the store last received anything (a
            // first push the hub did not get to record, and so made again, or
            // a position the hub's history no longer reaches): the store's
            // received position then moves past their deletes for good. The
            // push runs only when the hub has every change of the store, so
            // what the store holds and the hub does not is what the hub
            // deleted (a held object waits for its conflict).
            let kept = Set(all)
            for run in writing where run.writing {
                do {
                    let member = run.member
                    let roots = configuration.model.entities.filter { $0.superentity == nil }
                    let gone = try member.context.performAndWait { try member.access.globalIdentifiersOfAllObjects(of: roots) }
                        .filter { !kept.contains($0) && !run.held.contains($0) }
                    var start = 0
                    while start < gone.count {
                        try writePage(run, Array(gone[start..<min(start + chunkChanges, gone.count)]), [:])
                        start += chunkChanges
                    }
                } catch {
                    run.failure = error
                }
            }
        }
    }

    /// One save of a push: the hub states (or deletions) of `objects`.
    /// With `postponing`, an object whose to-one destination is neither in
    /// the store nor written by this save waits for the end of the push
    /// (`finishPush`), where it is written once after its destination:
    /// written now, it would be written again once the destination came, two
    /// engine writes for one hub change (`ReferenceOrder`).
    private func writePage(_ run: PushRun, _ objects: [UUID], _ states: [UUID: ObjectState], postponing: Bool = true) throws {
        guard !objects.isEmpty else { return }
        let member = run.member
        run.wroteObjects = true
        statistics.largestPushSave = max(statistics.largestPushSave, objects.count)
        try member.context.performAndWait {
            defer { member.access.reset() }
            member.context.name = "push:\(run.hubPosition)"
            try member.access.load(objects + objects.compactMap { states[$0] }.flatMap { ObjectState.references($0.values) })
            var objects = objects, states = states
            try writeRelatedObjectsOfDeletes(member, &objects, &states, excluded: run.held)
            // In identifier-text order; each text made once, not per comparison.
            var ordered = objects.map { ($0.uuidString, $0) }.sorted { $0.0 < $1.0 }.map(\.1)
            if postponing {
                let waiting = try forwardReferences(ordered, states, member.access)
                if !waiting.isEmpty {
                    run.postponed.merge(waiting) { $1 }
                    run.again += ordered.filter { waiting[$0] != nil }
                    ordered.removeAll { waiting[$0] != nil }
                }
            }
            for gid in ordered where states[gid] == nil {
                if let object = try member.access.object(gid) { member.context.delete(object) }
            }
            try deleteMembersTheHubNoLongerHas(member, ordered, Set(objects).union(run.held), states)
            for gid in ordered {
                guard let state = states[gid] else { continue }
                if try member.access.object(gid) == nil { _ = try member.access.insert(state.entityName, gid: gid) }
            }
            for gid in ordered {
                guard let state = states[gid], let object = try member.access.object(gid) else { continue }
                member.access.clearMissedReference()
                try member.access.apply(state.values, to: object)
                if member.access.missedReference { run.again.append(gid) }
            }
            try member.context.save()
        }
    }

    /// The objects of a page with a to-one destination that is neither in
    /// the store nor written by the page (nor itself waiting), with their
    /// destinations.
    private func forwardReferences(_ objects: [UUID], _ states: [UUID: ObjectState], _ access: GraphAccess) throws -> [UUID: [UUID]] {
        let written = Set(objects.filter { states[$0] != nil })
        var waiting: [UUID: [UUID]] = [:]
        var changed = true
        while changed {
            changed = false
            for gid in objects where waiting[gid] == nil {
                guard let state = states[gid] else { continue }
                let destinations = ReferenceOrder.toOneDestinations(state.values)
                for destination in destinations where written.contains(destination) ? waiting[destination] != nil : try access.object(destination) == nil {
                    waiting[gid] = destinations
                    changed = true
                    break
                }
            }
        }
        return waiting
    }

    /// Objects this page deletes have delete rules: deleting them would
    /// change the store's objects related to them (a nulled to-one, a
    /// membership dropped), an engine write of those that the hub's history
    /// may bring only in a later page, where the object is written again:
    /// two writes for its one hub change. Those related objects (not held)
    /// are written in this page instead, with their hub state (which the
    /// later page then writes again unchanged: no row changes), or deleted
    /// here when the hub deleted them too. The push comes to that anyway:
    /// it runs only when the hub has every change of the store, so the hub's
    /// states are what the store must end with.
    private func writeRelatedObjectsOfDeletes(_ member: Member, _ objects: inout [UUID], _ states: inout [UUID: ObjectState],
                                              excluded: Set<UUID>) throws {
        var deleted: [ManagedObject] = []
        for gid in objects where states[gid] == nil {
            if let object = try member.access.object(gid) { deleted.append(object) }
        }
        guard !deleted.isEmpty else { return }
        let inPage = Set(objects)
        var related: [UUID] = []
        for object in try member.access.relatedObjects(of: deleted) where !object.isDeleted {
            guard let id = try member.access.globalIdentifier(of: object), !inPage.contains(id), !excluded.contains(id) else { continue }
            related.append(id)
        }
        guard !related.isEmpty else { return }
        let hubStates = try hubStates(Array(Set(related)))
        for id in Set(related) {
            objects.append(id)
            states[id] = hubStates[id]
        }
        try member.access.load(hubStates.values.flatMap { ObjectState.references($0.values) })
    }

    /// A membership written whole (`.members`) leaves out the members the
    /// hub no longer has. When such a member's delete comes in a later page
    /// of the same push (the states written are the hub's as it is now, the
    /// pages are its history in order), writing the membership first would
    /// unlink it (its to-one nulled, or its own membership changed): an
    /// engine write of it that the hub never made, then the delete. Those
    /// members are deleted here instead, in this page's save, which is what
    /// the push comes to anyway (the store has no unpulled change: the push
    /// runs only then, under the store's write lock).
    private func deleteMembersTheHubNoLongerHas(_ member: Member, _ ordered: [UUID], _ excluded: Set<UUID>,
                                                _ states: [UUID: ObjectState]) throws {
        // The memberships written whole, with the store's current members of each.
        var written: [(kept: Set<UUID>, members: [ManagedObject])] = []
        for gid in ordered {
            guard let state = states[gid], let object = try member.access.object(gid) else { continue }
            for (name, value) in state.values {
                guard case .members(let kept) = value,
                      let rel = object.entity.propertiesByName[name] as? RelationshipDescription, rel.isToMany else { continue }
                let current = try object.value(forKey: name)
                let members = ((current as? [ManagedObject]) ?? (current as? Set<ManagedObject>).map(Array.init) ?? []).filter { !$0.isDeleted }
                if !members.isEmpty { written.append((Set(kept), members)) }
            }
        }
        guard !written.isEmpty else { return }
        // One identifier query for every member, not one per member (a push's hot path).
        try member.access.learnGlobalIdentifiers(of: written.flatMap(\.members))
        var candidates: [UUID: ManagedObject] = [:]
        for (kept, members) in written {
            for object in members {
                // A member in this page is written by its own state; a held one
                // (a conflict waiting) is not the push's to delete.
                guard let id = try member.access.globalIdentifier(of: object), !kept.contains(id), !excluded.contains(id) else { continue }
                candidates[id] = object
            }
        }
        guard !candidates.isEmpty else { return }
        let present = try hubStates(Array(candidates.keys))
        for (id, object) in candidates where present[id] == nil && !object.isDeleted { member.context.delete(object) }
    }

    /// Ends a push inside its store transaction: objects that missed a
    /// reference written again, then the received position (and a mark when
    /// no row changed) in the store's metadata.
    private func finishPush(_ run: PushRun) throws {
        let member = run.member
        var seen = Set<UUID>()
        let missed = ReferenceOrder.destinationsFirst(run.again.filter { seen.insert($0).inserted }, dependencies: run.postponed)
        run.again = []
        run.postponed = [:]
        var start = 0
        while start < missed.count {
            let page = Array(missed[start..<min(start + chunkChanges, missed.count)])
            try writePage(run, page, try hubStates(page), postponing: false)
            start += chunkChanges
        }
        let after = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
        member.store.metadata[Self.metadataKey(configuration.name, "pushedThrough")] = Int(run.hubPosition)
        if after == run.before {
            // Nothing changed in the store, so no push transaction marks the
            // base in its history: keep a mark in its metadata instead.
            try recordPushMark(member, storePosition: run.before, hubPosition: run.hubPosition)
        } else {
            try run.store.save(StoreSaveRequest())
        }
        run.reached = after
    }

    private func notePush(_ member: Member, hubPosition: Int64, fullPushDone: Bool, pendingWritten: Set<UUID>) {
        var entry = pushBookkeeping[member.name] ?? (hubPosition, false, [])
        entry.pushedThrough = max(entry.pushedThrough, hubPosition)
        entry.fullPushDone = entry.fullPushDone || fullPushDone
        entry.pendingWritten.formUnion(pendingWritten)
        pushBookkeeping[member.name] = entry
    }

    /// Commits what the round's pushes leave for the hub in one hub
    /// transaction: pending objects written, first pushes done, and the
    /// hub's copy of each store's received position. The copy alone (the
    /// store's metadata is authoritative; purging only needs it not ahead)
    /// is written only once it lags by `idleAdvanceStep`, so a round that
    /// carries one small change costs no hub commit for it.
    ///
    /// A hub that cannot take it (full, unreachable) fails no round: the
    /// stores already hold what was pushed, so the bookkeeping is kept and
    /// tried again after the next round, and the stores it was for show the
    /// error meanwhile (until then their pending objects and a first push
    /// are written again: the same values).
    func commitPushBookkeeping() {
        guard !pushBookkeeping.isEmpty else { return }
        let entries = pushBookkeeping
        pushBookkeeping = [:]
        do {
            if try writePushBookkeeping(entries) { statistics.hubCommits += 1 }
        } catch {
            for (name, entry) in entries {
                let newer = pushBookkeeping[name]
                pushBookkeeping[name] = (max(entry.pushedThrough, newer?.pushedThrough ?? 0),
                                         entry.fullPushDone || (newer?.fullPushDone ?? false),
                                         entry.pendingWritten.union(newer?.pendingWritten ?? []))
                if let member = members.first(where: { $0.name == name }) {
                    member.lastError = "the hub could not record what was pushed to store \(name): \(error)"
                    member.failed = true
                }
            }
        }
    }

    /// Commits the bookkeeping; false when none of it needed a commit.
    private func writePushBookkeeping(_ entries: [String: (pushedThrough: Int64, fullPushDone: Bool, pendingWritten: Set<UUID>)]) throws -> Bool {
        // The cursors are read and written back together.
        try hub.transaction {
            var batch = HubBatch(origin: nil)
            for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
                guard var cursor = try hub.cursor(for: name) else { continue }
                let needed = entry.fullPushDone && cursor.needsFullPush || !entry.pendingWritten.isEmpty
                    || entry.pushedThrough - cursor.pushedThrough >= Self.idleAdvanceStep
                guard needed else { continue }
                cursor.pushedThrough = max(cursor.pushedThrough, entry.pushedThrough)
                if entry.fullPushDone { cursor.needsFullPush = false }
                batch.cursors.append(cursor)
                batch.pendingRemoved += entry.pendingWritten.map { (name, $0) }
            }
            guard !batch.isEmpty else { return false }
            try hub.commit(batch)
            return true
        }
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
        // Read and written together: a shared hub's other writers cannot come between.
        try hub.transaction {
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
            // The pull's own starting point (an advance over the engine's pushes
            // may not be committed to the hub yet).
            let cursor = try hub.cursor(for: member.name).map { effectiveCursor(member, $0) }
            let storePosition = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
            var lag = 0.0
            // After the cursor, up to `checkedThrough` only the engine's pushes lie.
            if let cursor, case let seen = max(cursor.pulledThrough, member.checkedThrough), storePosition > seen {
                // The oldest application transaction not pulled: its fields only, nothing decoded.
                let oldest = PersistentHistoryChangeRequest.fetchHistory(after: member.token(seen))
                oldest.resultType = .transactionsOnly
                oldest.transactionPredicate = try FetchPredicate(format: "author == nil OR author != %@", argumentArray: [Self.author])
                oldest.fetchLimit = 1
                if let first = try member.coordinator.execute(oldest).transactions.first {
                    lag = max(0, Date().timeIntervalSince(first.timestamp))
                }
            }
            // Behind the hub: data changes it has not received (the hub's own
            // bookkeeping moves its position too, so positions alone do not say).
            var behind = cursor == nil || cursor?.needsFullPush == true
            if let cursor, !behind, cursor.pushedThrough < hubPosition {
                let pushedKey = Self.metadataKey(configuration.name, "pushedThrough")
                let pushed = (member.store.metadata[pushedKey] as? Int).map(Int64.init) ?? cursor.pushedThrough
                behind = try !hub.pending(for: member.name).isEmpty
                // Page by page, the store's own pulls skipped unread, until one change is found.
                var from = pushed
                while !behind {
                    let page = try hub.changes(after: from, excludingOrigin: member.name, changeLimit: chunkChanges)
                    behind = !page.changes.isEmpty
                    if page.through == from { break }
                    from = page.through
                }
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
