import Foundation

/// The built-in functions of ``FetchExpression/function(_:_:)``, named by
/// Core Data's selector names.
///
/// ```swift
/// try FetchExpression(format: "average:({1, 2, 6})").evaluate(with: nil) // 3.0
/// try FetchExpression(format: "FUNCTION(name, 'uppercase:')").evaluate(with: ["name": "ann"]) // "ANN"
/// ```
public enum FetchFunction {
    /// Every supported name with its number of arguments (nil: any number).
    public static let arities: [String: Int?] = [
        "sum:": nil, "count:": nil, "min:": nil, "max:": nil, "average:": nil,
        "median:": nil, "mode:": nil, "stddev:": nil,
        "sqrt:": 1, "abs:": 1, "floor:": 1, "ceiling:": 1, "trunc:": 1,
        "log:": 1, "ln:": 1, "exp:": 1,
        "lowercase:": 1, "uppercase:": 1, "length:": 1,
        "now": 0,
        "add:to:": 2, "from:subtract:": 2, "multiply:by:": 2, "divide:by:": 2,
        "modulus:by:": 2, "raise:toPower:": 2,
        "castObject:toType:": 2,
    ]

    /// The binary arithmetic functions and the operators that write them.
    static let arithmeticOperators: [String: String] = [
        "add:to:": "+", "from:subtract:": "-", "multiply:by:": "*", "divide:by:": "/", "raise:toPower:": "**",
    ]

    /// The type names `CAST` accepts.
    public static let castTypes: Set<String> = [
        "NSDate", "NSNumber", "NSString", "NSDecimalNumber", "NSUUID", "NSURL", "NSData",
    ]

    static func apply(_ name: String, _ args: [Any?]) throws -> Any? {
        do {
            return try applyUnchecked(name, args)
        } catch var error as PredicateEvaluationError {
            if error.operatorName == nil { error.operatorName = name }
            throw error
        }
    }

    private static func applyUnchecked(_ name: String, _ args: [Any?]) throws -> Any? {
        if case let target as ExpressionFunctionTarget = args.first.flatMap({ $0 }) {
            return try target.evaluateFunction(name, arguments: Array(args.dropFirst()))
        }
        switch name {
        case "sum:": return try sum(listArgument(args))
        case "count:": return listArgument(args).count
        case "min:": return try extreme(listArgument(args), wantMax: false)
        case "max:": return try extreme(listArgument(args), wantMax: true)
        case "average:":
            let values = listArgument(args)
            return values.isEmpty ? nil : try average(values)
        case "median:": return try median(listArgument(args))
        case "mode:": return mode(listArgument(args))
        case "stddev:": return try standardDeviation(listArgument(args))
        case "now": return Date()
        default: break
        }
        guard let arity = arities[name] else {
            // Not built in: a method of the receiver (`FUNCTION($manager, 'x:', …)`).
            return try callTarget(name, args)
        }
        guard args.count == arity ?? args.count else {
            throw PredicateEvaluationError(.invalidOperand, reason: "\(name) takes \(arity ?? 0) argument(s), got \(args.count)")
        }
        switch name {
        case "lowercase:", "uppercase:", "length:":
            let s = Scalar(any: args[0])
            if case .null = s { return nil }
            guard case let .string(text) = s else {
                throw PredicateEvaluationError(.typeMismatch, reason: "expects a string, got \(s.typeName) \(s.errorDescription)")
            }
            if name == "length:" { return text.count }
            return name == "lowercase:" ? text.lowercased() : text.uppercased()
        case "abs:":
            switch Scalar(any: args[0]) {
            case .null: return nil
            case let .int(v): return v == .min ? Double(v).magnitude : Int(exactly: v.magnitude) ?? Double(v.magnitude)
            case let .decimal(v): return v < 0 ? -v : v
            case let s: return try double(s, name).magnitude
            }
        case "sqrt:", "floor:", "ceiling:", "trunc:", "log:", "ln:", "exp:":
            let s = Scalar(any: args[0])
            if case .null = s { return nil }
            let d = try double(s, name)
            switch name {
            case "sqrt:": return d.squareRoot()
            case "floor:": return d.rounded(.down)
            case "ceiling:": return d.rounded(.up)
            case "trunc:": return d.rounded(.towardZero)
            case "log:": return log10(d)
            case "ln:": return Foundation.log(d)
            default: return Foundation.exp(d)
            }
        case "castObject:toType:":
            guard case let .string(type) = Scalar(any: args[1]) else {
                throw PredicateEvaluationError(.typeMismatch, reason: "the CAST type must be a string")
            }
            return try cast(Scalar(any: args[0]), to: type)?.anyValue
        default:
            return try arithmetic(name, Scalar(any: args[0]), Scalar(any: args[1]))
        }
    }

