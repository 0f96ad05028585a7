import Foundation
import ObjectGraph
@testable import StoreSync
import StoreSyncPostgreSQL
import PostgreSQLTestSupport

/// Models and helpers the PostgreSQL hub's tests share.
enum PostgreSQLHubFixtures {
    /// Every way the hub stores a property:
    /// - `Item`: one attribute of each type (transformable through the property-list transformer),
    ///   `folder` (to-one, inverse of the unordered `Folder.items`), `queuedIn` (to-one, inverse of
    ///   the ordered `Folder.queue`), `tags` (many-to-many with `Tag.items`),
    ///   `detail` (one-to-one with `Detail.item`, cascading).
    /// - `Special`: a subentity of `Item` with an attribute of its own (same table).
    /// - `Folder`, `Tag`, `Detail`: a name and their sides of those relationships.
    static func model() -> ManagedObjectModel {
        let folder = EntityDescription(name: "Folder")
        let item = EntityDescription(name: "Item")
        let tag = EntityDescription(name: "Tag")
        let detail = EntityDescription(name: "Detail")
        func relationship(_ name: String, _ destination: EntityDescription, toMany: Bool, ordered: Bool = false,
                          rule: DeleteRule = .nullify) -> RelationshipDescription {
            let rel = RelationshipDescription(name: name, destination: destination, toMany: toMany)
            rel.isOrdered = ordered
            rel.deleteRule = rule
            return rel
        }
        func pair(_ a: RelationshipDescription, _ b: RelationshipDescription) {
            a.inverseRelationship = b
            b.inverseRelationship = a
        }
        let items = relationship("items", item, toMany: true), itemFolder = relationship("folder", folder, toMany: false)
        pair(items, itemFolder)
        let queue = relationship("queue", item, toMany: true, ordered: true), queuedIn = relationship("queuedIn", folder, toMany: false)
        pair(queue, queuedIn)
        let tags = relationship("tags", tag, toMany: true), tagItems = relationship("items", item, toMany: true)
        pair(tags, tagItems)
        let itemDetail = relationship("detail", detail, toMany: false, rule: .cascade), detailItem = relationship("item", item, toMany: false)
        pair(itemDetail, detailItem)
        let plist = AttributeDescription(name: "plist", type: .transformable)
        plist.valueTransformerName = ValueTransformerRegistry.propertyListName
        let types: [(String, AttributeType)] = [("i16", .integer16), ("i32", .integer32), ("i64", .integer64), ("dec", .decimal),
                                                ("dbl", .double), ("flt", .float), ("str", .string), ("flag", .boolean), ("when", .date),
                                                ("blob", .binaryData), ("uid", .uuid), ("link", .uri)]
        item.properties = types.map { AttributeDescription(name: $0.0, type: $0.1) } + [plist, itemFolder, queuedIn, tags, itemDetail]
        folder.properties = [AttributeDescription(name: "name", type: .string), items, queue]
        tag.properties = [AttributeDescription(name: "name", type: .string), tagItems]
        detail.properties = [AttributeDescription(name: "note", type: .string), detailItem]
        let special = EntityDescription(name: "Special")
        special.properties = [AttributeDescription(name: "extra", type: .string)]
        item.subentities = [special]
        let model = ManagedObjectModel()
        model.entities = [detail, folder, item, special, tag]
        return model
    }

    /// Every attribute of `Item` set, with values whose text is easy to get
    /// wrong. Decimals within a double's precision and no NaN: the embedded
    /// hub's SQLite turns longer decimals into doubles and NaN into NULL.
    static func itemAttributes(_ n: Int) -> [String: SyncValue] {
        [
            "i16": .attribute(Int16(-12 - n)), "i32": .attribute(Int32(70_000 + n)), "i64": .attribute(Int64(1) << 40 + Int64(n)),
            "dec": .attribute(Decimal(string: "1234.125")! + Decimal(n)), "dbl": .attribute(0.1 + Double(n)),
            "flt": .attribute(Float(1) / 3 + Float(n)), "str": .attribute("it's \"quoted\" ünïcode \(n)"), "flag": .attribute(n % 2 == 0),
            "when": .attribute(Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_789 + Double(n))),
            "blob": .attribute(Data([0, 1, 2, 0xff, UInt8(n & 0xff)])), "uid": .attribute(UUID()),
            "link": .attribute(URL(string: "https://example.com/a%20b?n=\(n)")!), "plist": .attribute(["k": "v\(n)"]),
        ]
    }

    /// Every `Item` attribute nil.
    static let nilItemAttributes: [String: SyncValue] = Dictionary(uniqueKeysWithValues: [
        "i16", "i32", "i64", "dec", "dbl", "flt", "str", "flag", "when", "blob", "uid", "link", "plist",
    ].map { ($0, SyncValue.attribute(nil)) })

    /// A hub's object as comparable text (what the engine's verifier compares).
    static func describe(_ state: ObjectState?) -> [String: String]? {
        guard let state else { return nil }
        var fields = SyncGroup.describe(state.values)
        fields["entity"] = state.entityName
        return fields
    }

    /// A hub change as comparable text (positions differ between hubs).
    static func describe(_ change: HubChange) -> String {
        let kind = change.isInsert ? "insert" : change.isDelete ? "delete" : "update"
        let changed = change.changedProperties.map { "\($0.key)=\(ObjectState.canonical($0.value ?? nil))" }.sorted().joined(separator: ",")
        return "\(change.globalIdentifier) \(change.entityName) \(kind) origin=\(change.origin ?? "nil") [\(changed)]"
    }

    /// A fresh PostgreSQL hub on the test server (and its schema's name, to drop).
    static func hub(model: ManagedObjectModel = model(), group: String = TestPostgreSQL.uniqueGroupName(), host: String = "h1") throws -> PostgreSQLHub {
        try PostgreSQLHub(model: model, conninfo: try TestPostgreSQL.requireConninfo(), group: group, host: host)
    }

    static func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-pg-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
