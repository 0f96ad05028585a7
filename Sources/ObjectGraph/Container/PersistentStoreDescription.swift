import Foundation

/// How a `PersistentContainer` adds one store: Core Data's
/// `NSPersistentStoreDescription`, with its defaults (SQLite, automatic
/// lightweight migration on, added synchronously).
///
/// The flags are a view of `options` under the coordinator's own keys
/// (`NSReadOnlyPersistentStoreOption`, `NSPersistentStoreTimeoutOption`,
/// `NSSQLitePragmasOption`), except the two migration flags, which are kept
/// apart and written into the options only when the store is added, as Core
/// Data does: an explicit option under the same key wins.
///
/// ```swift
/// let description = PersistentStoreDescription(url: URL(fileURLWithPath: "/var/lib/app/Notes.sqlite"))
/// description.setOption(true as NSNumber, forKey: PersistentStore.persistentHistoryTrackingKey)
/// description.setValue("FULL", forPragmaNamed: "synchronous")
/// container.persistentStoreDescriptions = [description]
/// ```
public final class PersistentStoreDescription: CustomStringConvertible {
    /// The store type, `PersistentStoreCoordinator.sqliteStoreType` by default.
    public var type: String = PersistentStoreCoordinator.sqliteStoreType
    /// The model configuration the store holds; nil for every entity.
    public var configuration: String?
    /// Where the store lives; nil only for in-memory stores.
    public var url: URL?
    /// The options handed to `addPersistentStore(ofType:configurationName:at:options:)`.
    public private(set) var options: [String: Any] = [:]
    /// False (the default): `loadPersistentStores` adds the store before it
    /// returns; true: on a background queue, the handler called from there.
    public var shouldAddStoreAsynchronously = false
    /// True by default (unlike a bare coordinator): a store of an older model
    /// version is migrated when added (`NSMigratePersistentStoresAutomaticallyOption`).
    public var shouldMigrateStoreAutomatically = true
    /// True by default: a mapping model is inferred when none is found
    /// (`NSInferMappingModelAutomaticallyOption`).
    public var shouldInferMappingModelAutomatically = true

    /// A description of a SQLite store at `url`.
    public init(url: URL) {
        self.url = url
    }

    /// A description with no URL; set `url`, or use an in-memory `type`.
    public init() {}

    /// Sets (or with nil removes) one store option.
    public func setOption(_ option: Any?, forKey key: String) {
        options[key] = option
    }

    /// `NSReadOnlyPersistentStoreOption`.
    public var isReadOnly: Bool {
        get { (options[PersistentStore.readOnlyOption] as? Bool) ?? false }
        set { options[PersistentStore.readOnlyOption] = newValue }
    }

    /// `NSPersistentStoreTimeoutOption`: seconds a SQLite statement waits for
    /// another connection's lock. 240 when unset, Core Data's default.
    public var timeout: TimeInterval {
        get { (options[PersistentStore.timeoutOption] as? TimeInterval) ?? (options[PersistentStore.timeoutOption] as? Int).map(TimeInterval.init) ?? 240 }
        set { options[PersistentStore.timeoutOption] = newValue }
    }

    /// The SQLite pragmas set when the store opens (`NSSQLitePragmasOption`).
    public var sqlitePragmas: [String: Any] {
        (options[SQLiteStoreOptions.pragmasKey] as? [String: Any]) ?? [:]
    }

    /// Sets (or with nil removes) one SQLite pragma, as Core Data's
    /// `setValue(_:forPragmaNamed:)`. The store refuses pragmas it does not
    /// allow when it opens (134080), not here.
    public func setValue(_ value: String?, forPragmaNamed name: String) {
        var pragmas = sqlitePragmas
        pragmas[name] = value
        options[SQLiteStoreOptions.pragmasKey] = pragmas.isEmpty ? nil : pragmas
    }

    /// The options the store is added with: `options` plus the migration
    /// flags, an option set explicitly under their keys winning.
    var effectiveOptions: [String: Any] {
        var result = options
        if result[PersistentStore.migratePersistentStoresAutomaticallyOption] == nil {
            result[PersistentStore.migratePersistentStoresAutomaticallyOption] = shouldMigrateStoreAutomatically
        }
        if result[PersistentStore.inferMappingModelAutomaticallyOption] == nil {
            result[PersistentStore.inferMappingModelAutomaticallyOption] = shouldInferMappingModelAutomatically
        }
        return result
    }

    public var description: String {
        "<PersistentStoreDescription> (type: \(type), url: \(url?.path ?? "nil"), configuration: \(configuration ?? "nil"), readOnly: \(isReadOnly))"
    }
}
