import Foundation

/// Decodes Core Data's compiled model: the `NSKeyedArchiver` archive of an
/// `NSManagedObjectModel` that `momc` writes as a `.mom` file and that Core
/// Data caches, deflated, in a SQLite store's `Z_MODELCACHE.Z_CONTENT`
/// (format and keys: docs/COMPILED-MODELS.md).
///
/// The result is an editable `ManagedObjectModel` with entities,
/// inheritance, every property and option the model layer has, inverses,
/// configurations, fetch request templates, indexes, uniqueness
/// constraints, user info, version hash modifiers, renaming identifiers and
/// version identifiers. It is validated like a model read from Xcode's files.
///
/// Errors are `CoreDataError`s naming `source`: 259 for bytes that are not a
/// (complete) deflate stream or keyed archive, 134060 for an archive that is
/// not a model, uses archived classes or options this decoder does not read
/// (each named), or describes an invalid model.
///
/// ```swift
/// let model = try CompiledModelDecoder.decode(archive: Data(contentsOf: momURL), source: momURL.path)
/// let cached = try CompiledModelDecoder.decode(modelCache: zContentBytes, source: "Store.sqlite")
/// ```
public enum CompiledModelDecoder {
    /// Decodes a `.mom` file's bytes (a binary property list).
    public static func decode(archive data: Data, source: String) throws -> ManagedObjectModel {
        let reader = try KeyedArchiveReader(data: data, source: source)
        var decoding = Decoding(reader: reader)
        let model = try decoding.model()
        model.sourceURL = URL(fileURLWithPath: source)
        let errors = model.problems().filter { !$0.isWarning }
        if !errors.isEmpty {
            throw CoreDataError(.coreData,
                                "\(source): invalid managed object model (\(errors.count) problem\(errors.count == 1 ? "" : "s")):\n" + errors.map(\.description).joined(separator: "\n"),
                                userInfo: [CoreDataError.detailedErrorsKey: errors.map(\.error), CoreDataError.filePathErrorKey: source])
        }
        return model
    }

    /// Decodes `Z_MODELCACHE.Z_CONTENT`: raw deflate around the archive.
    public static func decode(modelCache data: Data, source: String) throws -> ManagedObjectModel {
        let archive: Data
        do {
            archive = try RawDeflate.decompress(data)
        } catch {
            throw CoreDataError(.fileReadCorruptFile, "\(source): Z_MODELCACHE.Z_CONTENT is not a raw deflate stream: \(error)",
                                userInfo: [CoreDataError.filePathErrorKey: source])
        }
        return try decode(archive: archive, source: source)
    }

    /// Bit meanings of the `_P` flags `NSPropertyDescription` archives.
    enum PropertyFlags {
        static let present: Int64 = 0x1
        static let optional: Int64 = 0x2
        static let readOnly: Int64 = 0x4
        static let transient: Int64 = 0x8
        static let noValidationPredicates: Int64 = 0x10
        static let noValidationWarnings: Int64 = 0x20
        static let noUserInfo: Int64 = 0x40
        static let noVersionHashModifier: Int64 = 0x80
        static let indexedBySpotlight: Int64 = 0x100
        static let storedInExternalRecord: Int64 = 0x200
        static let ordered: Int64 = 0x400
    }

    /// Bit meanings of `NSAttributeDescription`'s `NSFlagsKey`.
    enum AttributeFlags {
        static let hasMaximum: Int64 = 0x1
        static let hasMinimum: Int64 = 0x2
        static let externalBinaryStorage: Int64 = 0x4
    }

    /// The validation warnings Core Data's model compiler gives the
    /// predicates it makes from an attribute's bounds and pattern: the
    /// validation error codes (1610 too large … 1680 pattern).
    static let constraintWarningCodes: Set<String> = ["1610", "1620", "1630", "1640", "1660", "1670", "1680"]
}

