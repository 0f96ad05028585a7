import Foundation
import Testing
@testable import ObjectGraph

/// Inferred migrations of SQLite stores (MM-02, PC-39): schema-only changes
/// run in place with SQL in one transaction and keep every primary key; a
/// change of how a relationship is stored is migrated by copying. Values are
/// read back with SQLite's C API and through a coordinator with the new model.
@Suite struct SQLiteInPlaceMigrationTests {
    static func person(_ model: ManagedObjectModel) -> EntityDescription { model.entitiesByName["Person"]! }

    static func rows(_ url: URL, _ sql: String) throws -> [String] {
        try RawSQLite.query(url.path, sql).map { $0.map(\.description).joined(separator: "|") }
    }

    /// PC-39 (a), MM-02 (a): an added optional attribute is one `ALTER TABLE
    /// … ADD COLUMN`; every row keeps its key and values, the new column is
    /// nil, the store keeps its UUID and records the new model's hashes.
    @Test func addedOptionalAttributeIsOneAlterTable() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let before = try Self.rows(url, "SELECT Z_PK, Z_ENT, Z_OPT, ZNAME, ZAGE, ZNICKNAME, ZDEPARTMENT FROM ZPERSON ORDER BY Z_PK")
        let uuid = try RawSQLite.query(url.path, "SELECT Z_UUID FROM Z_METADATA")
        let v2 = SmallModel.make()
        Self.person(v2).properties += [AttributeDescription(name: "email", type: .string)]

