import Foundation

/// Mapping models in files (MM-03): ObjectGraph's JSON mapping files, and
/// Xcode's `.xcmappingmodel` folders (`XcodeMappingModelReader`).
///
/// The JSON format (docs/MIGRATION.md, "Mapping files"):
///
/// ```json
/// {
///   "sourceModel": "Model.xcdatamodel",
///   "destinationModel": "Model 2.xcdatamodel",
///   "inferRemaining": true,
///   "entityMappings": [
///     { "name": "NoteToNote", "type": "transform", "source": "Note", "destination": "Note",
///       "policy": "NotePolicy", "inferRemaining": true,
///       "attributes": [ { "name": "created", "value": "FUNCTION($entityPolicy, 'dateFromISO8601String:', $source.created)" } ],
///       "relationships": [ { "name": "tags", "value": "FUNCTION($manager, 'destinationInstancesForEntityMappingNamed:sourceInstances:', 'TagToTag', $source.tags)" } ] }
///   ]
/// }
/// ```
///
/// `inferRemaining` in an entity mapping maps the destination properties it
/// does not list as Xcode's "auto-generate value expressions" does (the
/// source property with the same renaming identifier, when its type can be
/// carried over); at the top level it also adds mappings for the entities no
/// mapping names (copy or transform by renaming identifier, add, remove).
extension MappingModel {
    /// Reads a mapping file: a `.xcmappingmodel` folder or an ObjectGraph
    /// JSON mapping (MM-03). The models fill in what the file leaves to be
    /// generated (`inferRemaining`, Xcode's auto-generated expressions) and
    /// the entity version hashes; without them those parts are left empty.
    ///
    /// ```swift
    /// let mapping = try MappingModel(contentsOf: URL(fileURLWithPath: "V1toV2.json"), sourceModel: v1, destinationModel: v2)
    /// ```
    /// - Throws: 260 for a missing file, 259 for one that is not a mapping
    ///   model, 134110 for a value expression that does not parse (file,
    ///   mapping, property, column and a caret under the problem).
    public convenience init(contentsOf url: URL, sourceModel: ManagedObjectModel? = nil, destinationModel: ManagedObjectModel? = nil) throws {
        self.init()
        let read: MappingModel
        if url.pathExtension == "xcmappingmodel" {
            read = try XcodeMappingModelReader.read(contentsOf: url, sourceModel: sourceModel, destinationModel: destinationModel)
        } else {
            read = try Self.readJSON(contentsOf: url, sourceModel: sourceModel, destinationModel: destinationModel)
        }
        entityMappings = read.entityMappings
        sourceModelVersionName = read.sourceModelVersionName
        destinationModelVersionName = read.destinationModelVersionName
        if let sourceModel, let destinationModel { fillVersionHashes(sourceModel: sourceModel, destinationModel: destinationModel) }
    }

