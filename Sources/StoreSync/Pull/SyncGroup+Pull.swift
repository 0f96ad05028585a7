import Foundation
import ObjectGraph

extension SyncGroup {
    /// Applies the store's history after its cursor to the hub: the store
    /// transactions are read in chunks (`PullChunk`) and each chunk is
    /// committed in one hub transaction together with the cursor that says
    /// what it covers.
    @discardableResult
    func pull(_ member: Member) throws -> Bool {
        guard let hubCursor = try hub.cursor(for: member.name) else {
            try bootstrap(member)
            return true
        }
        // What the hub holds, and where this pull starts: further on when an
        // earlier pull found only the engine's own pushes and kept its advance
        // in memory (valid while the hub's cursor is the one it started from).
        var state = PullState(cursor: effectiveCursor(member, hubCursor), committed: hubCursor)
        member.deferredCursor = nil
        defer { member.context.performAndWait { member.access.reset() } }
        // Each chunk reads the hub, settles and commits in one hub
        // transaction; a shared hub may run it again after a serialisation
        // failure, from the state it started with.
        var more = true
        while more {
            let start = state
            var attempts = 0
            more = try hub.transaction {
                attempts += 1
                if attempts > 1 {
                    state = start
                    member.context.performAndWait { member.access.reset() }
                }
                let chunk = PullChunk(self, member, state: state)
                defer { state = chunk.state }
                return try chunk.run()
            }
        }
        if state.cursor.pulledThrough != state.committed.pulledThrough || state.cursor.base != state.committed.base {
            member.deferredCursor = (state.committed, state.cursor)
        }
        return state.moved
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

    /// A hub commit of a pull that failed, said as the hub's failure (a full
    /// disk, say), keeping Core Data's code: the store is fine, and nothing
    /// moved (the cursor commits with the batch).
    func hubFailure(_ error: Error, pulling member: Member) -> CoreDataError {
        let code = (error as? CoreDataError)?.code ?? .persistentStoreSave
        let message = (error as? CoreDataError)?.message ?? "\(error)"
        return CoreDataError(code, "\(hub.displayName) could not commit the changes of store \(member.name): \(message)",
                             userInfo: [CoreDataError.underlyingErrorKey: error])
    }

    /// "push:POSITION" → POSITION.
    static func pushedPosition(_ contextName: String) -> Int64? {
        contextName.hasPrefix("push:") ? Int64(contextName.dropFirst(5)) : nil
    }
}
