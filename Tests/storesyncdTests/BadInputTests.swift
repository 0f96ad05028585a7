#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import Foundation
import ObjectGraph
import XCTest

/// Bad input through the real daemon (issue 16): a corrupt store, a store of
/// an incompatible model and a store whose file goes missing each fail that
/// store, with the reason in the log and the count in `STATUS=`, while the
/// others go on syncing; the store joins again once it is fixed.
final class BadInputTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws { directory = try Daemon.temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    func url(_ name: String) -> URL { directory.appendingPathComponent("\(name).sqlite") }

    static func sql(_ path: String, _ text: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { throw CoreDataError(.sqlite, "open \(path)") }
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5000)
        guard sqlite3_exec(db, text, nil, nil, nil) == SQLITE_OK else { throw CoreDataError(.sqlite, String(cString: sqlite3_errmsg(db))) }
    }

    /// Starts the daemon with a notify socket, rescans every second.
    func start() throws -> (Daemon.Running, SystemdTests.NotifySocket) {
        let config = try Daemon.makeGroup(in: directory, extra: "rescan_interval = \"1s\"")
        return try startExisting(config)
    }

    func startExisting(_ config: String) throws -> (Daemon.Running, SystemdTests.NotifySocket) {
        let systemd = try SystemdTests.NotifySocket(path: directory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8)).sock").path)
        let daemon = try Daemon.Running(["--config", config], environment: ["NOTIFY_SOCKET": systemd.name],
                                        logFile: directory.appendingPathComponent("daemon.log"))
        return (daemon, systemd)
    }

    func insert(_ name: String, into store: URL) throws {
        let app = try Daemon.app(store)
        try app.performAndWait {
            let item = try app.insertNewObject(forEntityName: "Item")
            try item.setValue(name, forKey: "name")
            try item.setValue(Int64(1), forKey: "count")
            try app.save()
        }
    }

    func arrives(_ name: String, in stores: [String], _ daemon: Daemon.Running, file: StaticString = #filePath, line: UInt = #line) {
        let ok = (try? Daemon.wait(timeout: 20) { try stores.allSatisfy { try Daemon.items(url($0))[name] != nil } }) ?? false
        XCTAssertTrue(ok, "\(name) did not reach \(stores)\n\(daemon.log)", file: file, line: line)
    }

    /// The last `STATUS=` received, once one matches.
    func status(_ systemd: SystemdTests.NotifySocket, _ match: (String) -> Bool) -> String? {
        if let seen = systemd.received.last(where: { $0.hasPrefix("STATUS=") || $0.contains("\nSTATUS=") }), match(seen) { return seen }
        return systemd.wait(timeout: 20) { ($0.hasPrefix("STATUS=") || $0.contains("\nSTATUS=")) && match($0) }
    }

    func testCorruptStoreFailsWithTheReasonWhileTheOthersSyncAndJoinsOnceReplaced() throws {
        let config = try Daemon.makeGroup(in: directory, extra: "rescan_interval = \"1s\"")
        var garbage = [UInt8](repeating: 0, count: 8192)
        for index in garbage.indices { garbage[index] = UInt8(truncatingIfNeeded: index &* 7919 &+ 13) }
        try Data(garbage).write(to: url("s2"))
        let (daemon, systemd) = try startExisting(config)

        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.contains("msg=\"store not open\"") }, daemon.log)
        let line = daemon.log.split(separator: "\n").first { $0.contains("msg=\"store not open\"") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("store=s2"), line)
        XCTAssertTrue(line.contains("is not a SQLite store file") && line.contains("error_code=134010"), "the reason names what is wrong: \(line)")
        XCTAssertNotNil(status(systemd) { $0.contains("1 failed") }, "STATUS= shows the failed store: \(systemd.received)")

        try insert("while-s2-is-corrupt", into: url("s1"))
        arrives("while-s2-is-corrupt", in: ["s3"], daemon)

        // Repeated failures are not repeated in the log: one line, however many rounds.
        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.components(separatedBy: "trigger=timer").count > 3 }, daemon.log)
        XCTAssertEqual(daemon.log.components(separatedBy: "msg=\"store failing\"").count - 1, 0, "logged at open, then quiet:\n\(daemon.log)")

        // A valid store in its place joins at its file event and receives everything.
        let fresh = directory.appendingPathComponent("fresh.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: Daemon.model())
        try coordinator.remove(try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: fresh))
        try FileManager.default.removeItem(at: url("s2"))
        try FileManager.default.moveItem(at: fresh, to: url("s2"))
        arrives("while-s2-is-corrupt", in: ["s2"], daemon)
        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.contains("msg=\"store recovered\"") }, daemon.log)
        XCTAssertNotNil(status(systemd) { $0.contains("0 failed") }, "\(systemd.received)")
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }

    /// A SQLite file whose header is intact and whose pages after the first
    /// are garbage (a torn copy, a disk error): the store fails wherever the
    /// damage is met, with SQLite's reason.
    func testStoreWithCorruptPagesFailsWithTheReasonWhileTheOthersSync() throws {
        let config = try Daemon.makeGroup(in: directory, extra: "rescan_interval = \"1s\"")
        for index in 0..<200 { try insert("old-\(index)", into: url("s2")) }
        // Checkpoint the WAL into the file, then overwrite every page after the first.
        let app = try Daemon.app(url("s2"))
        for store in app.persistentStoreCoordinator.persistentStores { try app.persistentStoreCoordinator.remove(store) }
        let handle = try FileHandle(forUpdating: url("s2"))
        let size = try handle.seekToEnd()
        XCTAssertGreaterThan(size, 8192, "the store should span several pages")
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data((0..<Int(size - 4096)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }))
        try handle.close()
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url("s2").path + suffix) }
        let (daemon, systemd) = try startExisting(config)

        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.contains("msg=\"store not open\"") || daemon.log.contains("msg=\"store failing\"") }, daemon.log)
        let line = daemon.log.split(separator: "\n").first { $0.contains("msg=\"store not open\"") || $0.contains("msg=\"store failing\"") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("store=s2"), line)
        XCTAssertTrue(line.contains("database disk image is malformed"), "SQLite's reason: \(line)")
        XCTAssertNotNil(status(systemd) { $0.contains("1 failed") }, "\(systemd.received)")
        try insert("beside-the-corrupt-store", into: url("s1"))
        arrives("beside-the-corrupt-store", in: ["s3"], daemon)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }

    func testStoreOfAnIncompatibleModelFailsWith134100WhileTheOthersSync() throws {
        let config = try Daemon.makeGroup(in: directory, extra: "rescan_interval = \"1s\"")
        // Item with other attributes: the store's version hashes do not match the group's model.
        let item = EntityDescription(name: "Item")
        item.properties = [AttributeDescription(name: "title", type: .string), AttributeDescription(name: "done", type: .boolean)]
        let other = ManagedObjectModel()
        other.entities = [item]
        try FileManager.default.removeItem(at: url("s2"))
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: other)
        try coordinator.remove(try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url("s2")))
        let (daemon, systemd) = try startExisting(config)

        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.contains("msg=\"store not open\"") }, daemon.log)
        let line = daemon.log.split(separator: "\n").first { $0.contains("msg=\"store not open\"") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("store=s2"), line)
        XCTAssertTrue(line.contains("error_code=134100"), line)
        XCTAssertTrue(line.contains("error_name=NSPersistentStoreIncompatibleVersionHashError"), line)
        XCTAssertNotNil(status(systemd) { $0.contains("1 failed") }, "\(systemd.received)")
        try insert("beside-the-other-model", into: url("s1"))
        arrives("beside-the-other-model", in: ["s3"], daemon)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }

    func testStoreFileMissingFailsThatStoreUntilItIsBack() throws {
        let (daemon, systemd) = try start()
        XCTAssertTrue(Daemon.wait(timeout: 20) { Daemon.startRoundDone(daemon.log) }, daemon.log)
        try insert("before", into: url("s1"))
        arrives("before", in: ["s2", "s3"], daemon)

        // s2 goes away (moved, as by an operator): it fails, the others go on.
        let aside = directory.appendingPathComponent("aside")
        try FileManager.default.createDirectory(at: aside, withIntermediateDirectories: true)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: url("s2").path + suffix) {
            try FileManager.default.moveItem(atPath: url("s2").path + suffix, toPath: aside.appendingPathComponent("s2.sqlite" + suffix).path)
        }
        try insert("while-s2-is-missing", into: url("s1"))
        arrives("while-s2-is-missing", in: ["s3"], daemon)
        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.contains("msg=\"store failing\"") }, daemon.log)
        let line = daemon.log.split(separator: "\n").first { $0.contains("msg=\"store failing\"") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("store=s2") && line.contains("is missing"), line)
        XCTAssertNotNil(status(systemd) { $0.contains("1 failed") }, "\(systemd.received)")

        // Back in place: it recovers and catches up.
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: aside.appendingPathComponent("s2.sqlite" + suffix).path) {
            try FileManager.default.moveItem(atPath: aside.appendingPathComponent("s2.sqlite" + suffix).path, toPath: url("s2").path + suffix)
        }
        arrives("while-s2-is-missing", in: ["s2"], daemon)
        XCTAssertTrue(Daemon.wait(timeout: 20) { daemon.log.contains("msg=\"store recovered\"") }, daemon.log)
        let recovered = daemon.log.split(separator: "\n").first { $0.contains("msg=\"store recovered\"") }.map(String.init) ?? ""
        XCTAssertTrue(recovered.contains("store=s2") && recovered.contains("failures="), recovered)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }

    /// A store file replaced while the daemon runs (a copy renamed over it,
    /// as a restore would): the daemon reopens the group on the new file
    /// instead of writing the old, unlinked one.
    func testStoreFileReplacedWhileRunningIsReopened() throws {
        let (daemon, _) = try start()
        XCTAssertTrue(Daemon.wait(timeout: 20) { Daemon.startRoundDone(daemon.log) }, daemon.log)
        try insert("before", into: url("s1"))
        arrives("before", in: ["s2", "s3"], daemon)
        // A copy of s2 (every page in the main file first), renamed over it.
        let copy = directory.appendingPathComponent("copy.sqlite")
        try Self.sql(url("s2").path, "PRAGMA wal_checkpoint(TRUNCATE)")
        try FileManager.default.copyItem(at: url("s2"), to: copy)
        XCTAssertEqual(rename(copy.path, url("s2").path), 0)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url("s2").path + suffix) }
        try insert("after-replace", into: url("s1"))
        arrives("after-replace", in: ["s2", "s3"], daemon)
        XCTAssertTrue(daemon.log.contains("msg=\"store file replaced; reopening the group\""), daemon.log)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }

    /// A store file absent at start-up (its directory exists) is created by
    /// the engine and receives the group's contents: an application that
    /// has not made its store yet finds it ready (the config allows this).
    func testStoreFileAbsentAtStartIsCreatedAndFilled() throws {
        let config = try Daemon.makeGroup(in: directory, extra: "rescan_interval = \"1s\"")
        try insert("existing", into: url("s1"))
        try FileManager.default.removeItem(at: url("s3"))
        let (daemon, _) = try startExisting(config)
        arrives("existing", in: ["s2", "s3"], daemon)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 30), 0, daemon.log)
    }
}