    /// `CAST(value, "Type")`; also used by the parser to fold constant casts.
    static func cast(_ value: Scalar, to type: String) throws -> FetchValue? {
        func fail() -> PredicateEvaluationError {
            PredicateEvaluationError(.typeMismatch, operatorName: "CAST", reason: "cannot cast \(value.typeName) \(value.errorDescription) to \(type)")
        }
        if case .null = value { return .null }
        switch type {
        case "NSDate":
            if case let .date(d) = value { return .date(d) }
            if case let .string(s) = value, let t = Double(s) { return .date(Date(timeIntervalSinceReferenceDate: t)) }
            guard let t = value.doubleValue else { throw fail() }
            return .date(Date(timeIntervalSinceReferenceDate: t))
        case "NSNumber":
            switch value {
            case let .int(v): return .int(v)
            case let .double(v): return .double(v)
            case let .bool(v): return .bool(v)
            case let .decimal(v): return .decimal(v)
            case let .date(d): return .double(d.timeIntervalSinceReferenceDate)
            case let .string(s):
                let t = s.trimmingCharacters(in: .whitespaces)
                if let i = Int64(t) { return .int(i) }
                if let d = Double(t) { return .double(d) }
                throw fail()
            default: throw fail()
            }
        case "NSDecimalNumber":
            switch value {
            case let .string(s):
                guard let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) else { throw fail() }
                return .decimal(d)
            default:
                guard let d = value.decimalValue else { throw fail() }
                return .decimal(d)
            }
        case "NSString":
            switch value {
            case let .string(s): return .string(s)
            case let .int(v): return .string(String(v))
            case let .double(v): return .string(String(v))
            case let .decimal(v): return .string("\(v)")
            case let .bool(v): return .string(v ? "1" : "0")
            case let .uuid(u): return .string(u.uuidString)
            case let .url(u): return .string(u.absoluteString)
            default: throw fail()
            }
        case "NSUUID":
            if case let .uuid(u) = value { return .uuid(u) }
            if case let .string(s) = value, let u = UUID(uuidString: s) { return .uuid(u) }
            throw fail()
        case "NSURL":
            if case let .url(u) = value { return .url(u) }
            if case let .string(s) = value, let u = URL(string: s) { return .url(u) }
            throw fail()
        case "NSData":
            if case let .data(d) = value { return .data(d) }
            if case let .string(s) = value, let d = Data(base64Encoded: s) { return .data(d) }
            throw fail()
        default:
            throw PredicateEvaluationError(.invalidOperand, operatorName: "CAST",
                                           reason: "unknown CAST type \"\(type)\"; known: \(castTypes.sorted().joined(separator: ", "))")
        }
    }

    // MARK: Aggregates

    /// The elements: a single collection argument, or the arguments themselves.
    private static func listArgument(_ args: [Any?]) -> [Any?] {
        if args.count == 1, case let .collection(items) = Scalar(any: args[0]) { return items }
        if args.count == 1, case .null = Scalar(any: args[0]) { return [] }
        return args
    }

    private static func numbers(_ values: [Any?]) throws -> [Scalar] {
        var result: [Scalar] = []
        for v in values {
            let s = Scalar(any: v)
            if case .null = s { continue }
            guard s.isNumeric else {
                throw PredicateEvaluationError(.typeMismatch, reason: "expects numbers, got \(s.typeName) \(s.errorDescription)")
            }
            result.append(s)
        }
        return result
    }

    static func sum(_ values: [Any?]) throws -> Any {
        let nums = try numbers(values)
        if nums.contains(where: { if case .decimal = $0 { return true } else { return false } }) {
            return nums.reduce(Decimal(0)) { $0 + ($1.decimalValue ?? 0) }
        }
        var intTotal: Int64 = 0
        var allInts = true
        for n in nums {
            switch n {
            case let .int(v):
                let (r, overflow) = intTotal.addingReportingOverflow(v)
                if overflow { allInts = false } else { intTotal = r }
            case let .bool(b):
                let (r, overflow) = intTotal.addingReportingOverflow(b ? 1 : 0)
                if overflow { allInts = false } else { intTotal = r }
            default: allInts = false
            }
            if !allInts { break }
        }
        if allInts { return Int(exactly: intTotal) ?? intTotal }
        return nums.reduce(0.0) { $0 + ($1.doubleValue ?? 0) }
    }

    static func average(_ values: [Any?]) throws -> Any? {
        let nums = try numbers(values)
        if nums.isEmpty { return nil }
        if nums.contains(where: { if case .decimal = $0 { return true } else { return false } }) {
            return nums.reduce(Decimal(0)) { $0 + ($1.decimalValue ?? 0) } / Decimal(nums.count)
        }
        return nums.reduce(0.0) { $0 + ($1.doubleValue ?? 0) } / Double(nums.count)
    }

    /// The least or greatest non-nil value, by the comparison operators' order.
    static func extreme(_ values: [Any?], wantMax: Bool) throws -> Any? {
        var best: Scalar?
        for v in values {
            let s = Scalar(any: v)
            if case .null = s { continue }
            guard let current = best else { best = s; continue }
            let order = try PredicateEvaluator.ordering(s, current, [], op: wantMax ? "max:" : "min:")
            if order == (wantMax ? .orderedDescending : .orderedAscending) { best = s }
        }
        return best?.anyValue
    }

    static func median(_ values: [Any?]) throws -> Any? {
        let nums = try numbers(values).compactMap { $0.doubleValue }.sorted()
        if nums.isEmpty { return nil }
        let mid = nums.count / 2
        return nums.count % 2 == 1 ? nums[mid] : (nums[mid - 1] + nums[mid]) / 2
    }

    /// The most frequent values, as an array: Core Data's `mode:` returns all
    /// of them when several tie.
    static func mode(_ values: [Any?]) -> [Any] {
        var counts: [(value: Scalar, count: Int)] = []
        for v in values {
            let s = Scalar(any: v)
            if case .null = s { continue }
            if let i = counts.firstIndex(where: { PredicateEvaluator.equal($0.value, s, [], foldedRight: nil) }) {
                counts[i].count += 1
            } else {
                counts.append((s, 1))
            }
        }
        let top = counts.map(\.count).max() ?? 0
        return counts.filter { $0.count == top }.compactMap { $0.value.anyValue }
    }

    /// Population standard deviation.
    static func standardDeviation(_ values: [Any?]) throws -> Any? {
        let nums = try numbers(values).compactMap { $0.doubleValue }
        if nums.isEmpty { return nil }
        let mean = nums.reduce(0, +) / Double(nums.count)
        let variance = nums.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(nums.count)
        return variance.squareRoot()
    }

    static func distinct(_ values: [Any?]) -> [Any] {
        var result: [Scalar] = []
        for v in values {
            let s = Scalar(any: v)
            if case .null = s { continue }
            if !result.contains(where: { PredicateEvaluator.equal($0, s, [], foldedRight: nil) }) { result.append(s) }
        }
        return result.compactMap { $0.anyValue }
    }

    // MARK: Arithmetic

    private static func double(_ s: Scalar, _ name: String) throws -> Double {
        guard s.isNumeric, let d = s.doubleValue else {
            throw PredicateEvaluationError(.typeMismatch, reason: "expects a number, got \(s.typeName) \(s.errorDescription)")
        }
        return d
    }

    static func arithmetic(_ name: String, _ a: Scalar, _ b: Scalar) throws -> Any? {
        let symbol = arithmeticOperators[name] ?? name
        if case .null = a { return nil }
        if case .null = b { return nil }
        // Dates move by seconds; the difference of two dates is seconds.
        switch (name, a, b) {
        case let ("add:to:", .date(d), n) where n.isNumeric: return d.addingTimeInterval(n.doubleValue ?? 0)
        case let ("add:to:", n, .date(d)) where n.isNumeric: return d.addingTimeInterval(n.doubleValue ?? 0)
        case let ("from:subtract:", .date(d), n) where n.isNumeric: return d.addingTimeInterval(-(n.doubleValue ?? 0))
        case let ("from:subtract:", .date(x), .date(y)): return x.timeIntervalSince(y)
        default: break
        }
        guard a.isNumeric, b.isNumeric else {
            throw PredicateEvaluationError(.typeMismatch, operatorName: symbol,
                                           reason: "cannot apply \(symbol) to \(a.typeName) \(a.errorDescription) and \(b.typeName) \(b.errorDescription)")
        }
        func int(_ s: Scalar) -> Int64? {
            switch s {
            case let .int(v): return v
            case let .bool(v): return v ? 1 : 0
            default: return nil
            }
        }
        let isDecimal: Bool = {
            if case .decimal = a { return true }
            if case .decimal = b { return true }
            return false
        }()
        if name == "divide:by:" || name == "modulus:by:", b.doubleValue == 0 {
            throw PredicateEvaluationError(.arithmetic, operatorName: symbol, reason: "division by zero")
        }
        if isDecimal, name != "raise:toPower:", name != "modulus:by:", let x = a.decimalValue, let y = b.decimalValue {
            switch name {
            case "add:to:": return x + y
            case "from:subtract:": return x - y
            case "multiply:by:": return x * y
            default: return x / y
            }
        }
        if let x = int(a), let y = int(b) {
            let result: (Int64, Bool)?
            switch name {
            case "add:to:": result = x.addingReportingOverflow(y)
            case "from:subtract:": result = x.subtractingReportingOverflow(y)
            case "multiply:by:": result = x.multipliedReportingOverflow(by: y)
            case "modulus:by:": result = x.remainderReportingOverflow(dividingBy: y)
            default: result = nil
            }
            if let (value, overflow) = result, !overflow { return Int(exactly: value) ?? value }
        }
        let x = a.doubleValue ?? 0, y = b.doubleValue ?? 0
        switch name {
        case "add:to:": return x + y
        case "from:subtract:": return x - y
        case "multiply:by:": return x * y
        case "divide:by:": return x / y
        case "modulus:by:": return x.truncatingRemainder(dividingBy: y)
        default: return Foundation.pow(x, y)
        }
    }
}
