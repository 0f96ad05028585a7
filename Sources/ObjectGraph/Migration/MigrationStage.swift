import Foundation

/// The stages of a migration, in order (MG-09). A copying migration runs the
/// first three over every entity mapping, one stage after the other, then
/// saves; a SQLite store migrated in place runs one SQL transaction
/// (`.schema`).
///
/// ```swift
/// let token = manager.observeProgress { event in print(event.stage, event.fraction) }
/// ```
public enum MigrationStage: String, CaseIterable, Sendable {
    /// Creating destination instances from source instances.
    case createDestinationInstances = "create destination instances"
    /// Setting the destination instances' relationships.
    case createRelationships = "create relationships"
    /// Custom validation, then the destination context's own at save.
    case validate = "validate"
    /// Writing the destination store (the save, or the swap of the migrated copy).
    case save = "save"
    /// Changing a SQLite store's tables in place with SQL, in one transaction.
    case schema = "schema"
}

/// One report of a migration's progress (MG-10, MG-11): what it is doing and
/// how far along it is.
///
/// ```swift
/// let token = manager.observeProgress { progress in
///     print(progress)   // "create relationships Note->Note 62%"
/// }
/// ```
public struct MigrationProgress: Sendable, CustomStringConvertible {
    /// The stage running.
    public let stage: MigrationStage
    /// The entity mapping being processed, when the stage goes mapping by mapping.
    public let entityMappingName: String?
    /// How complete the whole migration is, 0 to 1; it never goes down.
    public let fraction: Double

    public var description: String {
        let mapping = entityMappingName.map { " \($0)" } ?? ""
        return String(format: "%@%@ %.0f%%", stage.rawValue, mapping, fraction * 100)
    }
}

/// Keeps a progress observer registered; `cancel()` or releasing it ends the observation.
///
/// ```swift
/// let token = manager.observeProgress { print($0.fraction) }
/// try manager.migrateStore(from: old, sourceType: "SQLite", with: mapping, toDestinationURL: new, destinationType: "SQLite")
/// token.cancel()
/// ```
public final class MigrationObservation {
    private var onCancel: (() -> Void)?
    init(onCancel: @escaping () -> Void) { self.onCancel = onCancel }
    /// Stops the observer's calls.
    public func cancel() { onCancel?(); onCancel = nil }
    deinit { cancel() }
}
