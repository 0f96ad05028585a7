import Foundation

/// Where a store stands with the hub. Committed with the hub's data, so a
/// crash never separates what was applied from the cursor that says so.
public struct SyncCursor: Sendable, Equatable {
    public var store: String
    /// The store's history position pulled through.
    public var pulledThrough: Int64
    /// The hub position the store's changes after `pulledThrough` are based
    /// on (the last push the store had received there).
    public var base: Int64
    /// The hub position last pushed to the store (a copy: the store's own metadata is authoritative).
    public var pushedThrough: Int64
    /// True until the store has received the hub's whole contents once.
    public var needsFullPush: Bool

    public init(store: String, pulledThrough: Int64, base: Int64, pushedThrough: Int64, needsFullPush: Bool) {
        self.store = store
        self.pulledThrough = pulledThrough
        self.base = base
        self.pushedThrough = pushedThrough
        self.needsFullPush = needsFullPush
    }
}

/// A hub change to one object, as conflict detection reads it.
public struct HubChange: @unchecked Sendable {
    public var position: Int64
    /// The store whose pull wrote it (nil: a resolution or bootstrap of no store).
    public var origin: String?
    public var globalIdentifier: UUID
    public var entityName: String
    public var isInsert: Bool
    public var isDelete: Bool
    /// Attributes and to-ones changed, with their values before.
    public var changedProperties: [String: Any?]

    /// Public, so a hub in another module can hand back its history.
    ///
    /// ```swift
    /// HubChange(position: 7, origin: "s1", globalIdentifier: gid, entityName: "Record",
    ///           isInsert: false, isDelete: false, changedProperties: ["a": Int32(1)])
    /// ```
    public init(position: Int64, origin: String?, globalIdentifier: UUID, entityName: String, isInsert: Bool, isDelete: Bool,
                changedProperties: [String: Any?]) {
        self.position = position
        self.origin = origin
        self.globalIdentifier = globalIdentifier
        self.entityName = entityName
        self.isInsert = isInsert
        self.isDelete = isDelete
        self.changedProperties = changedProperties
    }
}

/// Everything one hub transaction writes: objects, the cursor that says
/// what they came from, conflicts and pending pushes. All or nothing.
public struct HubBatch: @unchecked Sendable {
    /// The store the batch applies changes from (its pull), or nil.
    public var origin: String?
    public var inserts: [(UUID, ObjectState)] = []
    public var updates: [(UUID, [String: SyncValue])] = []
    public var deletes: [UUID] = []
    /// Cursors written with the batch (a pull's own; several when the
    /// bookkeeping of a round's pushes is committed together).
    public var cursors: [SyncCursor] = []
    /// The first of `cursors`; setting it replaces that store's cursor in the batch.
    public var cursor: SyncCursor? {
        get { cursors.first }
        set {
            guard let newValue else { cursors = []; return }
            cursors.removeAll { $0.store == newValue.store }
            cursors.insert(newValue, at: 0)
        }
    }
    public var newConflicts: [SyncConflict] = []
    public var resolvedConflicts: [(Int64, ConflictResolution)] = []
    /// Objects a store must receive from the hub whatever its cursor says.
    public var pendingAdded: [(store: String, object: UUID)] = []
    public var pendingRemoved: [(store: String, object: UUID)] = []

    public init(origin: String?) { self.origin = origin }

    public var isEmpty: Bool {
        inserts.isEmpty && updates.isEmpty && deletes.isEmpty && cursors.isEmpty && newConflicts.isEmpty
            && resolvedConflicts.isEmpty && pendingAdded.isEmpty && pendingRemoved.isEmpty
    }
}

