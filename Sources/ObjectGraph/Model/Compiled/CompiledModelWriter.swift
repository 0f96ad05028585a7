import Foundation

/// Writes a model in Core Data's compiled form: the keyed archive `momc`
/// writes as a `.mom`, and, deflated, what Core Data stores in
/// `Z_MODELCACHE.Z_CONTENT`, with the keys `CompiledModelDecoder` reads
/// (docs/COMPILED-MODELS.md). Attribute bounds and patterns become
/// validation predicates with the validation error codes as warnings, and
/// the bounds are also written in `NSFlagsKey` form, as the model compiler
/// does; each indexed attribute gets its one-property fetch index.
///
/// Not written: derived/composite attributes (the model layer has none),
/// `NSCompoundIndexes` (the pre-iOS 11 index list), fetch requests with
/// grouping or expression columns, subquery predicates: these throw.
///
/// ```swift
/// let mom = try CompiledModelWriter.archive(model)            // .mom bytes
/// let cache = try CompiledModelWriter.modelCacheData(model)   // Z_CONTENT bytes
/// ```
public enum CompiledModelWriter {
    /// The `.mom` bytes (binary property list).
    public static func archive(_ model: ManagedObjectModel) throws -> Data {
        var encoding = Encoding(model: model)
        return try encoding.run()
    }

    /// The `Z_MODELCACHE.Z_CONTENT` bytes: the archive, raw-deflated.
    public static func modelCacheData(_ model: ManagedObjectModel) throws -> Data {
        try RawDeflate.compress(try archive(model))
    }
}

private struct Encoding {
    let model: ManagedObjectModel
    let writer = KeyedArchiveWriter()
    var entityUIDs: [ObjectIdentifier: Int] = [:]
    var propertyUIDs: [ObjectIdentifier: Int] = [:]
    let root: Int

    init(model: ManagedObjectModel) {
        self.model = model
        root = writer.reserve()
    }

    func unsupported(_ what: String) -> CoreDataError { CoreDataError(.coreData, "cannot write a compiled model: \(what)") }

    mutating func run() throws -> Data {
        for entity in model.entities {
            entityUIDs[ObjectIdentifier(entity)] = writer.reserve()
            for property in entity.directProperties { propertyUIDs[ObjectIdentifier(property)] = writer.reserve() }
        }
        for entity in model.entities { try encode(entity) }
        var fields: [String: Any] = [
            "NSEntities": writer.object("NSDictionary", fields: [
                "NS.keys": try model.entities.map { try writer.value($0.name) },
                "NS.objects": model.entities.map { writer.reference(entityUIDs[ObjectIdentifier($0)]!) },
            ]),
            // momc writes an empty version identifier when none is set.
            "NSVersionIdentifiers": writer.object("NSSet", fields: [
                "NS.objects": try (model.versionIdentifiers.isEmpty ? [""] : model.versionIdentifiers.sorted()).map { try writer.value($0) },
            ]),
        ]
        if !model.configurations.isEmpty {
            let names = model.configurations.sorted()
            fields["NSConfigurations"] = writer.object("NSDictionary", fields: [
                "NS.keys": try names.map { try writer.value($0) },
                "NS.objects": names.map { name in
                    writer.object("NSSet", fields: ["NS.objects": (model.entities(forConfiguration: name) ?? []).compactMap { entityUIDs[ObjectIdentifier($0)].map(writer.reference) }])
                },
            ])
        }
        let templates = model.fetchRequestTemplatesByName.sorted { $0.key < $1.key }
        fields["NSFetchRequestTemplates"] = templates.isEmpty ? writer.null : writer.object("NSDictionary", fields: [
            "NS.keys": try templates.map { try writer.value($0.key) },
            "NS.objects": try templates.map { try fetchRequest($0.value) },
        ])
        writer.fill(root, className: "NSManagedObjectModel", fields: fields)
        return try writer.finish(root: root)
    }

