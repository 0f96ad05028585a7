import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The change log against `KnownHistory`: every transaction of every store
/// and the hub once, each filter selecting exactly what it names, resuming
/// with no gap and no repeat, paging, following new commits.
@Suite struct SyncChangeLogTests {
    func read(_ history: KnownHistory, _ filter: ChangeLogFilter = ChangeLogFilter(), after: ChangeLogPosition = .start,
              pageSize: Int = 64) throws -> [ChangeLogEntry] {
        let log = try SyncChangeLog(groups: [history.configuration], filter: filter, after: after, pageSize: pageSize)
        defer { log.close() }
        var entries: [ChangeLogEntry] = []
        while let entry = try log.next() { entries.append(entry) }
        #expect(log.takeProblems().isEmpty)
        return entries
    }

    func key(_ entry: ChangeLogEntry) -> String { "\(entry.source.key):\(entry.position)" }

    @Test func everyTransactionOfEveryStoreAndTheHubOnceInTimeOrder() throws {
        let history = try KnownHistory.make()
        let entries = try read(history)
        var filter = ChangeLogFilter()
        filter.includesBookkeeping = true
        let everything = try read(history, filter)

        // Each store's history exactly (nothing hidden in stores).
        for (index, url) in history.urls.enumerated() {
            let expected = try KnownHistory.transactions(url, model: history.configuration.model)
            let got = entries.filter { $0.source.store == "s\(index + 1)" }
            #expect(got.map(\.position) == expected.map(\.token.position), "s\(index + 1)")
            #expect(got.map(\.author) == expected.map(\.author), "s\(index + 1)")
            #expect(got.map { $0.changes.count } == expected.map { $0.changes.count }, "s\(index + 1)")
        }
        // The hub's whole history with its bookkeeping; without it, only
        // transactions that changed data or recorded a conflict event.
        let hubURL = history.configuration.stateDirectory.appendingPathComponent("hub.sqlite")
        let hubExpected = try KnownHistory.transactions(hubURL, model: EmbeddedHub.hubModel(history.configuration.model))
        #expect(everything.filter(\.source.isHub).map(\.position) == hubExpected.map(\.token.position))
        let hubShown = entries.filter(\.source.isHub)
        #expect(hubShown.count < hubExpected.count)
        #expect(hubShown.allSatisfy { !$0.changes.isEmpty || !$0.conflictEvents.isEmpty })
        #expect(hubShown.allSatisfy { $0.changes.allSatisfy { !EmbeddedHub.bookkeeping.contains($0.entity) } })

        // Time order across sources; positions grow within each source.
        #expect(zip(entries, entries.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })
        for source in Set(entries.map(\.source)) {
            let positions = entries.filter { $0.source == source }.map(\.position)
            #expect(positions == positions.sorted() && Set(positions).count == positions.count)
        }

        // Authors and engine writes.
        #expect(entries.contains { $0.source.store == "s3" && $0.author == nil && $0.changes.first?.properties.contains { $0.name == "name" && $0.new == .string("sql") } == true })
        for entry in entries where entry.author == SyncGroup.author {
            if entry.source.isHub {
                #expect(entry.engineWrite == .hub || { if case .pull = entry.engineWrite { return true }; return false }(), "\(entry.engineWrite as Any)")
            } else {
                guard case .push(let position)? = entry.engineWrite else { Issue.record("store entry by storesync is not a push: \(entry.contextName ?? "nil")"); continue }
                #expect(entry.contextName == "push:\(position)")
            }
        }
        #expect(entries.filter { $0.author != SyncGroup.author }.allSatisfy { $0.engineWrite == nil })

        // Old and new values, relationships by global identifier.
        let update = try #require(entries.first { $0.author == "app2" && $0.changes.first?.properties.first?.name == "a" })
        #expect(update.changes.first?.properties.first == ChangeLogPropertyChange(name: "a", old: .integer(1), new: .integer(2)))
        let insert = try #require(entries.first { $0.author == "app1" })
        let recordInsert = try #require(insert.changes.first { $0.entity == "Record" })
        #expect(recordInsert.kind == .insert && recordInsert.globalIdentifier == history.record)
        #expect(recordInsert.properties.first { $0.name == "folder" }?.new == .object(history.folder))
        let folderInsert = try #require(insert.changes.first { $0.entity == "Folder" })
        #expect(folderInsert.properties.first { $0.name == "records" }?.added == [history.record])

        // The conflict: recorded in a pull from s2, resolved in a hub transaction.
        let recorded = try #require(entries.first { $0.conflictEvents.contains { if case .recorded = $0 { return true }; return false } })
        #expect(recorded.engineWrite == .pull(store: "s2"))
        #expect(recorded.conflictEvents == [.recorded(id: 1, store: "s2", object: history.record, entity: "Record", kind: "update")])
        let resolved = try #require(entries.first { $0.conflictEvents.contains { if case .resolved = $0 { return true }; return false } })
        #expect(resolved.engineWrite == .hub && resolved.conflictEvents == [.resolved(id: 1, taking: "hub")])
    }

