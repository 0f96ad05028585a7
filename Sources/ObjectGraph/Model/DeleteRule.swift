/// What happens to a relationship's destination when its source is deleted,
/// numbered as Core Data's `NSDeleteRule` (DEL-01…DEL-04).
///
/// ```swift
/// employees.deleteRule = .deny
/// ```
public enum DeleteRule: UInt, CaseIterable, Sendable {
    case noAction = 0
    case nullify = 1
    case cascade = 2
    case deny = 3

    /// The name Xcode writes in a model file's `deletionRule` attribute.
    public var xcodeName: String {
        switch self {
        case .noAction: return "No Action"
        case .nullify: return "Nullify"
        case .cascade: return "Cascade"
        case .deny: return "Deny"
        }
    }

    public init?(xcodeName: String) {
        guard let match = DeleteRule.allCases.first(where: { $0.xcodeName == xcodeName }) else { return nil }
        self = match
    }
}
