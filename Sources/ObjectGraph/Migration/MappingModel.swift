import Foundation

/// How the data of a store moves from one model version to another (MM-*):
/// Core Data's `NSMappingModel`, an ordered list of entity mappings.
///
/// Build one in code, read one from a file (`init(contentsOf:)`: ObjectGraph's
/// JSON mapping files, and Xcode's `.xcmappingmodel`, see docs/MIGRATION.md),
/// find one for two models among files (`mappingModel(from:forSourceModel:destinationModel:)`),
/// or let ObjectGraph infer one (`inferredMappingModel(forSourceModel:destinationModel:)`).
///
/// ```swift
/// let mapping = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
/// for entityMapping in mapping.entityMappings { print(entityMapping.name, entityMapping.mappingType) }
/// ```
public final class MappingModel: CustomStringConvertible {
    /// Processed in array order (MM-04, MM-05). Duplicate names are refused
    /// when a migration starts (MM-05).
    public var entityMappings: [EntityMapping]
    /// The model version this mapping was written for (a `.xcdatamodel`
    /// folder or `.mom` name, extension optional), when it says; used to
    /// pick a mapping file for two models (MM-01).
    public var sourceModelVersionName: String?
    public var destinationModelVersionName: String?
    /// True for a mapping built by `inferredMappingModel(forSourceModel:destinationModel:)`.
    public internal(set) var isInferred = false

    public init(entityMappings: [EntityMapping] = []) {
        self.entityMappings = entityMappings
    }

