import Foundation

/// Writes a model as an Xcode `contents` document that `XcodeModelReader`
/// reads back to an equivalent model, and that Xcode opens.
///
/// Validation predicates beyond the min/max/regex constraints have no place in
/// Xcode's format; they are written as `<validationPredicate>` elements, which
/// this reader understands and Xcode ignores.
///
/// ```swift
/// let xml = XcodeModelWriter.contents(of: model)
/// try XcodeModelWriter.write(model, to: URL(fileURLWithPath: "Company.xcdatamodel"))
/// ```
public enum XcodeModelWriter {
    /// The `contents` document for a model.
    public static func contents(of model: ManagedObjectModel) -> String {
        var out = #"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"# + "\n"
        var modelAttributes: [(String, String)] = [
            ("type", "com.apple.IDECoreDataModeler.DataModel"), ("documentVersion", "1.0"),
            ("minimumToolsVersion", "Automatic"), ("sourceLanguage", "Swift"),
        ]
        modelAttributes.append(("userDefinedModelVersionIdentifier", model.versionIdentifiers.sorted().first ?? ""))
        out += "<model\(attrs(modelAttributes))>\n"
        for entity in model.entities { out += entityXML(entity) }
        for (name, template) in model.fetchRequestTemplatesByName.sorted(by: { $0.key < $1.key }) {
            out += "    <fetchRequest\(attrs(fetchRequestAttributes(template, name: name)))/>\n"
        }
        for name in model.configurations {
            out += "    <configuration\(attrs([("name", name)]))>\n"
            for entity in model.entities(forConfiguration: name) ?? [] {
                out += "        <memberEntity\(attrs([("name", entity.name)]))/>\n"
            }
            out += "    </configuration>\n"
        }
        return out + "</model>\n"
    }

    /// Writes `contents` into a `.xcdatamodel` folder (created if missing), or
    /// to the file itself when `url` does not end in `.xcdatamodel`. The file is
    /// replaced atomically.
    public static func write(_ model: ManagedObjectModel, to url: URL) throws {
        var target = url
        if url.pathExtension == "xcdatamodel" {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            target = url.appendingPathComponent("contents")
        }
        do {
            try Data(contents(of: model).utf8).write(to: target, options: .atomic)
        } catch {
            throw CoreDataError(.fileWriteUnknown, "\(target.path): cannot write model: \(error.localizedDescription)",
                                userInfo: [CoreDataError.filePathErrorKey: target.path, CoreDataError.underlyingErrorKey: error])
        }
    }

    private static func entityXML(_ entity: EntityDescription) -> String {
        var a: [(String, String)] = [("name", entity.name)]
        if entity.managedObjectClassName != EntityDescription.genericClassName {
            a.append(("representedClassName", entity.managedObjectClassName))
        }
        if let parent = entity.superentity { a.append(("parentEntity", parent.name)) }
        if entity.isAbstract { a.append(("isAbstract", "YES")) }
        if let modifier = entity.versionHashModifier { a.append(("versionHashModifier", modifier)) }
        if let id = entity.storedRenamingIdentifier { a.append(("elementID", id)) }
        var out = "    <entity\(attrs(a))>\n"
        for property in entity.directProperties {
            switch property {
            case let attribute as AttributeDescription: out += attributeXML(attribute)
            case let relationship as RelationshipDescription: out += relationshipXML(relationship)
            case let fetched as FetchedPropertyDescription: out += fetchedXML(fetched)
            default: break
            }
        }
        for index in entity.indexes {
            out += "        <fetchIndex\(attrs([("name", index.name)]))>\n"
            for element in index.elements {
                out += "            <fetchIndexElement\(attrs([("property", element.propertyName), ("type", element.collationType.xcodeName), ("order", element.isAscending ? "ascending" : "descending")]))/>\n"
            }
            out += "        </fetchIndex>\n"
        }
        if !entity.uniquenessConstraints.isEmpty {
            out += "        <uniquenessConstraints>\n"
            for constraint in entity.uniquenessConstraints {
                out += "            <uniquenessConstraint>\n"
                for value in constraint { out += "                <constraint\(attrs([("value", value)]))/>\n" }
                out += "            </uniquenessConstraint>\n"
            }
            out += "        </uniquenessConstraints>\n"
        }
        out += userInfoXML(entity.userInfo, indent: "        ")
        return out + "    </entity>\n"
    }

    private static func commonAttributes(_ p: PropertyDescription) -> [(String, String)] {
        var a: [(String, String)] = [("name", p.name)]
        if p.isOptional { a.append(("optional", "YES")) }
        if p.isTransient { a.append(("transient", "YES")) }
        if p.isIndexed { a.append(("indexed", "YES")) }
        if p.isIndexedBySpotlight { a.append(("spotlightIndexingEnabled", "YES")) }
        if p.isStoredInExternalRecord { a.append(("storedInTruthFile", "YES")) }
        if let modifier = p.versionHashModifier { a.append(("versionHashModifier", modifier)) }
        if let id = p.storedRenamingIdentifier { a.append(("elementID", id)) }
        return a
    }

