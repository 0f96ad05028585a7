import Foundation
import ObjectGraph

/// What one pull carries from chunk to chunk (docs/SYNC.md "Pull"). A
/// value, so that a chunk a shared hub runs again after a serialisation
/// failure starts from the state taken before it by plain assignment.
struct PullState {
    /// Where the next chunk starts: ahead of `committed` when an advance
    /// over the engine's own pushes is kept in memory, not committed.
    var cursor: SyncCursor
    /// The store's cursor as the hub holds it.
    var committed: SyncCursor
    /// Whether a chunk committed anything to the hub.
    var moved = false
    /// Hub positions the store received by pushes that changed nothing in
    /// it, read once per pull.
    var marks: [(storePosition: Int64, hubPosition: Int64)]?
    /// Objects with an unresolved conflict for the store, read once per
    /// pull and grown by the conflicts the pull records: their later changes wait.
    var held: Set<UUID>?
    /// The hub's changes since the store's base that did not come from it,
    /// by object, read once per pull and brought up to date at the start of
    /// each chunk (other hosts commit between chunks on a shared hub), and
    /// the hub position it is read through.
    var hubLog: [UUID: [HubChange]]?
    var logThrough: Int64 = 0

    init(cursor: SyncCursor, committed: SyncCursor) {
        self.cursor = cursor
        self.committed = committed
    }
}