        let preview = try SmallModel.migrate(url, from: v1, to: v2)
        #expect(preview.inPlace)
        #expect(preview.statements.contains("ALTER TABLE ZPERSON ADD COLUMN ZEMAIL VARCHAR"))
        #expect(!preview.statements.contains { $0.contains("_OG_MIGRATING_") })
        #expect(preview.changes == ["Person: add column ZEMAIL VARCHAR".replacingOccurrences(of: "Person", with: "ZPERSON")])
        #expect(try Self.rows(url, "SELECT Z_PK, Z_ENT, Z_OPT, ZNAME, ZAGE, ZNICKNAME, ZDEPARTMENT FROM ZPERSON ORDER BY Z_PK") == before)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM ZPERSON WHERE ZEMAIL IS NOT NULL").first?.first?.int == 0)
        #expect(try RawSQLite.query(url.path, "SELECT Z_UUID FROM Z_METADATA") == uuid)
        let metadata = try SQLiteStore.metadataForStore(at: url)
        #expect(v2.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        #expect(!v1.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        #expect(try SQLiteStore.cachedModel(forStoreAt: url)?.entityVersionHashesByName == v2.entityVersionHashesByName)
        let people = try SmallModel.read(url, v2, "Person", keys: ["name", "email", "department.title"])
        #expect(people.count == 30)
        #expect(people.allSatisfy { $0["email"] == "nil" && $0["department.title"] != "nil" })
    }

    /// PD-20 (b), MM-02 (b): a property renamed through its renaming
    /// identifier keeps its data, as `ALTER TABLE … RENAME COLUMN`.
    @Test func renamedAttributeKeepsItsValues() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let before = try Self.rows(url, "SELECT Z_PK, ZNICKNAME FROM ZPERSON ORDER BY Z_PK")
        let v2 = SmallModel.make()
        let alias = try #require(Self.person(v2).attributesByName["nickname"])
        alias.name = "alias"
        alias.renamingIdentifier = "nickname"

        let mapping = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
        let people = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Person" })
        #expect(people.attributeMappings.first { $0.name == "alias" }?.valueExpression?.expressionFormat == "$source.nickname")
        let preview = try SmallModel.migrate(url, from: v1, to: v2, mapping: mapping)
        #expect(preview.inPlace)
        #expect(preview.statements.contains("ALTER TABLE ZPERSON RENAME COLUMN ZNICKNAME TO ZALIAS"))
        #expect(try Self.rows(url, "SELECT Z_PK, ZALIAS FROM ZPERSON ORDER BY Z_PK") == before)
    }

    /// MM-02: an optional attribute made required with a default, and a new
    /// required attribute with a default: old rows get the default where
    /// they had nil, in place.
    @Test func requiredAttributesWithDefaultsFillOldRows() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let v2 = SmallModel.make()
        let nickname = try #require(Self.person(v2).attributesByName["nickname"])
        nickname.isOptional = false
        nickname.defaultValue = "none"
        let level = AttributeDescription(name: "level", type: .integer32)
        level.isOptional = false
        level.defaultValue = Int32(1)
        Self.person(v2).properties += [level]

        let preview = try SmallModel.migrate(url, from: v1, to: v2)
        #expect(preview.inPlace)
        let rows = try RawSQLite.query(url.path, "SELECT ZNAME, ZNICKNAME, ZLEVEL FROM ZPERSON ORDER BY Z_PK")
        #expect(rows.count == 30)
        for (i, row) in rows.enumerated() {
            #expect(row[1].text == (i % 4 == 0 ? "none" : "nick\(i)"))
            #expect(row[2].int == 1)
        }
        let read = try SmallModel.read(url, v2, "Person", keys: ["name", "nickname", "level"])
        #expect(read.filter { $0["nickname"] == "none" }.count == 8)
    }

    /// MM-02: an attribute removed and another widened (Integer 16 → 64):
    /// the table is rebuilt, values carried over, the old column gone.
    @Test func removedAndWidenedAttributesRebuildTheTable() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let before = try Self.rows(url, "SELECT Z_PK, ZNAME, ZAGE, ZDEPARTMENT FROM ZPERSON ORDER BY Z_PK")
        let v2 = SmallModel.make()
        Self.person(v2).properties = Self.person(v2).properties.filter { $0.name != "nickname" }
        Self.person(v2).attributesByName["age"]!.attributeType = .integer64

        let preview = try SmallModel.migrate(url, from: v1, to: v2)
        #expect(preview.inPlace)
        #expect(preview.changes.contains { $0.hasPrefix("rebuild table ZPERSON from ZPERSON, dropping ZNICKNAME") })
        #expect(try Self.rows(url, "SELECT Z_PK, ZNAME, ZAGE, ZDEPARTMENT FROM ZPERSON ORDER BY Z_PK") == before)
        #expect(try RawSQLite.tableColumns(url.path)["ZPERSON"]?.contains { $0.hasPrefix("ZNICKNAME") } == false)
        let read = try SmallModel.read(url, v2, "Person", keys: ["name", "age"])
        #expect(read.first { $0["name"] == "person 7" }?["age"] == "27")
    }

    /// MM-02 (d), EM-12c/d: an entity removed (its table dropped), one added
    /// (a new table), one renamed through its renaming identifier (a table
    /// renamed, not removed and added): entities are renumbered as a new
    /// store numbers them, keys and relationships (to-one and many-to-many)
    /// survive, the key counters are carried over.
    @Test func entitiesAddedRemovedAndRenamed() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let peopleBefore = try Self.rows(url, "SELECT p.Z_PK, p.ZNAME, d.ZTITLE FROM ZPERSON p JOIN ZDEPARTMENT d ON d.Z_PK = p.ZDEPARTMENT ORDER BY p.Z_PK")
        let tagsBefore = try Self.rows(url, "SELECT p.ZNAME, t.ZLABEL FROM Z_3TAGS j JOIN ZPERSON p ON p.Z_PK = j.Z_3PEOPLE JOIN ZTAG t ON t.Z_PK = j.Z_4TAGS ORDER BY 1, 2")
        #expect(tagsBefore.count == 10)
        let maxBefore = try RawSQLite.query(url.path, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Person'").first?.first?.int

        let v2 = SmallModel.make()
        let team = try #require(v2.entitiesByName["Department"])
        team.name = "Team"
        team.renamingIdentifier = "Department"
        let project = EntityDescription(name: "Project")
        project.properties = [AttributeDescription(name: "code", type: .string)]
        v2.entities = v2.entities.filter { $0.name != "Note" } + [project]

        let mapping = try MappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
        #expect(mapping.entityMappings.map { "\($0.mappingType) \($0.sourceEntityName ?? "-")->\($0.destinationEntityName ?? "-")" }.sorted()
                == ["add -->Project", "copy Tag->Tag", "remove Note->-", "transform Department->Team", "transform Person->Person"])
        let preview = try SmallModel.migrate(url, from: v1, to: v2, mapping: mapping)
        #expect(preview.inPlace)
        #expect(preview.changes.contains("drop table ZNOTE (removed entity Note)"))
        #expect(preview.changes.contains { $0.hasPrefix("rebuild table ZTEAM from ZDEPARTMENT") })
        let tables = Set(try RawSQLite.query(url.path, "SELECT name FROM sqlite_master WHERE type = 'table'").map { $0[0].text! })
        #expect(tables.isSuperset(of: ["ZPERSON", "ZTEAM", "ZPROJECT", "ZTAG", "Z_1TAGS"]))
        #expect(tables.isDisjoint(with: ["ZNOTE", "ZDEPARTMENT", "Z_3TAGS"]))
        #expect(try Self.rows(url, "SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT") == ["i1|t\"Person\"", "i2|t\"Project\"", "i3|t\"Tag\"", "i4|t\"Team\""])
        #expect(try RawSQLite.query(url.path, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Person'").first?.first?.int == maxBefore)
        #expect(try Self.rows(url, "SELECT p.Z_PK, p.ZNAME, d.ZTITLE FROM ZPERSON p JOIN ZTEAM d ON d.Z_PK = p.ZDEPARTMENT ORDER BY p.Z_PK") == peopleBefore)
        #expect(try Self.rows(url, "SELECT DISTINCT Z_ENT FROM ZPERSON") == ["i1"])
        #expect(try Self.rows(url, "SELECT p.ZNAME, t.ZLABEL FROM Z_1TAGS j JOIN ZPERSON p ON p.Z_PK = j.Z_1PEOPLE JOIN ZTAG t ON t.Z_PK = j.Z_3TAGS ORDER BY 1, 2") == tagsBefore)
        let read = try SmallModel.read(url, v2, "Person", keys: ["name", "department.title", "tags.label"])
        #expect(read.filter { $0["department.title"] == "Sales" }.count == 15)
        #expect(read.filter { $0["tags.label"] != "" }.count == 10)
    }

    /// MM-02: a to-one made to-many is inferred; its storage changes (a
    /// foreign key becomes a join table), so the store is migrated by
    /// copying; every person keeps its department.
    @Test func toOneMadeToManyIsMigratedByCopying() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let v2 = SmallModel.make()
        Self.person(v2).relationshipsByName["department"]!.maxCount = 0

        let preview = try SmallModel.migrate(url, from: v1, to: v2)
        #expect(!preview.inPlace)
        #expect(preview.changes.first?.contains("storage changes") == true)
        let read = try SmallModel.read(url, v2, "Person", keys: ["name", "department.title", "tags.label"])
        #expect(read.count == 30)
        for row in read {
            let i = Int(row["name"]!.split(separator: " ")[1])!
            #expect(row["department.title"] == (i % 2 == 0 ? "Sales" : "Research"))
            #expect(row["tags.label"] == (i % 3 == 0 ? (i % 2 == 0 ? "red" : "green") : ""))
        }
        #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
    }

    /// MM-02: an inheritance change Core Data infers: Person becomes a
    /// sub-entity of a new abstract Party and its `name` moves up into it.
    /// Person's rows move, in place, to Party's table, renumbered.
    @Test func attributeMovedUpIntoANewParent() throws {
        let v1 = SmallModel.make()
        let url = try SmallModel.store(v1)
        let before = try Self.rows(url, "SELECT Z_PK, ZNAME, ZAGE FROM ZPERSON ORDER BY Z_PK")
        let v2 = SmallModel.make()
        let party = EntityDescription(name: "Party")
        party.isAbstract = true
        party.properties = [AttributeDescription(name: "name", type: .string)]
        let person = Self.person(v2)
        person.properties = person.properties.filter { $0.name != "name" }
        party.subentities = [person]
        v2.entities += [party]

        let preview = try SmallModel.migrate(url, from: v1, to: v2)
        #expect(preview.inPlace)
        #expect(try Self.rows(url, "SELECT Z_PK, ZNAME, ZAGE FROM ZPARTY ORDER BY Z_PK") == before)
        let personNumber = try RawSQLite.query(url.path, "SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Person'").first?.first?.int
        #expect(try Self.rows(url, "SELECT DISTINCT Z_ENT FROM ZPARTY") == ["i\(personNumber!)"])
        let read = try SmallModel.read(url, v2, "Person", keys: ["name", "age", "department.title"])
        #expect(read.count == 30)
        #expect(read.first { $0["name"] == "person 3" }?["department.title"] == "Research")
    }

    /// Values stored outside the database (`allowsExternalBinaryDataStorage`)
    /// survive a migration by copying: the copy's files move beside the
    /// store, the old ones go once the new rows are in.
    @Test func externalBinaryValuesSurviveACopyingMigration() throws {
        func model(toMany: Bool) -> ManagedObjectModel {
            let m = SmallModel.make()
            let photo = AttributeDescription(name: "photo", type: .binaryData)
            photo.allowsExternalBinaryDataStorage = true
            m.entitiesByName["Person"]!.properties += [photo]
            if toMany { m.entitiesByName["Person"]!.relationshipsByName["department"]!.maxCount = 0 }
            return m
        }
        let v1 = model(toMany: false)
        let url = try SmallModel.store(v1, people: 2)
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: v1)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let big = Data((0..<300_000).map { UInt8($0 % 251) })
        try context.performAndWait {
            for person in try context.fetch(FetchRequest(entityName: "Person")) { try person.setValue(big, forKey: "photo") }
            try context.save()
        }
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        let folder = url.deletingLastPathComponent().appendingPathComponent(".Small_SUPPORT/_EXTERNAL_DATA")
        let before = Set(try FileManager.default.contentsOfDirectory(atPath: folder.path))
        #expect(before.count == 2)

        let preview = try SmallModel.migrate(url, from: model(toMany: false), to: model(toMany: true))
        #expect(!preview.inPlace)
        let after = Set(try FileManager.default.contentsOfDirectory(atPath: folder.path))
        #expect(after.count == 2)
        #expect(after.isDisjoint(with: before))
        let reader = try PersistentStoreCoordinator(managedObjectModel: model(toMany: true))
        try reader.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let readContext = ManagedObjectContext(coordinator: reader)
        try readContext.performAndWait {
            let photos = try readContext.fetch(FetchRequest(entityName: "Person")).map { try $0.value(forKey: "photo") as? Data }
            #expect(photos == [big, big])
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path).filter { $0.contains("migrating") }
        #expect(leftovers.isEmpty)
    }

    /// In place, the other relationship storages: a to-many made ordered
    /// (its inverse's table gains `Z_FOK_LIST`, positions numbered in key
    /// order) and a to-many without inverse (the hidden owner column on the
    /// destination's table is kept).
    @Test func orderedAndInverselessRelationshipsInPlace() throws {
        func model(ordered: Bool) -> ManagedObjectModel {
            let list = EntityDescription(name: "List"), item = EntityDescription(name: "Item"), folder = EntityDescription(name: "Folder")
            let items = RelationshipDescription(name: "items", destination: item, toMany: true)
            items.isOrdered = ordered
            let owner = RelationshipDescription(name: "list", destination: list)
            items.inverseRelationship = owner
            owner.inverseRelationship = items
            let files = RelationshipDescription(name: "files", destination: item, toMany: true)
            list.properties = [AttributeDescription(name: "title", type: .string), items]
            item.properties = [AttributeDescription(name: "name", type: .string), owner]
            folder.properties = [AttributeDescription(name: "name", type: .string), files]
            let m = ManagedObjectModel()
            m.entities = [folder, item, list]
            return m
        }
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Lists.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model(ordered: false))
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let lists = try (0..<2).map { i -> ManagedObject in
                let l = try context.insertNewObject(forEntityName: "List")
                try l.setValue("list \(i)", forKey: "title")
                return l
            }
            let folder = try context.insertNewObject(forEntityName: "Folder")
            try folder.setValue("docs", forKey: "name")
            var files: [ManagedObject] = []
            for i in 0..<6 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue("item \(i)", forKey: "name")
                try item.setValue(lists[i % 2], forKey: "list")
                if i < 3 { files.append(item) }
            }
            try folder.setValue(Set(files), forKey: "files")
            try context.save()
        }
        for store in coordinator.persistentStores { try coordinator.remove(store) }

        let preview = try SmallModel.migrate(url, from: model(ordered: false), to: model(ordered: true))
        #expect(preview.inPlace)
        #expect(try Self.rows(url, "SELECT ZNAME, Z_FOK_LIST FROM ZITEM ORDER BY Z_PK")
                == ["t\"item 0\"|i1", "t\"item 1\"|i1", "t\"item 2\"|i2", "t\"item 3\"|i2", "t\"item 4\"|i3", "t\"item 5\"|i3"])
        let reader = try PersistentStoreCoordinator(managedObjectModel: model(ordered: true))
        try reader.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let readContext = ManagedObjectContext(coordinator: reader)
        try readContext.performAndWait {
            let lists = try readContext.fetch(FetchRequest(entityName: "List")).sorted { (try $0.value(forKey: "title") as! String) < (try $1.value(forKey: "title") as! String) }
            let first = try #require(lists.first?.value(forKey: "items") as? [ManagedObject])
            #expect(try first.map { try $0.value(forKey: "name") as? String } == ["item 0", "item 2", "item 4"])
            let folder = try #require(readContext.fetch(FetchRequest(entityName: "Folder")).first)
            let files = try #require(folder.value(forKey: "files") as? Set<ManagedObject>)
            #expect(try files.map { try $0.value(forKey: "name") as! String }.sorted() == ["item 0", "item 1", "item 2"])
        }
    }
}
