import Foundation

/// Substitution variables plus the variables bound by enclosing SUBQUERYs.
struct EvaluationScope {
    var variables: [String: Any?]
    /// Innermost last; a SUBQUERY variable shadows a substitution variable.
    var bindings: [(name: String, value: Any?)] = []

    init(variables: [String: Any?]) {
        self.variables = variables
    }

    func lookup(_ name: String) throws -> Any? {
        for binding in bindings.reversed() where binding.name == name {
            return binding.value
        }
        if let entry = variables[name] { return unwrapOptional(entry) }
        throw PredicateEvaluationError(.unboundVariable, reason: "no value for variable $\(name)")
    }
}

/// The in-memory evaluator: walks the AST against an object with Core Data's
/// semantics (nil equals only nil, numbers compare by value, ordering with
/// nil is false).
enum PredicateEvaluator {
    // MARK: Predicates

    /// `dictionary` is `object` when it is a `[String: Any]`, passed along
    /// typed so single-key reads need no dynamic cast.
    static func evaluate(_ predicate: FetchPredicate, object: Any?, dictionary: [String: Any]?, scope: inout EvaluationScope) throws -> Bool {
        switch predicate {
        case .truePredicate:
            return true
        case .falsePredicate:
            return false
        case let .comparison(c):
            return try evaluate(c, object: object, dictionary: dictionary, scope: &scope)
        case let .and(items):
            for item in items where try !evaluate(item, object: object, dictionary: dictionary, scope: &scope) { return false }
            return true
        case let .or(items):
            for item in items where try evaluate(item, object: object, dictionary: dictionary, scope: &scope) { return true }
            return false
        case let .not(inner):
            return try !evaluate(inner, object: object, dictionary: dictionary, scope: &scope)
        }
    }

    /// The row evaluator: the same semantics, but plain `key OP constant`
    /// comparisons on a `[String: Any]` are decided without building a scope,
    /// boxing the row, or classifying values. Anything else falls through to
    /// the general evaluator.
    static func evaluate(_ predicate: FetchPredicate, row: [String: Any], variables: [String: Any?]) throws -> Bool {
        switch predicate {
        case let .comparison(c):
            let plan = c.plan
            // `values[index]` yields the stored value in place, where
            // `row[key]` would copy the existential first.
            if let fast = plan.fastConstant, let key = plan.leftKey, let index = row.index(forKey: key),
               let result = fastCompare(row.values[index], fast, plan.operatorType) {
                return result
            }
            var scope = EvaluationScope(variables: variables)
            return try evaluate(c, object: row, dictionary: row, scope: &scope)
        case let .and(items):
            for item in items where try !evaluate(item, row: row, variables: variables) { return false }
            return true
        case let .or(items):
            for item in items where try evaluate(item, row: row, variables: variables) { return true }
            return false
        case let .not(inner):
            return try !evaluate(inner, row: row, variables: variables)
        case .truePredicate:
            return true
        case .falsePredicate:
            return false
        }
    }

    static func evaluate(_ c: FetchComparison, object: Any?, dictionary: [String: Any]?, scope: inout EvaluationScope) throws -> Bool {
        do {
            let plan = c.plan
            let left: Any?
            if let key = plan.leftKey, let dictionary {
                // The hot path: one key read from a plain dictionary.
                guard let value = dictionary[key] else { throw unknownKey(key, in: [key], on: dictionary) }
                if let fast = plan.fastConstant, let result = fastCompare(value, fast, plan.operatorType) {
                    return result
                }
                left = value
            } else {
                left = try evaluate(c.left, object: object, scope: &scope)
            }
            let right: Scalar
            if let constant = plan.rightConstant {
                right = constant
            } else {
                right = Scalar(any: try evaluate(c.right, object: object, scope: &scope))
            }
            switch c.modifier {
            case .direct:
                return try compare(Scalar(any: left), right, c)
            case .any, .all:
                let wantAll = c.modifier == .all
                let leftScalar = Scalar(any: left)
                let elements: [Any?]
                switch leftScalar {
                case .null: elements = []
                case let .collection(items): elements = items
                default:
                    throw PredicateEvaluationError(
                        .typeMismatch, operatorName: wantAll ? "ALL" : "ANY",
                        reason: "the left-hand side must be a to-many collection (array or set), not \(leftScalar.typeName) \(leftScalar.errorDescription)")
                }
                for element in elements {
                    let result = try compare(Scalar(any: element), right, c)
                    if wantAll && !result { return false }
                    if !wantAll && result { return true }
                }
                return wantAll
            }
        } catch var error as PredicateEvaluationError {
            if error.predicateFormat == nil { error.predicateFormat = c.description }
            throw error
        }
    }

