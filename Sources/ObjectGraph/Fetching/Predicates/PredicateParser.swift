import Foundation

/// A recursive-descent parser for Apple's predicate format syntax.
///
/// Precedence, loosest first: `OR`, `AND`, `NOT`, comparison, `+ -`,
/// `* /`, `**`, unary `-`, postfix `.key`. Parentheses are ambiguous between
/// a grouped predicate and a grouped expression (`(a + b) > 1`); the parser
/// tries the predicate first and falls back to the expression, reporting
/// whichever attempt got further if both fail.
struct PredicateParser {
    static let reservedWords: Set<String> = [
        "AND", "OR", "NOT", "IN", "LIKE", "MATCHES", "BEGINSWITH", "ENDSWITH", "CONTAINS", "BETWEEN",
        "ANY", "ALL", "SOME", "NONE", "NULL", "NIL", "TRUE", "FALSE", "YES", "NO", "SELF",
        "TRUEPREDICATE", "FALSEPREDICATE", "SUBQUERY", "FUNCTION", "CAST", "FETCH",
        "FIRST", "LAST", "SIZE", "ANYKEY", "CASEINSENSITIVE", "CI",
    ]

    private let tokens: [PredicateToken]
    private let format: String
    private let arguments: [Any?]
    private var pos = 0
    private var argumentIndex = 0
    private var depth = 0
    /// Deeper nesting than any real predicate needs; the limit turns hostile
    /// input such as 100,000 '(' into an error instead of a stack overflow.
    static let maximumNesting = 200

    private mutating func enter() throws {
        depth += 1
        if depth > PredicateParser.maximumNesting {
            throw error("nesting is too deep (more than \(PredicateParser.maximumNesting) levels)")
        }
    }

    private init(_ format: String, arguments: [Any?]) throws {
        self.format = format
        self.tokens = try PredicateLexer.tokenize(format)
        self.arguments = arguments
    }

    static func parsePredicate(_ format: String, arguments: [Any?]) throws -> FetchPredicate {
        var parser = try PredicateParser(format, arguments: arguments)
        if case .end = parser.current.kind {
            throw PredicateSyntaxError(position: 0, reason: "empty predicate format string", format: format)
        }
        let predicate = try parser.parseOr()
        try parser.finish()
        return predicate
    }

    static func parseExpression(_ format: String, arguments: [Any?]) throws -> FetchExpression {
        var parser = try PredicateParser(format, arguments: arguments)
        let expression = try parser.parseExpression()
        try parser.finish()
        return expression
    }

    // MARK: Token helpers

    private var current: PredicateToken { tokens[min(pos, tokens.count - 1)] }

    private func peekToken(_ offset: Int) -> PredicateToken { tokens[min(pos + offset, tokens.count - 1)] }

    private func error(_ reason: String, at position: Int? = nil) -> PredicateSyntaxError {
        PredicateSyntaxError(position: position ?? current.position, reason: reason, format: format)
    }

    private func keyword(_ token: PredicateToken) -> String? {
        guard case let .identifier(name, escaped) = token.kind, !escaped else { return nil }
        let upper = name.uppercased()
        return PredicateParser.reservedWords.contains(upper) ? upper : nil
    }

    private func isKeyword(_ word: String) -> Bool { keyword(current) == word }

    private func isSymbol(_ symbol: String) -> Bool {
        if case let .symbol(s) = current.kind { return s == symbol }
        return false
    }

    @discardableResult
    private mutating func expectSymbol(_ symbol: String, _ context: @autoclosure () -> String) throws -> PredicateToken {
        guard isSymbol(symbol) else {
            throw error("expected '\(symbol)' \(context()), found \(describe(current))")
        }
        let token = current
        pos += 1
        return token
    }