/// One decoding pass; keeps the objects made per archive reference so
/// relationships, inverses and inheritance resolve to the same instances.
private struct Decoding {
    let reader: KeyedArchiveReader
    var entities: [Int: EntityDescription] = [:]
    var relationships: [Int: RelationshipDescription] = [:]
    /// Per relationship: its destination's and inverse's references (or names).
    var pendingRelationships: [(RelationshipDescription, destination: Int, destinationName: String?, inverse: Int, inverseName: String?)] = []
    var pendingInheritance: [(EntityDescription, superentity: Int)] = []
    var pendingIndexes: [(EntityDescription, ArchivedObject)] = []

    init(reader: KeyedArchiveReader) { self.reader = reader }

    var source: String { reader.source }

    func invalid(_ what: String, entity: String? = nil, property: String? = nil) -> CoreDataError {
        var info: [String: Any] = [CoreDataError.filePathErrorKey: source]
        if let entity { info[CoreDataError.entityNameErrorKey] = entity }
        if let property { info[CoreDataError.propertyNameErrorKey] = property }
        let place = [entity, property].compactMap { $0 }.joined(separator: ".")
        return CoreDataError(.coreData, "\(source): \(place.isEmpty ? "" : "\(place): ")\(what)", userInfo: info)
    }

    func expectClass(_ object: ArchivedObject, _ names: Set<String>, _ what: String) throws {
        guard names.contains(object.className) else {
            throw invalid("\(what) is archived as class \(object.className), which is not decoded (expected \(names.sorted().joined(separator: " or ")))")
        }
    }

    // MARK: - Model

    mutating func model() throws -> ManagedObjectModel {
        let root = try reader.object(try reader.root())
        guard root.className == "NSManagedObjectModel" else {
            throw invalid("the archive holds a \(root.className), not an NSManagedObjectModel")
        }
        let model = ManagedObjectModel()
        for object in try root.objectList("NSEntities") {
            try expectClass(object, ["NSEntityDescription"], "an entity")
            guard entities[object.uid] == nil else { throw invalid("entity object \(object.uid) is listed twice") }
            entities[object.uid] = try entity(object)
        }
        for (entity, superUID) in pendingInheritance {
            guard let parent = entities[superUID] else {
                throw invalid("superentity (object \(superUID)) is not one of the model's entities", entity: entity.name)
            }
            guard parent !== entity else { throw invalid("entity is its own superentity", entity: entity.name) }
            parent.subentities = (parent.subentities + [entity]).sorted { $0.name < $1.name }
        }
        // A cycle through superentities would loop everything that walks ancestors.
        for entity in entities.values where entity.ancestors.contains(where: { $0 === entity }) || entity.ancestors.last?.superentity != nil {
            throw invalid("inheritance cycle", entity: entity.name)
        }
        for item in pendingRelationships { try resolve(item) }
        for (entity, object) in pendingIndexes { entity.indexes = try indexes(object, entity: entity) }
        let sorted = entities.values.sorted { $0.name < $1.name }
        model.entities = sorted

        if let configurations = try root.value("NSConfigurations") {
            guard let dictionary = configurations as? [AnyHashable: Any?] else { throw invalid("NSConfigurations is not a dictionary") }
            for (key, members) in dictionary.sorted(by: { "\($0.key)" < "\($1.key)" }) {
                guard let name = key as? String, let list = members as? [Any?] else { throw invalid("configuration '\(key)' is not a name with a set of entities") }
                let configured = try list.map { item -> EntityDescription in
                    guard let object = item as? ArchivedObject, let entity = entities[object.uid] else {
                        throw invalid("configuration '\(name)' lists something that is not one of the model's entities")
                    }
                    return entity
                }
                model.setEntities(configured.sorted { $0.name < $1.name }, forConfiguration: name)
            }
        }
        if let templates = try root.object("NSFetchRequestTemplates") {
            let names = try reader.value(templates.uid)
            guard let dictionary = names as? [AnyHashable: Any?] else { throw invalid("NSFetchRequestTemplates is not a dictionary") }
            for (key, value) in dictionary {
                guard let name = key as? String, let object = value as? ArchivedObject else { throw invalid("fetch request template '\(key)' is not a fetch request") }
                model.setFetchRequestTemplate(try fetchRequest(object, context: "fetch request template '\(name)'"), forName: name)
            }
        }
        if let identifiers = try root.value("NSVersionIdentifiers") {
            guard let list = identifiers as? [Any?] else { throw invalid("NSVersionIdentifiers is not a set") }
            // momc archives an empty userDefinedModelVersionIdentifier as [""];
            // the Xcode reader reads it as no identifier, and so does this.
            model.versionIdentifiers = Set(list.compactMap { $0.map { "\($0)" } }.filter { !$0.isEmpty })
        }
        return model
    }

