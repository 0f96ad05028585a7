/// One property's old and new value; relationships hold object IDs.
///
/// ```swift
/// if let salary = change.changes["salary"] { print(salary.oldValue ?? "nil", "→", salary.newValue ?? "nil") }
/// ```
public struct PropertyChange: @unchecked Sendable {
    public var oldValue: Any?
    public var newValue: Any?

    public init(oldValue: Any?, newValue: Any?) {
        self.oldValue = oldValue
        self.newValue = newValue
    }
}
