import CSQLite
import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// A store transaction of more row changes than a pull chunk is settled at
/// the hub in parts (docs/SYNC.md, "Settled in parts"). Each test here runs
/// one scenario twice, with the same policies, once with chunks larger than
/// the transaction (settled whole) and once with chunks it spans several of
/// (settled in parts), and requires the same hub and stores at the end, as
/// well as the outcome the policy table gives. The transactions are a foreign
/// writer's raw SQL (any program on the host may write a store's file).
@Suite struct SyncSettledInPartsTests {
    /// Row changes per chunk when settled in parts.
    static let partChunk = 20

    /// Every object of a store or hub file keyed by entity and name (global
    /// identifiers differ between runs), relationships as the related objects'
    /// names, so two runs of one scenario compare.
    static func contentsByName(_ url: URL) throws -> [String: [String: String]] {
        let byGID = try SyncFixtures.contents(url)
        var names: [String: String] = [:]
        func plain(_ name: String?) -> String { name.map { $0.hasPrefix("String:") ? String($0.dropFirst(7)) : $0 } ?? "?" }
        for (gid, fields) in byGID { names[gid.uuidString] = plain(fields["name"]) }
        func rename(_ text: String) -> String {
            text.split(separator: ",").map { names[String($0)] ?? String($0) }.sorted().joined(separator: ",")
        }
        var out: [String: [String: String]] = [:]
        for fields in byGID.values {
            var renamed = fields
            for key in ["folder", "records", "labels"] { if let value = fields[key] { renamed[key] = rename(value) } }
            let key = "\(fields["entity"] ?? "?") \(plain(fields["name"]))"
            #expect(out[key] == nil, "two objects are \(key) in \(url.lastPathComponent)")
            out[key] = renamed
        }
        return out
    }

    /// SQL that inserts `count` records named `prefix1…` (no folder), keeping
    /// Z_PRIMARYKEY as Core Data does: `count` row changes.
    static func padding(_ count: Int, _ prefix: String) -> String {
        """
        WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < \(count)) \
        INSERT INTO ZRECORD (Z_PK, Z_ENT, Z_OPT, ZNAME, ZA) \
        SELECT (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record') + i, (SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record'), 1, '\(prefix)' || i, 0 FROM c; \
        UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + \(count) WHERE Z_NAME = 'Record';
        """
    }

    static func insertRecord(_ name: String, a: Int, folder: String = "NULL") -> String {
        """
        UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Record'; \
        INSERT INTO ZRECORD (Z_PK, Z_ENT, Z_OPT, ZNAME, ZA, ZFOLDER) SELECT Z_MAX, Z_ENT, 1, '\(name)', \(a), \(folder) FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record';
        """
    }

    struct Outcome {
        var hub: [String: [String: String]]
        var stores: [[String: [String: String]]]
        var conflicts: [SyncConflict]
        var parted: Int
    }

    /// Runs one scenario: `setUp` saves through s1's application (synced),
    /// `before` (optional) runs with the group open before the foreign
    /// transaction (a concurrent change of another store, pulled first), then
    /// s1's foreign transaction `sql` is pulled with chunks of `chunk` changes.
    static func run(_ policies: [SyncPolicy], chunk: Int, setUp: (ManagedObjectContext) throws -> Void,
                    before: ((SyncGroup, URL) throws -> Void)? = nil, sql: [String]) throws -> Outcome {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try SyncChunkingTests.prepare(directory, policies)
        let s1 = directory.appendingPathComponent("s1.sqlite")
        let app = try SyncFixtures.app(s1)
        try app.performAndWait {
            try setUp(app)
            try app.save()
        }
        let group = try SyncChunkingTests.group(directory, policies, chunk: chunk)
        try group.runUntilIdle()
        try before?(group, directory)
        let parted = group.statistics.partedTransactions
        try SyncBadInputTests.sql(s1.path, (["BEGIN;"] + sql + ["COMMIT;"]).joined(separator: " "))
        try group.runUntilIdle()
        let conflicts = try group.conflicts()
        let outcome = Outcome(hub: try contentsByName(directory.appendingPathComponent("state/hub.sqlite")),
                              stores: try (1...policies.count).map { try contentsByName(directory.appendingPathComponent("s\($0).sqlite")) },
                              conflicts: conflicts, parted: group.statistics.partedTransactions - parted)
        try group.close()
        return outcome
    }

    /// The scenario settled whole and in parts: the same hub, stores and
    /// conflicts. Returns the parted run's outcome.
    static func wholeAndInParts(_ policies: [SyncPolicy], setUp: (ManagedObjectContext) throws -> Void,
                                before: ((SyncGroup, URL) throws -> Void)? = nil, sql: [String]) throws -> Outcome {
        let whole = try run(policies, chunk: 100_000, setUp: setUp, before: before, sql: sql)
        let parts = try run(policies, chunk: partChunk, setUp: setUp, before: before, sql: sql)
        let label = "policies \(policies.map(\.rawValue))"
        #expect(whole.parted == 0, "\(label): settled whole")
        #expect(parts.parted == 1, "\(label): settled in parts")
        func compare(_ place: String, _ a: [String: [String: String]], _ b: [String: [String: String]]) {
            for key in Set(a.keys).union(b.keys).sorted() where a[key] != b[key] {
                Issue.record("\(label): \(place) \(key): whole \(a[key].map { "\($0)" } ?? "absent"), in parts \(b[key].map { "\($0)" } ?? "absent")")
            }
        }
        compare("hub", whole.hub, parts.hub)
        for n in whole.stores.indices { compare("s\(n + 1)", whole.stores[n], parts.stores[n]) }
        #expect(whole.conflicts.map { "\($0.kind)" }.sorted() == parts.conflicts.map { "\($0.kind)" }.sorted(), "\(label): conflicts")
        if whole.conflicts.isEmpty {
            // With no conflict left, every store holds what the hub holds.
            for (n, store) in parts.stores.enumerated() { compare("s\(n + 1) against the hub, in parts:", parts.hub, store) }
        }
        return parts
    }

