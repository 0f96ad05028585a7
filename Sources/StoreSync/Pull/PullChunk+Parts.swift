import Foundation
import ObjectGraph

/// A store transaction of more row changes than a chunk, settled in parts
/// (docs/SYNC.md "Settled in parts").
extension PullChunk {
    /// Reads the transaction a chunk of rows at a time, twice: first to
    /// note where each object's changes end (`PartedTransactionPlan`), then
    /// to settle each object's changes once, folded (`StoreChange.folding`),
    /// exactly as reading it whole would. Each part is written to the hub
    /// before the next is read and dropped; the last part commits the
    /// cursor. All parts are one hub transaction (`takesTransactionsInParts`):
    /// a failure between them leaves the hub and the cursor as they were.
    func settleInParts(_ transaction: PersistentHistoryTransaction, after start: Int64) throws {
        // What came before it in the chunk is its own hub commit, so the
        // parts never meet another transaction's objects in one batch
        // (nothing to commit yet: its cursor goes with the last part).
        if !batch.isEmpty { try commit() }
        try refreshLog(covered.base)
        let base = covered.base
        let end = transaction.token.position
        var from = start
        var parts = 0
        var deletes: [UUID] = []
        // Objects this transaction inserted at the hub in earlier parts,
        // and what waits for the last part (see holdBackForwardReferences).
        var inserted = Set<UUID>()
        var waiting = HubBatch(origin: member.name)
        var plan = PartedTransactionPlan()
        while from < end {
            let part = try readPart(of: transaction, after: from)
            plan.note(part.changes.map(StoreChange.init))
            from = part.token.position
        }
        from = start
        // Changes read in a part before the one they are settled in, folded.
        var folding: [UUID: StoreChange] = [:]
        while from < end {
            let part = try readPart(of: transaction, after: from)
            from = part.token.position
            var ready: [StoreChange] = []
            for change in part.changes where !state.held!.contains(change.globalIdentifier) {
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
            if from >= end {
                ready += folding.values.filter { !state.held!.contains($0.globalIdentifier) }
                folding = [:]
            }
            try settleAll(ready, base: base, presentHere: inserted.union(waiting.inserts.map(\.0)))
            noteBatchSize()
            guard from < end else { break }
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
                throw group.hubFailure(error, pulling: member)
            }
            batch = HubBatch(origin: member.name)
        }
        covered.pulledThrough = end
        batch.deletes = deletes + batch.deletes
        batch.inserts = waiting.inserts + batch.inserts
        batch.updates = waiting.updates + batch.updates
        try commit()
        group.statistics.partedTransactions += 1
        group.statistics.transactionParts += parts
    }

    /// The next part of `transaction` after position `from`: at most a
    /// chunk of its row changes, never past its scanned end (a foreign
    /// writer's run there may have grown since).
    private func readPart(of transaction: PersistentHistoryTransaction, after from: Int64) throws -> PersistentHistoryTransaction {
        let request = PersistentHistoryChangeRequest.fetchHistory(after: member.token(from))
        request.fetchLimit = 1
        request.changeLimit = Int(min(Int64(group.chunkChanges), transaction.token.position - from))
        request.cutsTransactions = true
        guard let part = try member.coordinator.execute(request).transactions.first,
              part.transactionNumber == transaction.transactionNumber, part.token.position > from,
              part.token.position <= transaction.token.position else {
            throw CoreDataError(.persistentStoreOperation, "the history of store \(member.name) changed while it was read (after position \(from))")
        }
        return part
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
    func holdBackForwardReferences(_ part: inout HubBatch, inserted: inout Set<UUID>, waiting: inout HubBatch) throws {
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
}
