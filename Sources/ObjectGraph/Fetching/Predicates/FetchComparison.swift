import Foundation

/// A comparison predicate: `left OP right`, the Linux counterpart of
/// `NSComparisonPredicate`.
///
/// ```swift
/// let c = FetchComparison(.key("name"), .like, .constant(.string("arg*")), options: [.caseInsensitive, .diacriticInsensitive])
/// try FetchPredicate.comparison(c).evaluate(with: ["name": "Ärger"]) // true
/// ```
///
/// A comparison prepares itself once when it is made: a constant right-hand
/// side is converted, case/diacritic folded, and compiled into a LIKE matcher
/// or a regular expression, so evaluating it many times does none of that.
public struct FetchComparison: Equatable, CustomStringConvertible, @unchecked Sendable {
    /// The operator, numbered as `NSPredicateOperatorType`.
    public enum Operator: Int, CaseIterable, Sendable {
        case lessThan = 0
        case lessThanOrEqualTo = 1
        case greaterThan = 2
        case greaterThanOrEqualTo = 3
        case equalTo = 4
        case notEqualTo = 5
        case matches = 6
        case like = 7
        case beginsWith = 8
        case endsWith = 9
        case `in` = 10
        case contains = 99
        case between = 100

        /// The operator as the canonical format writes it.
        public var symbol: String {
            switch self {
            case .lessThan: return "<"
            case .lessThanOrEqualTo: return "<="
            case .greaterThan: return ">"
            case .greaterThanOrEqualTo: return ">="
            case .equalTo: return "=="
            case .notEqualTo: return "!="
            case .matches: return "MATCHES"
            case .like: return "LIKE"
            case .beginsWith: return "BEGINSWITH"
            case .endsWith: return "ENDSWITH"
            case .in: return "IN"
            case .contains: return "CONTAINS"
            case .between: return "BETWEEN"
            }
        }

        var isOrdering: Bool {
            switch self {
            case .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo: return true
            default: return false
            }
        }
    }

    /// `ANY`/`ALL` over a to-many left-hand side, numbered as
    /// `NSComparisonPredicateModifier`. `NONE` is written as `NOT ANY`, as
    /// Apple's parser does.
    public enum Modifier: Int, Sendable {
        case direct = 0
        case all = 1
        case any = 2
    }

    /// String options, numbered as `NSComparisonPredicateOptions`.
    public struct Options: OptionSet, Hashable, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// `[c]`.
        public static let caseInsensitive = Options(rawValue: 1)
        /// `[d]`.
        public static let diacriticInsensitive = Options(rawValue: 2)
        /// `[n]`: accepted and kept for fidelity; Swift strings already
        /// compare by canonical equivalence, so it changes nothing.
        public static let normalized = Options(rawValue: 4)
    }

    // Everything lives in one immutable object, so copying a comparison out
    // of the predicate tree during evaluation is a single retain.
    let plan: ComparisonPlan

    public var left: FetchExpression { plan.left }
    public var operatorType: Operator { plan.operatorType }
    public var right: FetchExpression { plan.right }
    public var modifier: Modifier { plan.modifier }
    public var options: Options { plan.options }

    public init(
        _ left: FetchExpression, _ operatorType: Operator, _ right: FetchExpression,
        modifier: Modifier = .direct, options: Options = []
    ) {
        self.plan = ComparisonPlan(left: left, operatorType: operatorType, right: right, modifier: modifier, options: options)
    }

    public var description: String { PredicateFormatter.format(FetchPredicate.comparison(self)) }

    public static func == (lhs: FetchComparison, rhs: FetchComparison) -> Bool {
        lhs.operatorType == rhs.operatorType && lhs.modifier == rhs.modifier && lhs.options == rhs.options
            && lhs.left == rhs.left && lhs.right == rhs.right
    }
}