    /// Writes the mapping as an ObjectGraph JSON mapping file (MM-03);
    /// reading it back gives an equal mapping.
    ///
    /// ```swift
    /// try mapping.write(to: URL(fileURLWithPath: "V1toV2.json"))
    /// ```
    public func write(to url: URL) throws {
        var root: [String: Any] = ["entityMappings": entityMappings.map { m -> [String: Any] in
            var out: [String: Any] = ["name": m.name, "type": m.mappingType.description]
            if let s = m.sourceEntityName { out["source"] = s }
            if let d = m.destinationEntityName { out["destination"] = d }
            if let p = m.entityMigrationPolicyClassName { out["policy"] = p }
            if let e = m.sourceExpression { out["sourceExpression"] = e.expressionFormat }
            if let h = m.sourceEntityVersionHash { out["sourceVersionHash"] = h.base64EncodedString() }
            if let h = m.destinationEntityVersionHash { out["destinationVersionHash"] = h.base64EncodedString() }
            func properties(_ list: [PropertyMapping]) -> [[String: Any]] {
                list.map { p in
                    var entry: [String: Any] = ["name": p.name]
                    if let e = p.valueExpression { entry["value"] = e.expressionFormat }
                    if !p.userInfo.isEmpty { entry["userInfo"] = p.userInfo }
                    return entry
                }
            }
            out["attributes"] = properties(m.attributeMappings)
            out["relationships"] = properties(m.relationshipMappings)
            if !m.userInfo.isEmpty { out["userInfo"] = m.userInfo }
            return out
        }]
        if let name = sourceModelVersionName { root["sourceModel"] = name }
        if let name = destinationModelVersionName { root["destinationModel"] = name }
        guard JSONSerialization.isValidJSONObject(root) else {
            throw CoreDataError(.fileWriteUnknown, "\(url.path): the mapping's userInfo holds values JSON cannot hold", userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        let data = try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: url, options: .atomic)
    }

    static func readJSON(contentsOf url: URL, sourceModel: ManagedObjectModel?, destinationModel: ManagedObjectModel?) throws -> MappingModel {
        let path = url.path
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CoreDataError(.fileReadNoSuchFile, "\(path): no mapping file", userInfo: [CoreDataError.filePathErrorKey: path])
        }
        func corrupt(_ reason: String) -> CoreDataError {
            CoreDataError(.fileReadCorruptFile, "\(path): \(reason)", userInfo: [CoreDataError.filePathErrorKey: path])
        }
        guard let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { throw corrupt("not a JSON object") }
        guard let list = root["entityMappings"] as? [[String: Any]] else { throw corrupt("no \"entityMappings\" array") }
        let model = MappingModel()
        model.sourceModelVersionName = root["sourceModel"] as? String
        model.destinationModelVersionName = root["destinationModel"] as? String
        var autogenerate: [EntityMapping] = []
        for (index, entry) in list.enumerated() {
            let typeName = entry["type"] as? String ?? "transform"
            guard let type = EntityMappingType(name: typeName) else {
                throw corrupt("entity mapping \(index): unknown type \"\(typeName)\" (add, remove, copy, transform, custom, undefined)")
            }
            let m = EntityMapping(name: entry["name"] as? String, sourceEntityName: entry["source"] as? String,
                                  destinationEntityName: entry["destination"] as? String, type: type,
                                  entityMigrationPolicyClassName: entry["policy"] as? String,
                                  userInfo: entry["userInfo"] as? [String: Any] ?? [:])
            if let text = entry["sourceExpression"] as? String {
                do {
                    m.sourceExpression = try PropertyMapping.parse(text, property: "source expression", entityMapping: m.name)
                } catch let error as CoreDataError {
                    throw CoreDataError(error.code, "\(path): \(error.message)", userInfo: error.userInfo.merging([CoreDataError.filePathErrorKey: path]) { _, new in new })
                }
            }
            m.sourceEntityVersionHash = (entry["sourceVersionHash"] as? String).flatMap { Data(base64Encoded: $0) }
            m.destinationEntityVersionHash = (entry["destinationVersionHash"] as? String).flatMap { Data(base64Encoded: $0) }
            func properties(_ key: String) throws -> [PropertyMapping] {
                guard let items = entry[key] else { return [] }
                guard let items = items as? [[String: Any]] else { throw corrupt("entity mapping \(m.name): \"\(key)\" is not an array of objects") }
                return try items.map { item in
                    guard let name = item["name"] as? String else { throw corrupt("entity mapping \(m.name): a property mapping in \"\(key)\" has no name") }
                    let property = PropertyMapping(name: name, userInfo: item["userInfo"] as? [String: Any] ?? [:])
                    if let text = item["value"] as? String {
                        do {
                            property.valueExpression = try PropertyMapping.parse(text, property: name, entityMapping: m.name)
                        } catch let error as CoreDataError {
                            throw CoreDataError(error.code, "\(path): \(error.message)",
                                                userInfo: error.userInfo.merging([CoreDataError.filePathErrorKey: path, CoreDataError.entityMappingErrorKey: m.name]) { _, new in new })
                        }
                    }
                    return property
                }
            }
            m.attributeMappings = try properties("attributes")
            m.relationshipMappings = try properties("relationships")
            if entry["inferRemaining"] as? Bool == true { autogenerate.append(m) }
            model.entityMappings.append(m)
        }
        if let sourceModel, let destinationModel {
            for m in autogenerate { model.autogenerateProperties(of: m, sourceModel: sourceModel, destinationModel: destinationModel) }
            if root["inferRemaining"] as? Bool == true { model.autogenerateEntityMappings(sourceModel: sourceModel, destinationModel: destinationModel) }
        }
        return model
    }