    /// Issue 27, case 1: one foreign transaction inserts notes pointing at a
    /// folder row it inserts only after the first part boundary (a forward
    /// reference: they wait for the last part), then, in a later part,
    /// updates the first, deletes the second and clears the third's folder.
    /// Every later change of the held-back notes must apply.
    @Test(arguments: SyncPolicy.allCases)
    func laterChangesOfHeldBackObjectsApply(policy: SyncPolicy) throws {
        let folderKey = "(SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder')"
        let parts = try Self.wholeAndInParts([policy, .objectTrump], setUp: { app in
            try app.insertNewObject(forEntityName: "Folder").setValue("old", forKey: "name")
        }, sql: [
            "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Folder';",
            Self.insertRecord("n1", a: 1, folder: folderKey),
            Self.insertRecord("n2", a: 1, folder: folderKey),
            Self.insertRecord("n3", a: 1, folder: folderKey),
            Self.padding(Self.partChunk, "p"),
            "INSERT INTO ZFOLDER (Z_PK, Z_ENT, Z_OPT, ZNAME) SELECT Z_MAX, Z_ENT, 1, 'new' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Folder';",
            Self.padding(Self.partChunk, "q"),
            "UPDATE ZRECORD SET ZA = 42, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'n1';",
            "DELETE FROM ZRECORD WHERE ZNAME = 'n2';",
            "UPDATE ZRECORD SET ZFOLDER = NULL, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'n3';",
        ])
        #expect(parts.conflicts.isEmpty)
        #expect(parts.hub["Record n1"]?["a"] == ObjectState.canonical(Int32(42)), "n1 at the hub: \(parts.hub["Record n1"] ?? [:])")
        #expect(parts.hub["Record n1"]?["folder"] == "new")
        #expect(parts.hub["Record n2"] == nil, "n2 was deleted")
        #expect(parts.hub["Record n3"]?["folder"] == "nil", "n3's folder was cleared: \(parts.hub["Record n3"] ?? [:])")
        #expect(parts.hub["Folder new"]?["records"] == "n1")
        #expect(parts.hub.count == 2 + 2 + 2 * Self.partChunk)
    }

    /// Issue 27, case 2: s2 changes a note's `b`; then s1's foreign
    /// transaction changes its `a` and, after a part boundary, deletes it.
    /// Settled whole that is a delete against an update (MOC-MP-10 i): the
    /// store-trump and rollback policies cancel the delete and s1 gets the
    /// hub's note back, which never had s1's intermediate `a`; object-trump
    /// and overwrite delete; error records one conflict. In parts it must be
    /// the same: an object's earlier change in the transaction is never
    /// applied on its own.
    @Test(arguments: SyncPolicy.allCases)
    func anUpdateThenADeleteInLaterPartsIsOneDelete(policy: SyncPolicy) throws {
        let parts = try Self.wholeAndInParts([policy, .objectTrump], setUp: { app in
            let note = try app.insertNewObject(forEntityName: "Record")
            try note.setValue("note", forKey: "name")
            try note.setValue(Int32(1), forKey: "a")
            try note.setValue(Int32(1), forKey: "b")
        }, before: { group, directory in
            let s2 = try SyncFixtures.app(directory.appendingPathComponent("s2.sqlite"))
            try s2.performAndWait {
                let request = FetchRequest(entityName: "Record")
                request.predicate = try FetchPredicate(format: "name == 'note'")
                try #require(try s2.fetch(request).first).setValue(Int32(2), forKey: "b")
                try s2.save()
            }
            try group.pull(try group.member("s2"))
        }, sql: [
            "UPDATE ZRECORD SET ZA = 7, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'note';",
            Self.padding(Self.partChunk + 5, "p"),
            "DELETE FROM ZRECORD WHERE ZNAME = 'note';",
        ])
        switch policy {
        case .storeTrump, .rollback:
            #expect(parts.conflicts.isEmpty)
            #expect(parts.hub["Record note"]?["a"] == ObjectState.canonical(Int32(1)), "no store ever committed a = 7 with the note kept: \(parts.hub["Record note"] ?? [:])")
            #expect(parts.hub["Record note"]?["b"] == ObjectState.canonical(Int32(2)))
            #expect(parts.stores[0]["Record note"] == parts.hub["Record note"], "s1 got the note back")
        case .objectTrump, .overwrite:
            #expect(parts.conflicts.isEmpty)
            #expect(parts.hub["Record note"] == nil)
        case .error:
            #expect(parts.conflicts.map(\.kind) == [.deleteVersusUpdate])
            #expect(parts.hub["Record note"]?["a"] == ObjectState.canonical(Int32(1)))
        }
    }
}