/// What a comparison precomputes from its operands. Immutable after init, so
/// sharing it between copies of the comparison and between threads is safe.
final class ComparisonPlan: @unchecked Sendable {
    let left: FetchExpression
    let operatorType: FetchComparison.Operator
    let right: FetchExpression
    let modifier: FetchComparison.Modifier
    let options: FetchComparison.Options
    /// The key when the left side is a one-component key path: the hot path.
    let leftKey: String?
    /// The right side when it is a constant or an aggregate of constants.
    let rightConstant: Scalar?
    /// The constant right-hand string folded for the options.
    let foldedRightString: String?
    /// The constant right-hand side of IN/BETWEEN when it is a literal aggregate.
    let rightConstantList: [Scalar]?
    /// Set when the comparison is a plain `key OP constant` that the
    /// evaluator can decide without classifying values (the common case).
    let fastConstant: FastConstant?
    /// The constant right-hand side of IN when it lists only object IDs
    /// (Core Data's `SELF IN %@` with IDs), as a set: membership of one of
    /// thousands of IDs is then one lookup. IDs are immutable, so the set
    /// stays right; managed objects are left to the list, as an inserted
    /// object's ID changes when it is saved.
    let rightObjectIDs: Set<ManagedObjectID>?
    let likePattern: LikePattern?
    let regex: Result<NSRegularExpression, PredicateEvaluationError>?

    /// Below this many IDs scanning the list costs no more than a set.
    static let objectIDSetThreshold = 8

    init(left: FetchExpression, operatorType: FetchComparison.Operator, right: FetchExpression,
         modifier: FetchComparison.Modifier, options: FetchComparison.Options) {
        self.left = left
        self.operatorType = operatorType
        self.right = right
        self.modifier = modifier
        self.options = options
        if case let .keyPath(path) = left, path.count == 1, !path[0].hasPrefix("@") {
            leftKey = path[0]
        } else {
            leftKey = nil
        }
        var constant: Scalar?
        if case let .constant(value) = right { constant = Scalar(value) }
        if case let .string(s)? = constant {
            foldedRightString = StringComparison.fold(s, options)
        } else {
            foldedRightString = nil
        }
        if case let .aggregate(items) = right {
            var list: [Scalar] = []
            for item in items {
                guard case let .constant(v) = item else { list = []; break }
                list.append(Scalar(v))
            }
            rightConstantList = list.count == items.count ? list : nil
        } else {
            rightConstantList = nil
        }
        rightConstant = constant ?? rightConstantList.map(Scalar.list)
        if operatorType == .in, let list = rightConstantList, list.count >= Self.objectIDSetThreshold {
            var ids = Set<ManagedObjectID>(minimumCapacity: list.count)
            for item in list {
                guard case let .other(value) = item, let id = value as? ManagedObjectID else { ids.removeAll(); break }
                ids.insert(id)
            }
            rightObjectIDs = ids.isEmpty ? nil : ids
        } else {
            rightObjectIDs = nil
        }
        let plainOperator: Bool
        switch operatorType {
        case .equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            plainOperator = modifier == .direct && (options.isEmpty || options == .normalized)
        default:
            plainOperator = false
        }
        switch constant {
        case let .int(v)? where plainOperator: fastConstant = .int(v)
        case let .double(v)? where plainOperator && !v.isNaN: fastConstant = .double(v)
        case let .string(v)? where plainOperator: fastConstant = .string(v)
        case .null? where plainOperator && (operatorType == .equalTo || operatorType == .notEqualTo): fastConstant = .null
        default: fastConstant = nil
        }
        if operatorType == .like, let pattern = foldedRightString {
            likePattern = LikePattern(pattern)
        } else {
            likePattern = nil
        }
        if operatorType == .matches, case let .string(pattern)? = constant {
            regex = StringComparison.compileRegex(pattern, options: options)
        } else {
            regex = nil
        }
    }
}

/// A constant the evaluator compares directly against a value read from a
/// row, without building a ``Scalar`` for either side.
enum FastConstant {
    case int(Int64)
    case double(Double)
    case string(String)
    /// `== nil` / `!= nil`, decided fast only for values that are clearly not nil.
    case null
}
