import Foundation

/// Screens a binary property list before Foundation parses it. On Linux,
/// swift-corelibs-foundation bridges a parsed `set`, or a dictionary whose
/// key is a container, to Swift with a cast that traps on such members
/// (seen by the fuzz test in `CompiledModelTests`), so a damaged `.mom`
/// could end the process. Keyed archives hold neither (no sets at the
/// property-list level, string keys only), so refusing them loses nothing.
///
/// ```swift
/// if let problem = BinaryPlistPrecheck.problem(in: data) { throw … }
/// ```
enum BinaryPlistPrecheck {
    /// Why `data` must not reach Foundation's parser, or nil when it may
    /// (including when it is not a binary property list at all).
    static func problem(in data: Data) -> String? {
        let bytes = [UInt8](data)
        guard bytes.count >= 8, bytes.starts(with: Array("bplist".utf8)) else { return nil }
        guard bytes.count >= 40 else { return "binary property list shorter than its trailer" }
        let trailer = bytes.count - 32
        let offsetSize = Int(bytes[trailer + 6]), refSize = Int(bytes[trailer + 7])
        guard (1...8).contains(offsetSize), (1...8).contains(refSize) else { return "binary property list trailer has invalid sizes" }
        func integer(_ at: Int, _ size: Int) -> Int? {
            guard at >= 0, size <= 8, at + size <= bytes.count else { return nil }
            var v: UInt64 = 0
            for i in 0..<size { v = v << 8 | UInt64(bytes[at + i]) }
            return v > UInt64(Int.max) ? nil : Int(v)
        }
        guard let count = integer(trailer + 8, 8), let tableStart = integer(trailer + 24, 8),
              count <= bytes.count, tableStart <= trailer, tableStart + count * offsetSize <= trailer else {
            return "binary property list offset table lies outside the file"
        }
        func offset(_ index: Int) -> Int? {
            guard index >= 0, index < count, let o = integer(tableStart + index * offsetSize, offsetSize), o >= 8, o < tableStart else { return nil }
            return o
        }
        for index in 0..<count {
            guard let start = offset(index) else { return "object \(index) has an offset outside the object area" }
            let marker = bytes[start]
            switch marker >> 4 {
            case 0xC:
                return "object \(index) is a set, which a keyed archive never holds"
            case 0xD:
                var length = Int(marker & 0x0F), refs = start + 1
                if length == 0x0F {
                    guard refs < bytes.count, bytes[refs] >> 4 == 0x1, let n = integer(refs + 1, 1 << Int(bytes[refs] & 0x0F)) else {
                        return "object \(index) is a dictionary with an unreadable size"
                    }
                    refs += 1 + (1 << Int(bytes[refs] & 0x0F))
                    length = n
                }
                guard length <= count, refs + length * refSize <= tableStart else { return "dictionary \(index) runs past the object area" }
                for k in 0..<length {
                    guard let keyRef = integer(refs + k * refSize, refSize), let keyStart = offset(keyRef) else {
                        return "dictionary \(index) has a key reference outside the file"
                    }
                    guard [0x5, 0x6, 0x7].contains(bytes[keyStart] >> 4) else { return "dictionary \(index) has a key that is not a string" }
                }
            default:
                continue
            }
        }
        return nil
    }
}
