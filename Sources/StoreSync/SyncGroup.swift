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
    func openWaitingStores() {
        guard !unopened.isEmpty else { return }
        var still: [(configuration: SyncStoreConfiguration, reason: String)] = []
        for (store, _) in unopened {
            do {
                members.append(try Member(store, group: configuration.name, model: configuration.model))
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
    func attempt(_ member: Member, clearsFailure: Bool = true, _ body: () throws -> Bool) -> Bool {
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
    func pushAll(keepingFailureOf pullFailed: Set<String>) -> Bool {
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

    func pushAllNow(keepingFailureOf pullFailed: Set<String>) -> Bool {
        var runs: [PushRun] = []
        for member in members where !member.paused {
            _ = attempt(member, clearsFailure: !pullFailed.contains(member.name)) {
                if let run = try pushPlan(member) { runs.append(run) }
                return false
            }
        }
        return executePushes(runs)
    }

    public func pause(_ name: String) throws { try member(name).paused = true }

    public func resume(_ name: String) throws { try member(name).paused = false }

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

    /// What a round's pushes leave for the hub: the positions they took the
    /// stores to and the pending objects they wrote. Committed in one hub
    /// transaction after the round's pushes (`commitPushBookkeeping`); the
    /// store's own metadata is what counts, so losing it in a crash only
    /// means pending objects are written again.
    var pushBookkeeping: [String: (pushedThrough: Int64, fullPushDone: Bool, pendingWritten: Set<UUID>)] = [:]

    /// How far the hub may move past a store that receives nothing before its
    /// received position is advanced anyway.
    static let idleAdvanceStep: Int64 = 256

    public func close() throws {
        for member in members {
            for store in member.coordinator.persistentStores { try member.coordinator.remove(store) }
        }
        try hub.close()
    }
}
