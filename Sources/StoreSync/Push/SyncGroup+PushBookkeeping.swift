import Foundation
import ObjectGraph

extension SyncGroup {
    func notePush(_ member: Member, hubPosition: Int64, fullPushDone: Bool, pendingWritten: Set<UUID>) {
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
    func writePushBookkeeping(_ entries: [String: (pushedThrough: Int64, fullPushDone: Bool, pendingWritten: Set<UUID>)]) throws -> Bool {
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

    /// Records a push that changed no row in the store (see `StoreSyncMetadata`).
    func recordPushMark(_ member: Member, storePosition: Int64, hubPosition: Int64) throws {
        let cursor = try hub.cursor(for: member.name)
        // Marks the pull has passed are no longer needed.
        var marks = member.pushMarks.filter { $0.storePosition >= (cursor?.pulledThrough ?? 0) }
        marks.append((storePosition, hubPosition))
        member.pushMarks = marks
        try member.store.save(StoreSaveRequest())
    }
}
