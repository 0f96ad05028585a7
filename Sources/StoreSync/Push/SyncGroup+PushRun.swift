import Foundation
import ObjectGraph

extension SyncGroup {
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
}
