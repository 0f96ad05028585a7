import Foundation

/// Writes a record's dictionary as pretty-printed JSON with sorted keys,
/// for the value types records hold (strings, integers, doubles, booleans,
/// null, string arrays, nested dictionaries). `JSONSerialization` spent
/// most of a records save bridging each record to `NSDictionary` and
/// sorting keys with ICU collation; this writer sorts by code point and
/// appends bytes. A value of another type makes it return nil, and the
/// caller falls back to `JSONSerialization`.
enum RecordJSONWriter {
    static func data(of record: [String: Any]) -> Data? {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        guard write(record, indent: 0, into: &out) else { return nil }
        out.append(0x0A)
        return Data(out)
    }

    private static func write(_ dictionary: [String: Any], indent: Int, into out: inout [UInt8]) -> Bool {
        if dictionary.isEmpty {
            out.append(contentsOf: "{}".utf8)
            return true
        }
        out.append(UInt8(ascii: "{"))
        var first = true
        for key in dictionary.keys.sorted() {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            newline(indent + 1, &out)
            string(key, &out)
            out.append(contentsOf: " : ".utf8)
            guard value(dictionary[key]!, indent: indent + 1, into: &out) else { return false }
        }
        newline(indent, &out)
        out.append(UInt8(ascii: "}"))
        return true
    }

    private static func value(_ value: Any, indent: Int, into out: inout [UInt8]) -> Bool {
        // Not `case is NSNull`: on Linux that bridges an array or dictionary to an object first.
        if isNSNull(value) {
            out.append(contentsOf: "null".utf8)
            return true
        }
        switch value {
        case let v as String: string(v, &out)
        case let v as Bool: out.append(contentsOf: (v ? "true" : "false").utf8)
        case let v as Int: out.append(contentsOf: String(v).utf8)
        case let v as Double:
            guard v.isFinite else { return false }
            out.append(contentsOf: v.description.utf8)
        case let v as [String]:
            if v.isEmpty {
                out.append(contentsOf: "[]".utf8)
                return true
            }
            out.append(UInt8(ascii: "["))
            for (i, element) in v.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1, &out)
                string(element, &out)
            }
            newline(indent, &out)
            out.append(UInt8(ascii: "]"))
        case let v as [String: Any]: return write(v, indent: indent, into: &out)
        default: return false
        }
        return true
    }

    private static func newline(_ indent: Int, _ out: inout [UInt8]) {
        out.append(0x0A)
        for _ in 0..<indent { out.append(0x20); out.append(0x20) }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// A JSON string: quotes, backslashes and control characters escaped,
    /// everything else (slashes, non-ASCII) as UTF-8.
    private static func string(_ s: String, _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: copy them whole.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: s.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x00..<0x20:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
