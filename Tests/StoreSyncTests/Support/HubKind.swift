import Foundation
import ObjectGraph
import StoreSync
import StoreSyncPostgreSQL
import Testing
import PostgreSQLTestSupport

/// The hubs the engine's tests run over: the same decisions must come out
/// of the embedded hub and of a PostgreSQL one (issue 19: "the same
/// policy-table tests pass against both hub kinds").
enum HubKind: String, CustomTestStringConvertible, CaseIterable, Sendable {
    case embedded
    case postgreSQL

    var testDescription: String { rawValue }

    /// The kinds to test here: PostgreSQL when a test server is given
    /// (STORESYNC_TEST_POSTGRESQL), or when it is required
    /// (STORESYNC_REQUIRE_POSTGRESQL=1, as in CI), where opening it then
    /// fails the test with the reason.
    static var available: [HubKind] {
        TestPostgreSQL.conninfo != nil || ProcessInfo.processInfo.environment["STORESYNC_REQUIRE_POSTGRESQL"] == "1" ? [.embedded, .postgreSQL] : [.embedded]
    }

    /// A new, empty hub of this kind for a group of `model` (its state in `directory` for the embedded one).
    func makeHub(model: ManagedObjectModel, directory: URL, host: String = "test") throws -> SyncHub {
        switch self {
        case .embedded:
            return try EmbeddedHub(model: model, directory: directory)
        case .postgreSQL:
            guard let conninfo = TestPostgreSQL.conninfo else {
                throw CoreDataError(.persistentStoreOperation, "no PostgreSQL test server: run `scripts/postgres start` and export the STORESYNC_TEST_POSTGRESQL it prints")
            }
            return try PostgreSQLHub(model: model, conninfo: conninfo, group: TestPostgreSQL.uniqueGroupName(), host: host)
        }
    }
}
