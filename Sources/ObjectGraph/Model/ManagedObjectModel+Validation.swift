import Foundation

extension ManagedObjectModel {
    /// Names a property may not have because a managed object already
    /// answers to them (MOD-10).
    public static let reservedPropertyNames: Set<String> = [
        "entity", "objectID", "managedObjectContext", "isInserted", "isUpdated", "isDeleted",
        "isFault", "faultingState", "hasChanges", "hasPersistentChangedValues", "changedValues",
        "changedValuesForCurrentEvent", "committedValues", "description", "debugDescription",
        "hash", "hashValue", "self", "class", "superclass", "zone", "isProxy", "retainCount",
    ]

    /// Throws one Core Data error (134060) listing every error-level problem,
    /// each also under `NSDetailedErrors` with its file, line, entity and property.
    ///
    /// ```swift
    /// do { try model.validate() } catch let error as CoreDataError {
    ///     error.detailedErrors.forEach { print($0.message) }
    /// }
    /// ```
    public func validate() throws {
        let errors = problems().filter { !$0.isWarning }
        guard !errors.isEmpty else { return }
        let lines = errors.map(\.description).joined(separator: "\n")
        var info: [String: Any] = [CoreDataError.detailedErrorsKey: errors.map(\.error)]
        if let path = sourceURL?.path { info[CoreDataError.filePathErrorKey] = path }
        throw CoreDataError(.coreData, "invalid managed object model (\(errors.count) problem\(errors.count == 1 ? "" : "s")):\n\(lines)", userInfo: info)
    }

    /// Every problem with the model, errors and warnings, in model order.
    public func problems() -> [ModelProblem] {
        var out: [ModelProblem] = []
        let file = sourceURL?.path
        func problem(_ message: String, _ entity: EntityDescription?, _ property: PropertyDescription? = nil, line: Int? = nil, warning: Bool = false) {
            out.append(ModelProblem(message, file: file, line: line ?? property?.sourceLine ?? entity?.sourceLine,
                                    entity: entity?.name, property: property?.name, isWarning: warning))
        }

        var firstByName: [String: EntityDescription] = [:]
        for entity in entities {
            if entity.name.isEmpty { problem("entity has no name", entity) }
            if let first = firstByName[entity.name] {
                problem("duplicate entity name (first declared\(first.sourceLine.map { " at line \($0)" } ?? ""))", entity)
            } else {
                firstByName[entity.name] = entity
            }
        }

        for entity in entities {
            checkInheritance(of: entity, problem: problem)
            checkProperties(of: entity, problem: problem)
            for index in entity.indexes {
                let line = index.sourceLine ?? entity.sourceLine
                if index.elements.isEmpty {
                    problem("fetch index '\(index.name)' has no elements", entity, nil, line: line)
                }
                for element in index.elements {
                    guard let property = entity.propertiesByName[element.propertyName] else {
                        problem("fetch index '\(index.name)' names property '\(element.propertyName)', which the entity does not have", entity, nil, line: line)
                        continue
                    }
                    if property.isTransient || property is FetchedPropertyDescription || (property as? RelationshipDescription)?.isToMany == true {
                        problem("fetch index '\(index.name)' names '\(element.propertyName)', which is not stored in the entity's row", entity, property, line: line)
                    }
                }
            }
        }

        for entity in entities {
            for constraint in entity.uniquenessConstraints {
                if constraint.isEmpty { problem("a uniqueness constraint names no property", entity) }
                for key in constraint {
                    guard let property = entity.propertiesByName[key] else {
                        problem("uniqueness constraint (\(constraint.joined(separator: ", "))) names property '\(key)', which the entity does not have", entity)
                        continue
                    }
                    if property.isTransient || property is FetchedPropertyDescription || (property as? RelationshipDescription)?.isToMany == true {
                        problem("uniqueness constraint (\(constraint.joined(separator: ", "))) names '\(key)', which is not stored in the entity's row (an attribute or to-one relationship)", entity, property)
                    }
                }
            }
        }

        for name in configurations {
            for entity in entities(forConfiguration: name) ?? [] where !entities.contains(where: { $0 === entity }) {
                out.append(ModelProblem("configuration '\(name)' names entity '\(entity.name)', which is not in the model", file: file, entity: entity.name))
            }
        }
        for (name, template) in fetchRequestTemplatesByName.sorted(by: { $0.key < $1.key }) {
            if let entityName = template.entityName, firstByName[entityName] == nil {
                out.append(ModelProblem("fetch request template '\(name)' fetches entity '\(entityName)', which is not in the model (MOM-FT-05)", file: file, line: template.sourceLine, entity: entityName))
            } else if template.entityName == nil {
                out.append(ModelProblem("fetch request template '\(name)' names no entity", file: file, line: template.sourceLine))
            }
        }
        return out
    }

    private func checkInheritance(of entity: EntityDescription,
                                  problem: (String, EntityDescription?, PropertyDescription?, Int?, Bool) -> Void) {
        if let name = entity.parentEntityName, entity.superentity == nil {
            problem("parent entity '\(name)' is not in the model", entity, nil, nil, false)
        }
        var seen: [EntityDescription] = [entity]
        var next = entity.superentity
        while let parent = next {
            if parent === entity {
                let chain = (seen + [entity]).map(\.name).joined(separator: " -> ")
                problem("cycle in entity inheritance: \(chain)", entity, nil, nil, false)
                break
            }
            if seen.contains(where: { $0 === parent }) { break }  // reported on the entity in the cycle
            seen.append(parent)
            next = parent.superentity
        }
        if let parent = entity.superentity, !entities.contains(where: { $0 === parent }) {
            problem("parent entity '\(parent.name)' is not in the model", entity, nil, nil, false)
        }
        for child in entity.subentities where !entities.contains(where: { $0 === child }) {
            problem("sub-entity '\(child.name)' is not in the model", entity, nil, nil, false)
        }
    }