    @Test func eachFilterSelectsExactlyWhatItNames() throws {
        let history = try KnownHistory.make()
        let all = try read(history)

        var filter = ChangeLogFilter()
        filter.stores = ["s2"]
        filter.includesHub = false
        #expect(try read(history, filter).map(key) == all.filter { $0.source.store == "s2" }.map(key))

        filter = ChangeLogFilter()
        filter.stores = []
        #expect(try read(history, filter).map(key) == all.filter(\.source.isHub).map(key))

        filter = ChangeLogFilter()
        filter.entities = ["Folder"]
        let folders = try read(history, filter)
        #expect(folders.map(key) == all.filter { $0.changes.contains { $0.entity == "Folder" } }.map(key))
        #expect(folders.allSatisfy { $0.changes.allSatisfy { $0.entity == "Folder" } })
        #expect(Set(folders.map(\.source)).count == 4)   // inserted in s1, pulled into the hub, pushed to s2 and s3

        filter = ChangeLogFilter()
        filter.objects = [history.record]
        let record = try read(history, filter)
        #expect(record.allSatisfy { $0.changes.allSatisfy { $0.globalIdentifier == history.record } })
        #expect(record.map(key) == all.filter { $0.changes.contains { $0.globalIdentifier == history.record } || !$0.conflictEvents.isEmpty }.map(key))

        filter = ChangeLogFilter()
        filter.authors = ["app1"]
        let app1 = try read(history, filter)
        #expect(app1.count == 2 && app1.allSatisfy { $0.author == "app1" && $0.source.store == "s1" })

        filter.authors = [""]
        let foreign = try read(history, filter)
        #expect(foreign.count == 1 && foreign[0].author == nil && foreign[0].source.store == "s3")

        filter.authors = ["app2", "storesync"]
        #expect(try read(history, filter).map(key) == all.filter { $0.author == "app2" || $0.author == "storesync" }.map(key))

        filter = ChangeLogFilter()
        filter.since = history.boundary
        let after = try read(history, filter)
        #expect(!after.isEmpty && after.map(key) == all.filter { $0.timestamp >= history.boundary }.map(key))
        filter = ChangeLogFilter()
        filter.until = history.boundary
        let before = try read(history, filter)
        #expect(!before.isEmpty && before.map(key) == all.filter { $0.timestamp <= history.boundary }.map(key))
        #expect(before.count + after.count == all.count)

        // Combined: AND.
        filter = ChangeLogFilter()
        filter.since = history.boundary
        filter.authors = ["app1"]
        let late = try read(history, filter)
        #expect(late.count == 1 && late[0].changes.first?.properties.first == ChangeLogPropertyChange(name: "b", old: .null, new: .integer(7)))

        filter = ChangeLogFilter()
        filter.groups = ["test"]
        #expect(try read(history, filter).map(key) == all.map(key))
    }

