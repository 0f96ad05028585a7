import Foundation

/// An expression in Core Data's predicate language: the Linux counterpart of
/// `NSExpression`, which swift-corelibs-foundation does not provide.
///
/// ```swift
/// let total = try FetchExpression(format: "sum:(employees.salary)")
/// let value = try total.evaluate(with: ["employees": [["salary": 10], ["salary": 32]]])
/// // value as? Int == 42
/// ```
///
/// Equality is structural, except that forms which format identically are
/// equal: `member(.keyPath(["a"]), ["b"])` equals `.keyPath(["a", "b"])`.
public indirect enum FetchExpression: Equatable, CustomStringConvertible, @unchecked Sendable {
    /// A literal or `%@` value.
    case constant(FetchValue)
    /// `SELF`: the object being evaluated.
    case evaluatedObject
    /// A key path from the evaluated object, one component per key. Components
    /// may be collection operators (`@count`, `@sum`, `@avg`, `@min`, `@max`,
    /// `@distinctUnionOfObjects`).
    case keyPath([String])
    /// `$NAME`: a substitution variable, or a `SUBQUERY` iteration variable.
    case variable(String)
    /// `{a, b, c}`.
    case aggregate([FetchExpression])
    /// A built-in function, by its Core Data selector name (`"sum:"`,
    /// `"add:to:"`, `"now"`, `"castObject:toType:"`, see ``FetchFunction``).
    case function(String, [FetchExpression])
    /// A key path applied to the value of another expression, as in
    /// `$x.name` or `SUBQUERY(...).@count`.
    case member(FetchExpression, [String])
    /// `SUBQUERY(collection, $variable, predicate)`: the elements of the
    /// collection for which the predicate holds, with `$variable` bound to each.
    case subquery(collection: FetchExpression, variable: String, predicate: FetchPredicate)
    /// `FETCH(request, context, countOnly)`, see ``FetchRequestExpression``.
    case fetchRequest(FetchRequestExpression)

    /// `NSFetchRequestExpressionType` and friends: Core Data's expression type
    /// numbers, for code that switches on them.
    public var expressionType: Int {
        switch self {
        case .constant: return 0
        case .evaluatedObject: return 1
        case .variable: return 2
        case .keyPath, .member: return 3
        case .function: return 4
        case .aggregate: return 14
        case .subquery: return 13
        case .fetchRequest: return FetchRequestExpression.expressionType
        }
    }

    /// A key path expression from a dotted string: `.key("department.name")`.
    public static func key(_ dottedPath: String) -> FetchExpression {
        .keyPath(dottedPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init))
    }

    /// A constant from any Swift value, as `%@` would make it.
    public static func value(_ value: Any?) -> FetchExpression {
        FormatArgumentConverter.expression(forObject: value)
    }

    /// Parses an expression in predicate format syntax, e.g. `"salary * 2"`.
    public init(format: String, _ arguments: Any?...) throws {
        self = try PredicateParser.parseExpression(format, arguments: arguments)
    }

    /// Parses an expression, taking `%@`/`%K`/`%d` arguments from an array.
    public init(format: String, argumentArray: [Any?]) throws {
        self = try PredicateParser.parseExpression(format, arguments: argumentArray)
    }

    /// The canonical format string; parsing it gives back an equal expression.
    public var expressionFormat: String { PredicateFormatter.format(self) }

    public var description: String { expressionFormat }

    /// Evaluates the expression against an object (a dictionary, a
    /// ``KeyValueCoding`` value, an array of them, or nil).
    public func evaluate(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Any? {
        var scope = EvaluationScope(variables: substitutionVariables)
        return try PredicateEvaluator.evaluate(self, object: object, scope: &scope)
    }

    /// The same expression with `$VARIABLES` replaced by constants; variables
    /// missing from `variables` are left in place.
    public func withSubstitutionVariables(_ variables: [String: Any?]) -> FetchExpression {
        VariableSubstitution.substitute(self, variables: variables, bound: [])
    }

    /// Every free `$VARIABLE` name, sorted.
    public var variableNames: [String] {
        var names = Set<String>()
        VariableSubstitution.collect(self, bound: [], into: &names)
        return names.sorted()
    }

    /// The form used for equality: nested key paths folded together.
    var normalized: FetchExpression {
        switch self {
        case let .member(base, path):
            let b = base.normalized
            if path.isEmpty { return b }
            switch b {
            case let .keyPath(p): return .keyPath(p + path)
            case let .member(inner, p): return .member(inner, p + path)
            default: return .member(b, path)
            }
        default:
            return self
        }
    }

    public static func == (lhs: FetchExpression, rhs: FetchExpression) -> Bool {
        switch (lhs.normalized, rhs.normalized) {
        case let (.constant(a), .constant(b)): return a == b
        case (.evaluatedObject, .evaluatedObject): return true
        case let (.keyPath(a), .keyPath(b)): return a == b
        case let (.variable(a), .variable(b)): return a == b
        case let (.aggregate(a), .aggregate(b)): return a == b
        case let (.function(n1, a1), .function(n2, a2)): return n1 == n2 && a1 == a2
        case let (.member(b1, p1), .member(b2, p2)): return p1 == p2 && b1 == b2
        case let (.subquery(c1, v1, p1), .subquery(c2, v2, p2)): return v1 == v2 && c1 == c2 && p1 == p2
        case let (.fetchRequest(a), .fetchRequest(b)): return a == b
        default: return false
        }
    }
}