    mutating func encode(_ entity: EntityDescription) throws {
        let uid = entityUIDs[ObjectIdentifier(entity)]!
        var fields: [String: Any] = [
            "NSEntityName": try writer.value(entity.name),
            "NSClassNameForEntity": try writer.value(entity.managedObjectClassName),
            "NSManagedObjectModel": writer.reference(root),
            "NSSuperentity": entity.superentity.flatMap { entityUIDs[ObjectIdentifier($0)] }.map(writer.reference) ?? writer.null,
            "NSUserInfo": try writer.value(entity.userInfo as [String: Any?]),
            "NSVersionHashModifier": try writer.value(entity.versionHashModifier),
            "NSRenamingIdentifier": try writer.value(entity.renamingIdentifier),
        ]
        if entity.isAbstract { fields["NSIsAbstract"] = true }
        let children = entity.subentities.sorted { $0.name < $1.name }
        fields["NSSubentities"] = children.isEmpty ? writer.null : writer.object("NSDictionary", fields: [
            "NS.keys": try children.map { try writer.value($0.name) },
            "NS.objects": children.map { writer.reference(entityUIDs[ObjectIdentifier($0)]!) },
        ])
        let own = entity.directProperties
        for property in own { try encode(property, entity: uid) }
        fields["NSProperties"] = writer.object("NSMutableDictionary", superclasses: ["NSDictionary"], fields: [
            "NS.keys": try own.map { try writer.value($0.name) },
            "NS.objects": own.map { writer.reference(propertyUIDs[ObjectIdentifier($0)]!) },
        ])
        if !entity.uniquenessConstraints.isEmpty {
            fields["NSUniqueTuples"] = try writer.value(entity.uniquenessConstraints.map { $0 as [Any?] } as [Any?])
        }
        // Core Data keeps an indexed attribute as a one-property index named after it.
        let synthesized = own.filter { $0 is AttributeDescription && $0.isIndexed }
            .map { FetchIndexDescription(name: $0.name, elements: [FetchIndexElementDescription(propertyName: $0.name)]) }
        let indexes = entity.indexes + synthesized
        if !indexes.isEmpty {
            fields["NSFetchIndexDescriptions"] = writer.object("NSMutableArray", superclasses: ["NSArray"], fields: [
                "NS.objects": try indexes.map { index -> [String: Any] in
                    let indexUID = writer.reserve()
                    let elements = try index.elements.map { element in
                        writer.object("NSFetchIndexElementDescription", fields: [
                            "NSPropertyName": try writer.value(element.propertyName),
                            "NSFetchIndexElementType": Int(element.collationType.rawValue),
                            "NSAscending": element.isAscending,
                            "NSFetchIndexDescription": writer.reference(indexUID),
                        ])
                    }
                    writer.fill(indexUID, className: "NSFetchIndexDescription", fields: [
                        "NSIndexName": try writer.value(index.name), "NSPartialIndexPredicate": writer.null,
                        "NSIndexElements": writer.object("NSArray", fields: ["NS.objects": elements]),
                        "NSEntity": writer.reference(uid),
                    ])
                    return writer.reference(indexUID)
                },
            ])
        }
        writer.fill(uid, className: "NSEntityDescription", fields: fields)
    }

