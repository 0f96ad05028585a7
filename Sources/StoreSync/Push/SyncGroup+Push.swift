import Foundation
import ObjectGraph

extension SyncGroup {
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
        let pushed = member.receivedPosition ?? 0
        let pending = try hub.pending(for: member.name)
        var full = cursor.needsFullPush
        if !full && pending.isEmpty {
            guard hubPosition > pushed else { return nil }
            // Anything for this store? Its own pulls are skipped unread.
            var found = false
            do {
                found = try hub.hasChanges(after: pushed, excludingOrigin: member.name, changeLimit: chunkChanges)
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
                    member.receivedPosition = hubPosition
                    do {
                        try recordPushMark(member, storePosition: before, hubPosition: hubPosition)
                    } catch {
                        member.receivedPosition = pushed
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
                    member.receivedPosition = run.pushed
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
    func pushTogether(_ runs: [PushRun], _ index: Int) throws {
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
                if try run.member.firstApplicationTransaction(after: max(run.cursor.pulledThrough, run.member.checkedThrough)) != nil {
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
    func hubStates(_ objects: [UUID]) throws -> [UUID: ObjectState] {
        do { return try hub.states(of: objects) } catch { throw HubReadFailure(underlying: error) }
    }
}
