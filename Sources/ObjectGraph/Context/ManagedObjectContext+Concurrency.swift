import Foundation

/// Swift concurrency for contexts: Core Data's `perform(schedule:_:) async`.
///
/// Managed objects stay confined to their context's queue: pass
/// `ManagedObjectID`s (which are `Sendable`) between tasks and look the
/// objects up with `object(with:)` or `existingObject(with:)` inside the
/// other context's `perform`.
extension ManagedObjectContext {
    /// When `perform(schedule:_:)` runs its block (Core Data's `ScheduledTaskType`).
    public enum ScheduledTaskType: Sendable {
        /// At once when the caller is already on the context's queue,
        /// otherwise enqueued (the default).
        case immediate
        /// Always after the blocks already on the context's queue.
        case enqueued
    }

    /// Runs `block` on the context's queue and returns its result to the
    /// awaiting task. The end of the block is an end of event: pending
    /// changes are processed, as with `perform(_:)` (MOC-PP-02).
    ///
    /// ```swift
    /// let titles = try await context.perform {
    ///     try context.fetch(FetchRequest(entityName: "Note")).compactMap { try $0.value(forKey: "title") as? String }
    /// }
    /// ```
    // Runs on the caller's executor (`nonsending`), not the global one: a
    // main-queue context awaited from the main actor is on its queue, which
    // is what `.immediate` looks at.
    nonisolated(nonsending)
    public func perform<T>(schedule: ScheduledTaskType = .immediate, _ block: @escaping () throws -> T) async rethrows -> T {
        // `rethrows` cannot throw an error caught from another queue; the
        // helper's `rescue` parameter does it (the Dispatch overlay's
        // `sync` uses the same device).
        try await performHelper(schedule: schedule, block, rescue: { throw $0 })
    }

    nonisolated(nonsending)
    private func performHelper<T>(schedule: ScheduledTaskType, _ block: @escaping () throws -> T,
                                  rescue: (Error) throws -> T) async rethrows -> T {
        let result: Result<T, Error>
        if schedule == .immediate && isOnQueue {
            result = Result { try block() }
            processPendingChanges()
        } else {
            // The box carries the result across queues; only one side
            // touches it at a time (written before resume, read after).
            result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, Error>, Never>) in
                let box = UncheckedSendableBox(block)
                queue.async { [self] in
                    withExtendedLifetime(self) {
                        let value = Result { try box.value() }
                        processPendingChanges()
                        continuation.resume(returning: value)
                    }
                }
            }
        }
        switch result {
        case .success(let value): return value
        case .failure(let error): return try rescue(error)
        }
    }
}

/// Moves a non-`Sendable` value to the context's queue, where it is used
/// alone: contexts confine their objects by queue at run time, which the
/// compiler cannot see.
struct UncheckedSendableBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