    func encode(_ property: PropertyDescription, entity: Int) throws {
        let uid = propertyUIDs[ObjectIdentifier(property)]!
        var fields: [String: Any] = [
            "NSPropertyName": try writer.value(property.name),
            "NSEntity": writer.reference(entity),
            "NSRenamingIdentifier": try writer.value(property.renamingIdentifier),
        ]
        typealias F = CompiledModelDecoder.PropertyFlags
        var flags = F.present
        if property.isOptional { flags |= F.optional; fields["NSIsOptional"] = true }
        if property.isReadOnly { flags |= F.readOnly; fields["NSIsReadOnly"] = true }
        if property.isTransient { flags |= F.transient; fields["NSIsTransient"] = true }
        if property.isIndexedBySpotlight { flags |= F.indexedBySpotlight; fields["NSIndexedBySpotlight"] = true }
        if property.isStoredInExternalRecord { flags |= F.storedInExternalRecord; fields["NSIsStoredInTruth"] = true }
        if let r = property as? RelationshipDescription, r.isOrdered { flags |= F.ordered; fields["NSIsOrdered"] = true }

        var predicates = try property.validationPredicates.map { try FetchPredicate(format: $0) }
        var warnings: [Any?] = property.validationWarnings.map { $0 as Any? }
        if let attribute = property as? AttributeDescription {
            for (predicate, code) in constraintPredicates(attribute) { predicates.append(predicate); warnings.append(code) }
        }
        if predicates.isEmpty { flags |= F.noValidationPredicates | F.noValidationWarnings } else {
            fields["NSValidationPredicates"] = writer.object("NSArray", fields: ["NS.objects": try predicates.map { try ArchivedPredicateEncoder(writer: writer).predicate($0) }])
            fields["NSValidationWarnings"] = try writer.value(warnings)
        }
        if property.userInfo.isEmpty { flags |= F.noUserInfo } else { fields["NSUserInfo"] = try writer.value(property.userInfo as [String: Any?]) }
        if let modifier = property.versionHashModifier, !modifier.isEmpty { fields["NSVersionHashModifier"] = try writer.value(modifier) } else { flags |= F.noVersionHashModifier }
        fields["_P"] = Int(flags)

        let className: String
        switch property {
        case let attribute as AttributeDescription:
            className = "NSAttributeDescription"
            fields["NSAttributeType"] = Int(attribute.attributeType.rawValue)
            fields["NSAttributeValueClassName"] = try writer.value(attribute.attributeValueClassName)
            fields["NSDefaultValue"] = try writer.value(attribute.defaultValue)
            fields["NSValueTransformerName"] = try writer.value(attribute.valueTransformerName)
            if attribute.isIndexed { fields["NSIsIndexed"] = true }
            var attributeFlags: Int64 = attribute.allowsExternalBinaryDataStorage ? CompiledModelDecoder.AttributeFlags.externalBinaryStorage : 0
            for (isMinimum, bit, key) in [(true, CompiledModelDecoder.AttributeFlags.hasMinimum, "NSMinValueName"), (false, CompiledModelDecoder.AttributeFlags.hasMaximum, "NSMaxValueName")] {
                if let bound = bound(attribute, minimum: isMinimum) { attributeFlags |= bit; fields[key] = bound }
            }
            fields["NSFlagsKey"] = Int(attributeFlags)
        case let relationship as RelationshipDescription:
            className = "NSRelationshipDescription"
            fields["NSMinCount"] = relationship.minCount
            fields["NSMaxCount"] = relationship.maxCount
            fields["NSDeleteRule"] = Int(relationship.deleteRule.rawValue)
            fields["NSDestinationEntity"] = relationship.destinationEntity.flatMap { entityUIDs[ObjectIdentifier($0)] }.map(writer.reference) ?? writer.null
            fields["_NSDestinationEntityName"] = try writer.value(relationship.destinationEntity?.name ?? relationship.destinationEntityName)
            fields["NSInverseRelationship"] = relationship.inverseRelationship.flatMap { propertyUIDs[ObjectIdentifier($0)] }.map(writer.reference) ?? writer.null
            fields["_NSInverseRelationshipName"] = try writer.value(relationship.inverseRelationship?.name ?? relationship.inverseRelationshipName)
        case let fetched as FetchedPropertyDescription:
            className = "NSFetchedPropertyDescription"
            fields["NSFetchRequest"] = try fetched.fetchRequest.map { try fetchRequest($0) } ?? writer.null
            fields["_NSFetchRequestEntityName"] = try writer.value(fetched.fetchRequest?.entityName)
        default:
            throw unsupported("property \(property.name) is a \(type(of: property))")
        }
        writer.fill(uid, className: className, superclasses: ["NSPropertyDescription"], fields: fields)
    }

    /// `NSMinValueName`/`NSMaxValueName`: integers for integer types and
    /// string lengths, doubles otherwise.
    func bound(_ a: AttributeDescription, minimum: Bool) -> Any? {
        switch a.attributeType {
        case .string: return (minimum ? a.minLength : a.maxLength).map { Int64($0) }
        case .binaryData: return (minimum ? a.minLength : a.maxLength).map { Double($0) }
        case .date: return (minimum ? a.minDate : a.maxDate)?.timeIntervalSinceReferenceDate
        case .integer16, .integer32, .integer64:
            return (minimum ? a.minValue : a.maxValue).map { NSDecimalNumber(decimal: $0).int64Value }
        default: return (minimum ? a.minValue : a.maxValue).map { NSDecimalNumber(decimal: $0).doubleValue }
        }
    }

