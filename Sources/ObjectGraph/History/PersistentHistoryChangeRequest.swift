import Foundation

/// A request to fetch or delete persistent history (Core Data's
/// `NSPersistentHistoryChangeRequest`), run with
/// `ManagedObjectContext.execute(_:)` or the coordinator's.
///
/// ```swift
/// let request = PersistentHistoryChangeRequest.fetchHistory(after: lastToken)
/// request.authors = ["importer"]
/// if case .transactions(let transactions) = try context.execute(request) { … }
/// try context.execute(PersistentHistoryChangeRequest.deleteHistory(before: lastToken))
/// ```
public final class PersistentHistoryChangeRequest: @unchecked Sendable {
    public enum Operation: Sendable {
        /// Transactions after a token (nil: from the start).
        case fetchAfterToken(PersistentHistoryToken?)
        /// Transactions committed at or after a date.
        case fetchAfterDate(Date)
        /// Delete every transaction up to and including a token.
        case deleteThroughToken(PersistentHistoryToken)
        /// Delete every transaction committed before a date.
        case deleteBeforeDate(Date)
    }

    public let operation: Operation
    /// Only transactions by these authors (a foreign writer's have none).
    public var authors: Set<String>?
    /// Only changes of these entities (and transactions that keep one).
    public var entityNames: Set<String>?
    /// Only transactions this predicate accepts, evaluated on a dictionary
    /// with `author`, `contextName`, `timestamp`, `transactionNumber`.
    public var transactionPredicate: FetchPredicate?
    /// Only these stores (nil: every store with history).
    public var affectedStores: [PersistentStore]?
    /// For a delete through a token: only changes committed before this
    /// date go (a retention floor); nil: everything through the token.
    public var committedBefore: Date?
    /// For a fetch: at most this many transactions from each store (0: no
    /// limit), counted after the filters, so a reader can page through a long
    /// history: fetch again after the last transaction's token. The store
    /// stops reading at the limit; it never holds more than that.
    ///
    /// ```swift
    /// var after: PersistentHistoryToken? = nil
    /// repeat {
    ///     let request = PersistentHistoryChangeRequest.fetchHistory(after: after)
    ///     request.fetchLimit = 100
    ///     let page = try coordinator.execute(request).transactions
    ///     for transaction in page { print(transaction.token) }
    ///     after = page.last?.token ?? after
    ///     if page.count < 100 { break }
    /// } while true
    /// ```
    public var fetchLimit = 0
    /// For a fetch: reading stops at the end of the first transaction that
    /// brings the recorded row changes read to this many (0: no limit).
    /// Transactions are never cut, so a transaction larger than the limit
    /// comes whole (and alone, when it is the first). With `fetchLimit`,
    /// whichever limit is reached first ends the page. Rows of transactions
    /// the filters reject count too: the limit bounds the work of one call.
    public var changeLimit = 0
    /// For a fetch with `changeLimit`: whether reading stops after exactly
    /// that many row changes even inside a transaction (false: transactions
    /// are never cut). A cut transaction comes with the changes of the rows
    /// read and the token of the last row read; fetching after that token
    /// gives the rest of it, with the same transaction number, author and
    /// context name. An object whose rows fall on both sides of a cut is
    /// reported in each part with the changes of that part's rows (an insert
    /// in one, the member changes of later rows as an update in the next), so
    /// a reader applying the parts in order gets the whole transaction while
    /// holding one part's decoded values at a time.
    ///
    /// ```swift
    /// var after = before            // the token just before a large transaction
    /// repeat {
    ///     let request = PersistentHistoryChangeRequest.fetchHistory(after: after)
    ///     request.fetchLimit = 1
    ///     request.changeLimit = 2_000
    ///     request.cutsTransactions = true
    ///     guard let part = try coordinator.execute(request).transactions.first else { break }
    ///     apply(part.changes)
    ///     after = part.token
    /// } while after.position < whole.token.position
    /// ```
    public var cutsTransactions = false
    /// For a fetch: whether transactions come with their changes (Core
    /// Data's `NSPersistentHistoryResultType`). `.transactionsOnly` returns
    /// each transaction's token, number, timestamp, author and context name
    /// with no changes, without decoding a single value: what a reader needs
    /// to decide which transactions to read in full.
    public var resultType: PersistentHistoryResultType = .transactionsAndChanges

    public init(_ operation: Operation) { self.operation = operation }

    public static func fetchHistory(after token: PersistentHistoryToken?) -> PersistentHistoryChangeRequest { .init(.fetchAfterToken(token)) }
    public static func fetchHistory(after date: Date) -> PersistentHistoryChangeRequest { .init(.fetchAfterDate(date)) }
    public static func deleteHistory(before token: PersistentHistoryToken) -> PersistentHistoryChangeRequest { .init(.deleteThroughToken(token)) }
    public static func deleteHistory(before date: Date) -> PersistentHistoryChangeRequest { .init(.deleteBeforeDate(date)) }

    /// Whether a transaction passes the request's author and predicate filters.
    func accepts(_ transaction: PersistentHistoryTransaction) throws -> Bool {
        if let authors, !(transaction.author.map(authors.contains) ?? false) { return false }
        if let transactionPredicate {
            let fields: [String: Any?] = ["author": transaction.author, "contextName": transaction.contextName,
                                         "timestamp": transaction.timestamp, "transactionNumber": transaction.transactionNumber]
            return try transactionPredicate.evaluate(with: fields)
        }
        return true
    }
}

/// What a history fetch returns per transaction (Core Data's
/// `NSPersistentHistoryResultType`, the two kinds this implementation has).
public enum PersistentHistoryResultType: Sendable {
    /// Transactions with their changes.
    case transactionsAndChanges
    /// Transactions with `changes` empty: tokens, authors and context names only.
    case transactionsOnly
}

/// What a history request returns (Core Data's `NSPersistentHistoryResult`).
public enum PersistentHistoryResult: @unchecked Sendable {
    case transactions([PersistentHistoryTransaction])
    /// The number of row changes deleted.
    case deleted(Int)

    /// The fetched transactions, or none for a delete.
    public var transactions: [PersistentHistoryTransaction] {
        if case .transactions(let t) = self { return t }
        return []
    }
}
