import Foundation
import StoreSyncConfig
import XCTest

/// `storesyncd --check-config`: 0 for a valid file; 78 (EX_CONFIG) with
/// "FILE: key KEY: reason" on stderr for each kind of mistake.
final class ConfigurationTests: XCTestCase {
    var directory: URL!
    var config: String!

    override func setUpWithError() throws {
        directory = try Daemon.temporaryDirectory()
        config = try Daemon.makeGroup(in: directory)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    func testValidConfigExitsZero() throws {
        let result = try Daemon.run(["--check-config", "--config", config])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("OK (1 group, 3 stores)"), result.stdout)
    }

    func testDefaultPathComesFromConfigurationDirectory() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["CONFIGURATION_DIRECTORY"] = directory.path
        let result = try Daemon.run(["--check-config"], environment: environment)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix(config), result.stdout)
    }

    /// Replaces `old` with `new` in the valid file, expects exit 78 naming
    /// the file, `key` and a reason containing `reason`.
    func assertInvalid(_ old: String, _ new: String, key: String, reason: String, file: StaticString = #filePath, line: UInt = #line) throws {
        var text = try String(contentsOfFile: config, encoding: .utf8)
        XCTAssertTrue(text.contains(old), "fixture lacks \(old)", file: file, line: line)
        text = text.replacingOccurrences(of: old, with: new)
        let bad = directory.appendingPathComponent("bad.toml").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: bad))
        let result = try Daemon.run(["--check-config", "--config", bad])
        XCTAssertEqual(result.status, 78, result.stderr, file: file, line: line)
        XCTAssertTrue(result.stderr.hasPrefix("\(bad): key \(key): "), result.stderr, file: file, line: line)
        XCTAssertTrue(result.stderr.contains(reason), result.stderr, file: file, line: line)
    }

    func testUnknownKeys() throws {
        try assertInvalid("log_level = \"debug\"", "log_levle = \"debug\"", key: "log_levle", reason: "unknown key")
        try assertInvalid("name = \"items\"", "name = \"items\"\nmodle = \"x\"", key: "group[1].modle", reason: "unknown key")
        try assertInvalid("name = \"s2\"", "name = \"s2\"\npolcy = \"error\"", key: "group[1].store[2].polcy", reason: "unknown key")
    }

    func testWrongTypesAndValues() throws {
        try assertInvalid("log_level = \"debug\"", "log_level = 3", key: "log_level", reason: "expected a string, found integer")
        try assertInvalid("log_level = \"debug\"", "log_level = \"loud\"", key: "log_level", reason: "'loud' is not a level")
        try assertInvalid("log_format = \"logfmt\"", "log_format = \"xml\"", key: "log_format", reason: "'xml' is not a format")
        try assertInvalid("debounce = \"20ms\"", "debounce = \"soon\"", key: "debounce", reason: "is not a duration")
        try assertInvalid("debounce = \"20ms\"", "history_retention = -1", key: "history_retention", reason: "must not be negative")
        try assertInvalid("debounce = \"20ms\"", "rescan_interval = \"10ms\"", key: "rescan_interval", reason: "at least 1 second")
        try assertInvalid("state_directory = \"state\"", "state_directory = \"\"", key: "state_directory", reason: "must not be empty")
    }

    func testGroups() throws {
        try assertInvalid("[[group]]", "[nogroups]\n[[nothing]]", key: "nogroups", reason: "unknown key")
        try assertInvalid("name = \"items\"\n", "", key: "group[1].name", reason: "missing (required)")
        try assertInvalid("name = \"items\"", "name = \"no/slash\"", key: "group[1].name", reason: "may contain only")
        try assertInvalid("model = \"Items.xcdatamodel\"", "model = \"Missing.xcdatamodel\"", key: "group[1].model", reason: "does not exist")
        try assertInvalid("model = \"Items.xcdatamodel\"", "model = \"s1.sqlite\"", key: "group[1].model", reason: "is not a model")
        try Data("<model><entity".utf8).write(to: directory.appendingPathComponent("Broken.xcdatamodel"))
        try assertInvalid("model = \"Items.xcdatamodel\"", "model = \"Broken.xcdatamodel\"", key: "group[1].model", reason: "cannot load")
        let text = try String(contentsOfFile: config, encoding: .utf8)
        let group = String(text[text.range(of: "[[group]]")!.lowerBound...])
        try assertInvalid(group, group + "\n" + group, key: "group[2].name", reason: "defined twice")
    }

    func testStores() throws {
        try assertInvalid("path = \"s3.sqlite\"", "path = \"nowhere/s3.sqlite\"", key: "group[1].store[3].path", reason: "does not exist")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("adir"), withIntermediateDirectories: true)
        try assertInvalid("path = \"s3.sqlite\"", "path = \"adir\"", key: "group[1].store[3].path", reason: "is a directory")
        try assertInvalid("path = \"s3.sqlite\"", "path = \"s1.sqlite\"", key: "group[1].store[3].path", reason: "is already store 's1'")
        try assertInvalid("policy = \"overwrite\"", "policy = \"last-writer-wins\"", key: "group[1].store[3].policy", reason: "is not a policy")
        try assertInvalid("policy = \"overwrite\"", "", key: "group[1].store[3].policy", reason: "missing (required)")
        try assertInvalid("name = \"s3\"", "name = \"s1\"", key: "group[1].store[3].name", reason: "defined twice")
        try assertInvalid("policy = \"overwrite\"", "policy = \"overwrite\"\nconfiguration = \"Cloud\"", key: "group[1].store[3].configuration",
                          reason: "the model has no configuration 'Cloud'")
        let text = try String(contentsOfFile: config, encoding: .utf8)
        let stores = String(text[text.range(of: "[[group.store]]\nname = \"s2\"")!.lowerBound...])
        try assertInvalid(stores, "", key: "group[1].store", reason: "has 1 store; syncing needs two or more")
    }

    /// `[group.export]` (issue 18): each key's type and value, named with the group's index.
    func testExportTable() throws {
        let last = "policy = \"overwrite\"\n"
        func export(_ body: String) -> String { last + "\n[group.export]\n" + body }
        try assertInvalid(last, export("format = \"xml\""), key: "group[1].export.directory", reason: "missing (required)")
        try assertInvalid(last, export("directory = 3"), key: "group[1].export.directory", reason: "expected a string, found integer")
        try assertInvalid(last, export("directory = \"\""), key: "group[1].export.directory", reason: "must not be empty")
        try assertInvalid(last, export("directory = \".\""), key: "group[1].export.directory", reason: "holds store s1; records need a directory of their own")
        try assertInvalid(last, export("directory = \"records\"\nformat = \"yaml\""), key: "group[1].export.format",
                          reason: "'yaml' is not a record format (expected one of json, xml, binary)")
        try assertInvalid(last, export("directory = \"records\"\nextension = \".json\""), key: "group[1].export.extension", reason: "no dot")
        try assertInvalid(last, export("directory = \"records\"\nextension = \"txt\""), key: "group[1].export.extension", reason: "is taken")
        try assertInvalid(last, export("directory = \"records\"\nplain_text = \"yes\""), key: "group[1].export.plain_text",
                          reason: "expected true or false, found string")
        try assertInvalid(last, export("directory = \"records\"\nchange_feed = 1"), key: "group[1].export.change_feed", reason: "expected true or false")
        try assertInvalid(last, export("directory = \"records\"\nall_attributes_when_none_flagged = \"no\""),
                          key: "group[1].export.all_attributes_when_none_flagged", reason: "expected true or false")
        try assertInvalid(last, export("directory = \"records\"\nformt = \"xml\""), key: "group[1].export.formt", reason: "unknown key")
        try assertInvalid("model = \"Items.xcdatamodel\"\n", "model = \"Items.xcdatamodel\"\nexport = \"records\"\n", key: "group[1].export",
                          reason: "expected a table")
    }

    /// The commented `[group.export]` block of the shipped file, uncommented
    /// and pointed at a directory here, is accepted as it stands.
    func testShippedExportBlockIsValid() throws {
        let shipped = try String(contentsOf: Daemon.repositoryRoot.appendingPathComponent("etc/storesyncd.toml"), encoding: .utf8)
        let lines = shipped.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try XCTUnwrap(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == "# [group.export]" })
        var block: [String] = []
        for line in lines[start...] {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("#") else { break }
            let body = trimmed.dropFirst().trimmingCharacters(in: .whitespaces)
            // Settings are "# key = value"; the prose between them stays a comment.
            if body.hasPrefix("[group.export]") || body.range(of: #"^[a-z_]+ = "#, options: .regularExpression) != nil { block.append(body) }
        }
        XCTAssertEqual(block.count, 7, "the shipped block has [group.export] and its six keys: \(block)")
        let text = block.joined(separator: "\n").replacingOccurrences(of: "/srv/notes/records", with: directory.appendingPathComponent("records").path)
        try Data((try String(contentsOfFile: config, encoding: .utf8) + "\n" + text + "\n").utf8).write(to: URL(fileURLWithPath: config))
        let result = try Daemon.run(["--check-config", "--config", config])
        XCTAssertEqual(result.status, 0, result.stderr)
    }

    func testSyntaxErrorNamesTheLine() throws {
        try assertInvalid("log_level = \"debug\"", "log_level = \"debug", key: "(syntax)", reason: "line 3")
    }

    func testMissingFile() throws {
        let result = try Daemon.run(["--check-config", "--config", directory.appendingPathComponent("none.toml").path])
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.stderr.contains("none.toml: key (file): cannot read the file"), result.stderr)
    }

    /// `debounce` is the least time between two rounds of one store (no
    /// longer how long the files must be quiet first: the first event starts
    /// a round at once, see StoreTriggerTests); the reason says so, and the
    /// shipped file carries the new default.
    func testDebounceIsTheGapBetweenRoundsAndDefaultsToAFewMilliseconds() throws {
        try assertInvalid("debounce = \"20ms\"", "debounce = \"11s\"", key: "debounce", reason: "the least time between two rounds of one store")
        let shipped = try String(contentsOf: Daemon.repositoryRoot.appendingPathComponent("etc/storesyncd.toml"), encoding: .utf8)
        XCTAssertTrue(shipped.contains("debounce = \"5ms\""), "the shipped file shows the default")
        XCTAssertTrue(shipped.contains("The first\n# file event on an idle store starts a round at once"), "and documents the meaning")
        // Zero is allowed: rounds back to back, still one follow-up per burst.
        var text = try String(contentsOfFile: config, encoding: .utf8)
        text = text.replacingOccurrences(of: "debounce = \"20ms\"", with: "debounce = \"0ms\"")
        let zero = directory.appendingPathComponent("zero.toml").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: zero))
        let result = try Daemon.run(["--check-config", "--config", zero])
        XCTAssertEqual(result.status, 0, result.stderr)
    }

    /// The shipped example uses every key: all are accepted, and the first
    /// thing missing on a machine without /srv/notes is the model.
    func testShippedFileKnowsEveryKey() throws {
        let shipped = Daemon.repositoryRoot.appendingPathComponent("etc/storesyncd.toml").path
        let result = try Daemon.run(["--check-config", "--config", shipped])
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.stderr.hasPrefix("\(shipped): key group[1].model: /srv/notes/Notes.xcdatamodeld does not exist"), result.stderr)
    }

    // MARK: - Shared hubs (issue 19): host_name, hub, hub_password_file, hub_poll_interval

    /// The valid file with `old` replaced by `new`, loaded as the daemon loads it.
    func load(_ old: String, _ new: String) throws -> DaemonConfiguration {
        let text = try String(contentsOfFile: config, encoding: .utf8)
        XCTAssertTrue(text.contains(old), "fixture lacks \(old)")
        let file = directory.appendingPathComponent("edited.toml")
        try Data(text.replacingOccurrences(of: old, with: new).utf8).write(to: file)
        return try DaemonConfiguration.load(file: file.path, environment: [:])
    }

    static let group = "name = \"items\""

    /// `host_name` keys this host's stores in a shared hub: the machine's
    /// host name unless set, the same name at every start; refused when it
    /// could not name a store's row (a '/', which separates host and store
    /// in the hub's origins).
    func testHostNameDefaultsToTheMachineAndIsValidated() throws {
        var buffer = [CChar](repeating: 0, count: 256)
        XCTAssertEqual(gethostname(&buffer, 255), 0)
        XCTAssertEqual(try load("debounce", "debounce").hostName, String(cString: buffer))
        XCTAssertEqual(try load("debounce = \"20ms\"", "debounce = \"20ms\"\nhost_name = \"web-1.example\"").hostName, "web-1.example")
        try assertInvalid("debounce = \"20ms\"", "debounce = \"20ms\"\nhost_name = \"a/b\"", key: "host_name", reason: "may contain only letters")
        try assertInvalid("debounce = \"20ms\"", "debounce = \"20ms\"\nhost_name = \"\"", key: "host_name", reason: "must not be empty")
        try assertInvalid("debounce = \"20ms\"", "debounce = \"20ms\"\nhost_name = 7", key: "host_name", reason: "expected a string")
    }

    /// `hub = "postgresql://…"` (or `postgres://`) makes the group's hub a
    /// PostgreSQL database; absent, the embedded hub as before. One local
    /// store is enough with a shared hub (the others are other hosts').
    func testPostgreSQLHubIsAcceptedWithDefaults() throws {
        let embedded = try load("debounce", "debounce")
        XCTAssertEqual(embedded.groups[0].hub, .embedded)
        let shared = try load(Self.group, Self.group + "\nhub = \"postgresql://sync@db.example:6432/notes\"")
        let settings = try XCTUnwrap(shared.groups[0].hub.postgreSQL)
        XCTAssertEqual(settings.uri, "postgresql://sync@db.example:6432/notes")
        XCTAssertEqual(settings.pollInterval, 30, "the slow fallback poll defaults to 30 s")
        XCTAssertNil(settings.passwordFile)
        XCTAssertEqual(settings.serverDescription, "db.example:6432/notes")
        XCTAssertEqual(try load(Self.group, Self.group + "\nhub = \"postgres://db.example/notes\"\nhub_poll_interval = \"2m\"").groups[0].hub.postgreSQL?.pollInterval, 120)

        let text = try String(contentsOfFile: config, encoding: .utf8)
        let others = String(text[text.range(of: "[[group.store]]\nname = \"s2\"")!.lowerBound...])
        var oneStore = text.replacingOccurrences(of: others, with: "")
        oneStore = oneStore.replacingOccurrences(of: Self.group, with: Self.group + "\nhub = \"postgresql:///notes?host=/run/postgresql\"")
        let file = directory.appendingPathComponent("one.toml")
        try Data(oneStore.utf8).write(to: file)
        let result = try Daemon.run(["--check-config", "--config", file.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("OK (1 group, 1 stores)"), result.stdout)
    }

    /// The password is never in the configuration: a URI carrying one
    /// (`user:password@` or a `password=` parameter) is refused with exit 78
    /// naming the group and the key, and the password is not echoed.
    func testPasswordInTheHubURIIsRefusedWithoutEchoingIt() throws {
        let secret = "s3cr3t-Pa55"
        for uri in ["postgresql://sync:\(secret)@db.example/notes", "postgres://sync@db.example/notes?sslmode=require&password=\(secret)",
                    "postgresql://sync:\(secret)@db.example:5432,db2.example:5432/notes"] {
            var text = try String(contentsOfFile: config, encoding: .utf8)
            text = text.replacingOccurrences(of: Self.group, with: Self.group + "\nhub = \"\(uri)\"")
            let bad = directory.appendingPathComponent("bad.toml").path
            try Data(text.utf8).write(to: URL(fileURLWithPath: bad))
            let result = try Daemon.run(["--check-config", "--config", bad])
            XCTAssertEqual(result.status, 78, uri)
            XCTAssertTrue(result.stderr.hasPrefix("\(bad): key group[1].hub: group 'items': the URI contains a password"), result.stderr)
            XCTAssertTrue(result.stderr.contains("hub_password_file"), "the error says where the password goes: \(result.stderr)")
            XCTAssertFalse(result.stderr.contains(secret), "the password is echoed: \(result.stderr)")
            XCTAssertFalse(result.stdout.contains(secret))
        }
        // A user name alone, or a colon in the host part, is no password.
        XCTAssertNotNil(try load(Self.group, Self.group + "\nhub = \"postgresql://sync@[::1]:5432/notes\"").groups[0].hub.postgreSQL)
    }

    func testHubKeysAreValidated() throws {
        try assertInvalid(Self.group, Self.group + "\nhub = \"mysql://db.example/notes\"", key: "group[1].hub", reason: "expected a PostgreSQL URI")
        try assertInvalid(Self.group, Self.group + "\nhub = \"host=db.example dbname=notes\"", key: "group[1].hub", reason: "expected a PostgreSQL URI")
        try assertInvalid(Self.group, Self.group + "\nhub = 5", key: "group[1].hub", reason: "expected a string")
        try assertInvalid(Self.group, "name = \"items.v2\"\nhub = \"postgresql://db.example/notes\"", key: "group[1].name", reason: "whose schema it names")
        try assertInvalid(Self.group, Self.group + "\nhub_poll_interval = \"10s\"", key: "group[1].hub_poll_interval",
                          reason: "applies only to a PostgreSQL hub")
        try assertInvalid(Self.group, Self.group + "\nhub_password_file = \"pw\"", key: "group[1].hub_password_file",
                          reason: "applies only to a PostgreSQL hub")
        let hub = Self.group + "\nhub = \"postgresql://sync@db.example/notes\"\n"
        try assertInvalid(Self.group, hub + "hub_password_file = \"missing.pw\"", key: "group[1].hub_password_file", reason: "does not exist")
        try assertInvalid(Self.group, hub + "hub_password_file = \".\"", key: "group[1].hub_password_file", reason: "is a directory")
        try assertInvalid(Self.group, hub + "hub_poll_interval = \"500ms\"", key: "group[1].hub_poll_interval", reason: "at least 1 second")
        try assertInvalid(Self.group, hub + "hub_poll_interval = \"often\"", key: "group[1].hub_poll_interval", reason: "is not a duration")
        var text = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: Self.group, with: hub)
        text += "\n[group.export]\ndirectory = \"records\"\n"
        let bad = directory.appendingPathComponent("bad.toml").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: bad))
        let result = try Daemon.run(["--check-config", "--config", bad])
        XCTAssertEqual(result.status, 78, result.stderr)
        XCTAssertTrue(result.stderr.contains("key group[1].export: group 'items': external records are written from an embedded hub only"), result.stderr)
    }

    /// The password file's first line goes to libpq as the URI's `password`
    /// parameter, percent-encoded (libpq takes any connection keyword as a
    /// URI parameter), read at each connection; `connect_timeout` is added
    /// unless the URI sets it (libpq would wait forever).
    func testPasswordFileBecomesAPercentEncodedParameter() throws {
        let passwordFile = directory.appendingPathComponent("hub.pw")
        try Data("p@ss w&rd=%#ü\nsecond line ignored\n".utf8).write(to: passwordFile)
        let configuration = try load(Self.group, Self.group + "\nhub = \"postgresql://sync@db.example/notes\"\nhub_password_file = \"hub.pw\"")
        let settings = try XCTUnwrap(configuration.groups[0].hub.postgreSQL)
        XCTAssertEqual(settings.passwordFile?.path, passwordFile.path, "relative to the configuration file")
        XCTAssertEqual(try settings.conninfo(), "postgresql://sync@db.example/notes?password=p%40ss%20w%26rd%3D%25%23%C3%BC&connect_timeout=10")
        XCTAssertFalse(settings.serverDescription.contains("p@ss"))

        // Rotated: the next connection reads the new one. CRLF files work.
        try Data("n3w\r\n".utf8).write(to: passwordFile)
        XCTAssertEqual(try settings.conninfo(), "postgresql://sync@db.example/notes?password=n3w&connect_timeout=10")
        let withQuery = PostgreSQLHubSettings(uri: "postgres:///notes?host=/run/postgresql&connect_timeout=3", passwordFile: passwordFile)
        XCTAssertEqual(try withQuery.conninfo(), "postgres:///notes?host=/run/postgresql&connect_timeout=3&password=n3w")
        XCTAssertEqual(withQuery.serverDescription, "/run/postgresql:5432/notes")
        XCTAssertEqual(PostgreSQLHubSettings(uri: "postgresql://sync@db.example/notes").serverDescription, "db.example:5432/notes")
        XCTAssertEqual(PostgreSQLHubSettings(uri: "postgresql://sync@db.example").serverDescription, "db.example:5432/sync",
                       "libpq's default database is the user's name")

        // Empty or unreadable: an error naming the file, at connection time
        // (storesyncctl reads the same configuration, often as a user who
        // may not read the password).
        try Data("\n".utf8).write(to: passwordFile)
        XCTAssertThrowsError(try settings.conninfo()) { XCTAssertTrue("\($0)".contains("hub_password_file \(passwordFile.path): its first line (the password) is empty"), "\($0)") }
        try FileManager.default.removeItem(at: passwordFile)
        XCTAssertThrowsError(try settings.conninfo()) { XCTAssertTrue("\($0)".contains("hub_password_file \(passwordFile.path): cannot read it"), "\($0)") }
    }
}