    private func describe(_ token: PredicateToken) -> String {
        switch token.kind {
        case .end: return "end of input"
        case let .identifier(name, escaped):
            if !escaped, let k = keyword(token) { return "keyword '\(k)'" }
            return "'\(escaped ? "#" : "")\(name)'"
        case let .string(s): return "string \"\(s)\""
        case let .integer(i): return "number \(i)"
        case let .double(d): return "number \(d)"
        case let .variable(v): return "variable $\(v)"
        case let .collectionOperator(op): return "'\(op)'"
        case let .formatSpecifier(s): return "'%\(s)'"
        case let .symbol(s): return "'\(s)'"
        }
    }

    private mutating func finish() throws {
        guard case .end = current.kind else {
            if isSymbol(")") { throw error("unbalanced parentheses: ')' has no matching '('") }
            throw error("unexpected \(describe(current)) after a complete predicate")
        }
        if argumentIndex < arguments.count {
            throw error("too many format arguments: the format string uses \(argumentIndex) but \(arguments.count) were given",
                        at: current.position)
        }
    }

    // MARK: Predicates

    private mutating func parseOr() throws -> FetchPredicate {
        try enter()
        defer { depth -= 1 }
        var items = [try parseAnd()]
        while isKeyword("OR") || isSymbol("||") {
            pos += 1
            items.append(try parseAnd())
        }
        return items.count == 1 ? items[0] : .or(items)
    }

    private mutating func parseAnd() throws -> FetchPredicate {
        var items = [try parseNot()]
        while isKeyword("AND") || isSymbol("&&") {
            pos += 1
            items.append(try parseNot())
        }
        return items.count == 1 ? items[0] : .and(items)
    }

    private mutating func parseNot() throws -> FetchPredicate {
        try enter()
        defer { depth -= 1 }
        if isKeyword("NOT") || isSymbol("!") {
            pos += 1
            return .not(try parseNot())
        }
        return try parsePrimaryPredicate()
    }

    private mutating func parsePrimaryPredicate() throws -> FetchPredicate {
        if isKeyword("TRUEPREDICATE") { pos += 1; return .truePredicate }
        if isKeyword("FALSEPREDICATE") { pos += 1; return .falsePredicate }
        if isSymbol("(") {
            let saved = (pos, argumentIndex)
            let open = current
            let predicateError: PredicateSyntaxError
            do {
                pos += 1
                let inner = try parseOr()
                try expectSymbol(")", "to close '(' opened at column \(open.position + 1)")
                return inner
            } catch let e as PredicateSyntaxError {
                predicateError = e
            }
            (pos, argumentIndex) = saved
            do {
                return try parseComparison()
            } catch let e as PredicateSyntaxError {
                throw e.position > predicateError.position ? e : predicateError
            }
        }
        return try parseComparison()
    }

    private mutating func parseComparison() throws -> FetchPredicate {
        var modifier = FetchComparison.Modifier.direct
        var negate = false
        if let k = keyword(current), ["ANY", "SOME", "ALL", "NONE"].contains(k) {
            pos += 1
            switch k {
            case "ALL": modifier = .all
            case "NONE": modifier = .any; negate = true
            default: modifier = .any
            }
        }
        let left = try parseExpression()
        let opToken = current
        let op: FetchComparison.Operator
        switch opToken.kind {
        case let .symbol(s):
            switch s {
            case "=", "==": op = .equalTo
            case "!=", "<>": op = .notEqualTo
            case "<": op = .lessThan
            case "<=", "=<": op = .lessThanOrEqualTo
            case ">": op = .greaterThan
            case ">=", "=>": op = .greaterThanOrEqualTo
            default: throw missingOperator(after: left)
            }
        case .identifier:
            switch keyword(opToken) {
            case "LIKE": op = .like
            case "MATCHES": op = .matches
            case "BEGINSWITH": op = .beginsWith
            case "ENDSWITH": op = .endsWith
            case "CONTAINS": op = .contains
            case "IN": op = .in
            case "BETWEEN": op = .between
            default:
                if case let .identifier(name, _) = opToken.kind {
                    throw error("unknown operator '\(name)'; expected one of \(PredicateParser.operatorList)")
                }
                throw missingOperator(after: left)
            }
        default:
            throw missingOperator(after: left)
        }
        pos += 1
        let options = try parseOptions()
        let rightPosition = current.position
        let right = try parseExpression()
        if op == .between {
            // BETWEEN needs a two-element range: refused here rather than
            // failing (or matching nothing) at every evaluation. Variables,
            // key paths and functions can only be judged when evaluated.
            switch right {
            case let .aggregate(bounds) where bounds.count != 2:
                throw error("BETWEEN needs a range of two values such as {1, 10}; got \(bounds.count) value\(bounds.count == 1 ? "" : "s")", at: rightPosition)
            case .constant:
                throw error("BETWEEN needs a range of two values such as {1, 10}; got '\(right.expressionFormat)'", at: rightPosition)
            default: break
            }
        }
        let comparison = FetchPredicate.comparison(FetchComparison(left, op, right, modifier: modifier, options: options))
        return negate ? .not(comparison) : comparison
    }

