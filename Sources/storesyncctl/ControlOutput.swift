#if canImport(Glibc)
import Glibc
#endif
import Foundation
import StoreSyncControl

/// Printing for the daemon commands: aligned tables and relative times for
/// people, colour only on a terminal and never with `NO_COLOR`
/// (no-color.org), compact JSON for scripts.
enum ControlOutput {
    /// Whether stdout gets colour: a terminal, and `NO_COLOR` unset or empty.
    static let colour: Bool = {
        if let value = ProcessInfo.processInfo.environment["NO_COLOR"], !value.isEmpty { return false }
        return isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }()

    enum Colour: String {
        case green = "32", yellow = "33", red = "31", bold = "1", dim = "2"
    }

    static func paint(_ text: String, _ colour: Colour) -> String {
        self.colour ? "\u{1B}[\(colour.rawValue)m\(text)\u{1B}[0m" : text
    }

    /// A store state, coloured by how worrying it is.
    static func state(_ state: String) -> String {
        switch state {
        case "ok": return paint(state, .green)
        case "paused", "catching-up", "unknown": return paint(state, .yellow)
        default: return paint(state, .red)
        }
    }

    /// Columns padded to their widest cell (colour codes not counted),
    /// separated by two spaces, no trailing blanks.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { visibleWidth($0[column]) }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            var out = ""
            for (index, cell) in cells.enumerated() {
                out += cell
                if index < cells.count - 1 { out += String(repeating: " ", count: widths[index] - visibleWidth(cell) + 2) }
            }
            while out.hasSuffix(" ") { out.removeLast() }
            return out
        }
        return ([line(header.map { paint($0, .bold) })] + rows.map(line)).joined(separator: "\n") + "\n"
    }

    static func visibleWidth(_ text: String) -> Int {
        text.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression).count
    }

    /// "3.2 s", "4 min 10 s", "2 h 5 min", "3 d 4 h": the two largest units.
    static func duration(_ seconds: Double) -> String {
        if seconds < 1 { return "\(Int((seconds * 1000).rounded())) ms" }
        if seconds < 60 { return String(format: seconds < 10 ? "%.1f s" : "%.0f s", seconds) }
        let total = Int(seconds)
        let (days, hours, minutes, secs) = (total / 86400, total % 86400 / 3600, total % 3600 / 60, total % 60)
        if days > 0 { return "\(days) d \(hours) h" }
        if hours > 0 { return "\(hours) h \(minutes) min" }
        return "\(minutes) min \(secs) s"
    }

    /// "5 s ago" from an RFC 3339 time in a reply; the text itself if it cannot be read.
    static func ago(_ timestamp: String?, now: Date = Date()) -> String {
        guard let timestamp else { return "-" }
        guard let date = JSONValue.date(timestamp) else { return timestamp }
        return "\(duration(max(0, now.timeIntervalSince(date)))) ago"
    }

    /// A reply for scripts: its content without the envelope (`v`, `id`, `ok`).
    static func printJSON(_ reply: JSONValue) {
        var fields = reply.object ?? [:]
        for key in ["v", "id", "ok"] { fields[key] = nil }
        print(JSONValue.object(fields).text)
    }

    /// A JSON scalar as a table cell.
    static func cell(_ value: JSONValue?) -> String {
        switch value {
        case nil, .null?: return "-"
        case .string(let text)?: return text.replacingOccurrences(of: "\n", with: "\\n")
        case .int(let number)?: return "\(number)"
        case .double(let number)?: return "\(number)"
        case .bool(let flag)?: return flag ? "yes" : "no"
        case let other?: return other.text
        }
    }
}
