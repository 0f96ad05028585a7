import Foundation

/// Reads Xcode's model files: a `.xcdatamodeld` bundle (its current version,
/// named by `.xccurrentversion`), a `.xcdatamodel` folder, or the `contents`
/// XML file inside one (MOM-IN-01, MOD-02).
///
/// Every problem in the file is gathered, not just the first: an unknown
/// attribute type, a relationship to a missing entity, an inverse that does
/// not point back, a reserved property name, a cycle in inheritance. They are
/// thrown together as one `CoreDataError` (134060) whose `NSDetailedErrors`
/// name the file, line, entity and property of each.
///
/// ```swift
/// let model = try XcodeModelReader.read(contentsOf: URL(fileURLWithPath: "Model.xcdatamodeld"))
/// ```
public enum XcodeModelReader {
    /// Reads the model at `url`, resolving a bundle to its current version.
    public static func read(contentsOf url: URL) throws -> ManagedObjectModel {
        let contents = try contentsFile(for: url)
        let data: Data
        do {
            data = try Data(contentsOf: contents)
        } catch {
            throw CoreDataError(.fileReadNoSuchFile, "\(contents.path): cannot read model file: \(error.localizedDescription)",
                                userInfo: [CoreDataError.filePathErrorKey: contents.path, CoreDataError.underlyingErrorKey: error])
        }
        return try read(data: data, file: contents.path)
    }

    /// Reads a `contents` document from memory; `file` names it in errors.
    public static func read(data: Data, file: String? = nil) throws -> ManagedObjectModel {
        let root = try XMLElementNode.parse(data, file: file)
        var reader = Reader(file: file)
        let model = reader.model(from: root)
        model.sourceURL = file.map { URL(fileURLWithPath: $0) }
        let problems = reader.problems + model.problems()
        let errors = problems.filter { !$0.isWarning }
        if !errors.isEmpty {
            var info: [String: Any] = [CoreDataError.detailedErrorsKey: errors.map(\.error)]
            if let file { info[CoreDataError.filePathErrorKey] = file }
            throw CoreDataError(.coreData,
                                "invalid managed object model (\(errors.count) problem\(errors.count == 1 ? "" : "s")):\n" + errors.map(\.description).joined(separator: "\n"),
                                userInfo: info)
        }
        return model
    }

    /// Finds the `contents` file for a bundle, a model folder or the file itself.
    public static func contentsFile(for url: URL) throws -> URL {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw CoreDataError(.fileReadNoSuchFile, "\(url.path): no such model file or folder",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        guard isDirectory.boolValue else { return url }
        if url.pathExtension == "xcdatamodeld" {
            let bundle = try XcodeModelBundle(url: url)
            return url.appendingPathComponent(bundle.currentVersionName).appendingPathComponent("contents")
        }
        return url.appendingPathComponent("contents")
    }
}

extension ManagedObjectModel {
    /// Reads an Xcode model: a `.xcdatamodeld` bundle (current version), a
    /// `.xcdatamodel` folder or a `contents` file (MOM-IN-01); or a compiled
    /// one: a `.mom` file or a `.momd` folder (its current version).
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: "Company.xcdatamodeld"))
    /// ```
    public convenience init(contentsOf url: URL) throws {
        // Compiled models (.mom, .momd) are keyed archives, not Xcode's XML.
        let read = CompiledModelBundle.isCompiledModel(url)
            ? try CompiledModelBundle.read(contentsOf: url)
            : try XcodeModelReader.read(contentsOf: url)
        self.init()
        adopt(read)
    }

    /// Takes over a freshly read model's contents: a convenience init
    /// cannot return the model it read (every model-file initializer uses this).
    func adopt(_ read: ManagedObjectModel) {
        let copy = read.copy()
        entities = copy.entities
        for name in copy.configurations {
            setEntities(copy.entities(forConfiguration: name) ?? [], forConfiguration: name)
        }
        for (name, template) in copy.fetchRequestTemplatesByName { setFetchRequestTemplate(template, forName: name) }
        versionIdentifiers = copy.versionIdentifiers
        localizationDictionary = copy.localizationDictionary
        sourceURL = read.sourceURL
    }
}

