import Foundation
import Testing
@testable import ObjectGraph

/// A store's own model (cached or derived from its schema) and choosing the
/// version of a bundle a store was written with, on Apple-written stores.
@Suite struct SQLiteStoreModelTests {
    /// A copy of a fixture with its Z_MODELCACHE row deleted, as an old tool would have left it.
    static func copyWithoutModelCache(_ fixture: String) throws -> URL {
        let url = try SQLiteFixtures.copy(fixture)
        _ = try RawSQLite.query(url.path, "DELETE FROM Z_MODELCACHE", readWrite: true)
        #expect(try RawSQLite.query(url.path, "SELECT count(*) FROM Z_MODELCACHE")[0][0].int == 0)
        return url
    }

    static let expectedVersions: [String: String] = [
        "XCServerCoreData_1.2.0.sqlite": "XCServerCoreData1.2.0.xcdatamodel",
        "XCServerCoreData_1.2.0_empty.sqlite": "XCServerCoreData1.2.0.xcdatamodel",
        "XCServerCoreData_2.0.0_empty.sqlite": "XCServerCoreData2.0.0.xcdatamodel",
        "XCServerCoreData_2.0.1.sqlite": "XCServerCoreData2.0.1.xcdatamodel",
    ]

    @Test(arguments: SQLiteFixtures.all)
    func storeModelIsTheCachedOneWhenThereIsACache(fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteStore.storeModel(forStoreAt: url)
        #expect(!model.isDerivedFromStoreSchema)
        let source = try SQLiteFixtures.model(for: fixture)
        #expect(model.entityVersionHashesByName == source.entityVersionHashesByName)
    }

    @Test(arguments: SQLiteFixtures.all)
    func derivedModelMapsBackOntoTheStoreAndReadsEveryRow(fixture: String) throws {
        let url = try Self.copyWithoutModelCache(fixture)
        #expect(try SQLiteStore.cachedModel(forStoreAt: url) == nil)
        let model = try SQLiteStore.storeModel(forStoreAt: url)
        #expect(model.isDerivedFromStoreSchema)
        let source = try SQLiteFixtures.model(for: fixture)
        // Entity names are exact; property names are the lowercased ones; every stored property has a column.
        #expect(Set(model.entities.map(\.name)) == Set(source.entities.map(\.name)))
        for entity in source.entities {
            let derived = try #require(model.entitiesByName[entity.name])
            #expect(derived.userInfo[SQLiteSchemaModelDeriver.UserInfoKey.derivedFrom] == url.path)
            let stored = entity.properties.filter { !$0.isTransient && !(($0 as? RelationshipDescription).map { $0.isToMany && !($0.inverseRelationship?.isToMany ?? false) } ?? false) }
            #expect(Set(stored.map { $0.name.lowercased() }).isSubset(of: Set(derived.propertiesByName.keys)), "\(entity.name)")
        }
        // Types as close as the declared SQL types allow; to-ones with their destination, or kept as their key.
        var resolved = 0, unresolved: [String] = []
        for entity in source.entities {
            let derived = model.entitiesByName[entity.name]!
            for case let attribute as AttributeDescription in entity.directProperties where !attribute.isTransient {
                let sqlType = try #require(SQLiteSchema.sqlType(for: attribute.attributeType))
                #expect(derived.attributesByName[attribute.name.lowercased()]?.attributeType == SQLiteSchemaModelDeriver.typeGuesses[sqlType]?.0,
                        "\(entity.name).\(attribute.name)")
            }
            for case let rel as RelationshipDescription in entity.directProperties where !rel.isToMany {
                if let derivedRel = derived.relationshipsByName[rel.name.lowercased()] {
                    #expect(derivedRel.destinationEntity?.name == rel.destinationEntity?.name, "\(entity.name).\(rel.name)")
                    resolved += 1
                } else {
                    #expect(derived.attributesByName[rel.name.lowercased()]?.attributeType == .integer64)
                    unresolved.append("\(entity.name).\(rel.name)")
                }
            }
        }
        // Most destinations are found from names alone; the rest are named in the model.
        #expect(resolved > 3 * unresolved.count, "unresolved: \(unresolved)")
        let integration = try #require(model.entitiesByName["Integration"])
        #expect(integration.attributesByName["number"]?.attributeType == .integer64)
        #expect(integration.attributesByName["number"]?.userInfo[SQLiteSchemaModelDeriver.UserInfoKey.unknown]?.contains("Boolean") == true)
        #expect(model.entitiesByName["StatsBreakdown"]?.attributesByName["avg"]?.attributeType == .double)
        // To-ones by name; many-to-many from the join table, with their inverse.
        #expect(integration.relationshipsByName["bot"]?.destinationEntity?.name == "Bot")
        #expect(integration.relationshipsByName["bot"]?.isToMany == false)
        let tested = try #require(integration.relationshipsByName["testeddevices"])
        #expect(tested.isToMany && tested.destinationEntity?.name == "Device" && tested.inverseRelationship?.name == "integrations")
        #expect(model.entitiesByName["Configuration"]?.relationshipsByName["repositories"]?.inverseRelationship?.name == "configurations")
        // A to-one named after no entity, paired by the "inverse" naming with StatsBreakdown.zinverseerrors.
        #expect(model.entitiesByName["Stats"]?.relationshipsByName["errors"]?.destinationEntity?.name == "StatsBreakdown")

