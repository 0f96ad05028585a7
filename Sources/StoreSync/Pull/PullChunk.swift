import Foundation
import ObjectGraph

/// One chunk of a pull: the store's transactions after the cursor, about
/// `chunkChanges` row changes of them, settled against the hub and
/// committed with the cursor that says what they cover, all inside one
/// `hub.transaction { }` (docs/SYNC.md "Pull"). A chunk lives for one
/// attempt; what goes on to the next chunk is its `state`.
final class PullChunk {
    unowned let group: SyncGroup
    let member: SyncGroup.Member
    var state: PullState
    var hub: SyncHub { group.hub }

    /// The hub batch being built, the objects its transactions touch, and
    /// the cursor it will commit.
    var batch: HubBatch
    var touched = Set<UUID>()
    var covered: SyncCursor
    var applicationSeen = false
    private var logRefreshed = false

    init(_ group: SyncGroup, _ member: SyncGroup.Member, state: PullState) {
        self.group = group
        self.member = member
        self.state = state
        batch = HubBatch(origin: member.name)
        covered = state.cursor
    }

    /// Pulls the chunk; false when the store's history has nothing after the cursor.
    func run() throws -> Bool {
        guard let (transactions, large) = try readTransactions() else { return false }
        if state.marks == nil { state.marks = member.pushMarks }
        if state.held == nil { state.held = Set(try hub.conflicts(store: member.name, includingResolved: false).map(\.globalIdentifier)) }
        for (index, transaction) in transactions.enumerated() {
            // The base moves with each push the store received (no echo: pushes are not applied back).
            for mark in state.marks! where mark.storePosition < transaction.token.position { covered.base = max(covered.base, mark.hubPosition) }
            if transaction.author == SyncGroup.author {
                if let position = transaction.contextName.flatMap(SyncGroup.pushedPosition) { covered.base = max(covered.base, position) }
            } else if let start = large[index] {
                applicationSeen = true
                try settleInParts(transaction, after: start)
            } else {
                applicationSeen = true
                let changes = transaction.changes.filter { !state.held!.contains($0.globalIdentifier) }.map(StoreChange.init)
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
        if !applicationSeen && covered.pulledThrough - state.committed.pulledThrough < SyncGroup.idleAdvanceStep {
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
            state.cursor = covered
            return true
        }
        // (A store transaction settled in parts last committed it all.)
        if !batch.isEmpty || covered != state.cursor { try commit() }
        return true
    }

    /// The chunk's transactions: a scan of them with nothing decoded, then
    /// the application transactions among them read whole in their place
    /// (the engine's own pushes only move the base), except those of more
    /// row changes than a chunk when the hub takes a transaction in parts:
    /// those are returned as scanned, with the position before each, to be
    /// read part by part. Nil when there is nothing after the cursor.
    private func readTransactions() throws -> ([PersistentHistoryTransaction], large: [Int: Int64])? {
        let scan = PersistentHistoryChangeRequest.fetchHistory(after: member.token(state.cursor.pulledThrough))
        scan.resultType = .transactionsOnly
        scan.changeLimit = group.chunkChanges
        let transactions = try member.coordinator.execute(scan).transactions
        guard !transactions.isEmpty else { return nil }
        var chunk = transactions
        var runStart = state.cursor.pulledThrough, runFirst = 0, runLength = 0, previous = state.cursor.pulledThrough
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
            if transaction.author == SyncGroup.author {
                try readRun()
            } else if hub.takesTransactionsInParts && transaction.token.position - previous > Int64(group.chunkChanges) {
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
        return (chunk, large)
    }

    /// Commits the batch with the cursor it covers.
    func commit() throws {
        batch.cursor = covered
        do {
            try hub.commit(batch)
        } catch {
            throw group.hubFailure(error, pulling: member)
        }
        group.statistics.hubCommits += 1
        noteBatchSize()
        state.cursor = covered
        state.committed = covered
        state.moved = true
        batch = HubBatch(origin: member.name)
        touched = []
    }

    func noteBatchSize() {
        group.statistics.largestPullBatch = max(group.statistics.largestPullBatch, batch.inserts.count + batch.updates.count + batch.deletes.count)
    }

    /// Brings the hub's log of changes since `base` up to date, once per chunk.
    func refreshLog(_ base: Int64) throws {
        guard !logRefreshed else { return }
        var log = state.hubLog ?? [:]
        let from = state.hubLog == nil ? base : state.logThrough
        let through = try hub.forEachChangePage(after: from, excludingOrigin: member.name, changeLimit: group.chunkChanges) { page in
            for change in page { log[change.globalIdentifier, default: []].append(change) }
            return true
        }
        state.hubLog = log
        state.logThrough = through
        logRefreshed = true
    }

    /// Settles changes against the hub into the batch. `presentHere`:
    /// objects this store transaction inserted in earlier parts (written to
    /// the hub, or waiting for the last part), settled as objects the hub has.
    func settleAll(_ changes: [StoreChange], base: Int64, presentHere: Set<UUID> = []) throws {
        let states = try hub.states(of: changes.map(\.globalIdentifier))
        for change in changes {
            let gid = change.globalIdentifier
            let log = (state.hubLog![gid] ?? []).filter { $0.position > base && $0.origin != member.name }
            let hubState = states[gid] ?? (presentHere.contains(gid) ? ObjectState(entityName: change.entity.name, values: [:]) : nil)
            try settle(change, base: base, hubState: hubState, hubChanges: log)
        }
        // A conflict holds the object: the store's later changes to it wait for the resolution.
        for conflict in batch.newConflicts { state.held!.insert(conflict.globalIdentifier) }
    }
}
