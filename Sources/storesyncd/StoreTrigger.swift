import Dispatch
import Foundation

/// Turns one store's file events into rounds, on the loop thread.
///
/// Leading edge: the first event on an idle store starts a round at once
/// (waiting for quiet made every save at 100 saves/s wait the full
/// 0.5 s cap, docs/benchmarks/daemon.md). Events that arrive while that
/// round is queued or running are coalesced into exactly one follow-up
/// round after it ends, since the round may have read the store before
/// their commit. Two rounds start at least `gap` apart (the configuration's
/// `debounce`). While the store is failing (its last round, or any round of
/// the group, found it failed) a round waits `minimumBackoff` after the
/// event and a back-off after the last failure that doubles with each
/// failed round of its own up to `maximumBackoff`: a failing store whose
/// round touches its files cannot spin, and a store being replaced (removed,
/// then a new file moved in) is not reopened, and so created empty, in
/// between.
///
/// A round started by events may still have read the store just before a
/// writer's WAL commit became visible (the `-wal` write that woke us comes
/// before the commit lands in the shared index), and no later event comes
/// for it. The round reports whether the store still has application
/// changes after its pull cursor; if so it runs once more (at most
/// `maximumConfirmations` times in a row without a new event: a store the
/// pull cannot empty is left to the next event or the safety timer).
///
/// ```swift
/// let trigger = StoreTrigger(gap: 0.005, arm: { delay, fire in timer.start(after: delay, fire) }) { done in
///     runner.schedule(.store("s1")) { summary in loop.post { done(StoreTrigger.Outcome(summary, store: "s1")) } }
/// }
/// trigger.fileChanged()   // starts a round now
/// ```
final class StoreTrigger {
    /// How a round ended, as far as the trigger cares.
    struct Outcome: Equatable {
        /// The store failed in the round (or the round failed): back off.
        var failed: Bool
        /// After the round the store still had application changes after its pull cursor.
        var storeMoved: Bool

        init(failed: Bool, storeMoved: Bool) {
            self.failed = failed
            self.storeMoved = storeMoved
        }

        /// From a runner's summary; nil (the job was dropped) stays nil.
        init?(_ summary: RoundSummary?, store: String) {
            guard let summary else { return nil }
            let state = summary.stores.first { $0.name == store }
            failed = summary.error != nil || state?.state == .failed
            storeMoved = summary.unpulled.contains(store)
        }
    }

    let gap: TimeInterval
    let minimumBackoff: TimeInterval
    let maximumBackoff: TimeInterval
    static let maximumConfirmations = 5
    private let clock: () -> TimeInterval
    /// Starts (or restarts) the trigger's one timer.
    private let arm: (TimeInterval, @escaping () -> Void) -> Void
    /// Asks for a round; the trigger calls the handler it passes exactly
    /// once per request, with nil when the round was dropped.
    private let startRound: (@escaping (Outcome?) -> Void) -> Void

    /// A round was asked for and has not reported back (queued or running).
    private(set) var busy = false
    /// Events came while `busy`: one follow-up round is owed.
    private(set) var followUpOwed = false
    /// The timer is armed for the next round (the gap or back-off not over).
    private(set) var waiting = false
    private var lastStart = -TimeInterval.infinity
    private(set) var backoff: TimeInterval = 0
    /// The store failed in the last round that looked at it.
    private(set) var failing = false
    private var failedAt = -TimeInterval.infinity
    private var confirmations = 0
    private var closed = false
    /// Rounds asked for so far (tests, debug).
    private(set) var rounds = 0

    init(gap: TimeInterval, minimumBackoff: TimeInterval = 0.5, maximumBackoff: TimeInterval = 30,
         clock: @escaping () -> TimeInterval = StoreTrigger.monotonicSeconds,
         arm: @escaping (TimeInterval, @escaping () -> Void) -> Void,
         startRound: @escaping (@escaping (Outcome?) -> Void) -> Void) {
        self.gap = max(0, gap)
        self.minimumBackoff = minimumBackoff
        self.maximumBackoff = max(minimumBackoff, maximumBackoff)
        self.clock = clock
        self.arm = arm
        self.startRound = startRound
    }

    static func monotonicSeconds() -> TimeInterval { TimeInterval(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// A file event for the store.
    func fileChanged() {
        guard !closed else { return }
        confirmations = 0
        if busy {
            followUpOwed = true
        } else if !waiting {
            startWhenDue()
        }
        // Waiting: the round about to start has read nothing yet; it covers this event.
    }

    /// No rounds after this (the daemon stops or reloads).
    func close() { closed = true }

    /// The store's state as another round of the group found it (the
    /// safety timer's, the start-up round, a control request's).
    func storeSeen(failed: Bool) {
        guard failed != failing, !busy else { return }
        failing = failed
        if failed {
            failedAt = clock()
            backoff = max(backoff, minimumBackoff)
        } else {
            backoff = 0
        }
    }

    private func startWhenDue() {
        let now = clock()
        var due = lastStart + gap
        if failing { due = max(due, failedAt + backoff, now + minimumBackoff) }
        guard now < due else { return start() }
        waiting = true
        arm(due - now) { [weak self] in
            guard let self, waiting else { return }
            waiting = false
            start()
        }
    }

    private func start() {
        guard !closed else { return }
        busy = true
        followUpOwed = false
        lastStart = clock()
        rounds += 1
        var reported = false
        startRound { [weak self] outcome in
            guard let self, !reported else { return }
            reported = true
            finished(outcome)
        }
    }

    private func finished(_ outcome: Outcome?) {
        busy = false
        guard !closed, let outcome else {
            followUpOwed = false
            return
        }
        failing = outcome.failed
        if outcome.failed {
            backoff = min(maximumBackoff, backoff == 0 ? minimumBackoff : backoff * 2)
            failedAt = clock()
        } else {
            backoff = 0
        }
        if followUpOwed {
            startWhenDue()
        } else if outcome.storeMoved && !outcome.failed && confirmations < Self.maximumConfirmations {
            confirmations += 1
            startWhenDue()
        }
    }
}
