import Foundation
import Testing
@testable import ObjectGraph

/// Layout features the Apple fixtures do not exercise (inheritance, to-ones
/// into a hierarchy, ordered to-many, to-many without inverse, ordered
/// many-to-many), written and read back through `SQLiteStore`. These follow
/// the rules in docs/SQLITE-LAYOUT.md marked unverified.
@Suite struct SQLiteStoreRelationshipTests {
    /// Attachment(1); Item(2) with sub-entities Folder(3), Note(4); Owner(5); Tag(6).
    static func makeModel() -> ManagedObjectModel {
        let model = ManagedObjectModel()
        let attachment = EntityDescription(name: "Attachment")
        let item = EntityDescription(name: "Item")
        let folder = EntityDescription(name: "Folder")
        let note = EntityDescription(name: "Note")
        let owner = EntityDescription(name: "Owner")
        let tag = EntityDescription(name: "Tag")

        let itemOwner = RelationshipDescription(name: "owner", destination: owner)
        let ownerItems = RelationshipDescription(name: "items", destination: item, toMany: true)
        ownerItems.isOrdered = true
        itemOwner.inverseRelationship = ownerItems
        ownerItems.inverseRelationship = itemOwner
        let favourite = RelationshipDescription(name: "favourite", destination: item)
        let ownerTags = RelationshipDescription(name: "tags", destination: tag, toMany: true)
        ownerTags.isOrdered = true
        let tagOwners = RelationshipDescription(name: "owners", destination: owner, toMany: true)
        ownerTags.inverseRelationship = tagOwners
        tagOwners.inverseRelationship = ownerTags
        let attachments = RelationshipDescription(name: "attachments", destination: attachment, toMany: true)

        attachment.properties = [AttributeDescription(name: "fileName", type: .string)]
        item.properties = [AttributeDescription(name: "title", type: .string), itemOwner]
        folder.properties = [AttributeDescription(name: "name", type: .string)]
        note.properties = [AttributeDescription(name: "body", type: .string)]
        owner.properties = [AttributeDescription(name: "name", type: .string), ownerItems, favourite, ownerTags, attachments]
        tag.properties = [AttributeDescription(name: "label", type: .string), tagOwners]
        item.subentities = [folder, note]
        model.entities = [attachment, item, folder, note, owner, tag]
        return model
    }

    @Test func layoutOfTheUnverifiedFeatures() throws {
        let schema = try SQLiteSchema(model: Self.makeModel(), configurationName: nil)
        #expect(schema.entityNames == ["Attachment", "Item", "Folder", "Note", "Owner", "Tag"])
        #expect(schema.table(named: "ZOWNER")?.columns.map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "Z5_FAVOURITE", "ZFAVOURITE", "ZNAME"])
        #expect(schema.table(named: "ZITEM")?.columns.map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "ZOWNER", "Z_FOK_OWNER", "ZBODY", "ZNAME", "ZTITLE"])
        #expect(schema.table(named: "ZATTACHMENT")?.columns.map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "Z5ATTACHMENTS", "ZFILENAME"])
        let join = try #require(schema.joinTables.first)
        #expect(SQLiteSchema.createTableSQL(join) == "CREATE TABLE Z_5TAGS ( Z_5OWNERS INTEGER, Z_6TAGS INTEGER, Z_FOK_6TAGS INTEGER, PRIMARY KEY (Z_5OWNERS, Z_6TAGS) )")
        #expect(schema.indexes.map(\.name).contains("ZITEM_Z_ENT_INDEX"))
        #expect(schema.indexes.map(\.name).contains("ZATTACHMENT_Z5ATTACHMENTS_INDEX"))
    }