    private static let operatorList = "==, !=, <, <=, >, >=, LIKE, MATCHES, BEGINSWITH, ENDSWITH, CONTAINS, IN, BETWEEN"

    private func missingOperator(after left: FetchExpression) -> PredicateSyntaxError {
        if case .end = current.kind {
            return error("expected a comparison operator (\(PredicateParser.operatorList)) after '\(left.expressionFormat)', found end of input")
        }
        return error("expected a comparison operator (\(PredicateParser.operatorList)) after '\(left.expressionFormat)', found \(describe(current))")
    }

    private mutating func parseOptions() throws -> FetchComparison.Options {
        guard isSymbol("[") else { return [] }
        let open = current
        pos += 1
        guard case let .identifier(letters, false) = current.kind else {
            throw error("expected comparison options such as c, d or cd inside '[' ']'")
        }
        var options: FetchComparison.Options = []
        for letter in letters.lowercased() {
            switch letter {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            case "n": options.insert(.normalized)
            default: throw error("unknown comparison option '\(letter)' in '[\(letters)]'; expected c, d or n")
            }
        }
        pos += 1
        try expectSymbol("]", "to close the options opened at column \(open.position + 1)")
        return options
    }

    // MARK: Expressions

    private mutating func parseExpression() throws -> FetchExpression {
        try enter()
        defer { depth -= 1 }
        var left = try parseMultiplicative()
        while isSymbol("+") || isSymbol("-") {
            let name = isSymbol("+") ? "add:to:" : "from:subtract:"
            pos += 1
            left = .function(name, [left, try parseMultiplicative()])
        }
        return left
    }

    private mutating func parseMultiplicative() throws -> FetchExpression {
        var left = try parsePower()
        while isSymbol("*") || isSymbol("/") {
            let name = isSymbol("*") ? "multiply:by:" : "divide:by:"
            pos += 1
            left = .function(name, [left, try parsePower()])
        }
        return left
    }

    private mutating func parsePower() throws -> FetchExpression {
        var left = try parseUnary()
        while isSymbol("**") {
            pos += 1
            left = .function("raise:toPower:", [left, try parseUnary()])
        }
        return left
    }

    private mutating func parseUnary() throws -> FetchExpression {
        try enter()
        defer { depth -= 1 }
        guard isSymbol("-") else { return try parsePostfix() }
        pos += 1
        // A negative literal is one constant, so Int64.min is expressible.
        if case let .integer(magnitude) = current.kind {
            pos += 1
            if magnitude <= UInt64(Int64.max) { return .constant(.int(-Int64(magnitude))) }
            if magnitude == UInt64(Int64.max) + 1 { return .constant(.int(Int64.min)) }
            return .constant(.double(-Double(magnitude)))
        }
        if case let .double(value) = current.kind {
            pos += 1
            return .constant(.double(-value))
        }
        let operand = try parseUnary()
        return .function("from:subtract:", [.constant(.int(0)), operand])
    }