    /// Entity mappings by name (MM-06); with duplicate names the first wins.
    public var entityMappingsByName: [String: EntityMapping] {
        Dictionary(entityMappings.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public var description: String {
        "MappingModel(\(entityMappings.map(\.name).joined(separator: ", ")))"
    }

    // MARK: - Finding a mapping model (MM-01)

    /// The first mapping model among `urls` made for `sourceModel` →
    /// `destinationModel`, or nil (MM-01). Each URL is a mapping file (a
    /// `.xcmappingmodel` folder or an ObjectGraph `.json` mapping) or a
    /// directory searched (not recursively) for them, in name order. A file
    /// fits when the version names it records match the models' (see
    /// `ManagedObjectModel.versionName`), the entity version hashes it
    /// records match, and every entity and property it names exists.
    /// Files that do not load are skipped.
    ///
    /// ```swift
    /// let mapping = MappingModel.mappingModel(from: [URL(fileURLWithPath: "Mappings")], forSourceModel: v1, destinationModel: v2)
    /// ```
    public static func mappingModel(from urls: [URL], forSourceModel sourceModel: ManagedObjectModel,
                                    destinationModel: ManagedObjectModel) -> MappingModel? {
        for file in mappingFiles(in: urls) {
            guard let mapping = try? MappingModel(contentsOf: file, sourceModel: sourceModel, destinationModel: destinationModel) else { continue }
            if mapping.problems(sourceModel: sourceModel, destinationModel: destinationModel).isEmpty { return mapping }
        }
        return nil
    }

    /// Mapping files (`.xcmappingmodel`, `.json`) given directly or found
    /// in given directories (not recursively), in name order.
    ///
    /// ```swift
    /// let files = MappingModel.mappingFiles(in: [URL(fileURLWithPath: "Mappings")])
    /// ```
    public static func mappingFiles(in urls: [URL]) -> [URL] {
        var out: [URL] = []
        for url in urls {
            if isMappingFile(url) { out.append(url); continue }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue,
                  let items = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { continue }
            out += items.sorted().map { url.appendingPathComponent($0) }.filter(isMappingFile)
        }
        return out
    }

    static func isMappingFile(_ url: URL) -> Bool {
        ["xcmappingmodel", "json"].contains(url.pathExtension) && FileManager.default.fileExists(atPath: url.path)
    }

    // MARK: - Checking a mapping against two models

    /// Everything that keeps this mapping from migrating `sourceModel` to
    /// `destinationModel`, one line each; empty when it fits. Checked before
    /// a migration writes anything (MG-08 d).
    ///
    /// ```swift
    /// for problem in mapping.problems(sourceModel: v1, destinationModel: v2) { print(problem) }
    /// // entity mapping People: the destination entity Person has no attribute mail
    /// ```
    public func problems(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) -> [String] {
        var out: [String] = []
        if let name = sourceModelVersionName, let version = sourceModel.versionName, !Self.sameVersion(name, version) {
            out.append("the mapping is for source model \(name), not \(version)")
        }
        if let name = destinationModelVersionName, let version = destinationModel.versionName, !Self.sameVersion(name, version) {
            out.append("the mapping is for destination model \(name), not \(version)")
        }
        var seen: Set<String> = []
        for mapping in entityMappings {
            let label = "entity mapping \(mapping.name)"
            if !seen.insert(mapping.name).inserted { out.append("\(label): the name is used by another entity mapping") }
            if mapping.mappingType == .custom && mapping.entityMigrationPolicyClassName == nil {
                out.append("\(label): a custom mapping needs an entity migration policy class name (EM-07)")
            }
            if let policy = mapping.entityMigrationPolicyClassName, EntityMigrationPolicy.policyType(named: policy) == nil {
                out.append("\(label): no entity migration policy is registered as '\(policy)' (EntityMigrationPolicy.register)")
            }
            var source: EntityDescription?
            if let name = mapping.sourceEntityName {
                source = sourceModel.entitiesByName[name]
                if source == nil { out.append("\(label): the source model has no entity \(name)") }
                if let source, let hash = mapping.sourceEntityVersionHash, hash != source.versionHash {
                    out.append("\(label): the source entity \(name)'s version hash differs from the mapping's")
                }
            } else if [.copy, .transform, .remove].contains(mapping.mappingType) {
                out.append("\(label): a \(mapping.mappingType) mapping needs a source entity")
            }
            var destination: EntityDescription?
            if let name = mapping.destinationEntityName {
                destination = destinationModel.entitiesByName[name]
                if destination == nil { out.append("\(label): the destination model has no entity \(name)") }
                if let destination, let hash = mapping.destinationEntityVersionHash, hash != destination.versionHash {
                    out.append("\(label): the destination entity \(name)'s version hash differs from the mapping's")
                }
                if let destination, destination.isAbstract, mapping.mappingType != .remove, mapping.sourceEntityName != nil {
                    out.append("\(label): the destination entity \(name) is abstract and cannot have instances")
                }
            } else if [.copy, .transform, .add].contains(mapping.mappingType) {
                out.append("\(label): a \(mapping.mappingType) mapping needs a destination entity")
            }
            for property in mapping.attributeMappings {
                if let destination, destination.attributesByName[property.name] == nil {
                    out.append("\(label): the destination entity \(destination.name) has no attribute \(property.name)")
                }
                out += sourceKeyProblems(property, mapping: mapping, source: source, label: label)
            }
            for property in mapping.relationshipMappings {
                if let destination, destination.relationshipsByName[property.name] == nil {
                    out.append("\(label): the destination entity \(destination.name) has no relationship \(property.name)")
                }
                out += sourceKeyProblems(property, mapping: mapping, source: source, label: label)
            }
        }
        return out
    }

    /// `$source.key` paths whose first key the source entity lacks.
    private func sourceKeyProblems(_ property: PropertyMapping, mapping: EntityMapping, source: EntityDescription?, label: String) -> [String] {
        guard let source, let expression = property.valueExpression else { return [] }
        var keys: [String] = []
        Self.collectSourceKeys(expression, into: &keys)
        return keys.filter { source.propertiesByName[$0] == nil }
            .map { "\(label): the value expression of \(property.name) reads $source.\($0), which the source entity \(source.name) does not have" }
    }

    static func collectSourceKeys(_ expression: FetchExpression, into keys: inout [String]) {
        switch expression.normalized {
        case let .member(base, path):
            if case .variable(MigrationManager.sourceObjectKey) = base, let first = path.first { keys.append(first) } else { collectSourceKeys(base, into: &keys) }
        case let .function(_, args): args.forEach { collectSourceKeys($0, into: &keys) }
        case let .aggregate(items): items.forEach { collectSourceKeys($0, into: &keys) }
        case let .subquery(collection, _, _): collectSourceKeys(collection, into: &keys)
        default: break
        }
    }

    /// Throws 134110 listing every problem (see `problems(sourceModel:destinationModel:)`).
    func validate(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) throws {
        let problems = problems(sourceModel: sourceModel, destinationModel: destinationModel)
        guard !problems.isEmpty else { return }
        throw CoreDataError(.migration, "the mapping model does not fit the source and destination models:\n- " + problems.joined(separator: "\n- "),
                            userInfo: [Self.problemsErrorKey: problems])
    }

    /// Every problem a 134110 from `validate` found, as `[String]`.
    public static let problemsErrorKey = "ObjectGraphMappingProblems"

    static func sameVersion(_ a: String, _ b: String) -> Bool {
        func strip(_ s: String) -> String {
            for ext in [".xcdatamodel", ".mom"] where s.hasSuffix(ext) { return String(s.dropLast(ext.count)) }
            return s
        }
        return strip(a) == strip(b)
    }
}
