import ArgumentParser
import Foundation
import ObjectGraph

/// `storesyncctl model show PATH [--json]`: entities, properties,
/// relationships and version hashes of a model.
struct ModelShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a model's entities, properties, relationships and version hashes.",
        discussion: """
            PATH is a model (a .xcdatamodeld or .momd bundle: its current version; a \
            .xcdatamodel folder, a contents file or a .mom file) or a SQLite store. For a \
            store, the model printed is the version of --model's bundle the store was written \
            with, or without --model the store's own: the one cached in Z_MODELCACHE, else one \
            derived from its tables (names are lowercased column names; what the tables cannot \
            tell is listed under "notes"). Where the model came from goes to stderr.

            Examples:
              storesyncctl model show Model.xcdatamodeld
              storesyncctl model show Store.sqlite --json
              storesyncctl model show Store.sqlite --model Model.xcdatamodeld

            Exit statuses: 0 shown; 64 usage; 65 a model or store that cannot be read, or no \
            version of --model's bundle fits the store; 66 no such file; 75 the store stayed \
            locked by a writer past the timeout.
            """
    )

    @Argument(help: "A model (.xcdatamodeld, .momd, .xcdatamodel, contents or .mom) or a SQLite store file.")
    var path: String

    @Option(help: "With a store: a model bundle (or file) to take the version matching the store from.")
    var model: String?

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func run() throws {
        let model: ManagedObjectModel
        if SQLiteStore.hasSQLiteSignature(at: URL(fileURLWithPath: path)) {
            do {
                let resolved = try StoreModelResolver.resolve(store: URL(fileURLWithPath: path), modelPath: self.model)
                printError("model: \(resolved.origin)")
                model = resolved.model
            } catch let error as CoreDataError {
                printError(error.message)
                throw StoreModelResolver.exitCode(for: error)
            }
        } else {
            if self.model != nil {
                printError("--model is for a store; \(path) is not a SQLite file")
                throw SysExit.usage
            }
            model = try ModelLoading.load(path)
        }
        if json {
            print(try ModelReport.json(model))
        } else {
            print(ModelReport.text(model), terminator: "")
        }
    }
}

/// The two renderings of `model show`.
enum ModelReport {
    struct Report: Encodable {
        var entities: [Entity]
    }

    struct Entity: Encodable {
        var name: String
        var parent: String?
        var abstract: Bool
        var className: String
        var attributes: [Attribute]
        var relationships: [Relationship]
        var fetchedProperties: [FetchedProperty]
        var versionHash: String
        /// The entity's user info (for a model derived from a store: what the tables cannot tell).
        var notes: [String: String]?
    }

    struct Attribute: Encodable {
        var name: String
        var type: String
        var optional: Bool
        var transient: Bool
        var indexed: Bool
        var defaultValue: String?
        var inheritedFrom: String?
        var versionHash: String
        var notes: [String: String]?
    }

    struct Relationship: Encodable {
        var name: String
        var destination: String?
        var inverse: String?
        var toMany: Bool
        var ordered: Bool
        var optional: Bool
        var minCount: Int
        var maxCount: Int
        var deleteRule: String
        var inheritedFrom: String?
        var versionHash: String
        var notes: [String: String]?
    }

    struct FetchedProperty: Encodable {
        var name: String
        var entity: String?
        var predicate: String?
        var inheritedFrom: String?
    }

    /// User info, left out of the JSON when empty so plain models print as before.
    static func notes(_ userInfo: [String: String]) -> [String: String]? { userInfo.isEmpty ? nil : userInfo }

    static func build(_ model: ManagedObjectModel) -> Report {
        Report(entities: model.entities.sorted { $0.name < $1.name }.map { entity in
            func inherited(_ p: PropertyDescription) -> String? { p.entity === entity ? nil : p.entity?.name }
            return Entity(
                name: entity.name,
                parent: entity.superentity?.name,
                abstract: entity.isAbstract,
                className: entity.managedObjectClassName,
                attributes: entity.properties.compactMap { $0 as? AttributeDescription }.map {
                    Attribute(name: $0.name, type: $0.attributeType.xcodeName, optional: $0.isOptional,
                              transient: $0.isTransient, indexed: $0.isIndexed,
                              defaultValue: $0.defaultValue.map { String(describing: $0) },
                              inheritedFrom: inherited($0), versionHash: $0.versionHash.base64EncodedString(),
                              notes: notes($0.userInfo))
                },
                relationships: entity.properties.compactMap { $0 as? RelationshipDescription }.map {
                    Relationship(name: $0.name, destination: $0.destinationEntity?.name, inverse: $0.inverseRelationship?.name,
                                 toMany: $0.isToMany, ordered: $0.isOrdered, optional: $0.isOptional,
                                 minCount: $0.minCount, maxCount: $0.maxCount, deleteRule: $0.deleteRule.xcodeName,
                                 inheritedFrom: inherited($0), versionHash: $0.versionHash.base64EncodedString(),
                                 notes: notes($0.userInfo))
                },
                fetchedProperties: entity.properties.compactMap { $0 as? FetchedPropertyDescription }.map {
                    FetchedProperty(name: $0.name, entity: $0.fetchRequest?.entityName,
                                    predicate: $0.fetchRequest?.predicate?.predicateFormat, inheritedFrom: inherited($0))
                },
                versionHash: entity.versionHash.base64EncodedString(),
                notes: notes(entity.userInfo)
            )
        })
    }

    static func json(_ model: ManagedObjectModel) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(build(model)), as: UTF8.self)
    }

    static func text(_ model: ManagedObjectModel) -> String {
        var out = ""
        for entity in build(model).entities {
            var header = "entity \(entity.name)"
            if let parent = entity.parent { header += " : \(parent)" }
            if entity.abstract { header += " (abstract)" }
            out += header + "\n"
            out += "  class: \(entity.className)\n"
            out += "  versionHash: \(entity.versionHash)\n"
            if let unknown = entity.notes?[SQLiteSchemaModelDeriver.UserInfoKey.unknown] { out += "  unknown: \(unknown)\n" }
            for a in entity.attributes {
                var flags: [String] = [a.optional ? "optional" : "required"]
                if a.transient { flags.append("transient") }
                if a.indexed { flags.append("indexed") }
                if let d = a.defaultValue { flags.append("default=\(d)") }
                if let from = a.inheritedFrom { flags.append("from \(from)") }
                out += "  attribute \(a.name): \(a.type) [\(flags.joined(separator: ", "))]\n"
            }
            for r in entity.relationships {
                let arrow = r.toMany ? "->>" : "->"
                var flags = ["delete=\(r.deleteRule)", r.optional ? "optional" : "required"]
                if r.toMany { flags.append("count=\(r.minCount)...\(r.maxCount == 0 ? "*" : String(r.maxCount))") }
                if r.ordered { flags.append("ordered") }
                if let from = r.inheritedFrom { flags.append("from \(from)") }
                out += "  relationship \(r.name) \(arrow) \(r.destination ?? "?")"
                out += r.inverse.map { " (inverse \($0))" } ?? " (no inverse)"
                out += " [\(flags.joined(separator: ", "))]\n"
            }
            for f in entity.fetchedProperties {
                out += "  fetched \(f.name): \(f.entity ?? "?") where \(f.predicate ?? "TRUEPREDICATE")\n"
            }
        }
        return out
    }
}
