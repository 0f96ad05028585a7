import Foundation
@testable import storesyncd
import XCTest

/// The rule by which file events become rounds (docs/DAEMON.md, "Change
/// detection"), with a clock, timer and runner driven by the test: the
/// first event on an idle store starts a round at once; a burst during a
/// round gives exactly one follow-up; rounds are at least `debounce` apart;
/// a round that leaves the store moved runs again; a failing store backs off.
final class StoreTriggerTests: XCTestCase {
    /// A fake loop: time only moves when the test says, the one timer fires
    /// when time passes its deadline, rounds finish when the test says.
    final class Harness {
        var now: TimeInterval = 100
        var deadline: TimeInterval?
        var fire: (() -> Void)?
        var pending: [(StoreTrigger.Outcome?) -> Void] = []
        var started: [TimeInterval] = []
        var trigger: StoreTrigger!

        init(gap: TimeInterval, minimumBackoff: TimeInterval = 0.5, maximumBackoff: TimeInterval = 4) {
            trigger = StoreTrigger(gap: gap, minimumBackoff: minimumBackoff, maximumBackoff: maximumBackoff,
                                   clock: { [unowned self] in now },
                                   arm: { [unowned self] delay, action in deadline = now + delay; fire = action },
                                   startRound: { [unowned self] done in started.append(now); pending.append(done) })
        }

        func advance(_ seconds: TimeInterval) {
            now += seconds
            if let deadline, now >= deadline, let fire {
                self.deadline = nil
                self.fire = nil
                fire()
            }
        }

        /// Ends the oldest round in flight.
        func finish(failed: Bool = false, storeMoved: Bool = false) {
            pending.removeFirst()(StoreTrigger.Outcome(failed: failed, storeMoved: storeMoved))
        }
    }

