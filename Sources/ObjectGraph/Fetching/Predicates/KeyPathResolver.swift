import Foundation

/// Reads key paths from dictionaries, ``KeyValueCoding`` objects and to-many
/// collections, including the `@count`/`@sum`/... collection operators.
enum KeyPathResolver {
    /// The value at `keyPath` starting from `object`. nil part-way along gives
    /// nil (a nil to-one relationship); a to-many value maps the rest of the
    /// path over its elements and flattens nested collections.
    static func value(of object: Any?, keyPath: [String]) throws -> Any? {
        var current: Any? = object
        var index = 0
        while index < keyPath.count {
            let key = keyPath[index]
            if key.hasPrefix("@") {
                return try collectionOperator(key, on: current, rest: Array(keyPath[(index + 1)...]), fullPath: keyPath)
            }
            guard let value = unwrapOptional(current), !Scalar.isNull(value) else { return nil }
            if !isKeyedContainer(value), let elements = Scalar.collectionElements(value) {
                var mapped: [Any?] = []
                mapped.reserveCapacity(elements.count)
                let rest = Array(keyPath[index...])
                for element in elements {
                    let v = try self.value(of: element, keyPath: rest)
                    if let v = unwrapOptional(v), !isKeyedContainer(v), let nested = Scalar.collectionElements(v) {
                        mapped.append(contentsOf: nested)
                    } else {
                        mapped.append(v)
                    }
                }
                return mapped
            }
            current = try self.value(of: value, key: key, path: keyPath)
            index += 1
        }
        return current
    }

    /// One key read from one (non-collection) object.
    @inline(__always)
    static func value(of object: Any, key: String, path: [String]) throws -> Any? {
        if type(of: object) == [String: Any].self, let d = object as? [String: Any] {
            guard let v = d[key] else { throw PredicateEvaluator.unknownKey(key, in: path, on: object) }
            return v
        }
        if type(of: object) == [String: Any?].self, let d = object as? [String: Any?] {
            guard let v = d[key] else { throw PredicateEvaluator.unknownKey(key, in: path, on: object) }
            return v
        }
        if let kvc = object as? KeyValueCoding {
            do {
                return try kvc.value(forKey: key)
            } catch KeyValueCodingError.unknownKey(let badKey, let typeName) {
                throw PredicateEvaluationError(
                    .unknownKey, keyPath: path.joined(separator: "."),
                    reason: "unknown key '\(badKey)': \(typeName) has no key '\(badKey)'")
            }
        }
        if Scalar.isObject(object), let d = object as? NSDictionary {
            guard let v = d.object(forKey: key) else { throw PredicateEvaluator.unknownKey(key, in: path, on: object) }
            return Scalar.isNull(v) ? nil : v
        }
        if let d = object as? [String: Any] {
            guard let v = d[key] else { throw PredicateEvaluator.unknownKey(key, in: path, on: object) }
            return v
        }
        if let d = object as? [AnyHashable: Any] {
            guard let v = d[AnyHashable(key)] else { throw PredicateEvaluator.unknownKey(key, in: path, on: object) }
            return v
        }
        if let length = length(of: object, key: key) { return length }
        throw PredicateEvaluator.unknownKey(key, in: path, on: object)
    }

    /// `length` of a string or data value, as key-value coding answers it on
    /// Foundation's `NSString` (UTF-16 code units) and `NSData` (bytes), so
    /// `name.length > 0` reads as it does in Core Data; nil for anything else.
    static func length(of object: Any, key: String) -> Int? {
        guard key == "length" else { return nil }
        if let string = object as? String { return string.utf16.count }
        if let data = object as? Data { return data.count }
        return nil
    }

    static func isKeyedContainer(_ value: Any) -> Bool {
        let t = type(of: value)
        if t == [String: Any].self || t == [String: Any?].self { return true }
        if Scalar.isObject(value) { return value is KeyValueCoding || value is NSDictionary }
        return value is KeyValueCoding || value is [AnyHashable: Any]
    }

    static func typeName(of object: Any) -> String {
        String(describing: type(of: object))
    }

    /// `@count`, `@sum`, `@avg`, `@min`, `@max`, `@distinctUnionOfObjects`
    /// and `@unionOfObjects`, applied to a to-many value.
    static func collectionOperator(_ op: String, on value: Any?, rest: [String], fullPath: [String]) throws -> Any? {
        let path = fullPath.joined(separator: ".")
        let elements: [Any?]
        switch Scalar(any: value) {
        case .null: elements = []
        case let .collection(items): elements = items
        case let other:
            throw PredicateEvaluationError(
                .typeMismatch, keyPath: path, operatorName: op,
                reason: "\(op) needs a to-many collection, not \(other.typeName) \(other.errorDescription)")
        }
        if op == "@count" {
            guard rest.isEmpty else {
                throw PredicateEvaluationError(.invalidOperand, keyPath: path, operatorName: op, reason: "nothing may follow @count in a key path")
            }
            return elements.count
        }
        if op == "@distinctUnionOfObjects" || op == "@unionOfObjects", let next = rest.first, next.hasPrefix("@") {
            // `@distinctUnionOfObjects.@count`: operate on the union itself.
            let union: [Any?] = op == "@unionOfObjects"
                ? elements.filter { unwrapOptional($0) != nil }
                : FetchFunction.distinct(elements).map { Optional($0) }
            return try KeyPathResolver.value(of: union, keyPath: rest)
        }
        var values: [Any?] = []
        if rest.isEmpty {
            values = elements
        } else {
            for element in elements {
                let v = try self.value(of: element, keyPath: rest)
                if let v = unwrapOptional(v), !isKeyedContainer(v), let nested = Scalar.collectionElements(v) {
                    values.append(contentsOf: nested)
                } else {
                    values.append(v)
                }
            }
        }
        do {
            switch op {
            case "@sum": return try FetchFunction.sum(values)
            case "@avg": return values.isEmpty ? 0 : try FetchFunction.average(values)
            case "@min": return try FetchFunction.extreme(values, wantMax: false)
            case "@max": return try FetchFunction.extreme(values, wantMax: true)
            case "@distinctUnionOfObjects": return FetchFunction.distinct(values)
            case "@unionOfObjects": return values.filter { unwrapOptional($0) != nil }
            default:
                throw PredicateEvaluationError(.invalidOperand, operatorName: op, reason: "unknown collection operator \(op)")
            }
        } catch var error as PredicateEvaluationError {
            error.keyPath = error.keyPath ?? path
            throw error
        }
    }
}
