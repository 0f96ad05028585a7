/// Keeps an observation alive; `cancel()` (or dropping every reference) ends it.
public final class ObservationToken {
    private var onCancel: (() -> Void)?
    init(onCancel: @escaping () -> Void) { self.onCancel = onCancel }
    public func cancel() { onCancel?(); onCancel = nil }
    deinit { cancel() }
}
