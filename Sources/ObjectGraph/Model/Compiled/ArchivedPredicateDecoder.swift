import Foundation

/// Turns archived `NSPredicate`/`NSExpression` objects (as Foundation's
/// `encodeWithCoder:` writes them) into `FetchPredicate`/`FetchExpression`.
///
/// Decoded: `NSTruePredicate`, `NSFalsePredicate`, `NSCompoundPredicate`
/// (`NSCompoundPredicateType` 0 NOT, 1 AND, 2 OR; `NSSubpredicates`),
/// `NSComparisonPredicate` (`NSLeftExpression`, `NSRightExpression`,
/// `NSPredicateOperator` with `NSOperatorType`, `NSModifier` and the options
/// under `NSOptions` or `NSFlags`); expressions `NSConstantValueExpression`,
/// `NSSelfExpression`, `NSVariableExpression`, `NSKeyPathExpression` and
/// `NSFunctionExpression` (`valueForKeyPath:` on a key-path specifier, or a
/// named function), `NSAggregateExpression`, `NSKeyPathSpecifierExpression`.
/// Anything else (custom selectors, subqueries, blocks, ternaries) throws a
/// 134060 error that names the class: it is not decoded.
struct ArchivedPredicateDecoder {
    let reader: KeyedArchiveReader
    /// Where the predicate sits in the model, for error messages.
    let context: String
    let maximumDepth = 128

    func notDecoded(_ what: String) -> CoreDataError {
        CoreDataError(.coreData, "\(reader.source): \(context): \(what) is not decoded by ObjectGraph",
                      userInfo: [CoreDataError.filePathErrorKey: reader.source])
    }

    func predicate(_ object: ArchivedObject, depth: Int = 0) throws -> FetchPredicate {
        guard depth < maximumDepth else { throw reader.corrupt("\(context): predicate nests deeper than \(maximumDepth) levels") }
        switch object.className {
        case "NSTruePredicate": return .truePredicate
        case "NSFalsePredicate": return .falsePredicate
        case "NSCompoundPredicate":
            let subpredicates = try object.objectList("NSSubpredicates").map { try predicate($0, depth: depth + 1) }
            switch try object.integer("NSCompoundPredicateType") {
            case 0:
                guard subpredicates.count == 1 else { throw reader.corrupt("\(context): NOT predicate with \(subpredicates.count) subpredicates") }
                return .not(subpredicates[0])
            case 1: return .and(subpredicates)
            case 2: return .or(subpredicates)
            case let other: throw reader.corrupt("\(context): compound predicate type \(other) (known: 0 NOT, 1 AND, 2 OR)")
            }
        case "NSComparisonPredicate":
            guard let left = try object.object("NSLeftExpression"), let right = try object.object("NSRightExpression"),
                  let op = try object.object("NSPredicateOperator") else {
                throw reader.corrupt("\(context): comparison predicate \(object.uid) lacks an expression or its operator")
            }
            let typeNumber = try op.integer("NSOperatorType")
            guard let type = FetchComparison.Operator(rawValue: Int(clamping: typeNumber)) else {
                throw notDecoded("predicate operator type \(typeNumber) (\(op.className))")
            }
            guard let modifier = FetchComparison.Modifier(rawValue: try op.integer("NSModifier", in: 0...2)) else {
                throw reader.corrupt("\(context): predicate modifier out of range")
            }
            let optionBits = op.has("NSOptions") ? try op.integer("NSOptions") : try op.integer("NSFlags")
            let options = FetchComparison.Options(rawValue: Int(clamping: optionBits) & 7)
            return .comparison(FetchComparison(try expression(left, depth: depth + 1), type, try expression(right, depth: depth + 1),
                                               modifier: modifier, options: options))
        default:
            throw notDecoded("predicate class \(object.className)")
        }
    }

    func expression(_ object: ArchivedObject, depth: Int) throws -> FetchExpression {
        guard depth < maximumDepth else { throw reader.corrupt("\(context): expression nests deeper than \(maximumDepth) levels") }
        switch object.className {
        case "NSConstantValueExpression":
            let value = try object.value("NSConstantValue")
            if value is ArchivedObject { throw notDecoded("a constant of class \((value as! ArchivedObject).className)") }
            return .value(plain(value))
        case "NSSelfExpression":
            return .evaluatedObject
        case "NSVariableExpression":
            guard let name = try object.string("NSVariable") else { throw reader.corrupt("\(context): variable expression without a name") }
            return .variable(name)
        case "NSKeyPathSpecifierExpression":
            guard let path = try object.string("NSKeyPath") else { throw reader.corrupt("\(context): key path specifier without a path") }
            return .key(path)
        case "NSKeyPathExpression", "NSFunctionExpression":
            let selector = try object.string("NSSelectorName") ?? ""
            let arguments = try object.objectList("NSArguments").map { try expression($0, depth: depth + 1) }
            let operand = try object.object("NSOperand").map { try expression($0, depth: depth + 1) }
            if selector == "valueForKeyPath:" {
                guard arguments.count == 1, case let .keyPath(path) = arguments[0] else {
                    throw reader.corrupt("\(context): valueForKeyPath: without one key path argument")
                }
                switch operand {
                case nil, .evaluatedObject?: return .keyPath(path)
                case let base?: return .member(base, path)
                }
            }
            guard !selector.isEmpty else { throw reader.corrupt("\(context): function expression without a selector") }
            // A method of an object (FUNCTION($manager, 'selector:', …)): the
            // receiver is the first argument, as the predicate parser puts it.
            if let operand, case .variable = operand,
               FetchFunction.isMethodCall(selector, receiver: operand, argumentCount: arguments.count + 1) {
                return .function(selector, [operand] + arguments)
            }
            // Functions keep their full selector, as the predicate parser names them.
            return .function(selector, arguments)
        case "NSAggregateExpression":
            let items = try object.objectList("NSCollection")
            return .aggregate(try items.map { try expression($0, depth: depth + 1) })
        default:
            throw notDecoded("expression class \(object.className)")
        }
    }

    /// Foundation values as `FetchExpression.value` expects them: optional
    /// elements unwrapped to `NSNull`-free arrays and dictionaries.
    private func plain(_ value: Any?) -> Any? {
        switch value {
        case let array as [Any?]: return array.map { plain($0) ?? NSNull() }
        default: return value
        }
    }
}
