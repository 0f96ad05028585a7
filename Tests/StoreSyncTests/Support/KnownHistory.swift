import Foundation
import ObjectGraph
@testable import StoreSync

/// A history the change-log and verifier tests know step by step: three
/// stores (s1 object-trump, s2 error, s3 store-trump) of `SyncFixtures.model()`
/// written by their applications (authors app1, app2, app3) and a foreign
/// writer (SQL in s3), synced by a real `SyncGroup` in process, with one
/// conflict (s2 and s1 both change record one's `b`) resolved taking the hub.
///
/// Steps: 1. app1 inserts folder Inbox and record one (a=1) in it;
/// round. 2. app2 sets a=2 on one; round. 3. SQL renames one to "sql" in s3;
/// round. (`boundary`) 4. app1 sets b=7, app2 sets b=5; round: s1 is pulled
/// first, so s2's change meets the hub's and conflict 1 is recorded. 5. The
/// conflict is resolved taking the hub; rounds until idle.
struct KnownHistory {
    let directory: URL
    let group: SyncGroup
    let urls: [URL]
    let folder: UUID
    let record: UUID
    /// A time strictly after step 3 and before step 4.
    let boundary: Date

    var configuration: SyncGroupConfiguration { group.configuration }

    static func make() throws -> KnownHistory {
        let directory = try SyncFixtures.directory()
        let group = try SyncFixtures.group([.objectTrump, .error, .storeTrump], in: directory)
        let urls = (1...3).map { directory.appendingPathComponent("s\($0).sqlite") }
        try group.runUntilIdle()
        let apps = try urls.enumerated().map { try SyncFixtures.app($0.element, author: "app\($0.offset + 1)") }

        let (folderID, recordID) = try apps[0].performAndWait {
            let folder = try apps[0].insertNewObject(forEntityName: "Folder")
            try folder.setValue("Inbox", forKey: "name")
            let record = try apps[0].insertNewObject(forEntityName: "Record")
            try record.setValue("one", forKey: "name")
            try record.setValue(Int32(1), forKey: "a")
            try record.setValue(folder, forKey: "folder")
            try apps[0].save()
            return (folder.objectID, record.objectID)
        }
        let gids = try apps[0].persistentStoreCoordinator.globalIdentifiers(for: [folderID, recordID])
        let folder = gids[folderID]!, record = gids[recordID]!
        try group.runUntilIdle()

        try set(apps[1], record, "a", Int32(2))
        try group.runUntilIdle()

        try SyncBadInputTests.sql(urls[2].path, "UPDATE ZRECORD SET ZNAME = 'sql', Z_OPT = Z_OPT + 1 WHERE ZNAME = 'one'")
        try group.runUntilIdle()

        Thread.sleep(forTimeInterval: 0.02)
        let boundary = Date()
        Thread.sleep(forTimeInterval: 0.02)

        try set(apps[0], record, "b", Int32(7))
        try set(apps[1], record, "b", Int32(5))
        try group.runRound()
        let conflicts = try group.conflicts()
        precondition(conflicts.count == 1 && conflicts[0].store == "s2", "the known history expects one conflict of s2, got \(conflicts)")
        try group.resolve(conflicts[0].id, taking: .hub)
        try group.runUntilIdle()
        return KnownHistory(directory: directory, group: group, urls: urls, folder: folder, record: record, boundary: boundary)
    }

    static func set(_ app: ManagedObjectContext, _ gid: UUID, _ key: String, _ value: Any) throws {
        try app.performAndWait {
            app.reset()
            // The engine writes the file too: read the object as stored now.
            app.stalenessInterval = 0
            guard let object = try app.existingObject(withGlobalIdentifier: gid) else { throw CoreDataError(.persistentStoreOperation, "no object \(gid)") }
            try object.setValue(value, forKey: key)
            try app.save()
        }
    }

    /// Every transaction of one file, straight from ObjectGraph (the reference
    /// the change log is checked against).
    static func transactions(_ url: URL, model: ManagedObjectModel) throws -> [PersistentHistoryTransaction] {
        let file = try ReadOnlyStoreFile(url: url, model: model)
        defer { file.close() }
        return try file.coordinator.execute(.fetchHistory(after: nil)).transactions
    }
}
