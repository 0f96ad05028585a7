import Foundation

/// A position in one store's persistent history (Core Data's
/// `NSPersistentHistoryToken`): everything recorded up to and including
/// `position` is before it. Positions only grow, across processes and
/// reopening; tokens of one store compare by position.
///
/// Tokens are plain data, so a reader can keep where it stopped in a file or
/// a table and resume after a restart:
///
/// ```swift
/// let token = try coordinator.currentPersistentHistoryToken(fromStores: nil)
/// try token?.data.write(to: cursorFile)
/// let resumed = try PersistentHistoryToken(data: Data(contentsOf: cursorFile))
/// let request = PersistentHistoryChangeRequest.fetchHistory(after: resumed)
/// ```
public struct PersistentHistoryToken: Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    /// The `NSStoreUUID` of the store whose history this is.
    public let storeIdentifier: String
    /// The history position of the last change covered (`OGH_CHANGE.ID`).
    public let position: Int64

    public init(storeIdentifier: String, position: Int64) {
        self.storeIdentifier = storeIdentifier
        self.position = position
    }

    /// Orders by position; tokens of different stores order by store identifier first.
    public static func < (lhs: PersistentHistoryToken, rhs: PersistentHistoryToken) -> Bool {
        (lhs.storeIdentifier, lhs.position) < (rhs.storeIdentifier, rhs.position)
    }

    /// The token as storable data (JSON with the two fields).
    public var data: Data {
        // Encoding two plain fields cannot fail.
        (try? JSONEncoder().encode(self)) ?? Data()
    }

    /// A token read back from `data`.
    /// - Throws: 134070 when the data is not a token.
    public init(data: Data) throws {
        do {
            self = try JSONDecoder().decode(PersistentHistoryToken.self, from: data)
        } catch {
            throw CoreDataError(.persistentStoreOperation, "not a persistent history token: \(error)",
                                userInfo: [CoreDataError.underlyingErrorKey: error])
        }
    }

    public var description: String { "\(storeIdentifier)@\(position)" }
}