    /// The predicates the model compiler makes from an attribute's bounds
    /// and pattern, each with the validation error code it reports.
    func constraintPredicates(_ a: AttributeDescription) -> [(FetchPredicate, Int)] {
        var out: [(FetchPredicate, Int)] = []
        func add(_ left: FetchExpression, _ op: FetchComparison.Operator, _ value: Any, _ code: Int) {
            out.append((.comparison(FetchComparison(left, op, .value(value))), code))
        }
        let length = FetchExpression.keyPath(["length"])
        switch a.attributeType {
        case .string, .binaryData:
            if let n = a.minLength { add(length, .greaterThanOrEqualTo, Int64(n), 1670) }
            if let n = a.maxLength { add(length, .lessThanOrEqualTo, Int64(n), 1660) }
        case .date:
            if let d = a.minDate { add(.evaluatedObject, .greaterThanOrEqualTo, d, 1640) }
            if let d = a.maxDate { add(.evaluatedObject, .lessThanOrEqualTo, d, 1630) }
        default:
            if let d = a.minValue { add(.evaluatedObject, .greaterThanOrEqualTo, d, 1620) }
            if let d = a.maxValue { add(.evaluatedObject, .lessThanOrEqualTo, d, 1610) }
        }
        if let pattern = a.regularExpression { add(.evaluatedObject, .matches, pattern, 1680) }
        return out
    }

    func fetchRequest(_ request: AnyFetchRequest) throws -> [String: Any] {
        if request.propertiesToGroupBy != nil || request.havingPredicate != nil { throw unsupported("fetch request with grouping") }
        var fields: [String: Any] = [
            "NSEntity": try request.entityName.map { name in
                try model.entitiesByName[name].flatMap { entityUIDs[ObjectIdentifier($0)] }.map(writer.reference) ?? writer.value(name)
            } ?? writer.null,
            "NSPredicate": try request.predicate.map { try ArchivedPredicateEncoder(writer: writer).predicate($0) } ?? writer.null,
            "NSSortDescriptors": writer.object("NSArray", fields: ["NS.objects": try request.sortDescriptors.map { sort in
                writer.object("NSSortDescriptor", fields: ["NSKey": try writer.value(sort.key), "NSAscending": sort.ascending,
                                                           "NSSelector": try writer.value(sort.selectorName)])
            }]),
            "NSFetchLimit": request.fetchLimit, "NSFetchOffset": request.fetchOffset, "NSBatchSize": request.fetchBatchSize,
            "NSHasFetchRequestFlags": true,
            "NSRelationshipKeyPathsForPrefetching": try writer.value(request.relationshipKeyPathsForPrefetching as [Any?]),
        ]
        var flags = 0
        if request.returnsDistinctResults { flags |= 0x1 }
        if request.includesSubentities { flags |= 0x2 }
        if request.includesPropertyValues { flags |= 0x4 }
        if request.returnsObjectsAsFaults { flags |= 0x8 }
        if request.includesPendingChanges { flags |= 0x10 }
        fields["NSFetchRequestFlags"] = flags
        switch request.resultType {
        case .managedObject: fields["NSResultType"] = 0
        case .managedObjectID: fields["NSResultType"] = 1
        case .dictionary: fields["NSResultType"] = 2
        case .count: fields["NSResultType"] = 4
        }
        if let columns = request.propertiesToFetch {
            let names = try columns.map { column -> Any? in
                if let name = column as? String { return name }
                if let property = column as? PropertyDescription { return property.name }
                throw unsupported("fetch request column \(column) is not a property name")
            }
            fields["NSValuesToFetch"] = try writer.value(names)
        }
        return writer.object("NSFetchRequest", superclasses: ["NSPersistentStoreRequest"], fields: fields)
    }
}

/// Writes `FetchPredicate`s as Foundation archives `NSPredicate`, in the
/// classes and keys `ArchivedPredicateDecoder` reads.
struct ArchivedPredicateEncoder {
    let writer: KeyedArchiveWriter

