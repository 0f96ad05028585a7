/// What changed an object's state wholesale, passed to
/// `awake(fromSnapshotEvents:)` with Core Data's raw values (LIFE-16).
///
/// ```swift
/// override func awake(fromSnapshotEvents events: SnapshotEventType) {
///     super.awake(fromSnapshotEvents: events)
///     if events.contains(.undoDeletion) { rebuildCaches() }
/// }
/// ```
public struct SnapshotEventType: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let undoInsertion = SnapshotEventType(rawValue: 1 << 1)
    public static let undoDeletion = SnapshotEventType(rawValue: 1 << 2)
    public static let undoUpdate = SnapshotEventType(rawValue: 1 << 3)
    public static let rollback = SnapshotEventType(rawValue: 1 << 4)
    public static let refresh = SnapshotEventType(rawValue: 1 << 5)
    public static let mergePolicy = SnapshotEventType(rawValue: 1 << 6)
}