        // It opens the store (its hashes are not the store's) and reads what SQLite holds.
        let store = try SQLiteFixtures.openStore(url, model: model, options: [PersistentStore.readOnlyOption: true,
                                                                               PersistentStore.ignoreVersioningOption: true])
        defer { store.close() }
        for entity in model.entities {
            let rows = try store.finishedSnapshots(FetchRequest(entityName: entity.name))
            let expected = try RawSQLite.query(url.path, "SELECT Z_PK FROM Z\(entity.name.uppercased()) ORDER BY Z_PK").map { $0[0].int! }
            #expect(rows.compactMap(\.objectID.primaryKey).sorted() == expected, "\(entity.name)")
        }
    }

    @Test func derivedModelQueriesWithPredicatesThroughToOnes() throws {
        let url = try Self.copyWithoutModelCache("XCServerCoreData_2.0.1.sqlite")
        let model = try SQLiteStore.derivedModel(forStoreAt: url)
        let store = try SQLiteFixtures.openStore(url, model: model, options: [PersistentStore.readOnlyOption: true,
                                                                               PersistentStore.ignoreVersioningOption: true])
        defer { store.close() }
        let request = FetchRequest(entityName: "Integration")
        request.predicate = try FetchPredicate(format: "bot.name == 'Pocket Bot iOS' AND number > 30 AND endedtime != nil")
        let keys = try store.finishedSnapshots(request).compactMap(\.objectID.primaryKey).sorted()
        let expected = try RawSQLite.query(url.path, """
            SELECT i.Z_PK FROM ZINTEGRATION i JOIN ZBOT b ON b.Z_PK = i.ZBOT
            WHERE b.ZNAME = 'Pocket Bot iOS' AND i.ZNUMBER > 30 AND i.ZENDEDTIME IS NOT NULL ORDER BY i.Z_PK
            """).map { $0[0].int! }
        #expect(!expected.isEmpty)
        #expect(keys == expected)
        // A many-to-many read through the derived join table.
        let integration = try #require(model.entitiesByName["Integration"]?.relationshipsByName["testeddevices"])
        let owner = try RawSQLite.query(url.path, "SELECT Z_13INTEGRATIONS, count(*) FROM Z_9INTEGRATIONS GROUP BY 1 ORDER BY 2 DESC LIMIT 1")[0]
        let first = try #require(try store.finishedSnapshots(FetchRequest(entityName: "Integration")).first { $0.objectID.primaryKey == owner[0].int! })
        #expect(Int64(try store.relatedObjectIDs(for: integration, of: first.objectID).count) == owner[1].int!)
    }

    @Test func derivedModelOfAStoreObjectGraphWroteWithInheritance() throws {
        // A hierarchy, a to-one into it, a to-many without inverse and an ordered many-to-many.
        let item = EntityDescription(name: "Item")
        let book = EntityDescription(name: "Book")
        let film = EntityDescription(name: "Film")
        let shelf = EntityDescription(name: "Shelf")
        let tag = EntityDescription(name: "Tag")
        item.subentities = [book, film]
        let title = AttributeDescription(name: "title", type: .string)
        let pages = AttributeDescription(name: "pages", type: .integer32)
        let minutes = AttributeDescription(name: "minutes", type: .double)
        let favourite = RelationshipDescription(name: "favourite", destination: item)
        let items = RelationshipDescription(name: "items", destination: item, toMany: true)
        items.maxCount = 0
        let tags = RelationshipDescription(name: "tags", destination: tag, toMany: true)
        let shelves = RelationshipDescription(name: "shelves", destination: shelf, toMany: true)
        tags.maxCount = 0; shelves.maxCount = 0
        tags.isOrdered = true
        tags.inverseRelationship = shelves; shelves.inverseRelationship = tags
        item.properties = [title]
        book.properties = [pages]
        film.properties = [minutes]
        shelf.properties = [AttributeDescription(name: "label", type: .string), favourite, items, tags]
        tag.properties = [AttributeDescription(name: "name", type: .string), shelves]
        let model = ManagedObjectModel()
        model.entities = [item, book, film, shelf, tag]
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Shelves.sqlite")
        let writer = SQLiteStore(model: model, configurationName: nil, url: url, options: [:])
        try writer.load()
        writer.close()
        _ = try RawSQLite.query(url.path, """
            INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZTITLE, ZPAGES) VALUES (1, 2, 1, 'Dune', 412);
            """, readWrite: true)
        _ = try RawSQLite.query(url.path, "INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZTITLE, ZMINUTES) VALUES (2, 3, 1, 'Alien', 117.5)", readWrite: true)
        _ = try RawSQLite.query(url.path, "INSERT INTO ZSHELF (Z_PK, Z_ENT, Z_OPT, ZLABEL, Z4_FAVOURITE, ZFAVOURITE) VALUES (1, 4, 1, 'top', 2, 1)", readWrite: true)

        let derived = try SQLiteStore.derivedModel(forStoreAt: url)
        #expect(derived.entitiesByName["Book"]?.superentity?.name == "Item")
        #expect(derived.entitiesByName["Item"]?.subentities.map(\.name).sorted() == ["Book", "Film"])
        // Columns of a shared table go to the entity whose rows hold them.
        #expect(derived.entitiesByName["Book"]?.directProperties.map(\.name) == ["pages"])
        #expect(derived.entitiesByName["Film"]?.directProperties.map(\.name) == ["minutes"])
        #expect(derived.entitiesByName["Item"]?.directProperties.map(\.name) == ["title"])
        let shelfEntity = try #require(derived.entitiesByName["Shelf"])
        #expect(shelfEntity.relationshipsByName["favourite"]?.destinationEntity?.name == "Item")
        #expect(shelfEntity.relationshipsByName["items"]?.isToMany == true)
        #expect(shelfEntity.relationshipsByName["items"]?.inverseRelationship == nil)
        #expect(shelfEntity.relationshipsByName["tags"]?.isOrdered == true)
        #expect(shelfEntity.relationshipsByName["tags"]?.inverseRelationship?.name == "shelves")
        #expect(derived.entitiesByName["Tag"]?.relationshipsByName["shelves"]?.isOrdered == false)
        #expect(derived.entitiesByName["Book"]?.attributesByName["pages"]?.attributeType == .integer64)
        #expect(derived.entitiesByName["Film"]?.attributesByName["minutes"]?.attributeType == .double)
    }

    @Test(arguments: SQLiteFixtures.all)
    func versionMatchingPicksTheStoresVersion(fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let match = try ManagedObjectModel.version(matchingStoreAt: url, inBundle: TestPaths.xcServerBundle)
        #expect(match.versionName == Self.expectedVersions[fixture])
        #expect(match.evidence == .schemaAndModelCache)
        #expect(match.model.entityVersionHashesByName == (try SQLiteFixtures.model(for: fixture)).entityVersionHashesByName)
        // The chosen version opens the store.
        let store = try SQLiteFixtures.openStore(url, model: match.model, options: [PersistentStore.readOnlyOption: true])
        store.close()
    }

    @Test(arguments: SQLiteFixtures.all)
    func versionMatchingWithoutACacheGoesBySchema(fixture: String) throws {
        let url = try Self.copyWithoutModelCache(fixture)
        let match = try ManagedObjectModel.version(matchingStoreAt: url, inBundle: TestPaths.xcServerBundle)
        #expect(match.evidence == .schema)
        // The expected version is the choice or one with the same schema.
        #expect(([match.versionName] + match.alternatives).contains(Self.expectedVersions[fixture]!), "\(match.versionName) \(match.alternatives)")
    }

    @Test func versionMatchingByHashesForAStoreObjectGraphWrote() throws {
        let bundle = try XcodeModelBundle(url: TestPaths.xcServerBundle)
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Ours.sqlite")
        let store = SQLiteStore(model: try bundle.model(named: "XCServerCoreData2.0.1.xcdatamodel"), configurationName: nil, url: url, options: [:])
        try store.load()
        store.close()
        let match = try ManagedObjectModel.version(matchingStoreAt: url, inBundle: TestPaths.xcServerBundle)
        #expect(match.evidence == .versionHashes)
        #expect(match.versionName == "XCServerCoreData2.0.1.xcdatamodel")
    }

    @Test func versionMatchingRefusesAStoreNoVersionFits() throws {
        // A bundle holding only versions other than the store's.
        let dir = try TestPaths.temporaryDirectory()
        let bundle = dir.appendingPathComponent("Other.xcdatamodeld")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        for version in ["XCServerCoreData1.1.0.xcdatamodel", "XCServerCoreData2.0.3.xcdatamodel"] {
            try FileManager.default.copyItem(at: TestPaths.xcServerBundle.appendingPathComponent(version), to: bundle.appendingPathComponent(version))
        }
        let url = try SQLiteFixtures.copy("XCServerCoreData_2.0.1.sqlite")
        do {
            _ = try ManagedObjectModel.version(matchingStoreAt: url, inBundle: bundle)
            Issue.record("expected 134100")
        } catch let error as CoreDataError {
            #expect(error.code == .persistentStoreIncompatibleVersionHash)
            #expect(error.message.contains(url.path))
            #expect(error.message.contains("XCServerCoreData1.1.0.xcdatamodel: "))
            #expect(error.message.contains("XCServerCoreData2.0.3.xcdatamodel: "))
            #expect(error.message.contains("column") || error.message.contains("table"))
        }
        // An ObjectGraph store: the entities whose hashes differ are named.
        let ours = dir.appendingPathComponent("Ours.sqlite")
        let writer = SQLiteStore(model: try XcodeModelBundle(url: TestPaths.xcServerBundle).model(named: "XCServerCoreData2.0.1.xcdatamodel"),
                                 configurationName: nil, url: ours, options: [:])
        try writer.load()
        writer.close()
        #expect {
            _ = try ManagedObjectModel.version(matchingStoreAt: ours, inBundle: bundle)
        } throws: { error in
            guard let error = error as? CoreDataError else { return false }
            return error.code == .persistentStoreIncompatibleVersionHash && error.message.contains("version hashes differ for")
        }
    }

    @Test func storeFilesAreRecognisedBySignature() throws {
        let url = try SQLiteFixtures.copy("XCServerCoreData_2.0.1.sqlite")
        #expect(SQLiteStore.hasSQLiteSignature(at: url))
        #expect(!SQLiteStore.hasSQLiteSignature(at: TestPaths.xcServerBundle))
        #expect(!SQLiteStore.hasSQLiteSignature(at: TestPaths.xcServerBundle.appendingPathComponent("XCServerCoreData2.0.1.xcdatamodel/contents")))
        #expect(throws: CoreDataError.self) { try SQLiteStore.derivedModel(forStoreAt: url.deletingLastPathComponent().appendingPathComponent("none.sqlite")) }
    }
}