    /// Sets each entity mapping's version hashes from the models when it has none.
    func fillVersionHashes(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) {
        for m in entityMappings {
            if m.sourceEntityVersionHash == nil, let name = m.sourceEntityName { m.sourceEntityVersionHash = sourceModel.entitiesByName[name]?.versionHash }
            if m.destinationEntityVersionHash == nil, let name = m.destinationEntityName { m.destinationEntityVersionHash = destinationModel.entitiesByName[name]?.versionHash }
        }
    }

    /// Xcode's auto-generated value expressions for the destination
    /// properties a mapping does not list: the source property with the same
    /// renaming identifier, when its type can be carried over.
    func autogenerateProperties(of m: EntityMapping, sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) {
        guard let destination = m.destinationEntityName.flatMap({ destinationModel.entitiesByName[$0] }) else { return }
        let source = m.sourceEntityName.flatMap { sourceModel.entitiesByName[$0] }
        let listed = Set(m.attributeMappings.map(\.name) + m.relationshipMappings.map(\.name))
        func match(_ property: PropertyDescription) -> PropertyDescription? {
            guard let source else { return nil }
            let key = property.renamingIdentifier ?? property.name
            return source.properties.first { !$0.isTransient && ($0.renamingIdentifier ?? $0.name) == key } ?? source.propertiesByName[property.name]
        }
        for property in destination.properties where !property.isTransient && !listed.contains(property.name) {
            if let attribute = property as? AttributeDescription {
                if let old = match(attribute) as? AttributeDescription, Self.canWiden(old.attributeType, to: attribute.attributeType) {
                    m.attributeMappings.append(PropertyMapping(name: attribute.name, valueExpression: PropertyMapping.sourceKeyExpression(old.name)))
                } else {
                    m.attributeMappings.append(PropertyMapping(name: attribute.name))
                }
            } else if let relationship = property as? RelationshipDescription {
                if let old = match(relationship) as? RelationshipDescription, !(old.isToMany && !relationship.isToMany) {
                    m.relationshipMappings.append(PropertyMapping(name: relationship.name, valueExpression: PropertyMapping.relationshipLookupExpression(old.name)))
                } else {
                    m.relationshipMappings.append(PropertyMapping(name: relationship.name))
                }
            }
        }
    }

    /// Mappings for the entities no entity mapping names: matched by
    /// renaming identifier (copy or transform, properties auto-generated),
    /// new ones added, old ones removed.
    func autogenerateEntityMappings(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) {
        let mappedSources = Set(entityMappings.compactMap(\.sourceEntityName))
        let mappedDestinations = Set(entityMappings.compactMap(\.destinationEntityName))
        var matchedSources: Set<String> = []
        for destination in destinationModel.entities where !mappedDestinations.contains(destination.name) {
            let key = destination.renamingIdentifier ?? destination.name
            let source = sourceModel.entities.first { !mappedSources.contains($0.name) && ($0.renamingIdentifier ?? $0.name) == key }
                ?? sourceModel.entitiesByName[destination.name].flatMap { mappedSources.contains($0.name) ? nil : $0 }
            if let source, !matchedSources.contains(source.name) {
                matchedSources.insert(source.name)
                let type: EntityMappingType = source.versionHash == destination.versionHash && source.name == destination.name ? .copy : .transform
                let m = EntityMapping(sourceEntityName: source.name, destinationEntityName: destination.name, type: type)
                autogenerateProperties(of: m, sourceModel: sourceModel, destinationModel: destinationModel)
                entityMappings.append(m)
            } else {
                entityMappings.append(EntityMapping(sourceEntityName: nil, destinationEntityName: destination.name, type: .add))
            }
        }
        for source in sourceModel.entities where !mappedSources.contains(source.name) && !matchedSources.contains(source.name) {
            entityMappings.append(EntityMapping(sourceEntityName: source.name, destinationEntityName: nil, type: .remove))
        }
    }
}