    // MARK: - Entities

    mutating func entity(_ object: ArchivedObject) throws -> EntityDescription {
        guard let name = try object.string("NSEntityName"), !name.isEmpty else { throw invalid("entity object \(object.uid) has no name") }
        let entity = EntityDescription(name: name)
        entity.managedObjectClassName = try object.string("NSClassNameForEntity") ?? EntityDescription.genericClassName
        entity.isAbstract = try object.bool("NSIsAbstract")
        entity.userInfo = try userInfo(object, entity: name)
        entity.versionHashModifier = try nonEmpty(object.string("NSVersionHashModifier"))
        // Core Data archives the renaming identifier's default (the name) too.
        if let renaming = try object.string("NSRenamingIdentifier"), renaming != name { entity.renamingIdentifier = renaming }
        let superUID = try object.reference("NSSuperentity")
        if superUID != 0 { pendingInheritance.append((entity, superUID)) }

        var attributes: [PropertyDescription] = [], links: [PropertyDescription] = [], fetched: [PropertyDescription] = []
        for item in try object.objectList("NSProperties") {
            let owner = try item.reference("NSEntity")
            guard owner == 0 || owner == object.uid else {
                throw invalid("property object \(item.uid) belongs to another entity (object \(owner))", entity: name)
            }
            switch item.className {
            case "NSAttributeDescription": attributes.append(try attribute(item, entity: name))
            case "NSRelationshipDescription": links.append(try relationship(item, entity: name))
            case "NSFetchedPropertyDescription": fetched.append(try fetchedProperty(item, entity: name))
            default:
                throw invalid("property of class \(item.className) is not decoded (derived and composite attributes are not in the model layer)", entity: name)
            }
        }
        // Xcode's files and Core Data's own listing order: attributes, then
        // relationships, then fetched properties, each by name.
        entity.properties = [attributes, links, fetched].flatMap { $0.sorted { $0.name < $1.name } }

        if let tuples = try object.value("NSUniqueTuples") {
            guard let list = tuples as? [Any?] else { throw invalid("NSUniqueTuples is not an array", entity: name) }
            entity.uniquenessConstraints = try list.map { tuple in
                guard let members = tuple as? [Any?] else { throw invalid("a uniqueness constraint is not an array", entity: name) }
                return try members.map { member in
                    if let text = member as? String { return text }
                    if let property = member as? ArchivedObject, let text = try property.string("NSPropertyName") { return text }
                    throw invalid("a uniqueness constraint names something that is not a property", entity: name)
                }
            }
        }
        if let indexes = try object.object("NSFetchIndexDescriptions") { pendingIndexes.append((entity, indexes)) }
        return entity
    }

