import Foundation
import Testing
@testable import storesyncctl

/// `--since`/`--until` times as journalctl takes them (systemd.time(7)).
@Suite struct JournalTimeTests {
    let utc = TimeZone(identifier: "UTC")!
    /// 2026-11-25 15:30:45.5 UTC.
    let now = Date(timeIntervalSince1970: 1_795_620_645.5)

    func parse(_ text: String, zone: TimeZone? = nil) throws -> Date {
        try JournalTime.parse(text, now: now, timeZone: zone ?? utc)
    }

    func utcDate(_ y: Int, _ mo: Int, _ d: Int, _ h: Int = 0, _ mi: Int = 0, _ s: Int = 0) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        return calendar.date(from: DateComponents(year: y, month: mo, day: d, hour: h, minute: mi, second: s))!
    }

    @Test func absoluteTimes() throws {
        #expect(try parse("2026-11-25 10:00:00") == utcDate(2026, 11, 25, 10))
        #expect(try parse("2026-11-25 10:00") == utcDate(2026, 11, 25, 10))
        #expect(try parse("2026-11-25") == utcDate(2026, 11, 25))
        #expect(try parse("2026-11-25T10:00:00.250") == utcDate(2026, 11, 25, 10).addingTimeInterval(0.25))
        #expect(try parse("10:00") == utcDate(2026, 11, 25, 10))
        #expect(try parse("10:00:30") == utcDate(2026, 11, 25, 10, 0, 30))
        // Local time by default; a zone in the text wins.
        let berlin = TimeZone(identifier: "Europe/Berlin")!
        #expect(try parse("2026-11-25 10:00:00", zone: berlin) == utcDate(2026, 11, 25, 9))
        #expect(try parse("2026-11-25 10:00:00 UTC", zone: berlin) == utcDate(2026, 11, 25, 10))
        #expect(try parse("2026-11-25T10:00:00Z", zone: berlin) == utcDate(2026, 11, 25, 10))
        #expect(try parse("2026-11-25 10:00:00 +02:00") == utcDate(2026, 11, 25, 8))
        #expect(try parse("2026-11-25 10:00:00-0130") == utcDate(2026, 11, 25, 11, 30))
        #expect(try parse("@1764064800") == Date(timeIntervalSince1970: 1_764_064_800))
    }

    @Test func wordsAndRelativeTimes() throws {
        #expect(try parse("now") == now)
        #expect(try parse("today") == utcDate(2026, 11, 25))
        #expect(try parse("yesterday") == utcDate(2026, 11, 24))
        #expect(try parse("tomorrow") == utcDate(2026, 11, 26))
        #expect(try parse("-10min") == now.addingTimeInterval(-600))
        #expect(try parse("-2h") == now.addingTimeInterval(-7200))
        #expect(try parse("-1d") == now.addingTimeInterval(-86400))
        #expect(try parse("+1h 30min") == now.addingTimeInterval(5400))
        #expect(try parse("-1h30m") == now.addingTimeInterval(-5400))
        #expect(try parse("3 days ago") == now.addingTimeInterval(-3 * 86400))
        #expect(try parse("-90s") == now.addingTimeInterval(-90))
        #expect(try parse("-2w") == now.addingTimeInterval(-14 * 86400))
        #expect(try parse("-1M") == now.addingTimeInterval(-2_629_800))
        #expect(try parse("-500ms") == now.addingTimeInterval(-0.5))
    }

    @Test(arguments: ["", "10min", "-", "-10 parsecs", "2026-13-01", "2026-02-30", "25:00", "2026-11-25 10:00:00 +5", "last tuesday", "+3 days ago"])
    func notTimes(_ text: String) {
        #expect(throws: JournalTime.Failure.self) { try JournalTime.parse(text, now: now, timeZone: utc) }
    }
}
