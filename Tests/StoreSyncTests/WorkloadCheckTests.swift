import Foundation
import ObjectGraph
import SyncWorkload
import Testing
@testable import StoreSync

/// The checker the chaos and crash tests rely on finds each kind of damage:
/// writers save, the engine syncs, the check is clean; then each fault is
/// made by hand and must be counted as what it is.
@Suite struct WorkloadCheckTests {
    @Test func theCheckerCountsEachKindOfDamage() throws {
        let directory = try SyncFixtures.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = WorkloadModel.model()
        let stores = (1...3).map { ("s\($0)", directory.appendingPathComponent("s\($0).sqlite")) }
        let configuration = SyncGroupConfiguration(name: "check", model: model, stateDirectory: directory.appendingPathComponent("state"),
                                                   stores: stores.map { SyncStoreConfiguration(name: $0.0, url: $0.1, policy: .objectTrump) })
        let logs = (1...2).map { directory.appendingPathComponent("w\($0).log") }
        let group = try SyncGroup(configuration: configuration)
        var rng = WorkloadRandom(seed: 0xC4EC)
        for index in 0..<2 {
            let writer = try WorkloadWriter(name: "w\(index + 1)", storeName: "s\(index + 1)", store: stores[index].1, model: model, log: logs[index])
            for _ in 0..<40 {
                writer.step(.mixed, &rng)
                if Bool.random(using: &rng) { try group.runRound() }
            }
        }
        try group.runUntilIdle()
        try group.close()
        let hubDirectory = directory.appendingPathComponent("state")
        func check() throws -> WorkloadCheck.Report {
            try WorkloadCheck.run(model: model, stores: stores, hubDirectory: hubDirectory, logs: logs)
        }
        var report = try check()
        #expect(report.isClean, "\(report.json)")
        #expect(report.saves > 40 && report.liveObjects > 10, "\(report.summary)")
        #expect(report.places.first { $0.name == "hub" }?.engineChanges == report.ops, "the hub applied each logged change once: \(report.json)")

        // The w1 records alive, by name, and one of them.
        let live = WriterState(replaying: try WriterLogFile.read(logs[0])).live.filter { $0.entity == "Record" }.map(\.name).sorted()
        #expect(live.count >= 3)
        func sql(_ store: Int, _ text: String) throws { try SyncBadInputTests.sql(stores[store - 1].1.path, text) }

        // Lost: a record gone from s3.
        try sql(3, "DELETE FROM ZRECORD WHERE ZNAME = '\(live[0])'")
        report = try check()
        #expect(report.places.first { $0.name == "s3" }?.lost == 1, "\(report.json)")
        #expect(report.lost == 1 && !report.isClean)

        // Stale: another value in s2.
        try sql(2, "UPDATE ZRECORD SET ZA = ZA + 1000 WHERE ZNAME = '\(live[1])'")
        report = try check()
        #expect(report.places.first { $0.name == "s2" }?.stale == 1, "\(report.json)")

        // Duplicated (and extra): a second row of the same record in s3.
        try sql(3, """
            BEGIN; UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Record';
            INSERT INTO ZRECORD (Z_PK, Z_ENT, Z_OPT, ZA, ZNAME) SELECT Z_MAX, Z_ENT, 1, 1, '\(live[2])' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Record'; COMMIT;
            """)
        report = try check()
        #expect(report.places.first { $0.name == "s3" }?.duplicated == 1, "\(report.json)")
        #expect(report.places.first { $0.name == "s3" }?.extra == 1, "\(report.json)")

        // Echo into a store: the engine's author writing s1's own record (there and back, so not stale).
        let echo = try SyncFixtures.app(stores[0].1, model: model, author: SyncGroup.author)
        try echo.performAndWait {
            let request = FetchRequest(entityName: "Record")
            request.predicate = try FetchPredicate(format: "name == %@", argumentArray: [live[2]])
            let record = try #require(try echo.fetch(request).first)
            let a = try record.value(forKey: "a") as? Int64 ?? 0
            try record.setValue(a + 1, forKey: "a")
            try echo.save()
            try record.setValue(a, forKey: "a")
            try echo.save()
        }
        report = try check()
        #expect(report.places.first { $0.name == "s1" }?.echoed == 2, "\(report.json)")

        // Repeated delivery into a store: two more engine writes of w1's record into s2.
        let again = try SyncFixtures.app(stores[1].1, model: model, author: SyncGroup.author)
        try again.performAndWait {
            let request = FetchRequest(entityName: "Record")
            request.predicate = try FetchPredicate(format: "name == %@", argumentArray: [live[2]])
            let record = try #require(try again.fetch(request).first)
            let a = try record.value(forKey: "a") as? Int64 ?? 0
            try record.setValue(a + 1, forKey: "a")
            try again.save()
            try record.setValue(a, forKey: "a")
            try again.save()
        }
        report = try check()
        #expect(report.places.first { $0.name == "s2" }?.repeated == 2, "\(report.json)")

        // At the hub: a change pulled "from s2" to w1's record (an echo), and
        // two more "from s1" than w1 made (applied twice).
        let hub = try EmbeddedHub(model: model, directory: hubDirectory)
        let gid = try #require(WriterState(replaying: try WriterLogFile.read(logs[0])).objects[live[2]]?.gid)
        let a = try #require(try hub.state(of: gid)?.values["a"]).attributeValue as? Int64 ?? 0
        for (origin, value) in [("s2", a), ("s1", a + 1), ("s1", a)] {
            var batch = HubBatch(origin: origin)
            batch.updates = [(gid, ["a": .attribute(value + (origin == "s2" ? 7 : 0))])]
            try hub.commit(batch)
        }
        var restore = HubBatch(origin: nil)
        restore.updates = [(gid, ["a": .attribute(a)])]
        try hub.commit(restore)
        try hub.close()
        report = try check()
        let atHub = try #require(report.places.first { $0.name == "hub" })
        #expect(atHub.echoed == 1, "\(report.json)")
        #expect(atHub.repeated == 2, "\(report.json)")
        #expect(atHub.stale == 0, "\(report.json)")
    }
}

extension SyncValue {
    var attributeValue: Any? {
        if case .attribute(let value) = self { return value }
        return nil
    }
}