    /// `NSFetchIndexDescriptions`, less the one-property index Core Data
    /// makes for each attribute marked indexed: the model layer keeps that as
    /// `isIndexed`, as Xcode's files do, and the writer makes it again.
    func indexes(_ list: ArchivedObject, entity: EntityDescription) throws -> [FetchIndexDescription] {
        var out: [FetchIndexDescription] = []
        for object in try listItems(list) {
            try expectClass(object, ["NSFetchIndexDescription"], "a fetch index of \(entity.name)")
            guard let name = try object.string("NSIndexName") else { throw invalid("fetch index without a name", entity: entity.name) }
            if try object.reference("NSPartialIndexPredicate") != 0 {
                throw invalid("fetch index '\(name)' has a partial-index predicate, which the model layer does not hold (not decoded)", entity: entity.name)
            }
            let elements = try object.objectList("NSIndexElements").map { element -> FetchIndexElementDescription in
                try expectClass(element, ["NSFetchIndexElementDescription"], "an element of fetch index '\(name)'")
                var propertyName = try element.string("NSPropertyName")
                if propertyName == nil, let property = try element.object("NSProperty") { propertyName = try property.string("NSPropertyName") }
                guard let propertyName else { throw invalid("fetch index '\(name)' has an element without a property", entity: entity.name) }
                let type = try element.integer("NSFetchIndexElementType")
                guard let collation = FetchIndexElementDescription.CollationType(rawValue: UInt(clamping: type)), type >= 0 else {
                    throw invalid("fetch index '\(name)' has element type \(type) (known: 0 binary, 1 R-tree)", entity: entity.name)
                }
                return FetchIndexElementDescription(propertyName: propertyName, collationType: collation,
                                                    isAscending: element.has("NSAscending") ? try element.bool("NSAscending") : true)
            }
            if elements.count == 1, elements[0].propertyName == name, elements[0].collationType == .binary, elements[0].isAscending,
               entity.directProperties.contains(where: { $0.name == name && $0.isIndexed }) {
                continue
            }
            out.append(FetchIndexDescription(name: name, elements: elements))
        }
        return out
    }

    /// The members of an archived array (the index list is an array object).
    private func listItems(_ list: ArchivedObject) throws -> [ArchivedObject] {
        switch list.className {
        case "NSArray", "NSMutableArray", "NSSet", "NSMutableSet", "NSOrderedSet", "NSMutableOrderedSet":
            return try list.references("NS.objects").map { try reader.object($0) }
        default:
            throw invalid("NSFetchIndexDescriptions is a \(list.className), not an array")
        }
    }

    func userInfo(_ object: ArchivedObject, entity: String, property: String? = nil) throws -> [String: String] {
        guard let value = try object.value("NSUserInfo") else { return [:] }
        guard let dictionary = value as? [AnyHashable: Any?] else { throw invalid("NSUserInfo is not a dictionary", entity: entity, property: property) }
        var out: [String: String] = [:]
        for (key, item) in dictionary {
            // The model layer's user info holds strings, as Xcode's files do.
            if let text = item as? String {
                out["\(key)"] = text
            } else if let other = item, !(other is ArchivedObject), !(other is [Any?]), !(other is [AnyHashable: Any?]) {
                out["\(key)"] = "\(other)"
            } else {
                throw invalid("user info '\(key)' holds a value that is not a string or number", entity: entity, property: property)
            }
        }
        return out
    }

    func nonEmpty(_ text: String?) -> String? { text?.isEmpty == false ? text : nil }

    // MARK: - Properties