    @Test func hierarchyOrderedAndHiddenRelationshipsRoundTrip() throws {
        let model = Self.makeModel()
        let e = model.entitiesByName
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Rel.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        let notes = try store.newObjectIDs(for: e["Note"]!, count: 2)
        let folder = try store.newObjectIDs(for: e["Folder"]!, count: 1)[0]
        // Sub-entities share the root table's key space.
        #expect(Set((notes + [folder]).compactMap(\.primaryKey)).count == 3)
        let owner = try store.newObjectIDs(for: e["Owner"]!, count: 1)[0]
        let tags = try store.newObjectIDs(for: e["Tag"]!, count: 2)
        let files = try store.newObjectIDs(for: e["Attachment"]!, count: 2)

        var request = StoreSaveRequest()
        request.inserted = [
            StoreSnapshot(objectID: notes[0], version: 1, values: ["title": "n0", "body": "b0", "owner": owner]),
            StoreSnapshot(objectID: notes[1], version: 1, values: ["title": "n1", "body": "b1", "owner": owner]),
            StoreSnapshot(objectID: folder, version: 1, values: ["title": "f", "name": "Inbox", "owner": owner]),
            StoreSnapshot(objectID: owner, version: 1, values: ["name": "o", "favourite": notes[1]]),
            StoreSnapshot(objectID: tags[0], version: 1, values: ["label": "t0"]),
            StoreSnapshot(objectID: tags[1], version: 1, values: ["label": "t1"]),
            StoreSnapshot(objectID: files[0], version: 1, values: ["fileName": "a"]),
            StoreSnapshot(objectID: files[1], version: 1, values: ["fileName": "b"]),
        ]
        let ownerEntity = e["Owner"]!
        request.toManyChanges = [
            ToManyChange(objectID: owner, relationship: ownerEntity.relationshipsByName["items"]!, destinations: [folder, notes[1], notes[0]]),
            ToManyChange(objectID: owner, relationship: ownerEntity.relationshipsByName["tags"]!, destinations: [tags[1], tags[0]]),
            ToManyChange(objectID: owner, relationship: ownerEntity.relationshipsByName["attachments"]!, destinations: [files[1], files[0]]),
        ]
        try store.save(request)
        store.close()

        let reopened = try SQLiteFixtures.openStore(url, model: model)
        defer { reopened.close() }
        let items = try reopened.fetchSnapshots(FetchRequest(entityName: "Item")).snapshots
        #expect(items.map(\.objectID.entity.name).sorted() == ["Folder", "Note", "Note"])
        let onlyItems = FetchRequest(entityName: "Item")
        onlyItems.includesSubentities = false
        #expect(try reopened.fetchSnapshots(onlyItems).snapshots.isEmpty)
        let fetchedNotes = try reopened.fetchSnapshots(FetchRequest(entityName: "Note")).snapshots
        #expect(fetchedNotes.map { $0.values["body"] as? String } == ["b0", "b1"])
        #expect(fetchedNotes.allSatisfy { $0.values["name"] == nil })
        let folderRow = try #require(try reopened.snapshots(for: [folder])[folder])
        #expect(folderRow.values["name"] as? String == "Inbox")
        #expect(folderRow.values["title"] as? String == "f")

        // The to-one into the hierarchy remembers the destination's entity.
        let ownerRow = try #require(try reopened.snapshots(for: [owner])[owner])
        let favourite = try #require(ownerRow.values["favourite"] as? ManagedObjectID)
        #expect(favourite == notes[1])
        #expect(favourite.entity.name == "Note")
        #expect(try RawSQLite.query(url.path, "SELECT Z5_FAVOURITE FROM ZOWNER").first?.first == .integer(4))

        // Ordered, many-to-many ordered, and inverse-less to-many come back in order.
        #expect(try reopened.relatedObjectIDs(for: ownerEntity.relationshipsByName["items"]!, of: owner) == [folder, notes[1], notes[0]])
        #expect(try reopened.relatedObjectIDs(for: ownerEntity.relationshipsByName["tags"]!, of: owner) == [tags[1], tags[0]])
        #expect(try reopened.relatedObjectIDs(for: e["Tag"]!.relationshipsByName["owners"]!, of: tags[0]) == [owner])
        #expect(Set(try reopened.relatedObjectIDs(for: ownerEntity.relationshipsByName["attachments"]!, of: owner)) == Set(files))
        #expect(try reopened.relatedObjectIDs(for: e["Item"]!.relationshipsByName["owner"]!, of: notes[0]) == [owner])
        #expect(try RawSQLite.query(url.path, "SELECT Z_PK FROM ZITEM ORDER BY Z_FOK_OWNER").map { $0[0].int } == [folder, notes[1], notes[0]].map(\.primaryKey))
    }

    @Test func deletingAnObjectRemovesItsJoinRows() throws {
        let model = Self.makeModel()
        let e = model.entitiesByName
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Del.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        defer { store.close() }
        let owner = try store.newObjectIDs(for: e["Owner"]!, count: 1)[0]
        let tag = try store.newObjectIDs(for: e["Tag"]!, count: 1)[0]
        var request = StoreSaveRequest()
        request.inserted = [StoreSnapshot(objectID: owner, version: 1, values: [:]), StoreSnapshot(objectID: tag, version: 1, values: [:])]
        request.toManyChanges = [ToManyChange(objectID: owner, relationship: e["Owner"]!.relationshipsByName["tags"]!, destinations: [tag])]
        try store.save(request)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM Z_5TAGS").first?.first == .integer(1))
        var delete = StoreSaveRequest()
        delete.deleted = [(tag, 1)]
        try store.save(delete)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM Z_5TAGS").first?.first == .integer(0))
        #expect(try store.relatedObjectIDs(for: e["Owner"]!.relationshipsByName["tags"]!, of: owner) == [])
    }

    @Test func configurationStoresOnlyItsEntities() throws {
        let model = Self.makeModel()
        model.setEntities([model.entitiesByName["Tag"]!, model.entitiesByName["Attachment"]!], forConfiguration: "Small")
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Small.sqlite")
        let store = SQLiteStore(model: model, configurationName: "Small", url: url, options: [:])
        try store.load()
        store.close()
        let tables = try RawSQLite.query(url.path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").map { $0[0].text! }
        #expect(tables == ["ZATTACHMENT", "ZTAG", "Z_METADATA", "Z_MODELCACHE", "Z_PRIMARYKEY"])
        #expect(try RawSQLite.query(url.path, "SELECT Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT").map { $0[0].text! } == ["Attachment", "Tag"])
        let metadata = try SQLiteStore.metadataForStore(at: url)
        #expect((metadata["NSStoreModelVersionHashes"] as? [String: Data]).map { Set($0.keys) } == ["Attachment", "Tag"])
        let again = SQLiteStore(model: model, configurationName: "Small", url: url, options: [:])
        try again.load()
        again.close()
    }

    /// PC-34: a writer blocked past NSPersistentStoreTimeoutOption fails with 134090 (SQLITE_BUSY underneath).
    @Test func saveBlockedPastTheTimeoutIsATimeoutError() throws {
        let model = Self.makeModel()
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Busy.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model, options: [PersistentStore.timeoutOption: 0.3])
        defer { store.close() }
        let holder = try SQLiteConnection(path: url.path, mode: .readWrite)
        try holder.execute("BEGIN IMMEDIATE")
        defer { try? holder.execute("ROLLBACK") }
        let start = Date()
        do {
            _ = try store.newObjectIDs(for: model.entitiesByName["Tag"]!, count: 1)
            Issue.record("expected a timeout")
        } catch let error as CoreDataError {
            #expect(error.code == .persistentStoreTimeout)
            #expect(error.sqliteResultCode == 5)
            #expect(Date().timeIntervalSince(start) >= 0.25)
        }
    }
}
