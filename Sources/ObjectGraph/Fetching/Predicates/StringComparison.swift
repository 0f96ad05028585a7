import Foundation

/// String matching for the `[c]`, `[d]`, LIKE and MATCHES parts of the
/// predicate language.
enum StringComparison {
    /// Folds case and/or diacritics with Foundation's Unicode-aware folding.
    @inline(__always)
    static func fold(_ s: String, _ options: FetchComparison.Options) -> String {
        var fold: String.CompareOptions = []
        if options.contains(.caseInsensitive) { fold.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { fold.insert(.diacriticInsensitive) }
        if fold.isEmpty { return s }
        // ASCII has no diacritics, and lowercasing it is all case folding does.
        if s.utf8.allSatisfy({ $0 < 0x80 }) {
            return fold.contains(.caseInsensitive) ? s.lowercased() : s
        }
        return s.folding(options: fold, locale: nil)
    }

    /// BEGINSWITH, ENDSWITH and LIKE on an ASCII subject against an
    /// already-folded ASCII pattern, byte by byte with no allocation. nil when
    /// either side is not ASCII (folding is then Unicode work).
    static func asciiOperator(_ op: FetchComparison.Operator, _ subject: String, _ foldedPattern: String, caseInsensitive: Bool) -> Bool? {
        var subject = subject
        var pattern = foldedPattern
        return subject.withUTF8 { s -> Bool? in
            pattern.withUTF8 { p -> Bool? in
                if p.contains(where: { $0 >= 0x80 }) { return nil }
                @inline(__always) func fold(_ b: UInt8) -> UInt8 {
                    caseInsensitive && b >= 0x41 && b <= 0x5A ? b | 0x20 : b
                }
                switch op {
                case .beginsWith, .endsWith:
                    guard p.count <= s.count else {
                        return s.contains(where: { $0 >= 0x80 }) ? nil : false
                    }
                    let offset = op == .beginsWith ? 0 : s.count - p.count
                    for i in 0..<p.count {
                        let b = s[offset + i]
                        if b >= 0x80 { return nil }
                        if fold(b) != p[i] { return s.contains(where: { $0 >= 0x80 }) ? nil : false }
                    }
                    return s.contains(where: { $0 >= 0x80 }) ? nil : true
                case .like:
                    if s.contains(where: { $0 >= 0x80 }) { return nil }
                    return LikePattern.matchASCII(pattern: p, subject: s, fold: fold)
                default:
                    return nil
                }
            }
        }
    }

    static func compileRegex(_ pattern: String, options: FetchComparison.Options) -> Result<NSRegularExpression, PredicateEvaluationError> {
        var regexOptions: NSRegularExpression.Options = []
        if options.contains(.caseInsensitive) { regexOptions.insert(.caseInsensitive) }
        let source = options.contains(.diacriticInsensitive) ? fold(pattern, [.diacriticInsensitive]) : pattern
        do {
            // MATCHES tests the whole string, so the pattern is anchored at both ends.
            let regex = try NSRegularExpression(pattern: "\\A(?:" + source + ")\\z", options: regexOptions)
            return .success(regex)
        } catch {
            return .failure(PredicateEvaluationError(
                .invalidOperand, operatorName: "MATCHES",
                reason: "'\(pattern)' is not a valid regular expression"))
        }
    }

    static func matches(_ subject: String, regex: NSRegularExpression, options: FetchComparison.Options) -> Bool {
        let s = options.contains(.diacriticInsensitive) ? fold(subject, [.diacriticInsensitive]) : subject
        let ns = s as NSString
        return regex.firstMatch(in: s, options: [], range: NSRange(location: 0, length: ns.length)) != nil
    }
}

/// A compiled LIKE pattern: `*` matches any run of characters, `?` exactly
/// one, and a backslash makes the next character literal.
struct LikePattern: Sendable {
    enum Element: Equatable, Sendable {
        case literal(Character)
        case any
        case star
    }

    let elements: [Element]

    init(_ pattern: String) {
        var elements: [Element] = []
        var escaped = false
        for c in pattern {
            if escaped {
                elements.append(.literal(c))
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == "*" {
                if elements.last != .star { elements.append(.star) }
            } else if c == "?" {
                elements.append(.any)
            } else {
                elements.append(.literal(c))
            }
        }
        if escaped { elements.append(.literal("\\")) }
        self.elements = elements
    }

    /// LIKE over ASCII bytes; the pattern bytes are already folded.
    static func matchASCII(pattern: UnsafeBufferPointer<UInt8>, subject: UnsafeBufferPointer<UInt8>, fold: (UInt8) -> UInt8) -> Bool {
        var p = 0, s = 0
        var starP = -1, starS = 0
        let star = UInt8(ascii: "*"), any = UInt8(ascii: "?"), escape = UInt8(ascii: "\\")
        while s < subject.count {
            if p < pattern.count {
                let c = pattern[p]
                if c == star {
                    while p < pattern.count, pattern[p] == star { p += 1 }
                    starP = p
                    starS = s
                    continue
                }
                if c == any {
                    p += 1
                    s += 1
                    continue
                }
                var literal = c
                var width = 1
                if c == escape {
                    if p + 1 < pattern.count {
                        literal = pattern[p + 1]
                        width = 2
                    }
                }
                if literal == fold(subject[s]) {
                    p += width
                    s += 1
                    continue
                }
            }
            guard starP >= 0 else { return false }
            p = starP
            starS += 1
            s = starS
        }
        while p < pattern.count, pattern[p] == star { p += 1 }
        return p == pattern.count
    }

    /// Greedy matching with one backtrack point per star: linear in practice,
    /// never exponential.
    func matches(_ string: String) -> Bool {
        let chars = Array(string)
        var p = 0, s = 0
        var starP = -1, starS = 0
        while s < chars.count {
            if p < elements.count {
                switch elements[p] {
                case .star:
                    starP = p
                    starS = s
                    p += 1
                    continue
                case .any:
                    p += 1
                    s += 1
                    continue
                case let .literal(c):
                    if c == chars[s] {
                        p += 1
                        s += 1
                        continue
                    }
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starS += 1
            s = starS
        }
        while p < elements.count, elements[p] == .star { p += 1 }
        return p == elements.count
    }
}
