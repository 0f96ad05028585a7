import Foundation

/// Converts between `Date` and timestamptz text, exactly to the microsecond.
///
/// Done by hand (civil-date arithmetic) rather than with a DateFormatter:
/// formatters round to milliseconds and depend on the locale and calendar.
enum PostgreSQLTimestamp {
    /// Microseconds between 1970-01-01 and 2001-01-01 (Date's reference date).
    private static let referenceDateMicroseconds: Int64 = 978_307_200 * 1_000_000

    /// "YYYY-MM-DD HH:MM:SS.ffffff+00", with " BC" for years before 1.
    static func text(of date: Date) -> String {
        // From the reference date, Date's own basis, so a Date made from a whole
        // number of microseconds formats exactly.
        let micros = Int64((date.timeIntervalSinceReferenceDate * 1_000_000).rounded()) + referenceDateMicroseconds
        let (seconds, fraction) = floorDivide(micros, 1_000_000)
        let (days, secondOfDay) = floorDivide(seconds, 86_400)
        let (year, month, day) = civil(fromDays: days)
        let bc = year <= 0
        let shownYear = bc ? 1 - year : year
        var text = pad(shownYear, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + " "
        text += pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        text += "." + pad(fraction, 6) + "+00"
        if bc { text += " BC" }
        return text
    }

    /// Parses timestamptz (or timestamp, taken as UTC, or date) output in the
    /// ISO DateStyle: "YYYY-MM-DD[ HH:MM:SS[.f…]][±HH[:MM[:SS]]][ BC]",
    /// "infinity" and "-infinity". nil when the text is none of these.
    static func date(from text: String) -> Date? {
        if text == "infinity" { return .distantFuture }
        if text == "-infinity" { return .distantPast }
        var scanner = Array(text.utf8)[...]
        var bc = false
        if scanner.count > 3, scanner.suffix(3).elementsEqual(" BC".utf8) {
            bc = true
            scanner = scanner.dropLast(3)
        }
        guard let year = number(&scanner), take(&scanner, "-"),
              let month = number(&scanner), take(&scanner, "-"),
              let day = number(&scanner),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        var secondOfDay: Int64 = 0
        var micros: Int64 = 0
        var offset: Int64 = 0
        if take(&scanner, " ") || take(&scanner, "T") {
            guard let hour = number(&scanner), take(&scanner, ":"),
                  let minute = number(&scanner), take(&scanner, ":"),
                  let second = number(&scanner) else { return nil }
            secondOfDay = hour * 3600 + minute * 60 + second
            if take(&scanner, ".") {
                var digits = 0
                while let digit = scanner.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) {
                    scanner = scanner.dropFirst()
                    // Beyond microseconds PostgreSQL prints nothing; ignore any further digits.
                    if digits < 6 { micros = micros * 10 + Int64(digit - UInt8(ascii: "0")) }
                    digits += 1
                }
                guard digits > 0 else { return nil }
                for _ in digits..<max(digits, 6) { micros *= 10 }
            }
            if let sign = scanner.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                scanner = scanner.dropFirst()
                guard let hours = number(&scanner) else { return nil }
                var minutes: Int64 = 0
                var seconds: Int64 = 0
                if take(&scanner, ":") {
                    guard let value = number(&scanner) else { return nil }
                    minutes = value
                    if take(&scanner, ":") {
                        guard let value = number(&scanner) else { return nil }
                        seconds = value
                    }
                }
                offset = (hours * 3600 + minutes * 60 + seconds) * (sign == UInt8(ascii: "-") ? -1 : 1)
            }
        }
        guard scanner.isEmpty else { return nil }
        let astronomicalYear = bc ? 1 - year : year
        let days = self.days(fromCivil: astronomicalYear, month, day)
        let total = (days * 86_400 + secondOfDay - offset) * 1_000_000 + micros - referenceDateMicroseconds
        return Date(timeIntervalSinceReferenceDate: Double(total) / 1_000_000)
    }

    private static func number(_ scanner: inout ArraySlice<UInt8>) -> Int64? {
        var value: Int64 = 0
        var digits = 0
        while let digit = scanner.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit), digits < 12 {
            value = value * 10 + Int64(digit - UInt8(ascii: "0"))
            scanner = scanner.dropFirst()
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    private static func take(_ scanner: inout ArraySlice<UInt8>, _ character: Unicode.Scalar) -> Bool {
        guard scanner.first == UInt8(ascii: character) else { return false }
        scanner = scanner.dropFirst()
        return true
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        var quotient = a / b
        var remainder = a % b
        if remainder < 0 {
            quotient -= 1
            remainder += b
        }
        return (quotient, remainder)
    }

    // Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian,
    // astronomical years: year 0 is 1 BC), as PostgreSQL counts.
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