    // MARK: Comparison semantics

    /// Reads a small value (Int, Double, String, ...) straight out of an
    /// `Any` whose dynamic type is exactly `T`. The existential container's
    /// inline buffer layout is part of Swift's stable ABI, values of at most
    /// three words like these are always stored inline, and `load(as:)` makes
    /// a proper (retained) copy; this skips the general dynamic-cast
    /// machinery, which dominated the cost of a simple comparison.
    @inline(__always)
    static func peek<T>(_ value: Any, as _: T.Type) -> T? {
        guard type(of: value) == T.self else { return nil }
        return withUnsafeBytes(of: value) { $0.load(as: T.self) }
    }

    /// `value OP constant` for the value types rows hold most often; nil
    /// means "not one of those", and the general path decides instead.
    @inline(__always)
    static func fastCompare(_ value: Any, _ constant: FastConstant, _ op: FetchComparison.Operator) -> Bool? {
        let order: ComparisonResult
        switch constant {
        case let .int(k):
            let x: Int64
            if let v = peek(value, as: Int.self) {
                x = Int64(v)
            } else if let v = peek(value, as: Int64.self) {
                x = v
            } else if let v = peek(value, as: Int32.self) {
                x = Int64(v)
            } else if let v = peek(value, as: Int16.self) {
                x = Int64(v)
            } else if let v = peek(value, as: Double.self), let exact = Scalar.compareNumbers(.double(v), .int(k)) {
                return decide(exact, op)
            } else {
                return nil
            }
            order = x < k ? .orderedAscending : (x == k ? .orderedSame : .orderedDescending)
        case let .double(k):
            if let v = peek(value, as: Double.self), !v.isNaN {
                order = v < k ? .orderedAscending : (v == k ? .orderedSame : .orderedDescending)
            } else if let v = peek(value, as: Int.self), let exact = Scalar.compareNumbers(.int(Int64(v)), .double(k)) {
                order = exact
            } else if let v = peek(value, as: Int64.self), let exact = Scalar.compareNumbers(.int(v), .double(k)) {
                order = exact
            } else if let v = peek(value, as: Int16.self), let exact = Scalar.compareNumbers(.int(Int64(v)), .double(k)) {
                order = exact
            } else if let v = peek(value, as: Int32.self), let exact = Scalar.compareNumbers(.int(Int64(v)), .double(k)) {
                order = exact
            } else {
                return nil
            }
        case .null:
            if type(of: value) == String.self || type(of: value) == Int.self || type(of: value) == Double.self {
                return op == .notEqualTo
            }
            return nil
        case let .string(k):
            guard let v = peek(value, as: String.self) else { return nil }
            if op == .equalTo { return v == k }
            if op == .notEqualTo { return v != k }
            order = v < k ? .orderedAscending : (v == k ? .orderedSame : .orderedDescending)
        }
        return decide(order, op)
    }

    @inline(__always)
    static func decide(_ order: ComparisonResult, _ op: FetchComparison.Operator) -> Bool? {
        switch op {
        case .equalTo: return order == .orderedSame
        case .notEqualTo: return order != .orderedSame
        case .lessThan: return order == .orderedAscending
        case .lessThanOrEqualTo: return order != .orderedDescending
        case .greaterThan: return order == .orderedDescending
        case .greaterThanOrEqualTo: return order != .orderedAscending
        default: return nil
        }
    }