    func testFirstEventOnAnIdleStoreStartsARoundWithoutWaiting() {
        // A debounce of a whole second, yet the round starts at the event.
        let harness = Harness(gap: 1)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started, [100], "started at the event itself")
        XCTAssertNil(harness.deadline, "no timer was needed")
    }

    func testBurstDuringARoundGivesExactlyOneFollowUp() {
        let harness = Harness(gap: 0.005)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 1)
        // 50 events (a save writes -wal several times; many saves) while it runs.
        for _ in 0..<50 {
            harness.advance(0.001)
            harness.trigger.fileChanged()
        }
        XCTAssertEqual(harness.started.count, 1, "no round starts while one is in flight")
        harness.finish()
        // The gap (5 ms) has passed since the first round started: the follow-up starts at once.
        XCTAssertEqual(harness.started.count, 2, "one follow-up for the whole burst")
        harness.finish()
        harness.advance(1)
        XCTAssertEqual(harness.started.count, 2, "and nothing after it: the burst was covered")
        XCTAssertEqual(harness.trigger.rounds, 2)
    }

    func testEventsWhileARoundIsQueuedAreCoveredByIt() {
        // Queued and running look the same to the trigger: the runner has not
        // reported back, so the events owe one follow-up (the round may already read).
        let harness = Harness(gap: 0)
        harness.trigger.fileChanged()
        harness.trigger.fileChanged()
        harness.trigger.fileChanged()
        harness.finish()
        XCTAssertEqual(harness.started.count, 2)
        harness.finish()
        XCTAssertEqual(harness.started.count, 2)
    }

    func testFollowUpWaitsForTheGap() {
        let harness = Harness(gap: 0.05)
        harness.trigger.fileChanged()
        harness.advance(0.01)
        harness.trigger.fileChanged()
        harness.finish()
        XCTAssertEqual(harness.started.count, 1, "only 10 ms since the last start")
        XCTAssertEqual(harness.deadline ?? 0, 100.05, accuracy: 1e-9, "due one gap after the last start")
        // Events while the follow-up waits are covered by it.
        harness.trigger.fileChanged()
        harness.advance(0.02)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 1)
        harness.advance(0.02)
        XCTAssertEqual(harness.started.count, 2)
        XCTAssertEqual(harness.started[1], 100.05, accuracy: 1e-9)
        harness.finish()
        XCTAssertEqual(harness.started.count, 2)
    }

    func testAnEventOnAnIdleStoreSoonAfterARoundWaitsOnlyTheRestOfTheGap() {
        let harness = Harness(gap: 0.05)
        harness.trigger.fileChanged()
        harness.advance(0.001)
        harness.finish()
        harness.advance(0.009)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 1)
        XCTAssertEqual(harness.deadline ?? 0, 100.05, accuracy: 1e-9)
        harness.advance(0.04)
        XCTAssertEqual(harness.started.count, 2)
    }

    /// The lost delete of an earlier attempt: the round read the store just
    /// before the writer's commit became visible, and no event followed.
    func testARoundThatLeavesTheStoreMovedRunsAgain() {
        let harness = Harness(gap: 0)
        harness.trigger.fileChanged()
        harness.finish(storeMoved: true)
        XCTAssertEqual(harness.started.count, 2, "confirmed: the store moved, so once more")
        harness.finish(storeMoved: false)
        XCTAssertEqual(harness.started.count, 2)
    }

    func testConfirmationsStopAfterALimitWithoutNewEvents() {
        let harness = Harness(gap: 0)
        harness.trigger.fileChanged()
        for _ in 0..<20 { if !harness.pending.isEmpty { harness.finish(storeMoved: true) } }
        XCTAssertEqual(harness.started.count, 1 + StoreTrigger.maximumConfirmations,
                       "a store the pull cannot empty is left to the next event or the safety timer")
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 2 + StoreTrigger.maximumConfirmations, "a new event starts again")
    }

    /// BadInputTests' corrupt stores: a failing store must not re-trigger
    /// itself without pause, nor stop being tried.
    func testAFailingStoreBacksOffAndRecovers() {
        let harness = Harness(gap: 0.005, minimumBackoff: 0.5, maximumBackoff: 4)
        harness.trigger.fileChanged()
        // The failing round touches the store's files: an event during it.
        harness.trigger.fileChanged()
        harness.finish(failed: true, storeMoved: true)
        XCTAssertEqual(harness.started.count, 1, "no round straight after a failure")
        XCTAssertEqual(harness.trigger.backoff, 0.5)
        var last = harness.started.last!
        // Binary fractions only: the fake clock adds them exactly.
        for delay: TimeInterval in [0.5, 1, 2, 4, 4] {
            let before = harness.started.count
            harness.advance(delay / 2)
            XCTAssertEqual(harness.started.count, before, "not before \(delay) s")
            harness.advance(delay / 2)
            XCTAssertEqual(harness.started.count, before + 1, "next round \(delay) s after the last start")
            XCTAssertEqual(harness.started.last! - last, delay, accuracy: 1e-9)
            last = harness.started.last!
            harness.trigger.fileChanged()
            harness.finish(failed: true)
        }
        // Fixed: the next round succeeds, the back-off resets, events start rounds at once again.
        harness.advance(4)
        harness.finish()
        XCTAssertEqual(harness.trigger.backoff, 0)
        harness.advance(1)
        let before = harness.started.count
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, before + 1)
    }

    /// BadInputTests' corrupt store: another round (start-up, safety timer)
    /// found it failed; the operator removes it and moves a good file in.
    /// The removal's event must not reopen it in between (which would create
    /// an empty store where the good file was to go): it waits the minimum
    /// back-off after the event.
    func testAnEventOnAStoreOtherRoundsFoundFailedWaitsTheMinimumBackoff() {
        let harness = Harness(gap: 0.005, minimumBackoff: 0.5, maximumBackoff: 4)
        harness.trigger.storeSeen(failed: true)
        harness.advance(2)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 0, "not at the event")
        harness.trigger.fileChanged()
        harness.advance(0.25)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 0, "later events do not push it back either")
        harness.advance(0.25)
        XCTAssertEqual(harness.started, [102.5], "one round, the minimum back-off after the first event")
        harness.finish()
        // Joined: rounds at once again.
        harness.advance(1)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 2)
        harness.finish()
        // Another round found it well again before this one's: nothing held back.
        harness.trigger.storeSeen(failed: true)
        harness.trigger.storeSeen(failed: false)
        harness.advance(1)
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 3)
    }

    func testADroppedRoundOwesNothing() {
        let harness = Harness(gap: 0)
        harness.trigger.fileChanged()
        harness.trigger.fileChanged()
        harness.pending.removeFirst()(nil)
        XCTAssertEqual(harness.started.count, 1, "the group closed: nothing follows")
        harness.trigger.close()
        harness.trigger.fileChanged()
        XCTAssertEqual(harness.started.count, 1)
    }
}
