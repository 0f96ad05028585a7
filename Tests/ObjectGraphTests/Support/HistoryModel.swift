import Foundation
@testable import ObjectGraph

/// A model with an attribute of every stored type, inheritance, to-one,
/// to-many, many-to-many and a to-many without inverse: what the history
/// and sync tests write and compare, and an ordered to-many (`Owner.parts`).
enum HistoryModel {
    /// Attribute names and types of `Item` (all optional).
    static let itemAttributes: [(String, AttributeType)] = [
        ("count16", .integer16), ("count32", .integer32), ("count64", .integer64), ("flag", .boolean),
        ("amount", .decimal), ("ratio", .double), ("weight", .float), ("title", .string), ("when", .date),
        ("blob", .binaryData), ("uid", .uuid), ("link", .uri), ("info", .transformable),
    ]

    static func make() -> ManagedObjectModel {
        let owner = EntityDescription(name: "Owner")
        let item = EntityDescription(name: "Item")
        let special = EntityDescription(name: "SpecialItem")
        let tag = EntityDescription(name: "Tag")
        let part = EntityDescription(name: "Part")

        func attribute(_ name: String, _ type: AttributeType) -> AttributeDescription {
            let a = AttributeDescription(name: name, type: type)
            if type == .transformable { a.valueTransformerName = ValueTransformerRegistry.propertyListName }
            return a
        }
        let ownerName = attribute("name", .string)
        let items = RelationshipDescription(name: "items", destination: item, toMany: true)
        let itemOwner = RelationshipDescription(name: "owner", destination: owner, toMany: false)
        items.inverseRelationship = itemOwner
        itemOwner.inverseRelationship = items
        let tags = RelationshipDescription(name: "tags", destination: tag, toMany: true)
        let tagItems = RelationshipDescription(name: "items", destination: item, toMany: true)
        tags.inverseRelationship = tagItems
        tagItems.inverseRelationship = tags
        let watched = RelationshipDescription(name: "watched", destination: tag, toMany: true)   // no inverse
        let parts = RelationshipDescription(name: "parts", destination: part, toMany: true)   // ordered
        parts.isOrdered = true
        let partOwner = RelationshipDescription(name: "owner", destination: owner, toMany: false)
        parts.inverseRelationship = partOwner
        partOwner.inverseRelationship = parts
        for rel in [items, itemOwner, tags, tagItems, watched, parts, partOwner] { rel.deleteRule = .nullify }

        owner.properties = [ownerName, items, parts]
        part.properties = [attribute("name", .string), partOwner]
        item.properties = itemAttributes.map { attribute($0.0, $0.1) } + [itemOwner, tags, watched]
        special.properties = [attribute("level", .integer32)]
        item.subentities = [special]
        tag.properties = [attribute("name", .string), tagItems]

        let model = ManagedObjectModel()
        model.entities = [owner, item, special, tag, part]
        return model
    }

    static let sqlite = PersistentStoreCoordinator.sqliteStoreType
    static let historyOn: [String: Any] = [PersistentStore.persistentHistoryTrackingKey: true]

    /// A coordinator and context on a SQLite store with history on.
    static func stack(_ url: URL, model: ManagedObjectModel = make(), options: [String: Any] = historyOn) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: sqlite, at: url, options: options)
        return (coordinator, ManagedObjectContext(coordinator: coordinator))
    }
}