    static func compare(_ l: Scalar, _ r: Scalar, _ c: FetchComparison) throws -> Bool {
        switch c.operatorType {
        case .equalTo:
            return equal(l, r, c.options, foldedRight: c.plan.foldedRightString)
        case .notEqualTo:
            return !equal(l, r, c.options, foldedRight: c.plan.foldedRightString)
        case .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            guard let order = try ordering(l, r, c.options, op: c.operatorType.symbol) else { return false }
            switch c.operatorType {
            case .lessThan: return order == .orderedAscending
            case .lessThanOrEqualTo: return order != .orderedDescending
            case .greaterThan: return order == .orderedDescending
            default: return order != .orderedAscending
            }
        case .beginsWith, .endsWith, .like, .matches:
            return try stringOperator(l, r, c)
        case .in:
            if let ids = c.plan.rightObjectIDs {
                // A long list of IDs (`SELF IN %@`) is looked up, not scanned.
                guard case let .other(value) = l, Scalar.isObject(value), let id = objectID(of: value) else { return false }
                return ids.contains(id)
            }
            switch r {
            case .null: return false
            case let .list(items):
                for item in items where equal(l, item, c.options, foldedRight: nil) { return true }
                return false
            case let .collection(items):
                for item in items where equal(l, Scalar(any: item), c.options, foldedRight: nil) { return true }
                return false
            case let .string(haystack):
                guard case let .string(needle) = l else {
                    if case .null = l { return false }
                    throw mismatch("IN", l, r)
                }
                return substring(needle, in: haystack, c.options)
            default:
                throw mismatch("IN", l, r, detail: "the right-hand side of IN must be a collection or a string")
            }
        case .contains:
            switch l {
            case .null: return false
            case let .collection(items):
                for item in items where equal(Scalar(any: item), r, c.options, foldedRight: c.plan.foldedRightString) { return true }
                return false
            case let .string(haystack):
                switch r {
                case .null: return false
                case let .string(needle):
                    return substring(c.plan.foldedRightString ?? needle, in: haystack, c.options, needleFolded: c.plan.foldedRightString != nil)
                default: throw mismatch("CONTAINS", l, r)
                }
            default:
                throw mismatch("CONTAINS", l, r, detail: "the left-hand side of CONTAINS must be a collection or a string")
            }
        case .between:
            guard let bounds = r.elementScalars, bounds.count == 2 else {
                throw PredicateEvaluationError(
                    .invalidOperand, operatorName: "BETWEEN",
                    reason: "the right-hand side must be a collection of two bounds, not \(r.typeName) \(r.errorDescription)")
            }
            if case .null = l { return false }
            guard let low = try ordering(l, bounds[0], c.options, op: "BETWEEN"),
                  let high = try ordering(l, bounds[1], c.options, op: "BETWEEN") else { return false }
            return low != .orderedAscending && high != .orderedDescending
        }
    }

    /// Core Data equality: nil equals only nil; numbers (and Bools) by value;
    /// strings with the comparison's options; different kinds are unequal.
    static func equal(_ l: Scalar, _ r: Scalar, _ options: FetchComparison.Options, foldedRight: String?) -> Bool {
        switch (l, r) {
        case (.null, .null): return true
        case (.null, _), (_, .null): return false
        case let (.int(a), .int(b)): return a == b
        case let (.string(a), .string(b)):
            if options.isEmpty || options == .normalized { return a == b }
            return StringComparison.fold(a, options) == (foldedRight ?? StringComparison.fold(b, options))
        case let (.date(a), .date(b)): return a == b
        case let (.uuid(a), .uuid(b)): return a == b
        case let (.data(a), .data(b)): return a == b
        case let (.url(a), .url(b)): return a == b
        case (.collection, .collection), (.collection, .list), (.list, .collection), (.list, .list):
            guard let a = l.elementScalars, let b = r.elementScalars, a.count == b.count else { return false }
            for (x, y) in zip(a, b) where !equal(x, y, options, foldedRight: nil) { return false }
            return true
        case let (.other(a), .other(b)):
            if type(of: a) is AnyClass, type(of: b) is AnyClass {
                if (a as AnyObject) === (b as AnyObject) { return true }
                // Object IDs are values: another instance naming the same
                // object is equal, and an object equals its own ID, as
                // Core Data's `SELF IN %@` takes objects and IDs alike.
                guard let ia = objectID(of: a), let ib = objectID(of: b) else { return false }
                return ia == ib
            }
            if let ha = a as? AnyHashable, let hb = b as? AnyHashable { return ha == hb }
            return false
        default:
            if l.isNumeric && r.isNumeric { return Scalar.compareNumbers(l, r) == .orderedSame }
            return false
        }
    }

    /// The object ID a value stands for in equality: an ID itself, a
    /// managed object's ID or a store record's; nil for anything else.
    @inline(__always)
    static func objectID(of value: Any) -> ManagedObjectID? {
        if let id = value as? ManagedObjectID { return id }
        if let object = value as? ManagedObject { return object.objectID }
        if let record = value as? StoreRecord { return record.objectID }
        return nil
    }

    /// Ordering for <, <=, >, >= and BETWEEN; nil if either side is nil or
    /// the numbers are unordered (NaN). Incomparable kinds are an error.
    static func ordering(_ l: Scalar, _ r: Scalar, _ options: FetchComparison.Options, op: String) throws -> ComparisonResult? {
        switch (l, r) {
        case let (.int(a), .int(b)): return Scalar.order(a, b)
        case (.null, _), (_, .null): return nil
        case let (.string(a), .string(b)):
            if options.isEmpty { return Scalar.order(a, b) }
            return Scalar.order(StringComparison.fold(a, options), StringComparison.fold(b, options))
        case let (.date(a), .date(b)): return Scalar.order(a, b)
        default:
            if l.isNumeric && r.isNumeric { return Scalar.compareNumbers(l, r) }
            throw mismatch(op, l, r)
        }
    }