/// Turns the element tree into a model, recording problems as it goes.
private struct Reader {
    let file: String?
    var problems: [ModelProblem] = []

    init(file: String?) { self.file = file }

    mutating func problem(_ message: String, line: Int?, entity: String? = nil, property: String? = nil) {
        problems.append(ModelProblem(message, file: file, line: line, entity: entity, property: property))
    }

    mutating func model(from root: XMLElementNode) -> ManagedObjectModel {
        let model = ManagedObjectModel()
        guard root.name == "model" else {
            problem("root element is <\(root.name)>, expected <model>: not a Core Data model file", line: root.line)
            return model
        }
        if let identifier = root.attributes["userDefinedModelVersionIdentifier"], !identifier.isEmpty {
            model.versionIdentifiers = [identifier]
        }
        let entities = root.children(named: "entity").map { entity(from: $0) }
        let byName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

        // Inheritance: each parent gets its children, in file order.
        var childrenOf: [String: [EntityDescription]] = [:]
        for entity in entities {
            guard let parentName = entity.parentEntityName else { continue }
            if byName[parentName] != nil { childrenOf[parentName, default: []].append(entity) }
        }
        for (parentName, children) in childrenOf { byName[parentName]?.subentities = children }

        // Relationships: destinations first, then inverses (which need them).
        for entity in entities {
            for case let relationship as RelationshipDescription in entity.directProperties {
                if let name = relationship.destinationEntityName { relationship.destinationEntity = byName[name] }
            }
        }
        for entity in entities {
            for case let relationship as RelationshipDescription in entity.directProperties {
                guard let inverseName = relationship.inverseRelationshipName,
                      let destination = relationship.destinationEntity else { continue }
                relationship.inverseRelationship = destination.relationshipsByName[inverseName]
            }
        }
        model.entities = entities

        for element in root.children(named: "configuration") {
            guard let name = element.attributes["name"] else {
                problem("<configuration> has no name", line: element.line)
                continue
            }
            var members: [EntityDescription] = []
            for member in element.children(named: "memberEntity") {
                let entityName = member.attributes["name"] ?? ""
                if let entity = byName[entityName] {
                    members.append(entity)
                } else {
                    problem("configuration '\(name)' names entity '\(entityName)', which is not in the model", line: member.line, entity: entityName)
                }
            }
            model.setEntities(members, forConfiguration: name)
        }
        for element in root.children(named: "fetchRequest") {
            guard let name = element.attributes["name"] else {
                problem("<fetchRequest> has no name", line: element.line)
                continue
            }
            model.setFetchRequestTemplate(fetchRequest(from: element), forName: name)
        }
        return model
    }

    mutating func entity(from element: XMLElementNode) -> EntityDescription {
        let a = element.attributes
        let name = a["name"] ?? ""
        if name.isEmpty { problem("<entity> has no name", line: element.line) }
        let entity = EntityDescription(name: name)
        entity.sourceLine = element.line
        entity.managedObjectClassName = a["representedClassName"] ?? EntityDescription.genericClassName
        entity.isAbstract = flag(a["isAbstract"])
        entity.parentEntityName = a["parentEntity"]
        entity.versionHashModifier = a["versionHashModifier"]
        entity.storedRenamingIdentifier = a["elementID"]
        entity.userInfo = userInfo(from: element)
        entity.uniquenessConstraints = element.child(named: "uniquenessConstraints")?
            .children(named: "uniquenessConstraint")
            .map { $0.children(named: "constraint").compactMap { $0.attributes["value"] } } ?? []

        entity.indexes = element.children(named: "fetchIndex").map { index in
            let description = FetchIndexDescription(name: index.attributes["name"] ?? "", elements: index.children(named: "fetchIndexElement").map { item in
                let type = item.attributes["type"] ?? "Binary"
                let collation = FetchIndexElementDescription.CollationType(xcodeName: type)
                if collation == nil {
                    problem("fetch index '\(index.attributes["name"] ?? "")' has unknown element type '\(type)' (known: 'Binary', 'RTree')", line: item.line, entity: name)
                }
                return FetchIndexElementDescription(propertyName: item.attributes["property"] ?? "", collationType: collation ?? .binary,
                                                    isAscending: item.attributes["order"] != "descending")
            })
            description.sourceLine = index.line
            return description
        }

        var properties: [PropertyDescription] = []
        for child in element.children {
            switch child.name {
            case "attribute": properties.append(attribute(from: child, entity: name))
            case "relationship": properties.append(relationship(from: child, entity: name))
            case "fetchedProperty": properties.append(fetchedProperty(from: child, entity: name))
            default: continue
            }
        }
        entity.properties = properties
        return entity
    }

