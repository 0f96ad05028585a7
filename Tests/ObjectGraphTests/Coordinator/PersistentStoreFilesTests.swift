import Foundation
import Testing
@testable import ObjectGraph

/// Removing and replacing store files (PSC-DS-01, PSC-RP-01): a SQLite
/// store's side files go with it, a store this coordinator has added is
/// removed first, and a replacement copies a consistent snapshot.
@Suite struct PersistentStoreFilesTests {
    static let sqlite = PersistentStoreCoordinator.sqliteStoreType

    /// A SQLite store at a new URL holding one department per name, left
    /// added to the returned coordinator (its WAL not checkpointed).
    static func store(_ names: [String], at url: URL? = nil) throws -> (URL, PersistentStoreCoordinator) {
        let url = try url ?? TestPaths.temporaryDirectory().appendingPathComponent("Store.sqlite")
        let (coordinator, context) = try Company.stack(type: sqlite, url: url)
        try context.performAndWait {
            for name in names { _ = try Company.department(context, name) }
            try context.save()
        }
        return (url, coordinator)
    }

    static func names(at url: URL) throws -> [String] {
        let (_, context) = try Company.stack(type: sqlite, url: url)
        return try context.performAndWait {
            try context.fetch(FetchRequest(entityName: "Department")).compactMap { try $0.value(forKey: "name") as? String }.sorted()
        }
    }

    static func files(beside url: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
            .filter { $0.hasPrefix(url.lastPathComponent) }.sorted()
    }

    // PSC-DS-01
    @Test func destroyRemovesTheAddedStoreAndEveryFileOfIt() throws {
        let (url, coordinator) = try Self.store(["Sales", "Research"])
        #expect(try Self.files(beside: url).contains("Store.sqlite-wal"))
        try coordinator.destroyPersistentStore(at: url, ofType: Self.sqlite)
        #expect(coordinator.persistentStores.isEmpty)
        #expect(try Self.files(beside: url).isEmpty)
        // A new store at the URL starts empty: no old WAL is replayed into it.
        #expect(try Self.names(at: url).isEmpty)
        // Nothing there is not an error; the newer spelling does the same.
        try coordinator.destroyPersistentStore(at: url.deletingLastPathComponent().appendingPathComponent("none.sqlite"), type: Self.sqlite)
    }

    @Test func destroyAndReplaceRefuseAnUnknownType() throws {
        let (url, coordinator) = try Self.store(["Sales"])
        let destroy = #expect(throws: CoreDataError.self) { try coordinator.destroyPersistentStore(at: url, ofType: "NoSuchType") }
        #expect(destroy?.code == .persistentStoreInvalidType)
        let replace = #expect(throws: CoreDataError.self) {
            try coordinator.replacePersistentStore(at: url, withPersistentStoreFrom: url, ofType: "NoSuchType")
        }
        #expect(replace?.code == .persistentStoreInvalidType)
        // Refused before anything was touched.
        #expect(coordinator.persistentStores.count == 1)
        #expect(try Self.names(at: url) == ["Sales"])
    }

    // PSC-RP-01: the copy holds what the source's WAL holds, read while the
    // source is still open in its own coordinator; the source is unchanged
    // and the destination's old content and side files are gone.
    @Test func replaceCopiesASnapshotOfTheSourceOverTheDestination() throws {
        let (source, sourceCoordinator) = try Self.store(["Research", "Sales"])
        let (destination, destinationCoordinator) = try Self.store(["Old"])
        try destinationCoordinator.replacePersistentStore(at: destination, destinationOptions: nil,
                                                          withPersistentStoreFrom: source, sourceOptions: nil, ofType: Self.sqlite)
        // The destination, added here, was removed first.
        #expect(destinationCoordinator.persistentStores.isEmpty)
        #expect(try Self.files(beside: destination) == ["Store.sqlite"])
        #expect(try Self.names(at: destination) == ["Research", "Sales"])
        #expect(try Self.names(at: source) == ["Research", "Sales"])
        #expect(sourceCoordinator.persistentStores.count == 1)
        // Replacing a store with itself leaves it as it is.
        try sourceCoordinator.replacePersistentStore(at: source, withPersistentStoreFrom: source, type: Self.sqlite)
        #expect(try Self.names(at: source) == ["Research", "Sales"])
    }

    /// PSC-RP-01: with no source, nothing changes and 260 names the path.
    @Test func replaceWithNoSourceLeavesTheDestination() throws {
        let (destination, coordinator) = try Self.store(["Kept"])
        let missing = destination.deletingLastPathComponent().appendingPathComponent("missing.sqlite")
        let error = #expect(throws: CoreDataError.self) {
            try coordinator.replacePersistentStore(at: destination, withPersistentStoreFrom: missing, ofType: Self.sqlite)
        }
        #expect(error?.code == .fileReadNoSuchFile)
        #expect(error?.userInfo[CoreDataError.filePathErrorKey] as? String == missing.path)
        #expect(coordinator.persistentStores.count == 1)
        #expect(try Self.names(at: destination) == ["Kept"])
    }
}
