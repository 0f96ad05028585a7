import Foundation

/// Model-constraint checks with Core Data's error codes and userInfo
/// (VAL-*, CONST-VC-*): 1570 missing mandatory value, 1580/1590 relationship
/// counts, 1600 Deny, 1610/1620 numbers, 1630/1640 dates, 1660/1670 lengths,
/// 1680 pattern. Each error names the object, key and value (VAL-18).
extension ManagedObject {
    /// Checks the model's constraints for `key` (the first failing one).
    func validateModelConstraints(_ value: inout Any?, forKey key: String) throws {
        guard let slot = layout.slotIndex[key] else {
            guard let property = layout.propertiesByName[key] else { throw unknownKey(key) }
            try validatePredicates(of: property, value)
            return
        }
        try validateModelConstraints(&value, slot: slot)
    }

    /// The model's checks of the property in `slot`: only the checks the
    /// model sets run.
    func validateModelConstraints(_ value: inout Any?, slot: Int) throws {
        if let attribute = layout.slotAttributes[slot] {
            value = try coerce(value, slot: slot, attribute)
            if value == nil {
                if !layout.slotIsOptional[slot] {
                    throw validationError(.validationMissingMandatoryProperty, attribute.name, nil, "\(entity.name).\(attribute.name) is a required value")
                }
            } else if layout.slotHasValueConstraints[slot] {
                try validateAttribute(attribute, value)
            }
        } else if let rel = layout.slotRelationships[slot] {
            let key = rel.name
            if rel.isToMany {
                // Apple (NSRelationshipDescription, "Cardinality"): "The counts
                // are only enforced if the relationship value in the containing
                // object is not nil. That is, optional relationships may have
                // zero objects in the relationship, which might be less than
                // the minimum count." A to-many is never nil (an empty set), so
                // optionality alone asks for no member: an empty non-optional
                // to-many with minimum count 0 is valid (RD-06).
                let count = ManagedObject.objects(in: value)?.count ?? 0
                let countsEnforced = count > 0 || !rel.isOptional
                if countsEnforced && count < rel.minCount {
                    throw validationError(.validationRelationshipLacksMinimumCount, key, value, "\(entity.name).\(key) has \(count) members; at least \(rel.minCount) required")
                }
                if rel.maxCount > 0 && count > rel.maxCount {
                    throw validationError(.validationRelationshipExceedsMaximumCount, key, value, "\(entity.name).\(key) has \(count) members; at most \(rel.maxCount) allowed")
                }
            } else if value == nil && !rel.isOptional {
                throw validationError(.validationMissingMandatoryProperty, key, nil, "\(entity.name).\(key) is a required value")
            }
        }
        if layout.slotHasValidationPredicates[slot] { try validatePredicates(of: layout.slotProperties[slot], value) }
    }

    /// The property's validation predicates, `SELF` being the value; a
    /// failure reports its warning and predicate (VAL-18). Nil values are
    /// left to the optionality check.
    private func validatePredicates(of property: PropertyDescription, _ value: Any?) throws {
        guard let value, !property.validationPredicates.isEmpty else { return }
        for (index, format) in property.validationPredicates.enumerated() {
            let predicate: FetchPredicate
            do { predicate = try FetchPredicate(format: format) } catch {
                throw validationError(.managedObjectValidation, property.name, value, "\(entity.name).\(property.name) has an invalid validation predicate '\(format)': \(error)")
            }
            let subject = ManagedObject.publicValue(value, property as? RelationshipDescription)
            if try !predicate.evaluate(with: subject) {
                let warning = index < property.validationWarnings.count ? property.validationWarnings[index] : "\(entity.name).\(property.name) does not satisfy \(format)"
                var error = validationError(.managedObjectValidation, property.name, value, warning)
                error.userInfo[CoreDataError.validationPredicateErrorKey] = predicate
                throw error
            }
        }
    }

    private func validateAttribute(_ attribute: AttributeDescription, _ value: Any?) throws {
        let key = attribute.name
        guard let value else {
            if !attribute.isOptional {
                throw validationError(.validationMissingMandatoryProperty, key, nil, "\(entity.name).\(key) is a required value")
            }
            return
        }
        // Each check runs only when the model sets its constraint: the casts
        // and the Decimal conversion cost more than the rest of a save.
        if attribute.minValue != nil || attribute.maxValue != nil, let number = ManagedObject.decimalValue(value) {
            if let min = attribute.minValue, number < min {
                throw validationError(.validationNumberTooSmall, key, value, "\(entity.name).\(key) is \(value), less than the minimum \(min)")
            }
            if let max = attribute.maxValue, number > max {
                throw validationError(.validationNumberTooLarge, key, value, "\(entity.name).\(key) is \(value), more than the maximum \(max)")
            }
        }
        if attribute.minDate != nil || attribute.maxDate != nil, let date = value as? Date {
            if let min = attribute.minDate, date < min {
                throw validationError(.validationDateTooSoon, key, value, "\(entity.name).\(key) is earlier than \(min)")
            }
            if let max = attribute.maxDate, date > max {
                throw validationError(.validationDateTooLate, key, value, "\(entity.name).\(key) is later than \(max)")
            }
        }
        if attribute.minLength != nil || attribute.maxLength != nil,
           let length = (value as? String)?.count ?? (value as? Data)?.count {
            if let min = attribute.minLength, length < min {
                throw validationError(.validationStringTooShort, key, value, "\(entity.name).\(key) is \(length) long, shorter than \(min)")
            }
            if let max = attribute.maxLength, length > max {
                throw validationError(.validationStringTooLong, key, value, "\(entity.name).\(key) is \(length) long, longer than \(max)")
            }
        }
        if let pattern = attribute.regularExpression, let string = value as? String {
            // A full match, as Core Data's MATCHES (reference §18).
            let regex = try? NSRegularExpression(pattern: "^(?:\(pattern))$", options: [])
            let range = NSRange(string.startIndex..., in: string)
            if regex?.firstMatch(in: string, options: [], range: range) == nil {
                var error = validationError(.validationStringPatternMatching, key, value, "\(entity.name).\(key) does not match the pattern \(pattern)")
                error.userInfo[CoreDataError.validationPredicateErrorKey] = "SELF MATCHES \"\(pattern)\""
                throw error
            }
        }
    }