    mutating func common(_ property: PropertyDescription, _ element: XMLElementNode) {
        let a = element.attributes
        property.sourceLine = element.line
        property.isOptional = flag(a["optional"])
        property.isTransient = flag(a["transient"])
        property.isIndexed = flag(a["indexed"])
        property.isIndexedBySpotlight = flag(a["spotlightIndexingEnabled"])
        property.isStoredInExternalRecord = flag(a["storedInTruthFile"])
        property.versionHashModifier = a["versionHashModifier"]
        property.storedRenamingIdentifier = a["elementID"]
        property.userInfo = userInfo(from: element)
        let rules = element.children(named: "validationPredicate")
        if !rules.isEmpty {
            property.setValidationPredicates(rules.map { $0.attributes["predicateString"] ?? "" },
                                             withValidationWarnings: rules.map { $0.attributes["warning"] ?? "" })
        }
    }

    mutating func attribute(from element: XMLElementNode, entity: String) -> AttributeDescription {
        let a = element.attributes
        let name = a["name"] ?? ""
        if name.isEmpty { problem("<attribute> has no name", line: element.line, entity: entity) }
        let typeName = a["attributeType"] ?? "Undefined"
        let type = AttributeType(xcodeName: typeName)
        let attribute = AttributeDescription(name: name, type: type ?? .undefined)
        if type == nil { attribute.unknownTypeName = typeName }
        common(attribute, element)
        let resolved = type ?? .undefined
        if let text = a["defaultValueString"] {
            if let value = ModelValue.parseDefault(text, type: resolved) {
                attribute.defaultValue = value
            } else if type != nil {
                problem("default value '\(text)' is not a valid \(resolved.xcodeName)", line: element.line, entity: entity, property: name)
            }
        }
        if resolved == .date, let text = a["defaultDateTimeInterval"] {
            if let seconds = Double(text) { attribute.defaultValue = Date(timeIntervalSinceReferenceDate: seconds) }
            else { problem("default date '\(text)' is not a number of seconds", line: element.line, entity: entity, property: name) }
        }
        switch resolved {
        case .string, .binaryData:
            attribute.minLength = integer(a["minValueString"], "minimum length", element, entity, name)
            attribute.maxLength = integer(a["maxValueString"], "maximum length", element, entity, name)
        case .date:
            attribute.minDate = seconds(a["minDateTimeInterval"], "minimum date", element, entity, name)
            attribute.maxDate = seconds(a["maxDateTimeInterval"], "maximum date", element, entity, name)
        default:
            attribute.minValue = decimal(a["minValueString"], "minimum value", element, entity, name)
            attribute.maxValue = decimal(a["maxValueString"], "maximum value", element, entity, name)
        }
        attribute.regularExpression = a["regularExpressionString"]
        attribute.valueTransformerName = a["valueTransformerName"]
        attribute.customValueClassName = a["customClassName"]
        attribute.allowsExternalBinaryDataStorage = flag(a["allowsExternalBinaryDataStorage"])
        attribute.usesScalarValueType = a["usesScalarValueType"].map(flag)
        return attribute
    }

