import Foundation
import ObjectGraph
import Testing
@testable import StoreSync

/// The change log's JSON read back (`ChangeLogEntry(jsonObject:valueKinds:)`,
/// what storesyncctl does with the daemon's `log` stream): every entry of a
/// known history, and a value of every kind, print exactly as before; and
/// `skipToEnd()` gives only what is committed after it.
@Suite struct ChangeLogEntryDecodingTests {
    /// Through JSON text, as the stream carries it (JSONSerialization's NSNumbers included).
    func roundTrip(_ entry: ChangeLogEntry) throws -> ChangeLogEntry {
        let text = try entry.jsonLine()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let kinds = try JSONSerialization.jsonObject(with: JSONSerialization.data(withJSONObject: entry.valueKinds)) as? [[String: String]] ?? []
        return try ChangeLogEntry(jsonObject: object, valueKinds: kinds)
    }

    @Test func everyEntryOfAKnownHistoryReadsBackExactly() throws {
        let history = try KnownHistory.make()
        var filter = ChangeLogFilter()
        filter.includesBookkeeping = true
        let log = try SyncChangeLog(groups: [history.configuration], filter: filter)
        defer { log.close() }
        var count = 0, conflictEvents = 0
        while let entry = try log.next() {
            let back = try roundTrip(entry)
            #expect(try back.jsonLine() == entry.jsonLine())
            #expect(back.source == entry.source && back.cursor == entry.cursor && back.engineWrite == entry.engineWrite)
            #expect(back.conflictEvents == entry.conflictEvents && back.conflicts == entry.conflicts)
            // As people see them (dates travel to the millisecond, as they are printed).
            func shown(_ entry: ChangeLogEntry) -> [String] {
                entry.changes.flatMap { change in change.properties.map { "\(change.globalIdentifier) \($0.name) \($0.old?.text ?? "-") \($0.new?.text ?? "-") \($0.added) \($0.removed) \($0.positions)" } }
            }
            #expect(shown(back) == shown(entry), "\(entry.source) \(entry.position)")
            // Native values (jsonObject itself) read back the same.
            #expect(try ChangeLogEntry(jsonObject: entry.jsonObject, valueKinds: entry.valueKinds).jsonLine() == entry.jsonLine())
            count += 1
            conflictEvents += entry.conflictEvents.count
        }
        #expect(count > 10 && conflictEvents >= 2, "the known history has pulls, pushes and a conflict recorded and resolved")
    }

    @Test func aValueOfEveryKindReadsBackExactly() throws {
        let gid = UUID(), other = UUID()
        let date = Date(timeIntervalSince1970: 1_795_000_000.125)
        let values: [(String, StoredValue)] = [
            ("null", .null), ("bool", .bool(true)), ("falseBool", .bool(false)), ("integer", .integer(-42)), ("one", .integer(1)),
            ("double", .double(2.5)), ("wholeDouble", .double(3)), ("nan", .double(.nan)), ("inf", .double(.infinity)),
            ("minusInf", .double(-.infinity)), ("decimal", .decimal(Decimal(string: "12345678901234567890.123")!)),
            ("string", .string("line\none \"quoted\"")), ("numeric", .string("42")), ("date", .date(date)),
            ("data", .data(Data([0, 1, 2, 255]))), ("uuid", .uuid(other)), ("uri", .uri(URL(string: "https://example.com/a?b=c")!)),
            ("object", .object(other)), ("other", .other("[1, 2]")),
        ]
        let change = ChangeLogChange(kind: .update, entity: "Thing", globalIdentifier: gid, properties:
            values.map { ChangeLogPropertyChange(name: $0.0, old: .null, new: $0.1) }.sorted { $0.name < $1.name }
            + [ChangeLogPropertyChange(name: "zmembers", added: [other], removed: [gid], positions: [other: 2], isToMany: true)])
        let entry = ChangeLogEntry(source: ChangeLogSource(group: "g", store: "s"), position: 7, cursor: try ChangeLogPosition(parsing: "g:3,g/s:7"),
                                   timestamp: date, author: nil, contextName: nil, transactionNumber: nil, engineWrite: nil,
                                   changes: [change], conflictEvents: [.recorded(id: 1, store: "s", object: gid, entity: "Thing", kind: "update"),
                                                                       .resolved(id: 1, taking: "hub")], conflicts: [1])
        let back = try roundTrip(entry)
        #expect(back.changes.first?.properties == entry.changes.first?.properties)
        #expect(try back.jsonLine() == entry.jsonLine())
        #expect(back.timestamp == date && back.author == nil && back.transactionNumber == nil && back.source.isHub == false)
    }

    @Test func aBadEntryNamesTheField() throws {
        #expect(throws: ChangeLogError.badEntry("field position is not an integer")) {
            try ChangeLogEntry(jsonObject: ["group": "g", "position": "7", "cursor": "", "time": "2026-11-25T09:00:00.000Z"])
        }
        #expect(throws: ChangeLogError.badEntry("fields group and store are both null: no source")) {
            try ChangeLogEntry(jsonObject: ["position": 7, "cursor": "", "time": "2026-11-25T09:00:00.000Z"])
        }
        let entry: [String: Any] = ["group": "g", "store": "s", "position": 1, "cursor": "", "time": "2026-11-25T09:00:00.000Z", "conflicts": [], "conflictEvents": [],
                                    "changes": [["type": "update", "entity": "E", "object": UUID().uuidString, "properties": ["d": ["new": "x"]]]]]
        #expect(throws: ChangeLogError.badEntry("property d: x is not a value of kind date")) {
            try ChangeLogEntry(jsonObject: entry, valueKinds: [["d": "date"]])
        }
    }

    @Test func skipToEndGivesOnlyLaterCommits() throws {
        let history = try KnownHistory.make()
        let log = try SyncChangeLog(groups: [history.configuration])
        defer { log.close() }
        try log.skipToEnd()
        #expect(try log.next() == nil)
        let everything = try SyncChangeLog(groups: [history.configuration])
        defer { everything.close() }
        while try everything.next() != nil {}
        #expect(log.position == everything.position, "skipToEnd stands where reading everything ends")
        let app = try SyncFixtures.app(history.urls[0], author: "later")
        try KnownHistory.set(app, history.folder, "name", "Later")
        let entry = try #require(try log.next())
        #expect(entry.author == "later")
        #expect(try log.next() == nil)
    }
}
