import Foundation

extension ManagedObjectModel {
    /// A copy of the named template with every `$VARIABLE` of its predicate
    /// replaced (MOM-FT-03); nil for an unknown name. A variable the
    /// dictionary does not supply throws `PredicateSubstitutionError`; pass
    /// `NSNull()` (or nil) to compare with nil; unused keys are ignored.
    ///
    /// ```swift
    /// let request = try model.fetchRequestFromTemplate(withName: "EmployeesEarningMoreThan",
    ///                                                  substitutionVariables: ["MIN": Decimal(500)])
    /// ```
    public func fetchRequestFromTemplate(withName name: String, substitutionVariables variables: [String: Any?]) throws -> AnyFetchRequest? {
        guard let template = fetchRequestTemplate(forName: name) else { return nil }
        let request = template.copy()
        request.predicate = try template.predicate?.substitutingVariables(variables)
        return request
    }
}

/// Lets predicates read a property description, as `$FETCHED_PROPERTY.userInfo.key`
/// does in a fetched property's request (FP-07).
extension PropertyDescription: KeyValueCoding {
    public func value(forKey key: String) throws -> Any? {
        switch key {
        case "name": return name
        case "userInfo": return userInfo
        case "entity": return entity?.name
        case "isOptional": return isOptional
        case "isTransient": return isTransient
        default: throw KeyValueCodingError.unknownKey(key, typeName: String(describing: type(of: self)))
        }
    }
}
