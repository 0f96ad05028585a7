import Foundation

/// Writes predicates and expressions in canonical format syntax. The output
/// is built to parse back to an equal AST, so it parenthesises only where the
/// parser would otherwise group differently:
///
/// - a compound inside a compound or after `NOT` is parenthesised;
/// - arithmetic operands are parenthesised by precedence (left-associative);
/// - keys that are reserved words are escaped with `#`;
/// - constants with no literal syntax use `CAST`: dates as
///   `CAST(secondsSince2001, "NSDate")`, decimals as
///   `CAST("1.5", "NSDecimalNumber")`, and UUIDs, URLs and data likewise.
enum PredicateFormatter {
    static func format(_ predicate: FetchPredicate) -> String {
        var out = ""
        write(predicate, into: &out)
        return out
    }

    static func format(_ expression: FetchExpression) -> String {
        var out = ""
        write(expression, into: &out)
        return out
    }

    static func format(_ value: FetchValue) -> String {
        var out = ""
        write(value, into: &out)
        return out
    }

    // MARK: Predicates

    private static func isCompound(_ p: FetchPredicate) -> Bool {
        switch p.normalized {
        case .and, .or: return true
        default: return false
        }
    }

    private static func writeChild(_ p: FetchPredicate, into out: inout String) {
        if isCompound(p) {
            out += "("
            write(p, into: &out)
            out += ")"
        } else {
            write(p, into: &out)
        }
    }

    static func write(_ predicate: FetchPredicate, into out: inout String) {
        switch predicate.normalized {
        case .truePredicate:
            out += "TRUEPREDICATE"
        case .falsePredicate:
            out += "FALSEPREDICATE"
        case let .and(items), let .or(items):
            let joiner: String
            if case .and = predicate.normalized { joiner = " AND " } else { joiner = " OR " }
            for (i, item) in items.enumerated() {
                if i > 0 { out += joiner }
                writeChild(item, into: &out)
            }
        case let .not(inner):
            out += "NOT "
            writeChild(inner, into: &out)
        case let .comparison(c):
            switch c.modifier {
            case .direct: break
            case .any: out += "ANY "
            case .all: out += "ALL "
            }
            write(c.left, into: &out)
            out += " "
            out += c.operatorType.symbol
            if !c.options.isEmpty {
                out += "["
                if c.options.contains(.caseInsensitive) { out += "c" }
                if c.options.contains(.diacriticInsensitive) { out += "d" }
                if c.options.contains(.normalized) { out += "n" }
                out += "]"
            }
            out += " "
            write(c.right, into: &out)
        }
    }

    // MARK: Expressions

    /// Binding strength: 1 for + -, 2 for * /, 3 for **, 4 for everything
    /// that needs no parentheses.
    private static func precedence(_ e: FetchExpression) -> Int {
        guard case let .function(name, args) = e, args.count == 2 else {
            if case let .constant(value) = e, startsWithMinus(value) { return 3 }
            return 4
        }
        switch name {
        case "add:to:", "from:subtract:": return 1
        case "multiply:by:", "divide:by:": return 2
        case "raise:toPower:": return 3
        default: return 4
        }
    }

    private static func startsWithMinus(_ value: FetchValue) -> Bool {
        switch value {
        case let .int(v): return v < 0
        case let .double(v): return v.sign == .minus && !v.isNaN && v.isFinite
        default: return false
        }
    }

    private static func writeOperand(_ e: FetchExpression, parenthesize: Bool, into out: inout String) {
        if parenthesize { out += "(" }
        write(e, into: &out)
        if parenthesize { out += ")" }
    }