    func common(_ property: PropertyDescription, _ object: ArchivedObject, entity: String) throws {
        let flags = try object.integer("_P")
        if flags != 0 {
            property.isOptional = flags & CompiledModelDecoder.PropertyFlags.optional != 0
            property.isReadOnly = flags & CompiledModelDecoder.PropertyFlags.readOnly != 0
            property.isTransient = flags & CompiledModelDecoder.PropertyFlags.transient != 0
            property.isIndexedBySpotlight = flags & CompiledModelDecoder.PropertyFlags.indexedBySpotlight != 0
            property.isStoredInExternalRecord = flags & CompiledModelDecoder.PropertyFlags.storedInExternalRecord != 0
        } else {
            // Archives older than the flags word hold only the booleans.
            property.isOptional = try object.bool("NSIsOptional")
            property.isReadOnly = try object.bool("NSIsReadOnly")
            property.isTransient = try object.bool("NSIsTransient")
            property.isIndexedBySpotlight = try object.bool("NSIndexedBySpotlight")
            property.isStoredInExternalRecord = try object.bool("NSIsStoredInTruth")
        }
        property.userInfo = try userInfo(object, entity: entity, property: property.name)
        property.versionHashModifier = try nonEmpty(object.string("NSVersionHashModifier"))
        if let renaming = try object.string("NSRenamingIdentifier"), renaming != property.name { property.renamingIdentifier = renaming }

        let predicates = try object.objectList("NSValidationPredicates")
        let warningValues = try object.value("NSValidationWarnings").map { value -> [Any?] in
            guard let list = value as? [Any?] else { throw invalid("NSValidationWarnings is not an array", entity: entity, property: property.name) }
            return list
        } ?? []
        guard predicates.isEmpty || warningValues.count == predicates.count else {
            throw invalid("\(predicates.count) validation predicates but \(warningValues.count) warnings", entity: entity, property: property.name)
        }
        if !predicates.isEmpty {
            let decoder = ArchivedPredicateDecoder(reader: reader, context: "\(entity).\(property.name) validation predicate")
            var formats: [String] = [], warnings: [String] = []
            for (object, warning) in zip(predicates, warningValues) {
                let predicate = try decoder.predicate(object)
                let text = warning.map { "\($0)" } ?? ""
                if let attribute = property as? AttributeDescription, CompiledModelDecoder.constraintWarningCodes.contains(text),
                   absorbConstraint(predicate, into: attribute) {
                    continue
                }
                formats.append(predicate.predicateFormat)
                warnings.append(text)
            }
            if !formats.isEmpty { property.setValidationPredicates(formats, withValidationWarnings: warnings) }
        }
    }

    /// The model compiler turns an attribute's bounds and pattern into
    /// validation predicates (`length >= 2`, `SELF <= 100`, `SELF MATCHES
    /// "…"`); the model layer holds them as fields, so those shapes are read
    /// back into the fields. Returns false for any other predicate.
    func absorbConstraint(_ predicate: FetchPredicate, into attribute: AttributeDescription) -> Bool {
        guard case let .comparison(c) = predicate, c.modifier == .direct, c.options.isEmpty, case let .constant(value) = c.right else { return false }
        let isLength = c.left == .keyPath(["length"])
        guard isLength || c.left == .evaluatedObject else { return false }
        let type = attribute.attributeType
        switch (c.operatorType, value) {
        case (.matches, .string(let pattern)) where !isLength && type == .string:
            attribute.regularExpression = pattern
        case (.greaterThanOrEqualTo, .int(let n)) where isLength && (type == .string || type == .binaryData):
            attribute.minLength = Int(clamping: n)
        case (.lessThanOrEqualTo, .int(let n)) where isLength && (type == .string || type == .binaryData):
            attribute.maxLength = Int(clamping: n)
        case (.greaterThanOrEqualTo, .date(let d)) where !isLength && type == .date:
            attribute.minDate = d
        case (.lessThanOrEqualTo, .date(let d)) where !isLength && type == .date:
            attribute.maxDate = d
        case (.greaterThanOrEqualTo, _) where !isLength && type.isNumeric:
            guard let d = decimal(value) else { return false }
            attribute.minValue = d
        case (.lessThanOrEqualTo, _) where !isLength && type.isNumeric:
            guard let d = decimal(value) else { return false }
            attribute.maxValue = d
        default:
            return false
        }
        return true
    }

    func decimal(_ value: FetchValue) -> Decimal? {
        switch value {
        case .int(let n): return Decimal(n)
        case .double(let d): return d.isFinite ? Decimal(string: "\(d)", locale: Locale(identifier: "en_US_POSIX")) : nil
        case .decimal(let d): return d
        default: return nil
        }
    }

