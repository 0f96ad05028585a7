import Foundation

/// Times as `journalctl --since/--until` takes them (systemd.time(7)), in
/// the local time zone unless the text names one:
///
/// - absolute: `2026-11-25`, `2026-11-25 10:00`, `2026-11-25 10:00:00`,
///   `2026-11-25T10:00:00.250`, optionally followed by `UTC`, `Z` or an
///   offset such as `+01:00`; `10:00` or `10:00:30` alone is today;
/// - `now`, `today`, `yesterday`, `tomorrow` (the last three at 00:00:00);
/// - relative to now: `-10min`, `+1h`, `-1h 30min`, `2 days ago`, with units
///   us, ms, s/sec/second(s), m/min/minute(s), h/hr/hour(s), d/day(s),
///   w/week(s), M/month(s) (30.44 days), y/year(s) (365.25 days);
/// - `@1764064800`: seconds since 1970-01-01 UTC.
enum JournalTime {
    struct Failure: Error, CustomStringConvertible {
        var text: String
        var description: String {
            "'\(text)' is not a time (examples: \"2026-11-25 10:00:00\", \"10:00\", today, yesterday, now, -10min, -2h, \"3 days ago\", @1764064800)"
        }
    }

    static func parse(_ raw: String, now: Date = Date(), timeZone: TimeZone = .current) throws -> Date {
        let text = raw.trimmingCharacters(in: .whitespaces)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let midnight = calendar.startOfDay(for: now)
        switch text.lowercased() {
        case "now": return now
        case "today": return midnight
        case "yesterday": return calendar.date(byAdding: .day, value: -1, to: midnight)!
        case "tomorrow": return calendar.date(byAdding: .day, value: 1, to: midnight)!
        default: break
        }
        if text.hasPrefix("@"), let seconds = Double(text.dropFirst()) { return Date(timeIntervalSince1970: seconds) }
        if let offset = relative(text) { return now.addingTimeInterval(offset) }
        if let date = absolute(text, calendar: calendar, now: now) { return date }
        throw Failure(text: raw)
    }

    /// Unit names (lower case) and their length in seconds; "M" (months)
    /// is told from "m" (minutes) by its case.
    private static let units: [(names: [String], seconds: Double)] = [
        (["usec", "us", "µs"], 1e-6), (["msec", "ms"], 1e-3),
        (["seconds", "second", "sec", "s"], 1), (["minutes", "minute", "min", "m"], 60),
        (["hours", "hour", "hr", "h"], 3600), (["days", "day", "d"], 86400), (["weeks", "week", "w"], 604_800),
        (["months", "month"], 2_629_800), (["years", "year", "y"], 31_557_600),
    ]

    /// `-10min`, `+1h 30min`, `2 days ago`: seconds from now (negative: past).
    static func relative(_ text: String) -> TimeInterval? {
        var body = Substring(text)
        var sign = 0.0
        if body.hasPrefix("-") { sign = -1; body = body.dropFirst() } else if body.hasPrefix("+") { sign = 1; body = body.dropFirst() }
        if body.lowercased().hasSuffix("ago") {
            guard sign == 0 else { return nil }
            sign = -1
            body = body.dropLast(3)
        }
        // Without a sign or "ago" a number is not a time (journalctl agrees).
        guard sign != 0 else { return nil }
        var rest = Substring(body.trimmingCharacters(in: .whitespaces))
        guard !rest.isEmpty else { return nil }
        var total = 0.0
        while !rest.isEmpty {
            let number = rest.prefix { $0.isNumber || $0 == "." }
            guard let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count).drop { $0 == " " }
            let word = rest.prefix { $0.isLetter }
            let factor: Double?
            if word.isEmpty { factor = 1 }   // a bare number is seconds
            else if word == "M" { factor = 2_629_800 }
            else { factor = units.first { $0.names.contains(word.lowercased()) }?.seconds }
            guard let factor else { return nil }
            total += value * factor
            rest = rest.dropFirst(word.count).drop { $0 == " " }
        }
        return sign * total
    }

    /// `YYYY-MM-DD[ HH:MM[:SS[.fff]]][ zone]` or `HH:MM[:SS]` (today).
    static func absolute(_ text: String, calendar: Calendar, now: Date) -> Date? {
        var body = text.replacingOccurrences(of: #"(?<=\d)T(?=\d)"#, with: " ", options: .regularExpression)
        var zone = calendar.timeZone
        // A trailing zone: UTC, Z, or ±HH[:]MM.
        if body.hasSuffix(" UTC") || body.hasSuffix(" utc") { zone = TimeZone(identifier: "UTC")!; body.removeLast(4) }
        else if body.hasSuffix("Z") { zone = TimeZone(identifier: "UTC")!; body.removeLast() }
        else if let match = body.range(of: #"\s?[+-]\d{2}:?\d{2}$"#, options: .regularExpression),
                body[..<match.lowerBound].contains(":") || body[..<match.lowerBound].count == 10 {
            let offset = body[match].trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ":", with: "")
            guard let hours = Int(offset.dropFirst().prefix(2)), let minutes = Int(offset.suffix(2)),
                  let parsed = TimeZone(secondsFromGMT: (offset.hasPrefix("-") ? -1 : 1) * (hours * 3600 + minutes * 60)) else { return nil }
            zone = parsed
            body = String(body[..<match.lowerBound])
        }
        body = body.trimmingCharacters(in: .whitespaces)
        var calendar = calendar
        calendar.timeZone = zone
        let parts = body.split(separator: " ")
        guard parts.count == 1 || parts.count == 2 else { return nil }
        var components = DateComponents()
        var timePart: Substring?
        if parts[0].contains("-") {
            let date = parts[0].split(separator: "-")
            guard date.count == 3, date[0].count == 4, let y = Int(date[0]), let m = Int(date[1]), let d = Int(date[2]) else { return nil }
            components.year = y; components.month = m; components.day = d
            timePart = parts.count == 2 ? parts[1] : nil
        } else {
            guard parts.count == 1 else { return nil }
            let today = calendar.dateComponents([.year, .month, .day], from: now)
            components.year = today.year; components.month = today.month; components.day = today.day
            timePart = parts[0]
        }
        components.hour = 0; components.minute = 0; components.second = 0
        var fraction = 0.0
        if let timePart {
            let time = timePart.split(separator: ":")
            guard time.count == 2 || time.count == 3, let h = Int(time[0]), let m = Int(time[1]) else { return nil }
            components.hour = h; components.minute = m
            if time.count == 3 {
                guard let seconds = Double(time[2]) else { return nil }
                components.second = Int(seconds)
                fraction = seconds - Double(Int(seconds))
            }
        }
        guard let month = components.month, (1...12).contains(month), let day = components.day, (1...31).contains(day),
              (0...23).contains(components.hour!), (0...59).contains(components.minute!), (0...60).contains(components.second!) else { return nil }
        guard let date = calendar.date(from: components) else { return nil }
        // Reject dates the calendar rolled over (2026-02-30).
        guard calendar.component(.day, from: date) == day else { return nil }
        return date.addingTimeInterval(fraction)
    }
}
