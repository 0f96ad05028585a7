import Foundation

/// What one save committed, in a form that outlives the saving context and
/// can cross threads or processes (MOC-MG-06): object IDs, entity names and,
/// for updates, every changed key with its old and new value. It travels in
/// the did-save notification under `ManagedObjectContext.changeSetKey`, and
/// `mergeChanges(from:)` applies it to another context.
///
/// Relationship values are `ManagedObjectID` (to-one) or `[ManagedObjectID]`
/// (to-many). A future stable global identifier would be one more field of
/// `ObjectChange`.
///
/// ```swift
/// let changes = note.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet
/// for update in changes?.updated ?? [] { print(update.objectID, update.changes.keys) }
/// ```
public struct ContextChangeSet: @unchecked Sendable {
    public var inserted: [ObjectChange] = []
    public var updated: [ObjectChange] = []
    public var deleted: [ObjectChange] = []
    public var contextName: String?
    public var transactionAuthor: String?
    /// For each store (by identifier) whose persistent history recorded this
    /// save: the position of the save's last recorded change.
    public var historyTokens: [String: PersistentHistoryToken] = [:]

    public init() {}

    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}