    private mutating func parsePostfix() throws -> FetchExpression {
        var base = try parsePrimaryExpression()
        while isSymbol(".") {
            pos += 1
            var path: [String] = []
            repeat {
                if path.count > 0 { pos += 1 }
                path.append(try parseKeyComponent())
            } while isSymbol(".")
            switch base {
            case let .keyPath(p): base = .keyPath(p + path)
            case let .member(inner, p): base = .member(inner, p + path)
            default: base = .member(base, path)
            }
        }
        return base
    }

    private mutating func parseKeyComponent() throws -> String {
        switch current.kind {
        case let .identifier(name, escaped):
            if !escaped, let k = keyword(current), k != "SELF" {
                throw error("expected a key after '.', found keyword '\(k)'; write #\(name) to use it as a key")
            }
            pos += 1
            return name
        case let .collectionOperator(op):
            pos += 1
            return op
        case let .formatSpecifier(spec) where spec == "K":
            let token = current
            pos += 1
            return try keyPathArgument(at: token).joined(separator: ".")
        default:
            throw error("expected a key after '.', found \(describe(current))")
        }
    }

    private mutating func parsePrimaryExpression() throws -> FetchExpression {
        let token = current
        switch token.kind {
        case let .string(s):
            pos += 1
            return .constant(.string(s))
        case let .integer(i):
            pos += 1
            if let v = Int64(exactly: i) { return .constant(.int(v)) }
            return .constant(.double(Double(i)))
        case let .double(d):
            pos += 1
            return .constant(.double(d))
        case let .variable(name):
            pos += 1
            return .variable(name)
        case let .formatSpecifier(spec):
            pos += 1
            return try formatArgument(spec, at: token)
        case let .collectionOperator(op):
            pos += 1
            return .keyPath([op])
        case let .symbol(s) where s == "{":
            pos += 1
            var items: [FetchExpression] = []
            if !isSymbol("}") {
                items.append(try parseExpression())
                while isSymbol(",") {
                    pos += 1
                    items.append(try parseExpression())
                }
            }
            try expectSymbol("}", "to close the aggregate '{' opened at column \(token.position + 1)")
            return .aggregate(items)
        case let .symbol(s) where s == "(":
            pos += 1
            let inner = try parseExpression()
            try expectSymbol(")", "to close '(' opened at column \(token.position + 1)")
            return inner
        case let .identifier(name, escaped):
            if !escaped, let k = keyword(token) {
                return try parseKeywordExpression(k, token)
            }
            if !escaped, case .symbol(":") = peekToken(1).kind {
                return try parseFunctionCall()
            }
            if !escaped, case .symbol("(") = peekToken(1).kind {
                return try parseFunctionCall()
            }
            pos += 1
            return .keyPath([name])
        case .end:
            throw error("expected an expression, found end of input")
        default:
            throw error("expected an expression, found \(describe(token))")
        }
    }

    private mutating func parseKeywordExpression(_ k: String, _ token: PredicateToken) throws -> FetchExpression {
        switch k {
        case "TRUE", "YES": pos += 1; return .constant(.bool(true))
        case "FALSE", "NO": pos += 1; return .constant(.bool(false))
        case "NULL", "NIL": pos += 1; return .constant(.null)
        case "SELF": pos += 1; return .evaluatedObject
        case "SUBQUERY": return try parseSubquery()
        case "FUNCTION": return try parseFunctionKeyword()
        case "CAST": return try parseCast()
        case "FETCH": return try parseFetch()
        default:
            if case let .identifier(name, _) = token.kind {
                throw error("expected an expression, found keyword '\(k)'; write #\(name) to use it as a key")
            }
            throw error("expected an expression, found keyword '\(k)'")
        }
    }

