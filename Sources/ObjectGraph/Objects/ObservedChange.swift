/// One change delivered to an observer of a managed object's key (KVO-01):
/// old and new values for attributes and to-ones, the mutation kind and the
/// objects involved for to-many changes (TM-08).
///
/// ```swift
/// let token = dept.addObserver(forKey: "employees") { change in
///     if change.kind == .insertion { print("hired", change.objects) }
/// }
/// ```
public struct ObservedChange {
    public enum Kind: Sendable { case setting, insertion, removal, replacement }
    public let object: ManagedObject
    public let key: String
    public let kind: Kind
    public let oldValue: Any?
    public let newValue: Any?
    /// For to-many mutations: the objects added or removed.
    public let objects: [ManagedObject]
}
