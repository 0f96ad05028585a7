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