    /// Conflict 1 (s2's b=5 against the hub's b=7 from s1), by the rule in
    /// `ChangeLogFilter.onlyConflicts`.
    @Test func conflictsSelectTheTransactionsOfTheConflict() throws {
        let history = try KnownHistory.make()
        var filter = ChangeLogFilter()
        filter.onlyConflicts = true
        let entries = try read(history, filter)
        var pushed: Int64 = -1
        if case .push(let position)? = entries.last?.engineWrite { pushed = position }
        func describe(_ entry: ChangeLogEntry) -> String {
            let values = entry.changes.flatMap { $0.properties.map { "\($0.name)=\($0.new?.text ?? "-")" } }.joined(separator: " ")
            return "\(entry.source) \(entry.engineWrite?.description ?? entry.author ?? "foreign") \(values) \(entry.conflictEvents.map { "\($0)" }.joined())"
        }
        #expect(entries.map(describe) == [
            "test/s2 app2 b=5 ",                                   // the store's conflicting change
            "test/hub pull from s1 b=7 ",                          // the hub's change it met
            "test/hub pull from s2  recorded(id: 1, store: \"s2\", object: \(history.record), entity: \"Record\", kind: \"update\")",
            "test/hub hub  resolved(id: 1, taking: \"hub\")",
            "test/s2 push of hub position \(pushed) b=7 ",
        ], "\(entries.map(describe).joined(separator: "\n"))")
        #expect(entries.allSatisfy { $0.conflicts == [1] })
        #expect(entries.allSatisfy { $0.changes.allSatisfy { $0.globalIdentifier == history.record } })

        // Without the filter, entries carry the conflicts they are involved in.
        let all = try read(history)
        #expect(all.filter { !$0.conflicts.isEmpty }.map(key) == entries.map(key))
    }

    @Test func resumingAfterAnyCursorGivesTheRestWithNoGapOrRepeat() throws {
        let history = try KnownHistory.make()
        let all = try read(history)
        #expect(try read(history, pageSize: 1).map(key) == all.map(key))

        for cut in [0, 1, all.count / 2, all.count - 1] {
            let rest = try read(history, after: all[cut].cursor, pageSize: 2)
            #expect(rest.map(key) == all[(cut + 1)...].map(key), "cut after \(cut)")
        }
        // The text form round-trips.
        let text = all[3].cursor.description
        #expect(try ChangeLogPosition(parsing: text) == all[3].cursor)
        #expect(try read(history, after: ChangeLogPosition(parsing: text)).map(key) == all[4...].map(key))

        // A reader's position after the end resumes to nothing, then to what
        // is committed later, exactly once.
        let log = try SyncChangeLog(groups: [history.configuration])
        while try log.next() != nil {}
        let end = log.position
        log.close()
        #expect(try read(history, after: end).isEmpty)
        let app = try SyncFixtures.app(history.urls[2], author: "late")
        try KnownHistory.set(app, history.record, "c", Int32(9))
        try history.group.runUntilIdle()
        let later = try read(history, after: end)
        #expect(later.first?.author == "late" && later.first?.source.store == "s3")
        #expect(later.filter { $0.author == "late" }.count == 1)
        #expect(Set(later.map(\.source)).count == 4)   // pulled into the hub, pushed to s1 and s2
        #expect(try read(history, after: later.last!.cursor).isEmpty)
    }

    @Test func aReaderFollowsCommitsMadeAfterItReachedTheEnd() throws {
        let history = try KnownHistory.make()
        let log = try SyncChangeLog(groups: [history.configuration], pageSize: 3)
        defer { log.close() }
        var seen = 0
        while try log.next() != nil { seen += 1 }
        #expect(seen > 0)
        #expect(try log.next() == nil)
        let app = try SyncFixtures.app(history.urls[0], author: "follower")
        try KnownHistory.set(app, history.folder, "name", "Outbox")
        let entry = try #require(try log.next())
        #expect(entry.author == "follower" && entry.changes.first?.properties == [ChangeLogPropertyChange(name: "name", old: .string("Inbox"), new: .string("Outbox"))])
        #expect(try log.next() == nil)
    }

    @Test func aLoneStoreFileReadsLikeItsSourceInTheGroup() throws {
        let history = try KnownHistory.make()
        var filter = ChangeLogFilter()
        filter.stores = ["s1"]
        filter.includesHub = false
        let inGroup = try read(history, filter)
        let lone = try SyncChangeLog(storeAt: history.urls[0], model: history.configuration.model)
        var entries: [ChangeLogEntry] = []
        while let entry = try lone.next() { entries.append(entry) }
        #expect(entries.map(\.position) == inGroup.map(\.position))
        #expect(entries.first?.source == ChangeLogSource(group: nil, store: "s1"))
        #expect(entries.last?.cursor.description == "s1:\(entries.last!.position)")
    }

    @Test func badFiltersAndPositionsNameTheProblem() throws {
        let history = try KnownHistory.make()
        func refusal(_ configure: (inout ChangeLogFilter) -> Void) -> String {
            var filter = ChangeLogFilter()
            configure(&filter)
            do {
                _ = try SyncChangeLog(groups: [history.configuration], filter: filter)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal { $0.stores = ["nope"] }.contains("no store named 'nope' in group test (stores: s1, s2, s3)"))
        #expect(refusal { $0.entities = ["Record", "Nope"] }.contains("has an entity named 'Nope'"))
        #expect(refusal { $0.groups = ["other"] }.contains("no sync group named 'other'"))
        #expect(throws: ChangeLogError.self) { try SyncChangeLog(storeAt: history.urls[0], model: history.configuration.model, filter: { var f = ChangeLogFilter(); f.onlyConflicts = true; return f }()) }

        for bad in ["test/s1", "test/s1:x", "test/s1:-3", "a/b/c:1", "test:1,test:2", "/s1:4"] {
            #expect(throws: ChangeLogError.self, "\(bad)") { try ChangeLogPosition(parsing: bad) }
        }
        #expect(try ChangeLogPosition(parsing: "") == .start)
        // A key naming no source would silently read that source from its start.
        #expect { try SyncChangeLog(groups: [history.configuration], after: ChangeLogPosition(parsing: "test/hub:3")) } throws: {
            "\($0)".contains("names source 'test/hub', which is not read here (sources: test, test/s1, test/s2, test/s3")
        }
        #expect(throws: ChangeLogError.self) { try SyncChangeLog(storeAt: history.urls[0], model: history.configuration.model, after: ChangeLogPosition(parsing: "test/s1:3")) }
        // A store file read alone must be readable: errors at once, not warnings.
        #expect(throws: CoreDataError.self) { try SyncChangeLog(storeAt: history.directory.appendingPathComponent("none.sqlite"), model: history.configuration.model) }
        #expect(try ChangeLogPosition(parsing: "test/s1:4, test:9").description == "test:9,test/s1:4")
    }

    @Test func aMissingOrUnattachedStoreIsReportedAndTheOthersAreRead() throws {
        let history = try KnownHistory.make()
        var configuration = history.configuration
        let missing = history.directory.appendingPathComponent("later.sqlite")
        configuration.stores.append(SyncStoreConfiguration(name: "later", url: missing, policy: .objectTrump))
        let plain = history.directory.appendingPathComponent("plain.sqlite")
        _ = try SyncFixtures.app(plain).performAndWait { }   // a store without history
        configuration.stores.append(SyncStoreConfiguration(name: "plain", url: plain, policy: .objectTrump))
        let log = try SyncChangeLog(groups: [configuration])
        var count = 0
        while try log.next() != nil { count += 1 }
        #expect(count == (try read(history)).count)
        let problems = log.takeProblems().map(\.description)
        #expect(problems.contains { $0.hasPrefix("test/later: no store file at \(missing.path)") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("test/plain: \(plain.path) records no history") }, "\(problems)")
        // Reported once, not at every look.
        #expect(try log.next() == nil)
        #expect(log.takeProblems().isEmpty)
    }
}
