import Foundation
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
}
