import CSQLite
import Foundation
import Testing
@testable import ObjectGraph

/// SQLite's locks on a database file are POSIX advisory locks, held per
/// process: closing *any* descriptor of the file in the process drops every
/// lock the process holds on it ("How To Corrupt An SQLite Database File",
/// section 2.2). If that happens under a live writer, another process's
/// connection believes it is the file's last user, checkpoints and deletes
/// the `-wal`, and the writer's next commits go to an unlinked file: lost.
///
/// Each test here opens a store, saves, then does something that opens the
/// same file again in this process (a second coordinator, a read-only
/// store, a metadata read or write), lets a real second process read the
/// file with a read-write connection (what the `sqlite3` shell does), saves
/// again, and checks from another process and after reopening that both
/// saves are there and the file is sound.
@Suite struct SQLiteFileLockSafetyTests {
    /// A store file with one saved department, and its open stack.
    func openedStore() throws -> (url: URL, coordinator: PersistentStoreCoordinator, context: ManagedObjectContext) {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Locks.sqlite")
        let (coordinator, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try context.performAndWait {
            _ = try Company.department(context, "first")
            try context.save()
        }
        return (url, coordinator, context)
    }

    /// Department names as another process sees them: an exit-test child
    /// that reads with a read-write connection and closes it, which
    /// checkpoints (and removes the `-wal`) when it believes it is last.
    static func readInAnotherProcess(_ path: String, expecting names: [String]) async {
        await #expect(processExitsWith: .success) { [path = path as String, names = names as [String]] in
            let rows = try RawSQLite.query(path, "SELECT ZNAME FROM ZDEPARTMENT ORDER BY Z_PK", readWrite: true)
            let seen = rows.map { $0[0].text ?? "" }
            guard seen == names else { throw RawSQLite.Failure(message: "saw \(seen), expected \(names)") }
        }
    }

    /// Saves a second department, then checks it from another process, and
    /// after closing everything, by reopening the file and by integrity check.
    func saveAgainAndCheck(_ url: URL, _ coordinator: PersistentStoreCoordinator, _ context: ManagedObjectContext) async throws {
        try context.performAndWait {
            _ = try Company.department(context, "second")
            try context.save()
        }
        await Self.readInAnotherProcess(url.path, expecting: ["first", "second"])
        for store in coordinator.persistentStores { try coordinator.remove(store) }

        let (_, reopened) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        let names = try reopened.performAndWait {
            try reopened.fetch(Company.request("Department", sortedBy: "name")).map { try $0.value(forKey: "name") as? String }
        }
        #expect(names == ["first", "second"])
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
    }

    /// The reproduction: a second coordinator on the same file is
    /// added and removed between two saves of the first.
    @Test func secondCoordinatorAddedAndRemovedLosesNoSave() async throws {
        let (url, coordinator, context) = try openedStore()
        let second = try PersistentStoreCoordinator(managedObjectModel: coordinator.managedObjectModel)
        let store = try second.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        try second.remove(store)
        await Self.readInAnotherProcess(url.path, expecting: ["first"])
        try await saveAgainAndCheck(url, coordinator, context)
    }

    /// A second coordinator that stays open (and reads) while the other process reads.
    @Test func secondCoordinatorKeptOpenLosesNoSave() async throws {
        let (url, coordinator, context) = try openedStore()
        let (_, other) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        #expect(try other.performAndWait { try other.count(for: FetchRequest(entityName: "Department")) } == 1)
        await Self.readInAnotherProcess(url.path, expecting: ["first"])
        try await saveAgainAndCheck(url, coordinator, context)
    }

    /// A read-only store of the same file, opened and removed in this process.
    @Test func readOnlyOpenLosesNoSave() async throws {
        let (url, coordinator, context) = try openedStore()
        let reader = try PersistentStoreCoordinator(managedObjectModel: coordinator.managedObjectModel)
        let store = try reader.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                                  options: [PersistentStore.readOnlyOption: true])
        let context2 = ManagedObjectContext(coordinator: reader)
        #expect(try context2.performAndWait { try context2.count(for: FetchRequest(entityName: "Department")) } == 1)
        try reader.remove(store)
        await Self.readInAnotherProcess(url.path, expecting: ["first"])
        try await saveAgainAndCheck(url, coordinator, context)
    }

    /// Metadata read and written by URL (PC-23, PS-15) while the store is open.
    @Test func metadataByURLLosesNoSave() async throws {
        let (url, coordinator, context) = try openedStore()
        var metadata = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        #expect(metadata[SQLiteMetadata.storeTypeKey] as? String == "SQLite")
        metadata["Owner"] = "tests"
        try SQLiteStore.setMetadata(metadata, forStoreAt: url)
        await Self.readInAnotherProcess(url.path, expecting: ["first"])
        try await saveAgainAndCheck(url, coordinator, context)
    }

    /// Without any second open, the sequence works too (the control case).
    @Test func noSecondOpenLosesNoSave() async throws {
        let (url, coordinator, context) = try openedStore()
        await Self.readInAnotherProcess(url.path, expecting: ["first"])
        try await saveAgainAndCheck(url, coordinator, context)
    }

    /// The header read that replaced `FileHandle` goes through SQLite's VFS:
    /// it reads the signature and the WAL flag of a live store, and of a
    /// file that is not SQLite, without touching locks.
    @Test func headerReadThroughSQLite() throws {
        let (url, _, _) = try openedStore()
        let header = try #require(try SQLiteConnection.readFileHeader(path: url.path, count: 20))
        #expect(header.prefix(16) == SQLiteStore.sqliteSignature)
        #expect(header[18] == 2 && header[19] == 2)   // WAL
        let text = url.deletingLastPathComponent().appendingPathComponent("notes.txt")
        try Data("hello".utf8).write(to: text)
        #expect(try SQLiteConnection.readFileHeader(path: text.path, count: 20) == Data("hello".utf8))
        #expect(try SQLiteConnection.readFileHeader(path: text.path + ".missing", count: 20) == nil)
    }
}
