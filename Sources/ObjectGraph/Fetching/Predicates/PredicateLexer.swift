import Foundation

/// One token of a predicate format string, with its character offset.
struct PredicateToken: Equatable {
    enum Kind: Equatable {
        /// An identifier; `escaped` when written `#name` (never a keyword).
        case identifier(String, escaped: Bool)
        case string(String)
        case integer(UInt64)
        case double(Double)
        /// `$NAME`.
        case variable(String)
        /// `@count`, `@sum`, ...
        case collectionOperator(String)
        /// `%@`, `%K`, `%d`, `%ld`, ...: the letters after `%`.
        case formatSpecifier(String)
        /// Punctuation and operators: `(`, `==`, `&&`, ...
        case symbol(String)
        case end
    }

    let kind: Kind
    let position: Int
}

/// Splits a format string into tokens. It reads Unicode scalars, not
/// Characters: a combining mark right after a quote would otherwise merge
/// with the quote into one Character and hide it. Offsets are scalar offsets,
/// which equal Character offsets except inside combining sequences.
struct PredicateLexer {
    private let chars: [Unicode.Scalar]
    private let format: String
    private var index = 0

    init(_ format: String) {
        self.format = format
        self.chars = Array(format.unicodeScalars)
    }

    static func tokenize(_ format: String) throws -> [PredicateToken] {
        var lexer = PredicateLexer(format)
        var tokens: [PredicateToken] = []
        while true {
            let token = try lexer.next()
            tokens.append(token)
            if token.kind == .end { return tokens }
        }
    }

    private func error(_ reason: String, at position: Int) -> PredicateSyntaxError {
        PredicateSyntaxError(position: position, reason: reason, format: format)
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        let i = index + offset
        return i < chars.count ? chars[i] : nil
    }

