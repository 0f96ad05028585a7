import Foundation
import XCTest

/// Issue 18's indexer acceptance: Recoll (Debian's `recollcmd`: recollindex,
/// recollq), with a configuration directory of its own whose only top
/// directory is a daemon's records directory, finds a value saved into a
/// store in that object's record; once the object is deleted and recollindex
/// runs again, the search finds nothing. The records carry the plain-text
/// rendering, which Recoll indexes with no configuration.
///
/// Skipped, saying why, when recollindex is not installed, unless
/// `STORESYNC_REQUIRE_INDEXER=1` (set by `.ci/run`, which installs recollcmd).
final class RecollIndexerTests: XCTestCase {
    static let recollindex = "/usr/bin/recollindex"
    static let recollq = "/usr/bin/recollq"

    func requireRecoll() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.recollindex), FileManager.default.isExecutableFile(atPath: Self.recollq) else {
            let reason = "recollindex/recollq are not installed (Debian: apt-get install recollcmd; .ci/run does)"
            if ProcessInfo.processInfo.environment["STORESYNC_REQUIRE_INDEXER"] == "1" {
                XCTFail("\(reason), and STORESYNC_REQUIRE_INDEXER=1")
                throw XCTSkip(reason)
            }
            print("RecollIndexerTests skipped: \(reason)")
            throw XCTSkip(reason)
        }
    }

    /// Runs recollindex over the configuration directory, then recollq for
    /// `word`: the paths of the documents it finds (`-b` prints one URL a line).
    func index(_ configuration: URL) throws -> Daemon.Result {
        try Daemon.runTool(Self.recollindex, ["-c", configuration.path])
    }

    func search(_ configuration: URL, _ word: String) throws -> [String] {
        let result = try Daemon.runTool(Self.recollq, ["-c", configuration.path, "-b", word])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("file://") }.map { String($0.dropFirst("file://".count)) }
    }

    func testRecollFindsASavedValueAndForgetsItAfterTheDelete() throws {
        try requireRecoll()
        let daemon = try Daemon.Controlled(groupExtra: "\n[group.export]\ndirectory = \"records\"\nplain_text = true\n")
        let root = daemon.directory.appendingPathComponent("records")
        let configuration = daemon.directory.appendingPathComponent("recoll")
        try FileManager.default.createDirectory(at: configuration, withIntermediateDirectories: true)
        // noaspell: the spelling dictionary build needs language data and
        // only slows the test down.
        try Data("topdirs = \(root.path)\nnoaspell = 1\nloglevel = 2\n".utf8).write(to: configuration.appendingPathComponent("recoll.conf"))

        let word = "zanzibarquux"
        try daemon.save("s2", name: word, count: 42)
        try daemon.save("s1", name: "ordinary", count: 1)
        XCTAssertTrue(Daemon.wait(timeout: 20) {
            ExternalRecordsDaemonTests.records(root, naming: word).count == 1 && ExternalRecordsDaemonTests.records(root).count == 2
        }, daemon.daemon.log)
        let record = try XCTUnwrap(ExternalRecordsDaemonTests.records(root, naming: word).first?.path)
        let stem = (record as NSString).deletingPathExtension

        let first = try index(configuration)
        XCTAssertEqual(first.status, 0, first.stderr)
        let hits = try search(configuration, word)
        print("recollq \(word): \(hits)")
        XCTAssertFalse(hits.isEmpty, "recollq found nothing for \(word); recollindex said:\n\(first.stderr)")
        for hit in hits {
            XCTAssertTrue((hit as NSString).deletingPathExtension == stem, "\(hit) is not the record of \(word) (\(record))")
        }
        XCTAssertTrue(try search(configuration, "ordinary").allSatisfy { !$0.hasPrefix(stem + ".") }, "the other object's search found this record")

        // From the store it was saved in: another may not have received it yet.
        try ExternalRecordsDaemonTests.delete(daemon.url("s2"), name: word)
        XCTAssertTrue(Daemon.wait(timeout: 20) { ExternalRecordsDaemonTests.records(root, naming: word).isEmpty }, daemon.daemon.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: stem + ".txt"), "the plain-text rendering outlived the record")
        let second = try index(configuration)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(try search(configuration, word), [], "the deleted object's record is still found")
        XCTAssertFalse(try search(configuration, "ordinary").isEmpty, "the remaining object is no longer found")
    }
}