    private mutating func parseSubquery() throws -> FetchExpression {
        let start = current
        pos += 1
        try expectSymbol("(", "after SUBQUERY")
        let collection = try parseExpression()
        try expectSymbol(",", "after the SUBQUERY collection")
        guard case let .variable(variable) = current.kind else {
            throw error("expected a $variable as the second SUBQUERY argument, found \(describe(current))")
        }
        pos += 1
        try expectSymbol(",", "after the SUBQUERY variable")
        let predicate = try parseOr()
        try expectSymbol(")", "to close SUBQUERY( opened at column \(start.position + 1)")
        return .subquery(collection: collection, variable: variable, predicate: predicate)
    }

    /// `FUNCTION(receiver, 'selector:', args...)` for the built-in functions:
    /// the receiver becomes the first argument, so the result is the same
    /// expression as `selector:(receiver, args...)`.
    private mutating func parseFunctionKeyword() throws -> FetchExpression {
        let start = current
        pos += 1
        try expectSymbol("(", "after FUNCTION")
        let receiver = try parseExpression()
        try expectSymbol(",", "after the FUNCTION receiver")
        let selectorToken = current
        guard case let .string(selector) = current.kind else {
            throw error("expected the function name as a string, such as 'uppercase:', found \(describe(current))")
        }
        pos += 1
        var args = [receiver]
        while isSymbol(",") {
            pos += 1
            args.append(try parseExpression())
        }
        try expectSymbol(")", "to close FUNCTION( opened at column \(start.position + 1)")
        // `now` takes no arguments; its receiver is only there for the syntax.
        if selector == "now" || selector == "now()" { return try makeFunction("now", Array(args.dropFirst()), at: selectorToken) }
        // A method of an object bound to a variable (`FUNCTION($manager,
        // 'destinationInstancesForEntityMappingNamed:sourceInstances:', …)`):
        // called through ExpressionFunctionTarget when evaluated.
        if case .variable = receiver, FetchFunction.isMethodCall(selector, receiver: receiver, argumentCount: args.count) {
            return .function(selector, args)
        }
        return try makeFunction(selector, args, at: selectorToken)
    }

    /// `name:(args)`, `add:to:(a, b)` and `now()`.
    private mutating func parseFunctionCall() throws -> FetchExpression {
        let start = current
        var name = ""
        while case let .identifier(part, false) = current.kind {
            if case .symbol(":") = peekToken(1).kind {
                name += part + ":"
                pos += 2
            } else if name.isEmpty {
                name = part
                pos += 1
                break
            } else {
                break
            }
        }
        try expectSymbol("(", "to open the arguments of \(name)")
        var args: [FetchExpression] = []
        if !isSymbol(")") {
            args.append(try parseExpression())
            while isSymbol(",") {
                pos += 1
                args.append(try parseExpression())
            }
        }
        try expectSymbol(")", "to close the arguments of \(name)")
        return try makeFunction(name, args, at: start)
    }

    private func makeFunction(_ name: String, _ args: [FetchExpression], at token: PredicateToken) throws -> FetchExpression {
        guard let arity = FetchFunction.arities[name] else {
            let known = FetchFunction.arities.keys.sorted().joined(separator: " ")
            throw error("unknown function '\(name)'; supported: \(known)", at: token.position)
        }
        if let arity, args.count != arity {
            throw error("function '\(name)' takes \(arity) argument\(arity == 1 ? "" : "s"), got \(args.count)", at: token.position)
        }
        if name == "castObject:toType:" { return try makeCast(args[0], args[1], at: token) }
        return .function(name, args)
    }

    private mutating func parseCast() throws -> FetchExpression {
        let start = current
        pos += 1
        try expectSymbol("(", "after CAST")
        let value = try parseExpression()
        try expectSymbol(",", "after the value to CAST")
        let type = try parseExpression()
        try expectSymbol(")", "to close CAST( opened at column \(start.position + 1)")
        return try makeCast(value, type, at: start)
    }

