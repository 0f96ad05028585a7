import Foundation

/// A fetch predicate: the Linux counterpart of `NSPredicate` with format
/// strings, which swift-corelibs-foundation does not provide.
///
/// ```swift
/// let p = try FetchPredicate(format: "name BEGINSWITH[cd] %@ AND age > %d", "a", 30)
/// p.predicateFormat                                   // name BEGINSWITH[cd] "a" AND age > 30
/// try p.evaluate(with: ["name": "Ärger", "age": 41])  // true
/// ```
///
/// Equality compares canonical forms: an `AND`/`OR` with one sub-predicate
/// equals that sub-predicate, an empty `AND` equals `TRUEPREDICATE` and an
/// empty `OR` equals `FALSEPREDICATE`, because they format the same way.
public indirect enum FetchPredicate: Equatable, CustomStringConvertible, @unchecked Sendable {
    /// `TRUEPREDICATE`.
    case truePredicate
    /// `FALSEPREDICATE`.
    case falsePredicate
    /// `left OP right`, optionally with `ANY`/`ALL` and `[cd]` options.
    case comparison(FetchComparison)
    /// `a AND b AND ...`.
    case and([FetchPredicate])
    /// `a OR b OR ...`.
    case or([FetchPredicate])
    /// `NOT p`.
    case not(FetchPredicate)

    /// Parses a predicate format string. Arguments fill `%@`, `%K`, `%d`,
    /// `%i`, `%ld`, `%f` and `%s` in order.
    ///
    /// - Throws: ``PredicateSyntaxError`` with the column of the problem.
    public init(format: String, _ arguments: Any?...) throws {
        self = try PredicateParser.parsePredicate(format, arguments: arguments)
    }

    /// Parses a predicate format string with its arguments in an array.
    public init(format: String, argumentArray: [Any?]) throws {
        self = try PredicateParser.parsePredicate(format, arguments: argumentArray)
    }

    /// `TRUEPREDICATE` or `FALSEPREDICATE`, like `NSPredicate(value:)`.
    public init(value: Bool) {
        self = value ? .truePredicate : .falsePredicate
    }

    /// A comparison, for building predicates in code:
    /// `.compare(.key("age"), .greaterThan, .value(30))`.
    public static func compare(
        _ left: FetchExpression, _ op: FetchComparison.Operator, _ right: FetchExpression,
        modifier: FetchComparison.Modifier = .direct, options: FetchComparison.Options = []
    ) -> FetchPredicate {
        .comparison(FetchComparison(left, op, right, modifier: modifier, options: options))
    }

    /// The canonical format string, like `NSPredicate.predicateFormat`.
    /// `try FetchPredicate(format: p.predicateFormat) == p` for every `p`
    /// whose constants are literals (see docs/PREDICATES.md).
    public var predicateFormat: String { PredicateFormatter.format(self) }

    public var description: String { predicateFormat }

    /// Evaluates the predicate against an object: a `[String: Any]` or
    /// `[String: Any?]` dictionary, an `NSDictionary`, a ``KeyValueCoding``
    /// value (managed objects), or anything else for `SELF` comparisons.
    ///
    /// - Throws: ``PredicateEvaluationError`` for an unknown key, an unbound
    ///   variable, or operands an operator cannot compare.
    public func evaluate(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Bool {
        if let row = PredicateEvaluator.asDictionary(object) {
            return try PredicateEvaluator.evaluate(self, row: row, variables: substitutionVariables)
        }
        var scope = EvaluationScope(variables: substitutionVariables)
        return try PredicateEvaluator.evaluate(self, object: object, dictionary: nil, scope: &scope)
    }

    /// Evaluates against a dictionary row; the same as
    /// ``evaluate(with:substitutionVariables:)-(Any?,_)``, chosen statically
    /// for `[String: Any]` so no dynamic cast is needed per evaluation.
    public func evaluate(with dictionary: [String: Any], substitutionVariables: [String: Any?] = [:]) throws -> Bool {
        try PredicateEvaluator.evaluate(self, row: dictionary, variables: substitutionVariables)
    }

    /// A copy with each `$VARIABLE` found in `variables` replaced by a
    /// constant (`nil` or `NSNull` gives `NULL`); other variables stay.
    /// `SUBQUERY` iteration variables are never replaced.
    public func withSubstitutionVariables(_ variables: [String: Any?]) -> FetchPredicate {
        VariableSubstitution.substitute(self, variables: variables, bound: [])
    }

    /// Like ``withSubstitutionVariables(_:)``, but throws
    /// ``PredicateSubstitutionError`` naming every variable that `variables`
    /// does not supply (MOM-FT-03).
    public func substitutingVariables(_ variables: [String: Any?]) throws -> FetchPredicate {
        let missing = variableNames.filter { variables[$0] == nil }
        if !missing.isEmpty {
            throw PredicateSubstitutionError(missingVariables: missing, predicateFormat: predicateFormat)
        }
        return withSubstitutionVariables(variables)
    }

    /// Every free `$VARIABLE` name in the predicate, sorted.
    public var variableNames: [String] {
        var names = Set<String>()
        VariableSubstitution.collect(self, bound: [], into: &names)
        return names.sorted()
    }

    /// The form used for equality: degenerate compounds removed.
    var normalized: FetchPredicate {
        switch self {
        case let .and(items):
            if items.isEmpty { return .truePredicate }
            if items.count == 1 { return items[0].normalized }
        case let .or(items):
            if items.isEmpty { return .falsePredicate }
            if items.count == 1 { return items[0].normalized }
        default: break
        }
        return self
    }

    public static func == (lhs: FetchPredicate, rhs: FetchPredicate) -> Bool {
        switch (lhs.normalized, rhs.normalized) {
        case (.truePredicate, .truePredicate), (.falsePredicate, .falsePredicate): return true
        case let (.comparison(a), .comparison(b)): return a == b
        case let (.and(a), .and(b)): return a == b
        case let (.or(a), .or(b)): return a == b
        case let (.not(a), .not(b)): return a == b
        default: return false
        }
    }
}