    func attribute(_ object: ArchivedObject, entity: String) throws -> AttributeDescription {
        guard let name = try object.string("NSPropertyName"), !name.isEmpty else { throw invalid("attribute object \(object.uid) has no name", entity: entity) }
        let typeNumber = try object.integer("NSAttributeType")
        guard let type = AttributeType(rawValue: UInt(clamping: typeNumber)), typeNumber >= 0 else {
            throw invalid("attribute type \(typeNumber) is not decoded (known: \(AttributeType.allCases.map { String($0.rawValue) }.joined(separator: ", ")))", entity: entity, property: name)
        }
        let attribute = AttributeDescription(name: name, type: type)
        try common(attribute, object, entity: entity)
        attribute.valueTransformerName = try object.string("NSValueTransformerName")
        if type == .transformable { attribute.customValueClassName = try object.string("NSAttributeValueClassName") }
        attribute.isIndexed = try object.bool("NSIsIndexed")
        if let value = try object.value("NSDefaultValue") {
            attribute.defaultValue = try defaultValue(value, type: type, entity: entity, property: name)
        }
        let flags = try object.integer("NSFlagsKey")
        attribute.allowsExternalBinaryDataStorage = flags & CompiledModelDecoder.AttributeFlags.externalBinaryStorage != 0
        // Bounds: integers and string lengths as 64-bit integers, the rest as doubles.
        let integral: Set<AttributeType> = [.integer16, .integer32, .integer64, .string]
        func bound(_ key: String) throws -> (Int64?, Double) {
            integral.contains(type) ? (try object.integer(key), 0) : (nil, try object.double(key))
        }
        for (bit, key, isMinimum) in [(CompiledModelDecoder.AttributeFlags.hasMinimum, "NSMinValueName", true),
                                      (CompiledModelDecoder.AttributeFlags.hasMaximum, "NSMaxValueName", false)] where flags & bit != 0 {
            let (n, d) = try bound(key)
            switch type {
            case .string, .binaryData:
                let length = n.map { Int(clamping: $0) } ?? Int(exactly: d.rounded(.towardZero)) ?? 0
                if isMinimum { attribute.minLength = length } else { attribute.maxLength = length }
            case .date:
                if isMinimum { attribute.minDate = Date(timeIntervalSinceReferenceDate: d) } else { attribute.maxDate = Date(timeIntervalSinceReferenceDate: d) }
            default:
                let value = n.map { Decimal($0) } ?? decimal(.double(d))
                if isMinimum { attribute.minValue = value } else { attribute.maxValue = value }
            }
        }
        return attribute
    }

