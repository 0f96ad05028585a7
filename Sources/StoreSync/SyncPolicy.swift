import ObjectGraph

/// How the hub settles a store's change to an object the hub changed since
/// the store last saw it: Core Data's merge policies, with the store's
/// change playing the in-memory object and the hub the persistent store
/// (docs/SYNC.md, "Policy table").
///
/// ```swift
/// let policy = try SyncPolicy(configurationName: "store-trump")   // .storeTrump
/// ```
public enum SyncPolicy: String, CaseIterable, Sendable, Codable {
    /// Applies nothing of the object; records a conflict and holds the
    /// object's later changes from that store until it is resolved.
    case error
    /// Conflicting properties keep the hub's value; the rest of the change applies.
    case storeTrump = "store-trump"
    /// Conflicting properties take the store's value; the rest applies too.
    case objectTrump = "object-trump"
    /// The store's object is taken whole.
    case overwrite
    /// The store's change to the object is dropped; the store gets the hub's object.
    case rollback

    /// The policy named as in the daemon's configuration file.
    public init(configurationName: String) throws {
        guard let policy = SyncPolicy(rawValue: configurationName) else {
            throw CoreDataError(.persistentStoreOperation,
                                "unknown merge policy '\(configurationName)'; expected one of \(SyncPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self = policy
    }

    /// The Core Data merge policy this one follows.
    public var mergePolicy: MergePolicy {
        switch self {
        case .error: return .error
        case .storeTrump: return .mergeByPropertyStoreTrump
        case .objectTrump: return .mergeByPropertyObjectTrump
        case .overwrite: return .overwrite
        case .rollback: return .rollback
        }
    }
}
