import Foundation
import Testing
@testable import ObjectGraph

/// A writer killed with SIGKILL in the middle of its saves leaves data and
/// history consistent: every committed change is recorded and nothing is
/// recorded that did not commit (both or neither), so replaying the history
/// still rebuilds the store exactly.
@Suite struct PersistentHistoryCrashTests {
    @Test(arguments: [5, 20, 45, 80, 130])
    func writerKilledMidSaveLeavesDataAndHistoryConsistent(killAfterMilliseconds: Int) async throws {
        let directory = try TestPaths.temporaryDirectory()
        let url = directory.appendingPathComponent("Killed.sqlite")
        let model = HistoryModel.make()
        do {
            let (_, context) = try HistoryModel.stack(url, model: model)
            try PersistentHistoryReplayPropertyTests.writeBatches(context, seed: 7, batches: 3)
        }
        let path = url.path
        await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String, killAfterMilliseconds = killAfterMilliseconds as Int] in
            // The kill lands wherever the saving thread happens to be, once
            // it has committed at least once.
            let firstSave = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                firstSave.wait()
                usleep(useconds_t(killAfterMilliseconds * 1000))
                kill(getpid(), SIGKILL)
            }
            let (_, context) = try HistoryModel.stack(URL(fileURLWithPath: path), model: HistoryModel.make())
            context.transactionAuthor = "doomed"
            for round in 0..<100_000 {
                try PersistentHistoryReplayPropertyTests.writeBatches(context, seed: UInt64(round), batches: 1)
                if round == 0 { firstSave.signal() }
            }
        }

        #expect(try RawSQLite.query(path, "PRAGMA integrity_check").first?.first?.text == "ok")
        // Every live row has exactly one live identifier and its insert recorded.
        for (table, entity) in [("ZTAG", "Tag"), ("ZITEM", "Item"), ("ZOWNER", "Owner")] {
            let unmatched = try RawSQLite.query(path, """
                SELECT count(*) FROM \(table) t JOIN Z_PRIMARYKEY p ON p.Z_NAME = '\(entity)' \
                WHERE NOT EXISTS (SELECT 1 FROM OGH_GLOBALID g WHERE g.TBL = p.Z_ENT AND g.PK = t.Z_PK AND g.DEAD = 0 \
                AND EXISTS (SELECT 1 FROM OGH_CHANGE c WHERE c.GID = g.GID AND c.KIND = 0))
                """).first?.first?.int
            #expect(unmatched == 0, "\(table): rows without an identifier or a recorded insert")
            let orphans = try RawSQLite.query(path, """
                SELECT count(*) FROM OGH_GLOBALID g JOIN Z_PRIMARYKEY p ON p.Z_ENT = g.TBL AND p.Z_NAME = '\(entity)' \
                WHERE g.DEAD = 0 AND NOT EXISTS (SELECT 1 FROM \(table) t WHERE t.Z_PK = g.PK)
                """).first?.first?.int
            #expect(orphans == 0, "\(table): identifiers of rows that never committed")
        }
        #expect(try RawSQLite.query(path, "SELECT count(*) FROM OGH_STATE WHERE CURRENTTX IS NOT NULL").first?.first?.int == 0)

        let (_, original) = try HistoryModel.stack(url, model: model)
        let transactions = try original.execute(.fetchHistory(after: nil)).transactions
        #expect(transactions.contains { $0.author == "doomed" })
        let (_, copy) = try HistoryModel.stack(directory.appendingPathComponent("Replayed.sqlite"), model: model)
        try PersistentHistoryReplayPropertyTests.replay(transactions, into: copy)
        let expected = try PersistentHistoryReplayPropertyTests.contents(original)
        let actual = try PersistentHistoryReplayPropertyTests.contents(copy)
        #expect(actual.count == expected.count)
        for (gid, fields) in expected where actual[gid] != fields {
            Issue.record("kill after \(killAfterMilliseconds) ms: \(gid) differs after replay: \(fields) vs \(actual[gid] ?? [:])")
        }
    }
}