    private func checkProperties(of entity: EntityDescription,
                                 problem: (String, EntityDescription?, PropertyDescription?, Int?, Bool) -> Void) {
        var declared: [String: PropertyDescription] = [:]
        for property in entity.ancestors.reversed().flatMap(\.directProperties) { declared[property.name] = property }
        var own: Set<String> = []
        for property in entity.directProperties {
            let name = property.name
            if name.isEmpty { problem("property has no name", entity, property, nil, false); continue }
            if ManagedObjectModel.reservedPropertyNames.contains(name) {
                problem("'\(name)' is a reserved name: a managed object already has a '\(name)' member (MOD-10)", entity, property, nil, false)
            }
            if !own.insert(name).inserted {
                problem("duplicate property name", entity, property, nil, false)
            } else if let inherited = declared[name], let owner = inherited.entity {
                problem("property '\(name)' is already inherited from entity '\(owner.name)'", entity, property, nil, false)
            }
            switch property {
            case let attribute as AttributeDescription: checkAttribute(attribute, in: entity, problem: problem)
            case let relationship as RelationshipDescription: checkRelationship(relationship, in: entity, problem: problem)
            case let fetched as FetchedPropertyDescription:
                if let request = fetched.fetchRequest, let target = request.entityName, entitiesByName[target] == nil {
                    problem("fetched property fetches entity '\(target)', which is not in the model", entity, property, nil, false)
                } else if fetched.fetchRequest?.entityName == nil {
                    problem("fetched property has no fetch request entity", entity, property, nil, false)
                }
            default: break
            }
        }
    }

    private func checkAttribute(_ attribute: AttributeDescription, in entity: EntityDescription,
                                problem: (String, EntityDescription?, PropertyDescription?, Int?, Bool) -> Void) {
        if let unknown = attribute.unknownTypeName {
            let known = AttributeType.allCases.map { "'\($0.xcodeName)'" }.joined(separator: ", ")
            problem("unknown attribute type '\(unknown)' (known: \(known))", entity, attribute, nil, false)
        } else if attribute.attributeType == .undefined && !attribute.isTransient {
            problem("stored attribute has the undefined type; only transient attributes may be undefined (AD-03)", entity, attribute, nil, false)
        }
        if let value = attribute.defaultValue, !ModelValue.isValid(value, for: attribute.attributeType) {
            problem("default value \(value) (\(type(of: value))) does not fit attribute type \(attribute.attributeType.xcodeName)", entity, attribute, nil, false)
        }
        if let min = attribute.minValue, let max = attribute.maxValue, min > max {
            problem("minimum value \(min) is greater than maximum value \(max)", entity, attribute, nil, false)
        }
        if let min = attribute.minLength, let max = attribute.maxLength, min > max {
            problem("minimum length \(min) is greater than maximum length \(max)", entity, attribute, nil, false)
        }
        if let pattern = attribute.regularExpression, (try? NSRegularExpression(pattern: pattern)) == nil {
            problem("regular expression '\(pattern)' does not compile", entity, attribute, nil, false)
        }
        if attribute.attributeType == .transformable, let name = attribute.valueTransformerName,
           ValueTransformerRegistry.shared.transformer(forName: name) == nil {
            problem("value transformer '\(name)' is not registered; register it before using the model", entity, attribute, nil, true)
        }
    }

    private func checkRelationship(_ relationship: RelationshipDescription, in entity: EntityDescription,
                                   problem: (String, EntityDescription?, PropertyDescription?, Int?, Bool) -> Void) {
        guard let destination = relationship.destinationEntity else {
            let named = relationship.destinationEntityName.map { "destination entity '\($0)' is not in the model" }
            problem(named ?? "relationship has no destination entity", entity, relationship, nil, false)
            return
        }
        if !entities.contains(where: { $0 === destination }) {
            problem("destination entity '\(destination.name)' is not in the model", entity, relationship, nil, false)
        }
        if relationship.minCount < 0 || relationship.maxCount < 0 {
            problem("relationship counts must not be negative", entity, relationship, nil, false)
        }
        if relationship.maxCount > 0 && relationship.minCount > relationship.maxCount {
            problem("minimum count \(relationship.minCount) is greater than maximum count \(relationship.maxCount)", entity, relationship, nil, false)
        }
        guard let inverse = relationship.inverseRelationship else {
            if let name = relationship.inverseRelationshipName {
                problem("inverse relationship '\(name)' is not declared on entity '\(destination.name)'", entity, relationship, nil, false)
            } else {
                problem("relationship has no inverse; the application must keep the graph consistent itself (REL-06)", entity, relationship, nil, true)
            }
            return
        }
        if !(inverse.entity.map { destination.isKindOf(entity: $0) || $0.isKindOf(entity: destination) } ?? false) {
            problem("inverse '\(inverse.name)' is declared on '\(inverse.entity?.name ?? "no entity")', not on destination '\(destination.name)'", entity, relationship, nil, false)
        } else if inverse.inverseRelationship !== relationship {
            let back = inverse.inverseRelationship.map { "'\($0.entity?.name ?? "?").\($0.name)'" } ?? "none"
            problem("inverse '\(destination.name).\(inverse.name)' does not point back: its inverse is \(back) (REL-05)", entity, relationship, nil, false)
        } else if let target = inverse.destinationEntity, !entity.isKindOf(entity: target) {
            problem("inverse '\(destination.name).\(inverse.name)' does not point back: it leads to '\(target.name)', not '\(entity.name)' (REL-05)", entity, relationship, nil, false)
        }
    }
}
