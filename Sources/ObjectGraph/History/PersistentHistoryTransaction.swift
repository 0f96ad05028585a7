import Foundation

/// One committed transaction of a store's history (Core Data's
/// `NSPersistentHistoryTransaction`).
///
/// A save by an ObjectGraph context records its author (the context's
/// `transactionAuthor`) and context name. A transaction committed by another
/// writer (the `sqlite3` shell, a script, Apple's Core Data on a copied
/// file) has neither, and no `transactionNumber`: its changes are recorded
/// by triggers that cannot tell two such commits apart, so foreign commits
/// between two ObjectGraph saves are reported as one transaction (see
/// docs/HISTORY.md).
///
/// ```swift
/// for transaction in transactions {
///     print(transaction.token, transaction.author ?? "(foreign)", transaction.changes.count)
/// }
/// ```
public struct PersistentHistoryTransaction: @unchecked Sendable {
    /// The position just after this transaction: fetching after it returns what came later.
    public var token: PersistentHistoryToken
    /// The number of the recorded ObjectGraph save; nil for foreign writers.
    public var transactionNumber: Int64?
    public var timestamp: Date
    public var author: String?
    public var contextName: String?
    public var storeIdentifier: String { token.storeIdentifier }
    public var changes: [PersistentHistoryChange]

    public init(token: PersistentHistoryToken, transactionNumber: Int64?, timestamp: Date, author: String?, contextName: String?,
                changes: [PersistentHistoryChange]) {
        self.token = token
        self.transactionNumber = transactionNumber
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.changes = changes
    }
}
