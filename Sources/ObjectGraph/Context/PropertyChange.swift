/// One property's old and new value.
public struct PropertyChange: @unchecked Sendable {
    public var oldValue: Any?
    public var newValue: Any?

    public init(oldValue: Any?, newValue: Any?) {
        self.oldValue = oldValue
        self.newValue = newValue
    }
}
