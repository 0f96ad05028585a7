import Foundation
import ObjectGraph

extension SyncGroup {
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
        return try member.firstApplicationTransaction(after: max(cursor.pulledThrough, member.checkedThrough)) != nil
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
                // The oldest application transaction not pulled.
                if let first = try member.firstApplicationTransaction(after: seen) {
                    lag = max(0, Date().timeIntervalSince(first.timestamp))
                }
            }
            // Behind the hub: data changes it has not received (the hub's own
            // bookkeeping moves its position too, so positions alone do not say).
            var behind = cursor == nil || cursor?.needsFullPush == true
            if let cursor, !behind, cursor.pushedThrough < hubPosition {
                let pushed = member.receivedPosition ?? cursor.pushedThrough
                behind = try !hub.pending(for: member.name).isEmpty
                // Page by page, the store's own pulls skipped unread, until one change is found.
                if !behind { behind = try hub.hasChanges(after: pushed, excludingOrigin: member.name, changeLimit: chunkChanges) }
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
}
