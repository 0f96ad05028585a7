import Foundation
import ObjectGraph

/// One store of a sync group: where it is and how its conflicts are settled.
public struct SyncStoreConfiguration: Sendable {
    /// A name unique in the group (used in status, logs and the hub's bookkeeping).
    public var name: String
    public var url: URL
    public var policy: SyncPolicy
    /// The model configuration the store holds (nil: the whole model).
    public var configurationName: String?

    public init(name: String, url: URL, policy: SyncPolicy, configurationName: String? = nil) {
        self.name = name
        self.url = url
        self.policy = policy
        self.configurationName = configurationName
    }
}

/// A sync group: stores of one model kept identical through one hub.
///
/// ```swift
/// let configuration = SyncGroupConfiguration(name: "notes", model: model,
///     stateDirectory: URL(fileURLWithPath: "/var/lib/storesyncd/notes"),
///     stores: [SyncStoreConfiguration(name: "app", url: appURL, policy: .storeTrump),
///              SyncStoreConfiguration(name: "web", url: webURL, policy: .objectTrump)])
/// let group = try SyncGroup(configuration: configuration)
/// try group.runRound()
/// ```
public struct SyncGroupConfiguration: @unchecked Sendable {
    public var name: String
    public var model: ManagedObjectModel
    /// Where the embedded hub (`hub.sqlite`) lives.
    public var stateDirectory: URL
    public var stores: [SyncStoreConfiguration]
    /// History kept after every party has moved past it (seconds; 0 purges at once).
    public var historyRetention: TimeInterval

    public init(name: String, model: ManagedObjectModel, stateDirectory: URL, stores: [SyncStoreConfiguration],
                historyRetention: TimeInterval = 7 * 24 * 3600) {
        self.name = name
        self.model = model
        self.stateDirectory = stateDirectory
        self.stores = stores
        self.historyRetention = historyRetention
    }
}

extension SyncGroupConfiguration {
    /// The group's embedded hub file, for tools that read it (`storesyncctl query GROUP`).
    ///
    /// ```swift
    /// let store = SQLiteStore(model: configuration.hubModel, configurationName: nil, url: configuration.hubURL,
    ///                         options: [PersistentStore.readOnlyOption: true])
    /// ```
    public var hubURL: URL { stateDirectory.appendingPathComponent("hub.sqlite") }

    /// The model the hub is written with: the group's model and the engine's
    /// bookkeeping entities.
    public var hubModel: ManagedObjectModel { EmbeddedHub.hubModel(model) }
}