    static func stringOperator(_ l: Scalar, _ r: Scalar, _ c: FetchComparison) throws -> Bool {
        let op = c.operatorType.symbol
        if case .null = l { return false }
        if case .null = r { return false }
        guard case let .string(subject) = l, case let .string(pattern) = r else { throw mismatch(op, l, r) }
        if let foldedPattern = c.plan.foldedRightString, c.operatorType != .matches,
           let result = StringComparison.asciiOperator(c.operatorType, subject, foldedPattern, caseInsensitive: c.options.contains(.caseInsensitive)) {
            return result
        }
        let folded = StringComparison.fold(subject, c.options)
        let foldedPattern = c.plan.foldedRightString ?? StringComparison.fold(pattern, c.options)
        switch c.operatorType {
        case .beginsWith: return folded.hasPrefix(foldedPattern)
        case .endsWith: return folded.hasSuffix(foldedPattern)
        case .like: return (c.plan.likePattern ?? LikePattern(foldedPattern)).matches(folded)
        default:
            let compiled = c.plan.regex ?? StringComparison.compileRegex(pattern, options: c.options)
            switch compiled {
            case let .success(regex): return StringComparison.matches(subject, regex: regex, options: c.options)
            case let .failure(error): throw error
            }
        }
    }

    static func substring(_ needle: String, in haystack: String, _ options: FetchComparison.Options, needleFolded: Bool = false) -> Bool {
        let n = needleFolded ? needle : StringComparison.fold(needle, options)
        if n.isEmpty { return true }
        return StringComparison.fold(haystack, options).contains(n)
    }

    static func mismatch(_ op: String, _ l: Scalar, _ r: Scalar, detail: String? = nil) -> PredicateEvaluationError {
        var reason = "cannot compare \(l.typeName) \(l.errorDescription) with \(r.typeName) \(r.errorDescription)"
        if let detail { reason += "; \(detail)" }
        return PredicateEvaluationError(.typeMismatch, operatorName: op, reason: reason)
    }

    // MARK: Expressions

    static func evaluate(_ expression: FetchExpression, object: Any?, scope: inout EvaluationScope) throws -> Any? {
        switch expression {
        case let .constant(value):
            return value.anyValue
        case .evaluatedObject:
            return object
        case let .keyPath(path):
            return try KeyPathResolver.value(of: object, keyPath: path)
        case let .variable(name):
            return try scope.lookup(name)
        case let .aggregate(items):
            var values: [Any?] = []
            values.reserveCapacity(items.count)
            for item in items { values.append(try evaluate(item, object: object, scope: &scope)) }
            return values
        case let .function(name, arguments):
            var values: [Any?] = []
            values.reserveCapacity(arguments.count)
            for argument in arguments { values.append(try evaluate(argument, object: object, scope: &scope)) }
            return try FetchFunction.apply(name, values)
        case let .member(base, path):
            let value = try evaluate(base, object: object, scope: &scope)
            return try KeyPathResolver.value(of: value, keyPath: path)
        case let .subquery(collection, variable, predicate):
            let source = Scalar(any: try evaluate(collection, object: object, scope: &scope))
            let elements: [Any?]
            switch source {
            case .null: elements = []
            case let .collection(items): elements = items
            default:
                throw PredicateEvaluationError(
                    .typeMismatch, operatorName: "SUBQUERY",
                    reason: "the collection must be a to-many value (array or set), not \(source.typeName) \(source.errorDescription)")
            }
            var matches: [Any?] = []
            scope.bindings.append((variable, nil))
            defer { scope.bindings.removeLast() }
            for element in elements {
                scope.bindings[scope.bindings.count - 1].value = element
                if try evaluate(predicate, object: element, dictionary: asDictionary(element), scope: &scope) { matches.append(element) }
            }
            return matches
        case let .fetchRequest(request):
            return try request.evaluate(with: object, scope: &scope)
        }
    }

    /// The object as a `[String: Any]` when it is exactly one.
    @inline(__always)
    static func asDictionary(_ object: Any?) -> [String: Any]? {
        guard let object, type(of: object) == [String: Any].self else { return nil }
        return object as? [String: Any]
    }

    static func unknownKey(_ key: String, in path: [String], on object: Any) -> PredicateEvaluationError {
        PredicateEvaluationError(
            .unknownKey, keyPath: path.joined(separator: "."),
            reason: "unknown key '\(key)': \(KeyPathResolver.typeName(of: object)) has no key '\(key)'")
    }
}