    static func write(_ expression: FetchExpression, into out: inout String) {
        switch expression {
        case let .constant(value):
            write(value, into: &out)
        case .evaluatedObject:
            out += "SELF"
        case let .keyPath(path):
            writeKeyPath(path, into: &out)
        case let .variable(name):
            out += "$" + name
        case let .aggregate(items):
            out += "{"
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                write(item, into: &out)
            }
            out += "}"
        case let .function(name, args):
            writeFunction(name, args, into: &out)
        case let .member(base, path):
            switch base {
            case .keyPath, .variable, .evaluatedObject, .aggregate, .subquery, .member, .fetchRequest:
                write(base, into: &out)
            case let .function(name, _) where FetchFunction.arithmeticOperators[name] == nil:
                write(base, into: &out)
            default:
                writeOperand(base, parenthesize: true, into: &out)
            }
            if !path.isEmpty {
                out += "."
                writeKeyPath(path, into: &out)
            }
        case let .subquery(collection, variable, predicate):
            out += "SUBQUERY("
            write(collection, into: &out)
            out += ", $" + variable + ", "
            write(predicate, into: &out)
            out += ")"
        case let .fetchRequest(request):
            out += "FETCH("
            write(request.requestExpression, into: &out)
            out += ", "
            write(request.contextExpression, into: &out)
            out += request.isCountOnlyRequest ? ", YES)" : ", NO)"
        }
    }

    private static func writeFunction(_ name: String, _ args: [FetchExpression], into out: inout String) {
        if let symbol = FetchFunction.arithmeticOperators[name], args.count == 2 {
            let mine = precedence(.function(name, args))
            // ** is written left-associative like the others, so the same rule holds.
            writeOperand(args[0], parenthesize: precedence(args[0]) < mine, into: &out)
            out += " " + symbol + " "
            writeOperand(args[1], parenthesize: precedence(args[1]) <= mine, into: &out)
            return
        }
        if name == "castObject:toType:", args.count == 2 {
            out += "CAST("
            write(args[0], into: &out)
            out += ", "
            write(args[1], into: &out)
            out += ")"
            return
        }
        if let receiver = args.first, FetchFunction.isMethodCall(name, receiver: receiver, argumentCount: args.count) {
            // A method call on a receiver: only the FUNCTION form parses back.
            out += "FUNCTION("
            write(receiver, into: &out)
            out += ", "
            write(.constant(.string(name)), into: &out)
            for arg in args.dropFirst() {
                out += ", "
                write(arg, into: &out)
            }
            out += ")"
            return
        }
        out += name == "now" ? "now" : name
        out += "("
        for (i, arg) in args.enumerated() {
            if i > 0 { out += ", " }
            write(arg, into: &out)
        }
        out += ")"
    }

    static func writeKeyPath(_ path: [String], into out: inout String) {
        for (i, key) in path.enumerated() {
            if i > 0 { out += "." }
            if !key.hasPrefix("@"), PredicateParser.reservedWords.contains(key.uppercased()) {
                out += "#"
            }
            out += key
        }
    }

    // MARK: Constants

    static func write(_ value: FetchValue, into out: inout String) {
        switch value {
        case .null:
            out += "nil"
        case let .bool(b):
            out += b ? "TRUE" : "FALSE"
        case let .int(i):
            out += String(i)
        case let .double(d):
            out += formatDouble(d)
        case let .decimal(d):
            out += "CAST(\"\(d)\", \"NSDecimalNumber\")"
        case let .string(s):
            writeString(s, into: &out)
        case let .date(date):
            out += "CAST(" + formatDouble(date.timeIntervalSinceReferenceDate) + ", \"NSDate\")"
        case let .uuid(u):
            out += "CAST(\"\(u.uuidString)\", \"NSUUID\")"
        case let .url(u):
            out += "CAST("
            writeString(u.absoluteString, into: &out)
            out += ", \"NSURL\")"
        case let .data(d):
            out += "CAST(\"\(d.base64EncodedString())\", \"NSData\")"
        case let .object(o):
            // No literal syntax exists for an arbitrary object; this names it
            // for humans and does not parse.
            out += "<\(type(of: o)): \(ObjectIdentifier(o).debugDescription)>"
        case let .other(h):
            out += "<\(type(of: h.base)): \(Scalar.describe(h.base))>"
        }
    }

    /// Shortest text that reads back as the same Double; non-finite values
    /// have no literal, so they go through CAST.
    static func formatDouble(_ d: Double) -> String {
        if d.isNaN { return "CAST(\"nan\", \"NSNumber\")" }
        if d.isInfinite { return d < 0 ? "CAST(\"-inf\", \"NSNumber\")" : "CAST(\"inf\", \"NSNumber\")" }
        return "\(d)"
    }

    static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
