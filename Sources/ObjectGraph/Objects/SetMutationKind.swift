/// The kinds of set mutation a to-many change announces (TM-06).
public enum SetMutationKind: Sendable { case union, minus, intersect, set }