    /// Every property in turn (VAL-11), all failures gathered (VAL-15).
    func validateAllProperties() throws {
        var errors: [Error] = []
        // In slot order (every modeled property but fetched ones), so errors
        // come in the entity's property order and values are read by index.
        let plain = isPlainManagedObject
        for (slot, property) in layout.slotProperties.enumerated() {
            // Nothing the model checks can fail here, and no custom check runs.
            if plain && layout.slotNeedsOnlyTypeCheck[slot] && storage.slot(slot, isNilOrOfType: layout.slotExactTypes[slot]) { continue }
            let rel = layout.slotRelationships[slot]
            if let rel, rel.isToMany, unloadedToMany.contains(rel.name) { continue }
            var value: Any? = rel == nil ? storage[slot: slot] : ManagedObject.publicValue(storage[slot: slot], rel)
            do {
                // A plain ManagedObject's validateValue is known (model
                // constraints, no custom checks): its attributes are checked
                // by slot, sparing a name lookup per property per save.
                if plain {
                    try validateModelConstraints(&value, slot: slot)
                } else {
                    try validateValue(&value, forKey: property.name)
                }
            } catch { errors.append(error) }
        }
        if let error = CoreDataError.combining(errors) { throw error }
    }

    /// A Deny relationship with destinations forbids the delete (VAL-13, 1600).
    func validateDenyRules() throws {
        var errors: [Error] = []
        for rel in layout.relationships where rel.deleteRule == .deny {
            if rel.isToMany {
                try? loadToMany(rel)
                let members = storage[rel.name] as? [ManagedObject] ?? []
                if !members.isEmpty {
                    errors.append(validationError(.validationRelationshipDeniedDelete, rel.name, Set(members), "Cannot delete \(entity.name): its Deny relationship '\(rel.name)' still has \(members.count) destination(s)"))
                }
            } else if let destination = storage[rel.name] as? ManagedObject {
                errors.append(validationError(.validationRelationshipDeniedDelete, rel.name, destination, "Cannot delete \(entity.name): its Deny relationship '\(rel.name)' still has a destination"))
            }
        }
        if let error = CoreDataError.combining(errors) { throw error }
    }

    func validationError(_ code: CoreDataError.Code, _ key: String, _ value: Any?, _ message: String) -> CoreDataError {
        var info: [String: Any] = [CoreDataError.validationObjectErrorKey: self, CoreDataError.validationKeyErrorKey: key]
        if let value { info[CoreDataError.validationValueErrorKey] = value }
        return CoreDataError(code, message, userInfo: info)
    }

    static func decimalValue(_ value: Any) -> Decimal? {
        switch value {
        case let n as Int16: return Decimal(Int(n))
        case let n as Int32: return Decimal(Int(n))
        case let n as Int64: return Decimal(n)
        case let n as Int: return Decimal(n)
        case let n as Double: return n.isFinite ? Decimal(n) : nil
        case let n as Float: return n.isFinite ? Decimal(Double(n)) : nil
        case let n as Decimal: return n
        default: return nil
        }
    }
}

extension CoreDataError {
    /// Several errors as one (VAL-14, VAL-15): nil for none, the error itself
    /// for one, else 1560 `NSValidationMultipleErrorsError` whose
    /// `NSDetailedErrors` lists every error (nested 1560s flattened).
    ///
    /// ```swift
    /// override func validateForUpdate() throws {
    ///     var errors: [Error] = []
    ///     do { try super.validateForUpdate() } catch { errors.append(error) }
    ///     if age < 16 && hasDrivingLicense { errors.append(myError) }
    ///     if let error = CoreDataError.combining(errors) { throw error }
    /// }
    /// ```
    public static func combining(_ errors: [Error]) -> Error? {
        var flat: [Error] = []
        for error in errors {
            if let e = error as? CoreDataError, e.code == .validationMultipleErrors {
                flat.append(contentsOf: (e.userInfo[detailedErrorsKey] as? [Error]) ?? [])
            } else {
                flat.append(error)
            }
        }
        if flat.isEmpty { return nil }
        if flat.count == 1 { return flat[0] }
        return CoreDataError(.validationMultipleErrors, "\(flat.count) validation errors occurred", userInfo: [detailedErrorsKey: flat])
    }
}
