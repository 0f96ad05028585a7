import Foundation
import Testing
@testable import ObjectGraph

/// The generated layout equals what Apple's Core Data wrote in each
/// XCServerCoreData fixture (tables, column names, order and types, indexes,
/// join tables, bookkeeping tables, entity numbers).
@Suite struct SQLiteSchemaTests {
    @Test(arguments: SQLiteFixtures.all)
    func generatedSchemaEqualsApplesFile(fixture: String) throws {
        let model = try SQLiteFixtures.model(for: fixture)
        let apple = try SQLiteFixtures.copy(fixture)
        let ours = apple.deletingLastPathComponent().appendingPathComponent("Ours.sqlite")
        // 1.2.0 was written by an older Core Data (framework 754) that named
        // attribute indexes differently.
        let style: SQLiteSchema.AttributeIndexStyle = fixture.contains("1.2.0") ? .legacyColumnIndex : .fetchIndex
        let schema = try SQLiteSchema(model: model, configurationName: nil, attributeIndexStyle: style)
        let db = try SQLiteConnection(path: ours.path, mode: .readWriteCreate)
        for sql in schema.createStatements() { try db.execute(sql) }
        db.close()

        let appleMaster = try RawSQLite.master(apple.path)
        let ourMaster = try RawSQLite.master(ours.path)
        // Same objects with byte-identical CREATE statements.
        let appleSet = Set(appleMaster.map { $0.joined(separator: "|") })
        let ourSet = Set(ourMaster.map { $0.joined(separator: "|") })
        // Known gap: the 2.0.0 model marks its indexed attributes with Xcode's
        // <fetchIndex> elements, which XcodeModelReader does not read yet, so
        // those 7 attribute indexes are missing from ours (see docs/SQLITE-LAYOUT.md).
        let knownMissing: Set<String> = fixture.contains("2.0.0") ? Set(appleSet.filter { $0.hasPrefix("index|Z_") && $0.contains("COLLATE BINARY ASC") }) : []
        if fixture.contains("2.0.0") { #expect(knownMissing.count == 7) }
        #expect(appleSet.subtracting(ourSet).subtracting(knownMissing).sorted() == [], "in Apple's file only")
        #expect(ourSet.subtracting(appleSet).sorted() == [], "in ours only")

        // Column order and declared types, as PRAGMA table_info reports them.
        let appleColumns = try RawSQLite.tableColumns(apple.path)
        let ourColumns = try RawSQLite.tableColumns(ours.path)
        #expect(appleColumns.keys.sorted() == ourColumns.keys.sorted())
        for (table, columns) in appleColumns {
            #expect(ourColumns[table] == columns, "columns of \(table)")
        }
    }

    /// A new store created by `SQLiteStore` has 2.0.1's exact schema.
    @Test func newStoreHasApplesSchema() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let apple = try SQLiteFixtures.copy(fixture)
        let ours = apple.deletingLastPathComponent().appendingPathComponent("New.sqlite")
        let store = try SQLiteFixtures.openStore(ours, model: try SQLiteFixtures.model(for: fixture))
        store.close()
        let appleMaster = try RawSQLite.master(apple.path)
        let ourMaster = try RawSQLite.master(ours.path)
        #expect(appleMaster == ourMaster)
        let names = try RawSQLite.query(ours.path, "SELECT Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT").map { $0[0].text! }
        let appleNames = try RawSQLite.query(apple.path, "SELECT Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT").map { $0[0].text! }
        #expect(names == appleNames)
    }

