import Foundation
#if canImport(Glibc)
import Glibc
#endif
import StoreSyncPostgreSQL
import Testing
import PostgreSQLTestSupport

/// PostgreSQLConnection against the server of `scripts/postgres start`
/// (STORESYNC_TEST_POSTGRESQL; skipped when unset, failing when
/// STORESYNC_REQUIRE_POSTGRESQL=1). Tests that share a table make their own
/// schema (TestPostgreSQL.uniqueGroupName) and drop it.
@Suite struct PostgreSQLConnectionTests {
    private func connect() throws -> PostgreSQLConnection {
        try PostgreSQLConnection(try TestPostgreSQL.requireConninfo())
    }

    /// A schema of the test's own, dropped when the test ends.
    private func withSchema(_ body: (String) throws -> Void) throws {
        let schema = TestPostgreSQL.uniqueGroupName()
        try connect().execute("CREATE SCHEMA \(schema)")
        defer { try? TestPostgreSQL.dropSchema(schema) }
        try body(schema)
    }

    // MARK: - Parameters and results

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func stringsRoundTripIncludingNullEmptyAndUnicode() throws {
        let connection = try connect()
        for value in ["", "plain", "Zoë naïve — 日本語 🚀", "quote ' and \\ backslash", "line\nbreak\ttab", "$1"] {
            let result = try connection.execute("SELECT $1::text", [value])
            #expect(result.string(0, 0) == value)
            #expect(!result.isNull(0, 0))
        }
        let null = try connection.execute("SELECT $1::text, $2::int8", [nil, nil])
        #expect(null.isNull(0, 0) && null.isNull(0, 1))
        #expect(null.string(0, 0) == nil && null.int64(0, 1) == nil)
        // A NUL cannot be sent as text: a clear error rather than a truncated value.
        let error = try #require(throws: PostgreSQLError.self) { try connection.execute("SELECT $1::text", ["a\u{0}b"]) }
        #expect(error.message.contains("$1") && error.message.contains("NUL"))
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func integersRoundTripAtTheirLimits() throws {
        let connection = try connect()
        for value in [Int64.min, -1, 0, 1, Int64.max] {
            #expect(try connection.execute("SELECT $1::int8", [value]).int64(0, 0) == value)
        }
        for value in [Int.min, 42, Int.max] {
            #expect(try connection.execute("SELECT $1::int8", [value]).int64(0, 0) == Int64(value))
        }
        for value in [Int32.min, Int32.max] {
            #expect(try connection.execute("SELECT $1::int4", [value]).int64(0, 0) == Int64(value))
        }
        for value in [Int16.min, Int16.max] {
            #expect(try connection.execute("SELECT $1::int2", [value]).int64(0, 0) == Int64(value))
        }
        // Out of range for the column's type: the server says so (22003).
        let error = try #require(throws: PostgreSQLError.self) {
            try connection.execute("SELECT $1::int2", [Int32.max])
        }
        #expect(error.sqlState == "22003")
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func floatingPointRoundTripsExactlyIncludingNaNAndInfinities() throws {
        let connection = try connect()
        let doubles: [Double] = [0, -0.0, 0.1, 1.0 / 3.0, -2.5e-300, 1.7976931348623157e308,
                                 Double.leastNonzeroMagnitude, .infinity, -.infinity]
        for value in doubles {
            let read = try #require(try connection.execute("SELECT $1::float8", [value]).double(0, 0))
            #expect(read == value && read.sign == value.sign, "\(value) read back as \(read)")
        }
        #expect(try connection.execute("SELECT $1::float8", [Double.nan]).double(0, 0)?.isNaN == true)
        #expect(try connection.execute("SELECT 'NaN'::float8, '-Infinity'::float8").string(0, 1) == "-Infinity")
        for value: Float in [0.1, -3.4028235e38, .infinity, -.infinity] {
            let read = try #require(try connection.execute("SELECT $1::float4", [value]).double(0, 0))
            #expect(Float(read) == value, "\(value) read back as \(read)")
        }
        #expect(try connection.execute("SELECT $1::float4", [Float.nan]).double(0, 0)?.isNaN == true)
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func boolUUIDDecimalAndByteaRoundTrip() throws {
        let connection = try connect()
        #expect(try connection.execute("SELECT $1::bool, $2::bool", [true, false]).bool(0, 0) == true)
        #expect(try connection.execute("SELECT $1::bool", [false]).bool(0, 0) == false)
        #expect(try connection.execute("SELECT $1::bool", [true]).string(0, 0) == "t")

        let uuid = UUID()
        let uuidResult = try connection.execute("SELECT $1::uuid, $1::uuid::text = $2", [uuid, uuid.uuidString.lowercased()])
        #expect(uuidResult.uuid(0, 0) == uuid)
        #expect(uuidResult.bool(0, 1) == true)

        for text in ["0", "-12345678901234567890.123456789", "0.000001", "99999999999999999999999999999999999999"] {
            let decimal = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
            let read = try connection.execute("SELECT $1::numeric", [decimal]).string(0, 0)
            #expect(read.flatMap { Decimal(string: $0, locale: Locale(identifier: "en_US_POSIX")) } == decimal)
        }

        for bytes: [UInt8] in [[], [0], [0, 0, 1, 0, 255, 0], Array(0...255)] {
            let data = Data(bytes)
            let result = try connection.execute("SELECT $1::bytea, length($1::bytea)", [data])
            #expect(result.data(0, 0) == data)
            #expect(result.int64(0, 1) == Int64(bytes.count))
        }
        #expect(Data([0, 0xab, 0xff]).postgreSQLText == "\\x00abff")
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func datesRoundTripToTheMicrosecondInAnyTimeZone() throws {
        let connection = try connect()
        // Whole microseconds (as Double from an integer count, so exact), after
        // and before 1970 and the reference date, and one BC.
        let micros: [Int64] = [817_000_000_123_456, 0, -1, -978_307_200_000_001, -3_000_000_000_000_000, 7_000_000_000_999_999, -63_200_000_000_000_000]
        let dates = micros.map { Date(timeIntervalSinceReferenceDate: Double($0) / 1_000_000) }
        // The output's offset follows the session's TimeZone: the parser takes
        // any, including a historical offset with seconds (Amsterdam's LMT).
        for zone in ["UTC", "Asia/Kolkata", "America/St_Johns", "Europe/Amsterdam"] {
            try connection.execute("SELECT set_config('TimeZone', $1, false)", [zone])
            for date in dates {
                let result = try connection.execute("SELECT $1::timestamptz, $1::timestamptz::text", [date])
                #expect(result.date(0, 0) == date, "\(date.postgreSQLText) in \(zone) read back from \(result.string(0, 1) ?? "NULL")")
            }
        }
        #expect(Date(timeIntervalSince1970: 1_700_000_000.123456).postgreSQLText == "2023-11-14 22:13:20.123456+00")
        #expect(Date(timeIntervalSince1970: -0.5).postgreSQLText == "1969-12-31 23:59:59.500000+00")
        let special = try connection.execute("SELECT 'infinity'::timestamptz, '-infinity'::timestamptz, '2024-02-29'::date")
        #expect(special.date(0, 0) == .distantFuture && special.date(0, 1) == .distantPast)
        #expect(special.date(0, 2) == Date(timeIntervalSince1970: 1_709_164_800))
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func resultsNameColumnsAndCountAffectedRows() throws {
        let connection = try connect()
        try connection.executeScript("""
            CREATE TEMPORARY TABLE item (id int PRIMARY KEY, name text);
            INSERT INTO item VALUES (1, 'a'), (2, 'b'), (3, NULL);
            """)
        let updated = try connection.execute("UPDATE item SET name = $1 WHERE id >= $2", ["z", 2])
        #expect(updated.affectedRows == 2 && updated.rowCount == 0)
        let rows = try connection.execute("SELECT id, name AS label FROM item ORDER BY id")
        #expect(rows.rowCount == 3 && rows.columnCount == 2)
        #expect(rows.columnName(1) == "label" && rows.column(named: "label") == 1 && rows.column(named: "name") == nil)
        #expect((0..<3).map { rows.string($0, 1) } == ["a", "z", "z"])
        #expect(try connection.execute("DELETE FROM item").affectedRows == 3)
    }

    // MARK: - Errors

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func aSQLErrorCarriesSQLStateServerAndStatementButNoParameters() throws {
        let connection = try connect()
        try connection.execute("CREATE TEMPORARY TABLE unique_name (name text PRIMARY KEY)")
        try connection.execute("INSERT INTO unique_name VALUES ($1)", ["parameter-value-1"])
        let error = try #require(throws: PostgreSQLError.self) {
            try connection.execute("INSERT INTO unique_name VALUES ($1)", ["parameter-value-1"])
        }
        #expect(error.sqlState == "23505")
        #expect(error.statement == "INSERT INTO unique_name VALUES ($1)")
        #expect(error.detail != nil)
        #expect(!error.isSerializationFailure && !error.isConnectionFailure)
        let description = error.description
        #expect(description.hasPrefix("PostgreSQL error 23505 at \(connection.serverDescription): duplicate key value"))
        #expect(description.hasSuffix(" in: INSERT INTO unique_name VALUES ($1)"))
        // The detail names the key; the statement part never holds parameters.
        #expect(!description.components(separatedBy: " in: ").last!.contains("parameter-value-1"))

        let syntax = try #require(throws: PostgreSQLError.self) { try connection.executeScript("SELEC 1") }
        #expect(syntax.sqlState == "42601" && syntax.statement == "SELEC 1")
        let long = "SELECT " + String(repeating: "1 + ", count: 100) + "nope"
        #expect(try #require(throws: PostgreSQLError.self) { try connection.execute(long) }.statement?.count == 200)
    }

    @Test func aRefusedConnectionNamesHostAndPortAndNeverThePassword() throws {
        let port = try Self.unusedPort()
        let error = try #require(throws: PostgreSQLError.self) {
            try PostgreSQLConnection("host=127.0.0.1 port=\(port) user=nobody dbname=nothing password=secret123 connect_timeout=5")
        }
        #expect(error.isConnectionFailure && error.sqlState == nil)
        #expect(error.description.hasPrefix("PostgreSQL connection error at 127.0.0.1:\(port)/nothing: "))
        #expect(error.description.contains("Connection refused"))
        #expect(!String(describing: error).contains("secret123") && !error.localizedDescription.contains("secret123"))

        let invalid = try #require(throws: PostgreSQLError.self) {
            try PostgreSQLConnection("host=127.0.0.1 password=secret123 bogus")
        }
        #expect(invalid.description.contains("invalid connection string"))
        #expect(!invalid.description.contains("secret123"))
        // libpq quotes a URI it cannot parse whole, password included: it is blanked.
        let uri = try #require(throws: PostgreSQLError.self) {
            try PostgreSQLConnection("postgresql://nobody:secret123@[::1/nothing")
        }
        #expect(uri.description.contains("IPv6 host address in URI: \"postgresql://nobody:********@[::1/nothing\""), "\(uri)")
        #expect(!uri.description.contains("secret123"))
    }

