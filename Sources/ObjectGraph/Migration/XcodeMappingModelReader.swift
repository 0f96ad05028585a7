import Foundation

/// Reads Xcode's `.xcmappingmodel` folders: `xcmapping.xml`, a Core Data XML
/// store of the mapping editor's objects (`XDDEVMAPPINGMODEL`,
/// `XDDEVENTITYMAPPING`, `XDDEVATTRIBUTEMAPPING`, `XDDEVRELATIONSHIPMAPPING`).
///
/// Read: the source and destination model paths (their last component is the
/// version name), each entity mapping's name, source and destination entity,
/// type (`mappingtypename`), order (`mappingnumber`), policy class name, and
/// each property mapping's name and value expression (`valueexpressiondata`,
/// an archived `NSExpression`, decoded like a compiled model's predicates).
/// Mappings Xcode auto-generates (`autogenerateexpression`, with no archived
/// expression) are generated from the models the caller passes, as
/// `mapc` generates them; so is the type of an `Undefined` mapping (copy or
/// transform, add, remove). Not read: the copies of the models Xcode keeps
/// (`sourcemodeldata`, Xcode's private format), source expressions and
/// filter predicates (the default source expression is used), user info.
///
/// ```swift
/// let mapping = try MappingModel(contentsOf: URL(fileURLWithPath: "V1toV2.xcmappingmodel"), sourceModel: v1, destinationModel: v2)
/// ```
enum XcodeMappingModelReader {
    static func read(contentsOf url: URL, sourceModel: ManagedObjectModel?, destinationModel: ManagedObjectModel?) throws -> MappingModel {
        let file = url.appendingPathComponent("xcmapping.xml")
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw CoreDataError(.fileReadNoSuchFile, "\(file.path): no xcmapping.xml in the mapping model", userInfo: [CoreDataError.filePathErrorKey: file.path])
        }
        let root = try XMLElementNode.parse(data, file: file.path)
        func corrupt(_ line: Int, _ reason: String) -> CoreDataError {
            CoreDataError(.fileReadCorruptFile, "\(file.path):\(line): \(reason)", userInfo: [CoreDataError.filePathErrorKey: file.path, CoreDataError.lineNumberErrorKey: line])
        }
        guard root.name == "database" else { throw corrupt(root.line, "not a Core Data XML store (root element <\(root.name)>)") }

        struct Object {
            let type: String
            let line: Int
            var attributes: [String: (type: String, text: String)] = [:]
            var relationships: [String: [String]] = [:]
            func string(_ name: String) -> String? { attributes[name].map(\.text).flatMap { $0.isEmpty ? nil : $0 } }
            func bool(_ name: String) -> Bool { attributes[name].map { $0.text.trimmingCharacters(in: .whitespacesAndNewlines) == "1" } ?? false }
        }
        var objects: [String: Object] = [:]
        for node in root.children(named: "object") {
            guard let type = node.attributes["type"], let id = node.attributes["id"] else { throw corrupt(node.line, "<object> without type or id") }
            var object = Object(type: type, line: node.line)
            for attribute in node.children(named: "attribute") {
                guard let name = attribute.attributes["name"] else { continue }
                object.attributes[name] = (attribute.attributes["type"] ?? "string", attribute.text)
            }
            for relationship in node.children(named: "relationship") {
                guard let name = relationship.attributes["name"] else { continue }
                object.relationships[name] = (relationship.attributes["idrefs"] ?? "").split(separator: " ").map(String.init)
            }
            objects[id] = object
        }
        guard let modelObject = objects.values.first(where: { $0.type == "XDDEVMAPPINGMODEL" }) else {
            throw corrupt(root.line, "no XDDEVMAPPINGMODEL object: not a mapping model")
        }
        let model = MappingModel()
        model.sourceModelVersionName = modelObject.string("sourcemodelpath").map { URL(fileURLWithPath: $0).lastPathComponent }
        model.destinationModelVersionName = modelObject.string("destinationmodelpath").map { URL(fileURLWithPath: $0).lastPathComponent }

        func expression(_ object: Object, context: String) throws -> FetchExpression? {
            guard let text = object.string("valueexpressiondata") else { return nil }
            let cleaned = text.components(separatedBy: .whitespacesAndNewlines).joined()
            guard let archive = Data(base64Encoded: cleaned) else { throw corrupt(object.line, "\(context): valueexpressiondata is not base64") }
            let reader = try KeyedArchiveReader(data: archive, source: file.path)
            return try ArchivedPredicateDecoder(reader: reader, context: context).expression(try reader.object(try reader.root()), depth: 0)
        }

        let entityObjects = (modelObject.relationships["entitymappings"] ?? []).compactMap { objects[$0] }
            .filter { $0.type == "XDDEVENTITYMAPPING" }
            .sorted { (Int($0.string("mappingnumber") ?? "") ?? 0) < (Int($1.string("mappingnumber") ?? "") ?? 0) }
        for object in entityObjects {
            let sourceName = object.string("sourcename"), destinationName = object.string("destinationname")
            let typeName = object.string("mappingtypename") ?? "Undefined"
            guard var type = EntityMappingType(name: typeName) else { throw corrupt(object.line, "unknown mapping type \(typeName)") }
            if type == .undefined {
                switch (sourceName, destinationName) {
                case (nil, .some): type = .add
                case (.some, nil): type = .remove
                case (.some(let s), .some(let d)):
                    let same = sourceModel?.entitiesByName[s]?.versionHash == destinationModel?.entitiesByName[d]?.versionHash && s == d && sourceModel != nil
                    type = same ? .copy : .transform
                default: break
                }
            }
            let policy = object.string("migrationpolicyclassname")
            let name = object.string("name") ?? "\(sourceName ?? "")To\(destinationName ?? "")"
            let m = EntityMapping(name: name, sourceEntityName: sourceName, destinationEntityName: destinationName, type: type,
                                  entityMigrationPolicyClassName: policy)
            var generated: [String] = []
            for (key, kind) in [("attributemappings", "XDDEVATTRIBUTEMAPPING"), ("relationshipmappings", "XDDEVRELATIONSHIPMAPPING")] {
                let properties = (object.relationships[key] ?? []).compactMap { objects[$0] }.filter { $0.type == kind }
                    .sorted { ($0.string("name") ?? "") < ($1.string("name") ?? "") }
                for property in properties {
                    guard let propertyName = property.string("name") else { continue }
                    if let value = try expression(property, context: "\(name).\(propertyName)") {
                        let mapping = PropertyMapping(name: propertyName, valueExpression: value)
                        if kind == "XDDEVATTRIBUTEMAPPING" { m.attributeMappings.append(mapping) } else { m.relationshipMappings.append(mapping) }
                    } else if property.bool("autogenerateexpression") || object.bool("autogenerateexpression") {
                        generated.append(propertyName)
                    } else {
                        let mapping = PropertyMapping(name: propertyName)
                        if kind == "XDDEVATTRIBUTEMAPPING" { m.attributeMappings.append(mapping) } else { m.relationshipMappings.append(mapping) }
                    }
                }
            }
            if let sourceModel, let destinationModel, !generated.isEmpty {
                // Generate exactly the listed properties, in name order.
                let probe = EntityMapping(sourceEntityName: sourceName, destinationEntityName: destinationName, type: type)
                model.autogenerateProperties(of: probe, sourceModel: sourceModel, destinationModel: destinationModel)
                m.attributeMappings += probe.attributeMappings.filter { generated.contains($0.name) }
                m.relationshipMappings += probe.relationshipMappings.filter { generated.contains($0.name) }
            }
            model.entityMappings.append(m)
        }
        return model
    }
}
