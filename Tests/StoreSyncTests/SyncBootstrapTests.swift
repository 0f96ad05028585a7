import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// A store joining the group is read whole (docs/SYNC.md "Bootstrap"), its
/// cursor starting at the store's history position before the read.
@Suite struct SyncBootstrapTests {
    /// An application committing while the store is read whole: the
    /// position and the objects must be of one state of the store. Read
    /// apart (folders first, then records), a folder's members were read
    /// before a record moved into it and the record after: the hub, written
    /// an object per save, set the folder's members again at the end without
    /// the record (a record moved out that no store moved), and the pull
    /// after the bootstrap moved it back (found by the SIGKILL crash test: a
    /// writer saving while the engine's first process bootstrapped its store).
    @Test func aCommitDuringTheBootstrapReadIsPulledOnceAfterIt() throws {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s1 = directory.appendingPathComponent("s1.sqlite")
        let app = try SyncFixtures.app(s1)
        try app.performAndWait {
            let folder = try app.insertNewObject(forEntityName: "Folder")
            try folder.setValue("f", forKey: "name")
            for name in ["m", "r"] {
                let record = try app.insertNewObject(forEntityName: "Record")
                try record.setValue(name, forKey: "name")
                if name == "m" { try record.setValue(folder, forKey: "folder") }
            }
            try app.save()
        }
        let group = try SyncChunkingTests.group(directory, [.objectTrump, .objectTrump], chunk: 2_000, hubPart: 1)
        let hub = group.hub as! SyncChunkingTests.FailingHub
        // Once the bootstrap has read the folders (their hub states are looked up), the application moves r into f.
        final class Flag: @unchecked Sendable { var value = false }
        let saved = Flag()
        let done = DispatchSemaphore(value: 0)
        hub.onStateRead = {
            hub.onStateRead = nil
            Thread.detachNewThread {
                try? app.performAndWait {
                    app.reset()
                    let folders = try app.fetch(FetchRequest(entityName: "Folder"))
                    let request = FetchRequest(entityName: "Record")
                    request.predicate = try FetchPredicate(format: "name == 'r'")
                    try app.fetch(request).first?.setValue(folders.first, forKey: "folder")
                    try app.save()
                    saved.value = true
                }
                done.signal()
            }
            // Long enough for the save to commit unless the bootstrap holds the store's write lock.
            if done.wait(timeout: .now() + 0.5) == .success { done.signal() }
        }
        try group.runUntilIdle()
        done.wait()
        #expect(saved.value)
        try group.runUntilIdle()
        let r = try #require(try SyncFixtures.contents(s1).first { $0.value["name"] == ObjectState.canonical("r") }?.key)
        let changes = try hub.inner.changes(after: 0).filter { $0.globalIdentifier == r }
        #expect(changes.map { $0.isInsert ? "insert" : "update \($0.changedProperties.keys.sorted())" } == ["insert", "update [\"folder\"]"],
                "the hub's changes of r: its insert, then the application's one move")
        try group.close()
        try SyncChunkingTests.expectConverged(directory, stores: 2, records: 2)
    }
}