    func predicate(_ p: FetchPredicate) throws -> [String: Any] {
        switch p {
        case .truePredicate: return writer.object("NSTruePredicate", superclasses: ["NSPredicate"], fields: [:])
        case .falsePredicate: return writer.object("NSFalsePredicate", superclasses: ["NSPredicate"], fields: [:])
        case let .not(inner): return try compound(0, [inner])
        case let .and(items): return try compound(1, items)
        case let .or(items): return try compound(2, items)
        case let .comparison(c):
            let family: String
            var op: [String: Any] = ["NSOperatorType": c.operatorType.rawValue, "NSModifier": c.modifier.rawValue]
            switch c.operatorType {
            case .equalTo, .notEqualTo: family = "NSEqualityPredicateOperator"; op["NSNegate"] = c.operatorType == .notEqualTo; op["NSOptions"] = c.options.rawValue
            case .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo: family = "NSComparisonPredicateOperator"; op["NSOptions"] = c.options.rawValue
            case .matches: family = "NSMatchingPredicateOperator"; op["NSFlags"] = c.options.rawValue
            case .like: family = "NSLikePredicateOperator"; op["NSFlags"] = c.options.rawValue
            case .beginsWith, .endsWith, .contains:
                family = "NSSubstringPredicateOperator"; op["NSFlags"] = c.options.rawValue
                op["NSPosition"] = c.operatorType == .beginsWith ? 0 : c.operatorType == .endsWith ? 1 : 2
            case .in: family = "NSInPredicateOperator"; op["NSFlags"] = c.options.rawValue
            case .between: family = "NSBetweenPredicateOperator"
            }
            return writer.object("NSComparisonPredicate", superclasses: ["NSPredicate"], fields: [
                "NSLeftExpression": try expression(c.left), "NSRightExpression": try expression(c.right),
                "NSPredicateOperator": writer.object(family, superclasses: ["NSPredicateOperator"], fields: op),
            ])
        }
    }

    func compound(_ type: Int, _ items: [FetchPredicate]) throws -> [String: Any] {
        writer.object("NSCompoundPredicate", superclasses: ["NSPredicate"], fields: [
            "NSCompoundPredicateType": type,
            "NSSubpredicates": writer.object("NSArray", fields: ["NS.objects": try items.map { try predicate($0) }]),
        ])
    }

    func expression(_ e: FetchExpression) throws -> [String: Any] {
        switch e {
        case let .constant(value):
            return writer.object("NSConstantValueExpression", superclasses: ["NSExpression"], fields: ["NSExpressionType": 0, "NSConstantValue": try writer.value(value.anyValue)])
        case .evaluatedObject:
            return writer.object("NSSelfExpression", superclasses: ["NSExpression"], fields: ["NSExpressionType": 1])
        case let .variable(name):
            return writer.object("NSVariableExpression", superclasses: ["NSExpression"], fields: ["NSExpressionType": 2, "NSVariable": try writer.value(name)])
        case let .keyPath(path):
            return try keyPath(operand: writer.object("NSSelfExpression", superclasses: ["NSExpression"], fields: ["NSExpressionType": 1]), path)
        case let .member(base, path):
            return try keyPath(operand: try expression(base), path)
        case let .function(name, arguments):
            return writer.object("NSFunctionExpression", superclasses: ["NSExpression"], fields: [
                "NSExpressionType": 4, "NSSelectorName": try writer.value(name), "NSOperand": writer.null,
                "NSArguments": writer.object("NSArray", fields: ["NS.objects": try arguments.map { try expression($0) }]),
            ])
        case let .aggregate(items):
            return writer.object("NSAggregateExpression", superclasses: ["NSExpression"], fields: [
                "NSExpressionType": 14, "NSCollection": writer.object("NSArray", fields: ["NS.objects": try items.map { try expression($0) }]),
            ])
        case .subquery, .fetchRequest:
            throw CoreDataError(.coreData, "cannot write a compiled model: predicate expression \(e.expressionFormat) (subqueries and fetch request expressions are not archived)")
        }
    }

    private func keyPath(operand: [String: Any], _ path: [String]) throws -> [String: Any] {
        writer.object("NSKeyPathExpression", superclasses: ["NSFunctionExpression", "NSExpression"], fields: [
            "NSExpressionType": 3, "NSOperand": operand, "NSSelectorName": try writer.value("valueForKeyPath:"),
            "NSArguments": writer.object("NSArray", fields: ["NS.objects": [
                writer.object("NSKeyPathSpecifierExpression", superclasses: ["NSExpression"], fields: ["NSExpressionType": 10, "NSKeyPath": try writer.value(path.joined(separator: "."))]),
            ]]),
        ])
    }
}