    mutating func relationship(from element: XMLElementNode, entity: String) -> RelationshipDescription {
        let a = element.attributes
        let name = a["name"] ?? ""
        if name.isEmpty { problem("<relationship> has no name", line: element.line, entity: entity) }
        let relationship = RelationshipDescription(name: name, toMany: flag(a["toMany"]))
        common(relationship, element)
        relationship.isOrdered = flag(a["ordered"])
        if let min = integer(a["minCount"], "minimum count", element, entity, name) { relationship.minCount = min }
        if let max = integer(a["maxCount"], "maximum count", element, entity, name) { relationship.maxCount = max }
        if !flag(a["toMany"]) { relationship.maxCount = 1 }
        if let rule = a["deletionRule"] {
            if let parsed = DeleteRule(xcodeName: rule) { relationship.deleteRule = parsed }
            else { problem("unknown deletion rule '\(rule)' (known: 'Nullify', 'Cascade', 'Deny', 'No Action')", line: element.line, entity: entity, property: name) }
        }
        relationship.destinationEntityName = a["destinationEntity"]
        if relationship.destinationEntityName == nil {
            problem("relationship has no destinationEntity", line: element.line, entity: entity, property: name)
        }
        relationship.inverseRelationshipName = a["inverseName"]
        return relationship
    }

    mutating func fetchedProperty(from element: XMLElementNode, entity: String) -> FetchedPropertyDescription {
        let name = element.attributes["name"] ?? ""
        let property = FetchedPropertyDescription(name: name)
        common(property, element)
        if let request = element.child(named: "fetchRequest") {
            property.fetchRequest = fetchRequest(from: request)
        } else {
            problem("fetched property has no <fetchRequest>", line: element.line, entity: entity, property: name)
        }
        return property
    }

    mutating func fetchRequest(from element: XMLElementNode) -> AnyFetchRequest {
        let a = element.attributes
        let request = AnyFetchRequest(entityName: a["entity"])
        request.sourceLine = element.line
        if let format = a["predicateString"], !format.isEmpty {
            do { request.predicate = try FetchPredicate(format: format) } catch {
                problem("fetch request predicate '\(format)' is invalid: \(error)", line: element.line)
            }
        }
        request.fetchLimit = a["fetchLimit"].flatMap { Int($0) } ?? 0
        request.fetchBatchSize = a["fetchBatchSize"].flatMap { Int($0) } ?? 0
        if let includes = a["includeSubentities"] { request.includesSubentities = flag(includes) }
        return request
    }

    func userInfo(from element: XMLElementNode) -> [String: String] {
        var info: [String: String] = [:]
        for entry in element.child(named: "userInfo")?.children(named: "entry") ?? [] {
            if let key = entry.attributes["key"] { info[key] = entry.attributes["value"] ?? "" }
        }
        return info
    }

    func flag(_ text: String?) -> Bool { text == "YES" || text == "true" }

    mutating func integer(_ text: String?, _ what: String, _ element: XMLElementNode, _ entity: String, _ property: String) -> Int? {
        guard let text else { return nil }
        guard let value = Int(text) else {
            problem("\(what) '\(text)' is not an integer", line: element.line, entity: entity, property: property)
            return nil
        }
        return value
    }

    mutating func decimal(_ text: String?, _ what: String, _ element: XMLElementNode, _ entity: String, _ property: String) -> Decimal? {
        guard let text else { return nil }
        guard let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
            problem("\(what) '\(text)' is not a number", line: element.line, entity: entity, property: property)
            return nil
        }
        return value
    }

    mutating func seconds(_ text: String?, _ what: String, _ element: XMLElementNode, _ entity: String, _ property: String) -> Date? {
        guard let text else { return nil }
        guard let value = Double(text) else {
            problem("\(what) '\(text)' is not a number of seconds since 2001-01-01", line: element.line, entity: entity, property: property)
            return nil
        }
        return Date(timeIntervalSinceReferenceDate: value)
    }
}
