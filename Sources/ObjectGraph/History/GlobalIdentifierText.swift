import Foundation

/// Global identifiers as the text `OGH_GLOBALID` and `OGH_CHANGE` store
/// (upper-case, 8-4-4-4-12 hex digits, what `UUID.uuidString` gives).
/// Foundation formats with `snprintf` and parses with `sscanf`, which
/// showed in profiles of reading and writing history at hundreds of
/// thousands of identifiers; these do the same by table lookup.
enum GlobalIdentifierText {
    private static let digits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Exactly `uuid.uuidString`.
    static func string(_ uuid: UUID) -> String {
        var bytes = uuid.uuid
        return withUnsafeBytes(of: &bytes) { raw in
            String(unsafeUninitializedCapacity: 36) { out in
                var o = 0
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = UInt8(ascii: "-"); o += 1 }
                    out[o] = digits[Int(raw[i] >> 4)]
                    out[o + 1] = digits[Int(raw[i] & 0x0F)]
                    o += 2
                }
                return 36
            }
        }
    }

    /// What `UUID(uuidString:)` reads: 36 characters, dashes at 8, 13, 18
    /// and 23, hex digits of either case elsewhere; nil for anything else.
    static func uuid(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { utf8 -> UUID? in
            guard utf8.count == 36 else { return nil }
            var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            let ok = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
                var i = 0
                for b in 0..<16 {
                    if i == 8 || i == 13 || i == 18 || i == 23 {
                        guard utf8[i] == UInt8(ascii: "-") else { return false }
                        i += 1
                    }
                    guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return false }
                    out[b] = high << 4 | low
                    i += 2
                }
                return true
            }
            return ok ? UUID(uuid: bytes) : nil
        }
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}