    private static func attributeXML(_ attribute: AttributeDescription) -> String {
        var a = commonAttributes(attribute)
        a.append(("attributeType", attribute.attributeType.xcodeName))
        if let value = attribute.defaultValue {
            if attribute.attributeType == .date, let date = value as? Date {
                a.append(("defaultDateTimeInterval", String(date.timeIntervalSinceReferenceDate)))
            } else if let text = ModelValue.formatDefault(value, type: attribute.attributeType) {
                a.append(("defaultValueString", text))
            }
        }
        switch attribute.attributeType {
        case .string, .binaryData:
            if let min = attribute.minLength { a.append(("minValueString", String(min))) }
            if let max = attribute.maxLength { a.append(("maxValueString", String(max))) }
        case .date:
            if let min = attribute.minDate { a.append(("minDateTimeInterval", String(min.timeIntervalSinceReferenceDate))) }
            if let max = attribute.maxDate { a.append(("maxDateTimeInterval", String(max.timeIntervalSinceReferenceDate))) }
        default:
            if let min = attribute.minValue { a.append(("minValueString", NSDecimalNumber(decimal: min).stringValue)) }
            if let max = attribute.maxValue { a.append(("maxValueString", NSDecimalNumber(decimal: max).stringValue)) }
        }
        if let regex = attribute.regularExpression { a.append(("regularExpressionString", regex)) }
        if let name = attribute.valueTransformerName { a.append(("valueTransformerName", name)) }
        if let name = attribute.customValueClassName { a.append(("customClassName", name)) }
        if attribute.allowsExternalBinaryDataStorage { a.append(("allowsExternalBinaryDataStorage", "YES")) }
        if let scalar = attribute.usesScalarValueType { a.append(("usesScalarValueType", scalar ? "YES" : "NO")) }
        return element("attribute", a, children: validationXML(attribute) + userInfoXML(attribute.userInfo, indent: "            "))
    }

    private static func relationshipXML(_ relationship: RelationshipDescription) -> String {
        var a = commonAttributes(relationship)
        if relationship.isToMany { a.append(("toMany", "YES")) }
        if relationship.isOrdered { a.append(("ordered", "YES")) }
        if relationship.minCount != 0 { a.append(("minCount", String(relationship.minCount))) }
        if relationship.maxCount != 0 { a.append(("maxCount", String(relationship.maxCount))) }
        a.append(("deletionRule", relationship.deleteRule.xcodeName))
        if let destination = relationship.destinationEntity?.name ?? relationship.destinationEntityName {
            a.append(("destinationEntity", destination))
        }
        if let inverse = relationship.inverseRelationship {
            a.append(("inverseName", inverse.name))
            if let owner = inverse.entity?.name { a.append(("inverseEntity", owner)) }
        }
        return element("relationship", a, children: validationXML(relationship) + userInfoXML(relationship.userInfo, indent: "            "))
    }

    private static func fetchedXML(_ fetched: FetchedPropertyDescription) -> String {
        var children = ""
        if let request = fetched.fetchRequest {
            children += "            <fetchRequest\(attrs(fetchRequestAttributes(request, name: "fetchedPropertyFetchRequest")))/>\n"
        }
        return element("fetchedProperty", commonAttributes(fetched), children: children + userInfoXML(fetched.userInfo, indent: "            "))
    }

    private static func fetchRequestAttributes(_ request: AnyFetchRequest, name: String) -> [(String, String)] {
        var a: [(String, String)] = [("name", name)]
        if let entity = request.entityName { a.append(("entity", entity)) }
        if let predicate = request.predicate?.predicateFormat { a.append(("predicateString", predicate)) }
        if request.fetchLimit != 0 { a.append(("fetchLimit", String(request.fetchLimit))) }
        if request.fetchBatchSize != 0 { a.append(("fetchBatchSize", String(request.fetchBatchSize))) }
        if !request.includesSubentities { a.append(("includeSubentities", "NO")) }
        return a
    }

    private static func validationXML(_ property: PropertyDescription) -> String {
        zip(property.validationPredicates, property.validationWarnings).map { predicate, warning in
            "            <validationPredicate\(attrs([("predicateString", predicate), ("warning", warning)]))/>\n"
        }.joined()
    }

    private static func userInfoXML(_ info: [String: String], indent: String) -> String {
        guard !info.isEmpty else { return "" }
        var out = "\(indent)<userInfo>\n"
        for (key, value) in info.sorted(by: { $0.key < $1.key }) {
            out += "\(indent)    <entry\(attrs([("key", key), ("value", value)]))/>\n"
        }
        return out + "\(indent)</userInfo>\n"
    }

    private static func element(_ name: String, _ attributes: [(String, String)], children: String) -> String {
        children.isEmpty
            ? "        <\(name)\(attrs(attributes))/>\n"
            : "        <\(name)\(attrs(attributes))>\n\(children)        </\(name)>\n"
    }

    private static func attrs(_ pairs: [(String, String)]) -> String {
        pairs.map { " \($0.0)=\"\(escape($0.1))\"" }.joined()
    }

    /// XML attribute escaping; newlines and tabs as character references so
    /// attribute-value normalization does not turn them into spaces.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\n": out += "&#10;"
            case "\r": out += "&#13;"
            case "\t": out += "&#9;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