    /// PGPASSWORD, over TCP to the `storesync` role (scram-sha-256, set up by
    /// scripts/postgres). PGPASSWORD is set for the whole test process and left
    /// set: changing the environment while other tests' threads read it is
    /// unsafe, and the socket connections (trust) ignore it. The wrong password
    /// goes in the conninfo, which libpq prefers to PGPASSWORD.
    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func thePasswordComesFromPGPASSWORDAndAWrongOneFailsClearly() throws {
        let port = try #require(try connect().execute("SHOW port").string(0, 0))
        setenv("PGPASSWORD", "storesync-test", 1)
        let tcp = "host=127.0.0.1 port=\(port) user=storesync dbname=storesync"
        let connection = try PostgreSQLConnection(tcp)
        #expect(try connection.execute("SELECT current_user, current_database()").string(0, 0) == "storesync")
        #expect(connection.serverDescription == "127.0.0.1:\(port)/storesync")

        let error = try #require(throws: PostgreSQLError.self) {
            try PostgreSQLConnection(tcp + " password=secret123")
        }
        #expect(error.isConnectionFailure)
        #expect(error.description.contains("127.0.0.1:\(port)/storesync"))
        #expect(error.description.contains("password authentication failed for user \"storesync\""))
        #expect(!error.description.contains("secret123") && !error.description.contains("storesync-test"))
    }

    // MARK: - Transactions

    /// The classic write skew: two SERIALIZABLE transactions each read the sum
    /// of the table and insert a row from it. Run side by side (both read
    /// before either writes), one of them must fail with 40001; `transaction`
    /// runs it again, and it then sees the other's row.
    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func aWriteSkewIsRetriedUntilBothTransactionsCommit() throws {
        try withSchema { schema in
            try connect().execute("CREATE TABLE \(schema).entry (n int8 NOT NULL)")
            let runs = try Self.writeSkew(schema: schema, attempts: 10)
            #expect(runs.errors.isEmpty, "\(runs.errors)")
            #expect(runs.bodyRuns > 2, "the failed transaction's body ran again")
            let rows = try connect().execute("SELECT n FROM \(schema).entry ORDER BY n")
            #expect((0..<rows.rowCount).map { rows.int64($0, 0) } == [1, 2], "committed as if one ran after the other")
        }
    }

    /// The same collision with a single attempt: the loser's 40001 reaches the caller.
    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func aWriteSkewWithOneAttemptThrowsTheSerializationFailure() throws {
        try withSchema { schema in
            try connect().execute("CREATE TABLE \(schema).entry (n int8 NOT NULL)")
            let runs = try Self.writeSkew(schema: schema, attempts: 1)
            #expect(runs.bodyRuns == 2)
            #expect(runs.errors.count == 1)
            let failure = try #require(runs.errors.first as? PostgreSQLError)
            #expect(failure.sqlState == "40001" && failure.isSerializationFailure)
            #expect(try connect().execute("SELECT count(*) FROM \(schema).entry").int64(0, 0) == 1)
        }
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func anotherErrorRollsBackAndIsRethrownAfterOneRun() throws {
        let connection = try connect()
        try connection.execute("CREATE TEMPORARY TABLE once (id int PRIMARY KEY)")
        var runs = 0
        let error = try #require(throws: PostgreSQLError.self) {
            try connection.transaction {
                runs += 1
                try connection.execute("INSERT INTO once VALUES (1)")
                try connection.execute("INSERT INTO once VALUES (1)")
            }
        }
        #expect(error.sqlState == "23505" && runs == 1)
        #expect(!connection.isInTransaction)
        #expect(try connection.execute("SELECT count(*) FROM once").int64(0, 0) == 0)

        struct BodyError: Error {}
        runs = 0
        #expect(throws: BodyError.self) {
            try connection.transaction(.readCommitted) {
                runs += 1
                try connection.execute("INSERT INTO once VALUES (2)")
                throw BodyError()
            }
        }
        #expect(runs == 1 && !connection.isInTransaction)
        #expect(try connection.execute("SELECT count(*) FROM once").int64(0, 0) == 0)
    }

    /// A body that catches a statement's error has left the transaction
    /// aborted; COMMIT would then roll back without an error. The transaction
    /// throws the caught error instead of returning as if committed.
    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func aBodyThatSwallowsAnErrorDoesNotLookCommitted() throws {
        let connection = try connect()
        try connection.execute("CREATE TEMPORARY TABLE swallowed (id int PRIMARY KEY)")
        let error = try #require(throws: PostgreSQLError.self) {
            try connection.transaction {
                try connection.execute("INSERT INTO swallowed VALUES (1)")
                _ = try? connection.execute("INSERT INTO swallowed VALUES (1)")
            }
        }
        #expect(error.sqlState == "23505")
        #expect(try connection.execute("SELECT count(*) FROM swallowed").int64(0, 0) == 0)
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func aNestedTransactionRunsItsBodyOnceInTheOuterOne() throws {
        let connection = try connect()
        try connection.execute("CREATE TEMPORARY TABLE nested (id int)")
        #expect(!connection.isInTransaction)
        var inner = 0
        let value = try connection.transaction(.repeatableRead) {
            #expect(connection.isInTransaction)
            return try connection.transaction {
                inner += 1
                try connection.execute("INSERT INTO nested VALUES (1)")
                return try connection.execute("SELECT current_setting('transaction_isolation')").string(0, 0)
            }
        }
        #expect(inner == 1 && value == "repeatable read")
        #expect(!connection.isInTransaction)
        #expect(try connection.execute("SELECT count(*) FROM nested").int64(0, 0) == 1)
    }

    // MARK: - LISTEN/NOTIFY and reconnecting

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func aNotificationFromAnotherConnectionMakesTheSocketReadable() throws {
        let listener = try connect()
        let notifier = try connect()
        let channel = "StoreSync \"" + TestPostgreSQL.uniqueGroupName() + "\""   // quoting: case, space, quote
        try listener.listen(channel)
        #expect(try listener.notifications().isEmpty)
        let notifierPID = try #require(try notifier.execute("SELECT pg_backend_pid()").int64(0, 0))
        try notifier.execute("SELECT pg_notify($1, $2)", [channel, "position 42"])
        try notifier.execute("NOTIFY \"\(channel.replacingOccurrences(of: "\"", with: "\"\""))\", 'position 43'")

        let received = try Self.waitForNotifications(listener, count: 2)
        #expect(received == [
            PostgreSQLNotification(channel: channel, payload: "position 42", processID: Int32(notifierPID)),
            PostgreSQLNotification(channel: channel, payload: "position 43", processID: Int32(notifierPID)),
        ])
        #expect(try listener.notifications().isEmpty)
    }

    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func reconnectAfterTheServerTerminatedTheBackendListensAgain() throws {
        let connection = try connect()
        let other = try connect()
        let channel = TestPostgreSQL.uniqueGroupName()
        try connection.listen(channel)
        let pid = try #require(try connection.execute("SELECT pg_backend_pid()").int64(0, 0))
        #expect(try other.execute("SELECT pg_terminate_backend($1::int4, 5000)", [pid]).bool(0, 0) == true)

        let error = try #require(throws: PostgreSQLError.self) { try connection.execute("SELECT 1") }
        #expect(error.isConnectionFailure, "\(error)")
        #expect(error.description.contains(connection.serverDescription))
        #expect(!connection.isConnected)

        try connection.reconnect()
        #expect(connection.isConnected && connection.socket >= 0)
        let newPID = try #require(try connection.execute("SELECT pg_backend_pid()").int64(0, 0))
        #expect(newPID != pid)
        try other.execute("SELECT pg_notify($1, 'after reconnect')", [channel])
        #expect(try Self.waitForNotifications(connection, count: 1).map(\.payload) == ["after reconnect"])

        connection.close()
        #expect(!connection.isConnected && connection.socket == -1)
        #expect(throws: PostgreSQLError.self) { try connection.execute("SELECT 1") }
        try connection.reconnect()
        #expect(try connection.execute("SELECT 1").int64(0, 0) == 1)
    }

    /// The whole server stopped (not just one backend), as in issue 19's "server
    /// stopped for a while": statements and `reconnect()` fail as connection
    /// failures naming the server, and `reconnect()` works once it is back. A
    /// cluster of the test's own (scripts/postgres, a few seconds), not the
    /// shared one, which other tests use meanwhile.
    @Test(.enabled(if: TestPostgreSQL.isAvailable))
    func reconnectFailsWhileTheServerIsDownAndWorksWhenItIsBack() throws {
        _ = try TestPostgreSQL.requireConninfo()
        let directory = try #require(mkdtemp(strdup("/tmp/storesync-pg-test.XXXXXX")).map { String(cString: $0) })
        let port = try Self.unusedPort()
        defer {
            _ = try? Self.postgresScript(["stop", "--dir", directory])
            try? FileManager.default.removeItem(atPath: directory)
        }
        let printed = try Self.postgresScript(["start", "--dir", directory, "--port", "\(port)"])
        let conninfo = "host=\(directory) port=\(port) user=postgres dbname=postgres"
        #expect(printed == "export STORESYNC_TEST_POSTGRESQL='\(conninfo)'\n")
        let connection = try PostgreSQLConnection(conninfo)
        #expect(connection.serverDescription == "\(directory):\(port)/postgres")
        #expect(try connection.execute("SELECT 1").int64(0, 0) == 1)

        _ = try Self.postgresScript(["stop", "--dir", directory])
        let lost = try #require(throws: PostgreSQLError.self) { try connection.execute("SELECT 1") }
        #expect(lost.isConnectionFailure, "\(lost)")
        let down = try #require(throws: PostgreSQLError.self) { try connection.reconnect() }
        #expect(down.isConnectionFailure && !connection.isConnected)
        #expect(down.description.hasPrefix("PostgreSQL connection error at \(directory):\(port)/postgres: "), "\(down)")
        #expect(down.description.contains("\(port)"))

        _ = try Self.postgresScript(["start", "--dir", directory, "--port", "\(port)"])
        try connection.reconnect()
        #expect(try connection.execute("SELECT 2").int64(0, 0) == 2)
    }

    // MARK: - Helpers

    struct ScriptFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs scripts/postgres with `arguments`; its stdout. Throws with its output when it fails.
    /// posix_spawn and waitpid rather than Foundation's Process, whose waitUntilExit
    /// was seen never to return under Swift Testing here (the child left a zombie).
    static func postgresScript(_ arguments: [String]) throws -> String {
        var root = URL(fileURLWithPath: #filePath)
        while !FileManager.default.fileExists(atPath: root.appendingPathComponent("Package.swift").path) {
            root = root.deletingLastPathComponent()
            guard root.path != "/" else { throw ScriptFailed(description: "Package.swift not found above \(#filePath)") }
        }
        let script = root.appendingPathComponent("scripts/postgres").path
        let outputPath = NSTemporaryDirectory() + "storesync-pg-script-\(UUID().uuidString)"
        defer {
            try? FileManager.default.removeItem(atPath: outputPath + ".out")
            try? FileManager.default.removeItem(atPath: outputPath + ".err")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, outputPath + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv: [UnsafeMutablePointer<CChar>?] = ([script] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, script, &actions, nil, argv, environ)
        guard spawned == 0 else { throw ScriptFailed(description: "cannot run \(script): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let printed = (try? String(contentsOfFile: outputPath + ".out", encoding: .utf8)) ?? ""
        // WIFEXITED && WEXITSTATUS == 0, spelled out (the macros are not imported).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            let errors = (try? String(contentsOfFile: outputPath + ".err", encoding: .utf8)) ?? ""
            throw ScriptFailed(description: "scripts/postgres \(arguments.joined(separator: " ")) failed (wait status \(status)): \(errors)")
        }
        return printed
    }

    /// What the two sides of the write skew saw; filled from their threads.
    final class SkewRuns: @unchecked Sendable {
        private let lock = NSLock()
        private var runs = 0
        private var failures: [any Error] = []
        var bodyRuns: Int { lock.lock(); defer { lock.unlock() }; return runs }
        var errors: [any Error] { lock.lock(); defer { lock.unlock() }; return failures }
        func ran() { lock.lock(); runs += 1; lock.unlock() }
        func failed(_ error: any Error) { lock.lock(); failures.append(error); lock.unlock() }
    }

    /// Two connections, each on its own thread, run the write skew; on the first
    /// run each waits until the other has read, so their reads overlap.
    static func writeSkew(schema: String, attempts: Int) throws -> SkewRuns {
        let connections = [try PostgreSQLConnection(try TestPostgreSQL.requireConninfo()),
                           try PostgreSQLConnection(try TestPostgreSQL.requireConninfo())]
        let haveRead = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        let runs = SkewRuns()
        let group = DispatchGroup()
        for side in 0..<2 {
            let connection = connections[side]
            DispatchQueue.global().async(group: group) {
                var firstRun = true
                do {
                    try connection.transaction(.serializable, attempts: attempts) {
                        runs.ran()
                        let sum = try connection.execute("SELECT coalesce(sum(n), 0) FROM \(schema).entry").int64(0, 0) ?? -1
                        if firstRun {
                            firstRun = false
                            haveRead[side].signal()
                            _ = haveRead[1 - side].wait(timeout: .now() + 10)
                        }
                        try connection.execute("INSERT INTO \(schema).entry (n) VALUES ($1)", [sum + 1])
                    }
                } catch {
                    runs.failed(error)
                }
            }
        }
        group.wait()
        return runs
    }

    /// poll(2)s the connection's socket until `count` notifications came (10 s at most).
    static func waitForNotifications(_ connection: PostgreSQLConnection, count: Int) throws -> [PostgreSQLNotification] {
        var received: [PostgreSQLNotification] = []
        let deadline = Date().addingTimeInterval(10)
        while received.count < count, Date() < deadline {
            var descriptor = pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 1000)
            #expect(ready >= 0)
            if ready > 0 { received += try connection.notifications() }
        }
        return received
    }

    /// A TCP port on 127.0.0.1 that nothing listens on: bound, read back and closed.
    static func unusedPort() throws -> UInt16 {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        try #require(bound)
        return UInt16(bigEndian: address.sin_port)
    }
}
