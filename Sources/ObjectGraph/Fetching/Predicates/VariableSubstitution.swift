import Foundation

/// Replacing `$VARIABLES` with constants, and finding which ones a predicate
/// uses. Variables bound by a SUBQUERY are local to it and never substituted.
enum VariableSubstitution {
    static func substitute(_ p: FetchPredicate, variables: [String: Any?], bound: Set<String>) -> FetchPredicate {
        switch p {
        case .truePredicate, .falsePredicate:
            return p
        case let .comparison(c):
            return .comparison(FetchComparison(
                substitute(c.left, variables: variables, bound: bound), c.operatorType,
                substitute(c.right, variables: variables, bound: bound),
                modifier: c.modifier, options: c.options))
        case let .and(items):
            return .and(items.map { substitute($0, variables: variables, bound: bound) })
        case let .or(items):
            return .or(items.map { substitute($0, variables: variables, bound: bound) })
        case let .not(inner):
            return .not(substitute(inner, variables: variables, bound: bound))
        }
    }

    static func substitute(_ e: FetchExpression, variables: [String: Any?], bound: Set<String>) -> FetchExpression {
        switch e {
        case .constant, .evaluatedObject, .keyPath:
            return e
        case let .variable(name):
            guard !bound.contains(name), let entry = variables[name] else { return e }
            return FormatArgumentConverter.expression(forObject: entry)
        case let .aggregate(items):
            return .aggregate(items.map { substitute($0, variables: variables, bound: bound) })
        case let .function(name, args):
            return .function(name, args.map { substitute($0, variables: variables, bound: bound) })
        case let .member(base, path):
            return .member(substitute(base, variables: variables, bound: bound), path)
        case let .subquery(collection, variable, predicate):
            var inner = bound
            inner.insert(variable)
            return .subquery(
                collection: substitute(collection, variables: variables, bound: bound),
                variable: variable,
                predicate: substitute(predicate, variables: variables, bound: inner))
        case let .fetchRequest(request):
            return .fetchRequest(FetchRequestExpression(
                requestExpression: substitute(request.requestExpression, variables: variables, bound: bound),
                contextExpression: substitute(request.contextExpression, variables: variables, bound: bound),
                isCountOnlyRequest: request.isCountOnlyRequest))
        }
    }

    static func collect(_ p: FetchPredicate, bound: Set<String>, into names: inout Set<String>) {
        switch p {
        case .truePredicate, .falsePredicate: break
        case let .comparison(c):
            collect(c.left, bound: bound, into: &names)
            collect(c.right, bound: bound, into: &names)
        case let .and(items), let .or(items):
            for item in items { collect(item, bound: bound, into: &names) }
        case let .not(inner):
            collect(inner, bound: bound, into: &names)
        }
    }

    static func collect(_ e: FetchExpression, bound: Set<String>, into names: inout Set<String>) {
        switch e {
        case .constant, .evaluatedObject, .keyPath: break
        case let .variable(name):
            if !bound.contains(name) { names.insert(name) }
        case let .aggregate(items), let .function(_, items):
            for item in items { collect(item, bound: bound, into: &names) }
        case let .member(base, _):
            collect(base, bound: bound, into: &names)
        case let .subquery(collection, variable, predicate):
            collect(collection, bound: bound, into: &names)
            var inner = bound
            inner.insert(variable)
            collect(predicate, bound: inner, into: &names)
        case let .fetchRequest(request):
            collect(request.requestExpression, bound: bound, into: &names)
            collect(request.contextExpression, bound: bound, into: &names)
        }
    }
}