    @Test(arguments: SQLiteFixtures.all)
    func entityNumbersEqualApplesPrimaryKeyTable(fixture: String) throws {
        let model = try SQLiteFixtures.model(for: fixture)
        let schema = try SQLiteSchema(model: model, configurationName: nil)
        let url = try SQLiteFixtures.copy(fixture)
        let rows = try RawSQLite.query(url.path, "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
        #expect(rows.count == model.entities.count)
        for row in rows {
            let mapping = try #require(schema.entity(named: row[1].text!))
            #expect(Int64(mapping.number) == row[0].int, "\(row[1])")
            #expect(Int64(mapping.superNumber) == row[2].int)
        }
    }

    @Test func botTableMatchesTheReferenceExample() throws {
        let model = try SQLiteFixtures.model(for: "XCServerCoreData_2.0.1.sqlite")
        let schema = try SQLiteSchema(model: model, configurationName: nil)
        let bot = try #require(schema.table(named: "ZBOT"))
        #expect(SQLiteSchema.createTableSQL(bot) == "CREATE TABLE ZBOT ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZTYPE INTEGER, ZCONFIGURATION INTEGER, ZSTATS INTEGER, ZXCODESERVER INTEGER, ZLASTUPDATE TIMESTAMP, ZIDENTIFIER VARCHAR, ZNAME VARCHAR, ZREVISION VARCHAR )")
        let join = try #require(schema.joinTables.first { $0.name == "Z_9INTEGRATIONS" })
        #expect(SQLiteSchema.createTableSQL(join) == "CREATE TABLE Z_9INTEGRATIONS ( Z_9TESTEDDEVICES INTEGER, Z_13INTEGRATIONS INTEGER, PRIMARY KEY (Z_9TESTEDDEVICES, Z_13INTEGRATIONS) )")
        #expect(schema.indexes.contains { $0.sql == "CREATE INDEX Z_Bot_identifier ON ZBOT (ZIDENTIFIER COLLATE BINARY ASC)" })
        #expect(schema.indexes.contains { $0.sql == "CREATE INDEX Z_9INTEGRATIONS_Z_13INTEGRATIONS_INDEX ON Z_9INTEGRATIONS (Z_13INTEGRATIONS, Z_9TESTEDDEVICES)" })
    }

    /// Inheritance is absent from the fixtures; these follow the documented
    /// rules (shared root table, contiguous numbers, suffixed collisions,
    /// Z_ENT index, entity column for to-ones into a hierarchy).
    @Test func inheritanceSharesTheRootTable() throws {
        let model = ManagedObjectModel()
        let item = EntityDescription(name: "Item")
        let note = EntityDescription(name: "Note")
        let folder = EntityDescription(name: "Folder")
        let owner = EntityDescription(name: "Owner")
        let itemTitle = AttributeDescription(name: "title", type: .string)
        let noteTitle = AttributeDescription(name: "title", type: .integer32)
        let folderSize = AttributeDescription(name: "size", type: .double)
        let favourite = RelationshipDescription(name: "favourite", destination: item)
        item.properties = [itemTitle]
        note.properties = [noteTitle]
        folder.properties = [folderSize]
        owner.properties = [favourite]
        item.subentities = [note, folder]
        model.entities = [owner, item, note, folder]
        let schema = try SQLiteSchema(model: model, configurationName: nil)
        #expect(schema.entityNames == ["Item", "Folder", "Note", "Owner"])
        #expect(schema.entity(named: "Note")?.superNumber == 1)
        #expect(schema.entity(named: "Item")?.numbersIncludingSubentities == [1, 2, 3])
        #expect(schema.entity(named: "Note")?.tableName == "ZITEM")
        let table = try #require(schema.table(named: "ZITEM"))
        #expect(table.columns.map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "ZTITLE1", "ZSIZE", "ZTITLE"])
        #expect(schema.entity(named: "Note")?.columnsByProperty["title"] == "ZTITLE1")
        #expect(schema.entity(named: "Folder")?.columnsByProperty["title"] == "ZTITLE")
        #expect(schema.table(named: "ZNOTE") == nil)
        #expect(schema.indexes.contains { $0.name == "ZITEM_Z_ENT_INDEX" })
        let ownerTable = try #require(schema.table(named: "ZOWNER"))
        #expect(ownerTable.columns.map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "Z4_FAVOURITE", "ZFAVOURITE"])
    }

    @Test func storedFileNumbersWinOverComputedOnes() throws {
        let model = try SQLiteFixtures.model(for: "XCServerCoreData_2.0.1.sqlite")
        var numbers: [String: Int] = [:]
        for (i, e) in model.entities.sorted(by: { $0.name > $1.name }).enumerated() { numbers[e.name] = i + 1 }
        let schema = try SQLiteSchema(model: model, configurationName: nil, entityNumbers: numbers)
        #expect(schema.entity(named: "XcodeServer")?.number == 1)
        #expect(schema.joinTables.contains { $0.name.hasPrefix("Z_\(numbers["Configuration"]!)") || $0.name.hasPrefix("Z_\(numbers["Repository"]!)") })
        numbers.removeValue(forKey: "Bot")
        #expect(throws: CoreDataError.self) { try SQLiteSchema(model: model, configurationName: nil, entityNumbers: numbers) }
    }
}