    /// Casts of constants are done now, so `CAST(0, "NSDate")` is a date
    /// constant, which is also how dates format.
    private func makeCast(_ value: FetchExpression, _ type: FetchExpression, at token: PredicateToken) throws -> FetchExpression {
        guard case let .constant(.string(typeName)) = type else {
            return .function("castObject:toType:", [value, type])
        }
        guard FetchFunction.castTypes.contains(typeName) else {
            throw error("unknown CAST type \"\(typeName)\"; expected one of \(FetchFunction.castTypes.sorted().joined(separator: ", "))", at: token.position)
        }
        guard case let .constant(constant) = value else {
            return .function("castObject:toType:", [value, type])
        }
        do {
            if let folded = try FetchFunction.cast(Scalar(constant), to: typeName) { return .constant(folded) }
            return .constant(.null)
        } catch let e as PredicateEvaluationError {
            throw error(e.reason, at: token.position)
        }
    }

    private mutating func parseFetch() throws -> FetchExpression {
        let start = current
        pos += 1
        try expectSymbol("(", "after FETCH")
        let request = try parseExpression()
        try expectSymbol(",", "after the FETCH request")
        let context = try parseExpression()
        try expectSymbol(",", "after the FETCH context")
        let countToken = current
        guard case let .constant(.bool(countOnly)) = try parseExpression() else {
            throw error("expected YES or NO for the FETCH count-only flag", at: countToken.position)
        }
        try expectSymbol(")", "to close FETCH( opened at column \(start.position + 1)")
        return FetchRequestExpression.expression(forFetch: request, context: context, countOnly: countOnly)
    }

    // MARK: Format arguments

    private mutating func nextArgument(_ token: PredicateToken) throws -> Any? {
        guard argumentIndex < arguments.count else {
            guard case let .formatSpecifier(spec) = token.kind else { return nil }
            throw error("format specifier %\(spec) has no argument: only \(arguments.count) argument\(arguments.count == 1 ? " was" : "s were") given",
                        at: token.position)
        }
        defer { argumentIndex += 1 }
        return unwrapOptional(arguments[argumentIndex])
    }

    private mutating func keyPathArgument(at token: PredicateToken) throws -> [String] {
        let argument = try nextArgument(token)
        guard let path = argument as? String, !path.isEmpty else {
            throw error("%K needs a key path string argument, got \(typeDescription(argument))", at: token.position)
        }
        return path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    private func typeDescription(_ value: Any?) -> String {
        guard let value else { return "nil" }
        return "\(type(of: value)) \(Scalar.describe(value).prefix(40))"
    }

    private mutating func formatArgument(_ spec: String, at token: PredicateToken) throws -> FetchExpression {
        if spec == "K" { return .keyPath(try keyPathArgument(at: token)) }
        let argument = try nextArgument(token)
        let letter = spec.last ?? "@"
        switch letter {
        case "@":
            return FormatArgumentConverter.expression(forObject: argument)
        case "d", "i", "D", "u", "U", "x", "X", "c", "C":
            switch Scalar(any: argument) {
            case let .int(v): return .constant(.int(v))
            default:
                throw error("%\(spec) needs an integer argument, got \(typeDescription(argument))", at: token.position)
            }
        case "f", "g", "e", "E":
            switch Scalar(any: argument) {
            case let .double(v): return .constant(.double(v))
            case let .int(v): return .constant(.double(Double(v)))
            default:
                throw error("%\(spec) needs a floating-point argument, got \(typeDescription(argument))", at: token.position)
            }
        case "s", "S":
            guard case let .string(s) = Scalar(any: argument) else {
                throw error("%\(spec) needs a string argument, got \(typeDescription(argument))", at: token.position)
            }
            return .constant(.string(s))
        default:
            throw error("unsupported format specifier %\(spec); use %@, %K, %d, %i, %ld, %f or %s", at: token.position)
        }
    }
}