/// The hub of a sync group: the replica that serialises every change and
/// keeps what the engine needs to decide conflicts once. The engine
/// (`SyncGroup`) makes every decision; a hub stores and answers. The
/// embedded hub is an ObjectGraph SQLite store (`EmbeddedHub`); a hub in a
/// database server implements the same protocol.
public protocol SyncHub: AnyObject {
    /// How messages name the hub ("the hub /var/lib/storesync/notes/hub.sqlite").
    var displayName: String { get }
    /// Runs `body`, whose hub reads and commits decide together (a pull's
    /// chunk: read the hub's changes and states, settle, commit), as one
    /// hub transaction. A hub shared by several processes (PostgreSQL) runs
    /// it serialisable and may run `body` again after a serialisation
    /// failure, so `body` must start from the state it had. A hub with one
    /// writer (the embedded hub) just runs it.
    ///
    /// ```swift
    /// let position = try hub.transaction {
    ///     let batch = decide(try hub.states(of: objects))
    ///     return try hub.commit(batch)
    /// }
    /// ```
    func transaction<T>(_ body: () throws -> T) throws -> T
    /// Runs `body`, whose hub reads must all see the hub at one position (a
    /// round's pushes: the position they record and the states they write
    /// must agree), against one snapshot. A hub nobody else writes just runs it.
    func snapshot<T>(_ body: () throws -> T) throws -> T
    /// Whether commits inside one `transaction { }` are parts of one hub
    /// transaction (see the default below); false unless a hub says so.
    var takesTransactionsInParts: Bool { get }
    /// The newest position of the hub's history.
    func currentPosition() throws -> Int64
    /// The hub's committed state of an object (nil: it does not have it).
    func state(of object: UUID) throws -> ObjectState?
    /// The committed states of many objects (those the hub has), read together.
    func states(of objects: [UUID]) throws -> [UUID: ObjectState]
    /// Every object the hub holds (for a store's first, full push).
    func allObjects() throws -> [UUID]
    /// The hub's changes after a position, in order (expired history throws 134301).
    func changes(after position: Int64) throws -> [HubChange]
    /// One page of the hub's changes after a position: whole hub transactions
    /// of about `changeLimit` row changes at most (one larger transaction
    /// comes alone), leaving out, unread, the transactions whose origin is
    /// `excludingOrigin`. `through` is the position the page covers (the
    /// last transaction read or skipped; `position` when there is nothing
    /// after it). Expired history throws 134301.
    func changes(after position: Int64, excludingOrigin: String?, changeLimit: Int) throws -> (changes: [HubChange], through: Int64)
    func cursor(for store: String) throws -> SyncCursor?
    func pending(for store: String) throws -> Set<UUID>
    func conflicts(store: String?, includingResolved: Bool) throws -> [SyncConflict]
    /// Commits a batch atomically; returns the hub position after it.
    @discardableResult
    func commit(_ batch: HubBatch) throws -> Int64
    /// Deletes the hub's history through a position, only what was
    /// committed before `committedBefore` when given (the retention floor).
    func purgeHistory(through position: Int64, committedBefore: Date?) throws
    func close() throws
}

extension SyncHub {
    /// One writer: nothing can come between the reads and the commit.
    public func transaction<T>(_ body: () throws -> T) throws -> T { try body() }
    /// Whether several commits inside one `transaction { }` make one hub
    /// transaction whose later reads see the earlier commits, with a
    /// reference to an object a later commit brings set before it ends. The
    /// engine then settles a store transaction larger than a chunk in parts
    /// (docs/SYNC.md, "Pull"); otherwise it reads it whole. The embedded hub
    /// does; a hub without it need not implement anything.
    ///
    /// ```swift
    /// if hub.takesTransactionsInParts { /* settle a huge store transaction page by page */ }
    /// ```
    public var takesTransactionsInParts: Bool { false }
    /// One writer: the hub only changes by the caller's own commits.
    public func snapshot<T>(_ body: () throws -> T) throws -> T { try body() }

    public var displayName: String { "the hub" }

    /// Every change after `position`, read page by page.
    public func changes(after position: Int64) throws -> [HubChange] {
        var out: [HubChange] = []
        try forEachChangePage(after: position, excludingOrigin: nil, changeLimit: 10_000) { page in
            out += page
            return true
        }
        return out
    }
}
