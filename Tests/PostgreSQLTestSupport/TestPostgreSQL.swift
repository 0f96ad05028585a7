import Foundation
import StoreSyncPostgreSQL

/// The PostgreSQL server tests use: `scripts/postgres start` prints the variable to export
/// (`scripts/test` starts a private one). A library target of its own, so every test target
/// that needs the server (StoreSyncPostgreSQLTests, StoreSyncTests, storesyncdTests) shares it.
///
/// Tests are skipped when STORESYNC_TEST_POSTGRESQL is unset, and fail when
/// STORESYNC_REQUIRE_POSTGRESQL=1 (CI) says the server must be there:
/// ```swift
/// @Test(.enabled(if: TestPostgreSQL.isAvailable)) func roundTrip() throws {
///     let connection = try PostgreSQLConnection(try TestPostgreSQL.requireConninfo())
/// }
/// ```
/// (XCTest: `try XCTSkipUnless(TestPostgreSQL.isAvailable)`, then `requireConninfo()`.)
public enum TestPostgreSQL {
    public static var conninfo: String? {
        ProcessInfo.processInfo.environment["STORESYNC_TEST_POSTGRESQL"].flatMap { $0.isEmpty ? nil : $0 }
    }
    public static var isRequired: Bool { ProcessInfo.processInfo.environment["STORESYNC_REQUIRE_POSTGRESQL"] == "1" }
    /// True when the tests should run: the server is configured, or required (then they fail without it).
    public static var isAvailable: Bool { conninfo != nil || isRequired }

    public struct Missing: Error, CustomStringConvertible {
        public var description: String {
            "STORESYNC_REQUIRE_POSTGRESQL=1 and STORESYNC_TEST_POSTGRESQL is unset: run `scripts/postgres start` and export the variable it prints"
        }
    }
    public static func requireConninfo() throws -> String {
        guard let conninfo else { throw Missing() }
        return conninfo
    }

    /// A fresh schema-safe unique name for a group: "t" and 12 random lowercase hex digits.
    public static func uniqueGroupName() -> String {
        "t" + String(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12))
    }
    /// Drops the schema `name` and everything in it (what a test's group made).
    public static func dropSchema(_ name: String) throws {
        try PostgreSQLConnection(try requireConninfo()).execute("DROP SCHEMA IF EXISTS \"\(name)\" CASCADE")
    }
}
