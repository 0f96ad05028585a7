import Foundation

/// A sort order for fetch results: key path, direction and comparison method,
/// the Linux counterpart of string-key `NSSortDescriptor` (FR-06).
///
/// nil sorts before every value in ascending order and after every value in
/// descending order, as `NSSortDescriptor` does (nil is less than anything).
///
/// ```swift
/// let byName = [
///     FetchSortDescriptor(key: "lastName", comparison: .caseInsensitiveCompare),
///     FetchSortDescriptor(key: "age", ascending: false),
/// ]
/// let sorted = try FetchSortDescriptor.sort(people, using: byName)
/// ```
public struct FetchSortDescriptor: Hashable, CustomStringConvertible, Sendable {
    /// The comparison selectors Core Data accepts, by their Objective-C names.
    public enum ComparisonMethod: String, CaseIterable, Hashable, Sendable {
        case compare = "compare:"
        case caseInsensitiveCompare = "caseInsensitiveCompare:"
        case localizedCompare = "localizedCompare:"
        case localizedCaseInsensitiveCompare = "localizedCaseInsensitiveCompare:"
        case localizedStandardCompare = "localizedStandardCompare:"
    }

    /// The dotted key path whose value is compared.
    public let key: String
    public let ascending: Bool
    public let comparison: ComparisonMethod
    private let components: [String]

    public init(key: String, ascending: Bool = true, comparison: ComparisonMethod = .compare) {
        self.key = key
        self.ascending = ascending
        self.comparison = comparison
        self.components = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// Takes the comparison by selector name, as `sortDescriptorWithKey:ascending:selector:`.
    ///
    /// - Throws: ``PredicateEvaluationError`` for a selector that is not one of
    ///   ``ComparisonMethod``.
    public init(key: String, ascending: Bool = true, selector: String) throws {
        guard let method = ComparisonMethod(rawValue: selector) else {
            throw PredicateEvaluationError(
                .invalidOperand, keyPath: key, operatorName: selector,
                reason: "unsupported sort selector '\(selector)'; supported: \(ComparisonMethod.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self.init(key: key, ascending: ascending, comparison: method)
    }

    /// The selector name, e.g. `"compare:"`.
    public var selectorName: String { comparison.rawValue }

    /// The same descriptor sorting the other way.
    public var reversed: FetchSortDescriptor {
        FetchSortDescriptor(key: key, ascending: !ascending, comparison: comparison)
    }

    public var description: String {
        "(\(key), \(ascending ? "ascending" : "descending"), \(selectorName))"
    }

    public static func == (a: FetchSortDescriptor, b: FetchSortDescriptor) -> Bool {
        a.key == b.key && a.ascending == b.ascending && a.comparison == b.comparison
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(ascending)
        hasher.combine(comparison)
    }

    /// Orders two objects (dictionaries, ``KeyValueCoding`` values) by this
    /// descriptor, direction included.
    public func compare(_ a: Any?, _ b: Any?) throws -> ComparisonResult {
        let order = try compareValues(
            Scalar(any: try KeyPathResolver.value(of: a, keyPath: components)),
            Scalar(any: try KeyPathResolver.value(of: b, keyPath: components)))
        return ascending ? order : FetchSortDescriptor.flip(order)
    }

    /// Sorts `objects` by `descriptors`, the first being the primary key and
    /// later ones breaking ties (FR-06). The sort is stable: objects equal
    /// under every descriptor keep their original order.
    ///
    /// - Throws: ``PredicateEvaluationError`` for an unknown key or values the
    ///   comparison cannot order (a string against a number).
    public static func sort<T>(_ objects: [T], using descriptors: [FetchSortDescriptor]) throws -> [T] {
        if descriptors.isEmpty || objects.count < 2 { return objects }
        // Keys are read once per object, not once per comparison, into one
        // flat array that the comparator reads in place.
        let width = descriptors.count
        var keys: [Scalar] = []
        keys.reserveCapacity(objects.count * width)
        for object in objects {
            for descriptor in descriptors {
                keys.append(Scalar(any: try KeyPathResolver.value(of: object, keyPath: descriptor.components)))
            }
        }
        var failure: Error?
        var order = Array(objects.indices)
        keys.withUnsafeBufferPointer { key in
            descriptors.withUnsafeBufferPointer { descriptor in
                order.sort { i, j in
                    if failure != nil { return i < j }
                    var d = 0
                    while d < width {
                        do {
                            let r = try descriptor[d].compareValues(key[i * width + d], key[j * width + d])
                            if r != .orderedSame { return (r == .orderedAscending) == descriptor[d].ascending }
                        } catch {
                            failure = error
                            return i < j
                        }
                        d += 1
                    }
                    // Equal under every descriptor: original order, so the sort is stable.
                    return i < j
                }
            }
        }
        if let failure { throw failure }
        return order.map { objects[$0] }
    }

    static func flip(_ r: ComparisonResult) -> ComparisonResult {
        switch r {
        case .orderedAscending: return .orderedDescending
        case .orderedDescending: return .orderedAscending
        case .orderedSame: return .orderedSame
        }
    }

    /// Ascending order of two key values; nil first.
    func compareValues(_ a: Scalar, _ b: Scalar) throws -> ComparisonResult {
        switch (a, b) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        case let (.string(x), .string(y)):
            switch comparison {
            case .compare: return Scalar.order(x, y)
            case .caseInsensitiveCompare: return x.caseInsensitiveCompare(y)
            case .localizedCompare: return x.localizedCompare(y)
            case .localizedCaseInsensitiveCompare: return x.localizedCaseInsensitiveCompare(y)
            case .localizedStandardCompare: return x.localizedStandardCompare(y)
            }
        case let (.date(x), .date(y)): return Scalar.order(x, y)
        case let (.uuid(x), .uuid(y)): return Scalar.order(x.uuidString, y.uuidString)
        case let (.url(x), .url(y)): return Scalar.order(x.absoluteString, y.absoluteString)
        default:
            if a.isNumeric, b.isNumeric, let r = Scalar.compareNumbers(a, b) { return r }
            throw PredicateEvaluationError(
                .typeMismatch, keyPath: key, operatorName: selectorName,
                reason: "cannot order \(a.typeName) \(a.errorDescription) against \(b.typeName) \(b.errorDescription)")
        }
    }
}
