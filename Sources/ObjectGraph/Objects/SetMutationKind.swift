/// The kinds of set mutation a to-many change announces (TM-06).
///
/// ```swift
/// willChangeValue(forKey: "employees", withSetMutation: .union, using: [newHire])
/// ```
public enum SetMutationKind: Sendable { case union, minus, intersect, set }