    /// The archived default (an NSNumber, string, date…) as the Swift type
    /// the attribute's values have.
    func defaultValue(_ value: Any, type: AttributeType, entity: String, property: String) throws -> Any? {
        func mismatch() -> CoreDataError {
            invalid("default value \(value) (\(Swift.type(of: value))) does not fit type \(type.xcodeName)", entity: entity, property: property)
        }
        func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
            switch value {
            case let n as Int64: guard let v = T(exactly: n) else { throw mismatch() }; return v
            case let d as Double: guard let v = T(exactly: d) else { throw mismatch() }; return v
            case let b as Bool: return b ? 1 : 0
            default: throw mismatch()
            }
        }
        func real() throws -> Double {
            switch value {
            case let n as Int64: return Double(n)
            case let d as Double: return d
            case let d as Decimal: return NSDecimalNumber(decimal: d).doubleValue
            default: throw mismatch()
            }
        }
        switch type {
        case .integer16: return try integer(Int16.self)
        case .integer32: return try integer(Int32.self)
        case .integer64: return try integer(Int64.self)
        case .double: return try real()
        case .float: return Float(try real())
        case .decimal:
            if let d = value as? Decimal { return d }
            if let n = value as? Int64 { return Decimal(n) }
            if let d = value as? Double, let decimal = decimal(.double(d)) { return decimal }
            throw mismatch()
        case .boolean:
            if let b = value as? Bool { return b }
            if let n = value as? Int64 { return n != 0 }
            throw mismatch()
        case .string: guard let s = value as? String else { throw mismatch() }; return s
        case .date: guard let d = value as? Date else { throw mismatch() }; return d
        case .binaryData: guard let d = value as? Data else { throw mismatch() }; return d
        case .uuid: guard let u = value as? UUID else { throw mismatch() }; return u
        case .uri: guard let u = value as? URL else { throw mismatch() }; return u
        case .transformable, .objectID, .undefined:
            if value is ArchivedObject { throw invalid("default value of class \((value as! ArchivedObject).className) is not decoded", entity: entity, property: property) }
            return value
        }
    }

    mutating func relationship(_ object: ArchivedObject, entity: String) throws -> RelationshipDescription {
        guard let name = try object.string("NSPropertyName"), !name.isEmpty else { throw invalid("relationship object \(object.uid) has no name", entity: entity) }
        let relationship = RelationshipDescription(name: name)
        try common(relationship, object, entity: entity)
        relationship.isOrdered = try object.integer("_P") != 0
            ? try object.integer("_P") & CompiledModelDecoder.PropertyFlags.ordered != 0
            : try object.bool("NSIsOrdered")
        relationship.minCount = try object.integer("NSMinCount", in: 0...Int64(Int32.max))
        relationship.maxCount = try object.integer("NSMaxCount", in: 0...Int64(Int32.max))
        let rule = try object.integer("NSDeleteRule")
        guard let deleteRule = DeleteRule(rawValue: UInt(clamping: rule)), rule >= 0 else {
            throw invalid("delete rule \(rule) (known: 0 no action, 1 nullify, 2 cascade, 3 deny)", entity: entity, property: name)
        }
        relationship.deleteRule = deleteRule
        pendingRelationships.append((relationship,
                                     destination: try object.reference("NSDestinationEntity"),
                                     destinationName: try object.string("_NSDestinationEntityName"),
                                     inverse: try object.reference("NSInverseRelationship"),
                                     inverseName: try object.string("_NSInverseRelationshipName")))
        relationships[object.uid] = relationship
        return relationship
    }

    func resolve(_ item: (RelationshipDescription, destination: Int, destinationName: String?, inverse: Int, inverseName: String?)) throws {
        let (relationship, destinationUID, destinationName, inverseUID, inverseName) = item
        let owner = relationship.entity?.name
        if destinationUID != 0 {
            guard let destination = entities[destinationUID] else {
                throw invalid("destination (object \(destinationUID)) is not one of the model's entities", entity: owner, property: relationship.name)
            }
            relationship.destinationEntity = destination
        } else if let destinationName {
            guard let destination = entities.values.first(where: { $0.name == destinationName }) else {
                throw invalid("destination entity '\(destinationName)' is not in the model", entity: owner, property: relationship.name)
            }
            relationship.destinationEntity = destination
        } else {
            throw invalid("relationship has no destination entity", entity: owner, property: relationship.name)
        }
        if inverseUID != 0 {
            guard let inverse = relationships[inverseUID] else {
                throw invalid("inverse (object \(inverseUID)) is not a relationship of the model", entity: owner, property: relationship.name)
            }
            relationship.inverseRelationship = inverse
        } else if let inverseName {
            relationship.inverseRelationship = relationship.destinationEntity?.relationshipsByName[inverseName]
            if relationship.inverseRelationship == nil {
                throw invalid("inverse '\(inverseName)' is not a relationship of the destination", entity: owner, property: relationship.name)
            }
        }
    }

    func fetchedProperty(_ object: ArchivedObject, entity: String) throws -> FetchedPropertyDescription {
        guard let name = try object.string("NSPropertyName"), !name.isEmpty else { throw invalid("fetched property object \(object.uid) has no name", entity: entity) }
        let property = FetchedPropertyDescription(name: name)
        try common(property, object, entity: entity)
        if let request = try object.object("NSFetchRequest") {
            let decoded = try fetchRequest(request, context: "\(entity).\(name)")
            if decoded.entityName == nil { decoded.entityName = try object.string("_NSFetchRequestEntityName") }
            property.fetchRequest = decoded
        }
        return property
    }

    // MARK: - Fetch requests

    func fetchRequest(_ object: ArchivedObject, context: String) throws -> AnyFetchRequest {
        try expectClass(object, ["NSFetchRequest"], context)
        let request = FetchRequest()
        let entityUID = try object.reference("NSEntity")
        if entityUID != 0 {
            // The entity is archived conditionally: a reference to one of the
            // model's entities, or (for a request made by name) the name.
            if let entity = entities[entityUID] {
                request.entityName = entity.name
            } else if let name = try reader.value(entityUID) as? String {
                request.entityName = name
            } else if let object = try? reader.object(entityUID), object.className == "NSEntityDescription" {
                request.entityName = try object.string("NSEntityName")
            } else {
                throw invalid("\(context): the request's entity is neither an entity nor a name")
            }
        }
        let decoder = ArchivedPredicateDecoder(reader: reader, context: context)
        request.predicate = try object.object("NSPredicate").map { try decoder.predicate($0) }
        request.sortDescriptors = try object.objectList("NSSortDescriptors").map { sort in
            try expectClass(sort, ["NSSortDescriptor"], "\(context) sort descriptor")
            guard let key = try sort.string("NSKey") else { throw invalid("\(context): sort descriptor without a key") }
            let selector = try sort.string("NSSelector") ?? "compare:"
            do {
                return try FetchSortDescriptor(key: key, ascending: try sort.bool("NSAscending"), selector: selector)
            } catch {
                throw invalid("\(context): sort selector '\(selector)' is not decoded")
            }
        }
        request.fetchLimit = try object.integer("NSFetchLimit", in: 0...Int64(Int32.max))
        request.fetchOffset = try object.integer("NSFetchOffset", in: 0...Int64(Int32.max))
        request.fetchBatchSize = try object.integer("NSBatchSize", in: 0...Int64(Int32.max))
        if try object.bool("NSHasFetchRequestFlags") {
            let flags = try object.integer("NSFetchRequestFlags")
            request.returnsDistinctResults = flags & 0x1 != 0
            request.includesSubentities = flags & 0x2 != 0
            request.includesPropertyValues = flags & 0x4 != 0
            request.returnsObjectsAsFaults = flags & 0x8 != 0
            request.includesPendingChanges = flags & 0x10 != 0
            switch try object.integer("NSResultType") {
            case 0: request.resultType = .managedObject
            case 1: request.resultType = .managedObjectID
            case 2: request.resultType = .dictionary
            case 4: request.resultType = .count
            case let other: throw invalid("\(context): fetch result type \(other) (known: 0, 1, 2, 4)")
            }
        }
        if let paths = try object.value("NSRelationshipKeyPathsForPrefetching") {
            guard let list = paths as? [Any?], list.allSatisfy({ $0 is String }) else { throw invalid("\(context): prefetch key paths are not strings") }
            request.relationshipKeyPathsForPrefetching = list.compactMap { $0 as? String }
        }
        if let values = try object.value("NSValuesToFetch") {
            guard let list = values as? [Any?], list.allSatisfy({ $0 is String }) else {
                throw invalid("\(context): properties to fetch other than names are not decoded")
            }
            request.propertiesToFetch = list.compactMap { $0 }
        }
        if try object.reference("NSValuesToGroupBy") != 0 || object.reference("NSHavingPredicate") != 0 {
            throw invalid("\(context): grouping (NSValuesToGroupBy, NSHavingPredicate) in an archived request is not decoded")
        }
        return request
    }
}
