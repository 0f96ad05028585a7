/// Keeps an observation alive; `cancel()` (or dropping every reference) ends it.
///
/// ```swift
/// var token: ObservationToken? = employee.addObserver(forKey: "salary") { _ in refresh() }
/// token = nil   // observation ends
/// ```
public final class ObservationToken {
    private var onCancel: (() -> Void)?
    init(onCancel: @escaping () -> Void) { self.onCancel = onCancel }
    public func cancel() { onCancel?(); onCancel = nil }
    deinit { cancel() }
}