    static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
        c == "_" || c.properties.isAlphabetic
    }

    static func isIdentifierPart(_ c: Unicode.Scalar) -> Bool {
        if c == "_" || c.properties.isAlphabetic || c.properties.numericType != nil { return true }
        switch c.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return false
        }
    }

    static func isDigit(_ c: Unicode.Scalar) -> Bool { ("0"..."9").contains(c) }

    static func isHexDigit(_ c: Unicode.Scalar) -> Bool {
        ("0"..."9").contains(c) || ("a"..."f").contains(c) || ("A"..."F").contains(c)
    }

    mutating func next() throws -> PredicateToken {
        while let c = peek(), c.properties.isWhitespace { index += 1 }
        let start = index
        guard let c = peek() else { return PredicateToken(kind: .end, position: start) }

        if PredicateLexer.isIdentifierStart(c) {
            return PredicateToken(kind: .identifier(readIdentifier(), escaped: false), position: start)
        }
        if PredicateLexer.isDigit(c) {
            return try readNumber(start)
        }
        switch c {
        case "\"", "'":
            return try readString(quote: c, start: start)
        case "#":
            index += 1
            guard let n = peek(), PredicateLexer.isIdentifierStart(n) else {
                throw error("expected a key name after '#'", at: start)
            }
            return PredicateToken(kind: .identifier(readIdentifier(), escaped: true), position: start)
        case "$":
            index += 1
            guard let n = peek(), PredicateLexer.isIdentifierStart(n) else {
                throw error("expected a variable name after '$'", at: start)
            }
            return PredicateToken(kind: .variable(readIdentifier()), position: start)
        case "@":
            index += 1
            guard let n = peek(), PredicateLexer.isIdentifierStart(n) else {
                throw error("expected a collection operator name after '@'", at: start)
            }
            return PredicateToken(kind: .collectionOperator("@" + readIdentifier()), position: start)
        case "%":
            index += 1
            var spec = ""
            while let n = peek(), n == "l" || n == "h" || n == "q" { spec.unicodeScalars.append(n); index += 1 }
            guard let n = peek(), "@KdiufsDUxXcCgeEp".unicodeScalars.contains(n) else {
                throw error("unknown format specifier '%\(spec)\(peek().map { String($0) } ?? "")'", at: start)
            }
            spec.unicodeScalars.append(n)
            index += 1
            return PredicateToken(kind: .formatSpecifier(spec), position: start)
        default:
            break
        }
        let two = peek(1).map { String(c) + String($0) } ?? String(c)
        for symbol in ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||", "**"] where two == symbol {
            index += 2
            return PredicateToken(kind: .symbol(symbol), position: start)
        }
        if "()[]{},.:=<>!+-*/".unicodeScalars.contains(c) {
            index += 1
            return PredicateToken(kind: .symbol(String(c)), position: start)
        }
        throw error("unexpected character '\(c)'", at: start)
    }

    private mutating func readIdentifier() -> String {
        var name = ""
        while let c = peek(), PredicateLexer.isIdentifierPart(c) {
            name.unicodeScalars.append(c)
            index += 1
        }
        return name
    }

    private mutating func readNumber(_ start: Int) throws -> PredicateToken {
        if peek() == "0", let p = peek(1), "xXoObB".unicodeScalars.contains(p) {
            index += 2
            let radix: Int = "xX".unicodeScalars.contains(p) ? 16 : ("oO".unicodeScalars.contains(p) ? 8 : 2)
            var digits = ""
            while let c = peek(), PredicateLexer.isHexDigit(c) || c == "_" {
                if c != "_" { digits.unicodeScalars.append(c) }
                index += 1
            }
            guard !digits.isEmpty, let value = UInt64(digits, radix: radix) else {
                throw error("invalid base-\(radix) integer literal '0\(p)\(digits)'", at: start)
            }
            return PredicateToken(kind: .integer(value), position: start)
        }
        var text = ""
        var isFloat = false
        while let c = peek(), PredicateLexer.isDigit(c) { text.unicodeScalars.append(c); index += 1 }
        if peek() == ".", let n = peek(1), PredicateLexer.isDigit(n) {
            isFloat = true
            text.append(".")
            index += 1
            while let c = peek(), PredicateLexer.isDigit(c) { text.unicodeScalars.append(c); index += 1 }
        }
        if let e = peek(), e == "e" || e == "E" {
            var lookahead = 1
            if let s = peek(1), s == "+" || s == "-" { lookahead = 2 }
            if let d = peek(lookahead), PredicateLexer.isDigit(d) {
                isFloat = true
                for _ in 0..<lookahead { text.unicodeScalars.append(chars[index]); index += 1 }
                while let c = peek(), PredicateLexer.isDigit(c) { text.unicodeScalars.append(c); index += 1 }
            }
        }
        if let c = peek(), PredicateLexer.isIdentifierStart(c) {
            throw error("invalid number literal: unexpected '\(c)' after '\(text)'", at: index)
        }
        if !isFloat, let value = UInt64(text) {
            return PredicateToken(kind: .integer(value), position: start)
        }
        guard let value = Double(text) else {
            throw error("invalid number literal '\(text)'", at: start)
        }
        return PredicateToken(kind: .double(value), position: start)
    }

    private mutating func readString(quote: Unicode.Scalar, start: Int) throws -> PredicateToken {
        index += 1
        var value = ""
        while true {
            guard let c = peek() else {
                throw error("unterminated string literal: missing closing \(quote) for the string opened at column \(start + 1)", at: start)
            }
            index += 1
            if c == quote { break }
            if c != "\\" { value.unicodeScalars.append(c); continue }
            guard let e = peek() else {
                throw error("unterminated string literal: missing closing \(quote) for the string opened at column \(start + 1)", at: start)
            }
            index += 1
            switch e {
            case "n": value.append("\n")
            case "t": value.append("\t")
            case "r": value.append("\r")
            case "0": value.append("\0")
            case "\"", "'", "\\": value.unicodeScalars.append(e)
            case "u":
                var hex = ""
                while hex.count < 4, let h = peek(), PredicateLexer.isHexDigit(h) { hex.unicodeScalars.append(h); index += 1 }
                guard hex.count == 4, let code = UInt32(hex, radix: 16) else {
                    throw error("invalid \\u escape: expected 4 hexadecimal digits", at: index - hex.count - 2)
                }
                // A surrogate pair written as two \u escapes makes one character.
                if (0xD800...0xDBFF).contains(code), peek() == "\\", peek(1) == "u" {
                    let save = index
                    index += 2
                    var low = ""
                    while low.count < 4, let h = peek(), PredicateLexer.isHexDigit(h) { low.unicodeScalars.append(h); index += 1 }
                    if low.count == 4, let lo = UInt32(low, radix: 16), (0xDC00...0xDFFF).contains(lo),
                       let scalar = Unicode.Scalar(0x10000 + ((code - 0xD800) << 10) + (lo - 0xDC00)) {
                        value.unicodeScalars.append(scalar)
                        continue
                    }
                    index = save
                }
                guard let scalar = Unicode.Scalar(code) else {
                    throw error("invalid \\u escape: U+\(hex) is not a Unicode scalar", at: index - 6)
                }
                value.unicodeScalars.append(scalar)
            default:
                throw error("unknown escape sequence '\\\(e)' in string literal", at: index - 2)
            }
        }
        return PredicateToken(kind: .string(value), position: start)
    }
}
