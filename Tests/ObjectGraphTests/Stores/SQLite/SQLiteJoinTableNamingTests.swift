import Foundation
import Testing
@testable import ObjectGraph

/// How many-to-many join tables are named (docs/SQLITE-LAYOUT.md, "Many-to-many
/// join tables"): which side names the table, which column comes first, what a
/// column is called when its name is taken, and the order columns.
///
/// Apple-written evidence: the XCServerCoreData stores (non-reflexive, no
/// inheritance) and two Photos.sqlite schemas from RhetTbull/PhotoScript
/// (non-reflexive with inheritance, ordered sides, suffixed columns,
/// self-inverse relationships). No Apple file shows a reflexive pair of two
/// different relationships, an ordered self-inverse relationship, or both
/// sides of a pair ordered; the tests of those cases pin the rule as
/// implemented and say so.
@Suite struct SQLiteJoinTableNamingTests {
    // MARK: - Helpers

    /// A to-many pair `a.aName` ↔ `b.bName` (b may be a, and aName may equal bName).
    @discardableResult
    static func pair(_ a: EntityDescription, _ aName: String, _ b: EntityDescription, _ bName: String,
                     aOrdered: Bool = false, bOrdered: Bool = false) -> (RelationshipDescription, RelationshipDescription) {
        let forward = RelationshipDescription(name: aName, destination: b, toMany: true)
        forward.isOrdered = aOrdered
        if a === b && aName == bName {
            forward.inverseRelationship = forward
            a.properties = a.directProperties + [forward]
            return (forward, forward)
        }
        let back = RelationshipDescription(name: bName, destination: a, toMany: true)
        back.isOrdered = bOrdered
        forward.inverseRelationship = back
        back.inverseRelationship = forward
        a.properties = a.directProperties + [forward]
        b.properties = b.directProperties + [back]
        return (forward, back)
    }

    static func model(_ entities: [EntityDescription]) -> ManagedObjectModel {
        let model = ManagedObjectModel()
        model.entities = entities
        return model
    }

    /// The one join table of a schema, with its CREATE TABLE and CREATE INDEX SQL.
    static func onlyJoin(_ schema: SQLiteSchema) throws -> (SQLiteSchema.JoinTable, String, String) {
        #expect(schema.joinTables.count == 1)
        let join = try #require(schema.joinTables.first)
        let index = try #require(schema.indexes.first { $0.tableName == join.name })
        return (join, SQLiteSchema.createTableSQL(join), index.sql)
    }

    // MARK: - Non-reflexive pairs

    /// Without inheritance the entity whose name sorts first names the table,
    /// whichever relationship name sorts first: Configuration(8).repositories ↔
    /// Repository(18).configurations gives Z_8REPOSITORIES, Device(9).integrations
    /// ↔ Integration(13).testedDevices gives Z_9INTEGRATIONS (XCServerCoreData).
    @Test(arguments: [("aaa", "zzz"), ("zzz", "aaa"), ("same", "same")])
    func theEntityFirstByNameNamesTheTable(names: (String, String)) throws {
        let (mine, theirs) = names
        let first = EntityDescription(name: "Alpha")
        let second = EntityDescription(name: "Beta")
        Self.pair(first, mine, second, theirs)
        let schema = try SQLiteSchema(model: Self.model([second, first]), configurationName: nil)
        let (join, table, index) = try Self.onlyJoin(schema)
        let m = mine.uppercased(), t = theirs.uppercased()
        #expect(join.name == "Z_1\(m)")
        #expect(join.relationship.entity?.name == "Alpha")
        #expect((join.firstColumn, join.secondColumn) == ("Z_1\(t)", "Z_2\(m)"))
        #expect(table == "CREATE TABLE Z_1\(m) ( Z_1\(t) INTEGER, Z_2\(m) INTEGER, PRIMARY KEY (Z_1\(t), Z_2\(m)) )")
        #expect(index == "CREATE INDEX Z_1\(m)_Z_2\(m)_INDEX ON Z_1\(m) (Z_2\(m), Z_1\(t))")
    }

    /// Entity numbers do not decide: Core Data walks the entities by name. A
    /// file's numbers can run against the names (ObjectGraph honours a file's
    /// Z_PRIMARYKEY), and the entity first by name still names the table.
    @Test func fileNumbersInTheOtherDirectionKeepTheSideFirstByName() throws {
        let first = EntityDescription(name: "Alpha")
        let second = EntityDescription(name: "Beta")
        Self.pair(first, "things", second, "owners")
        let schema = try SQLiteSchema(model: Self.model([first, second]), configurationName: nil,
                                      entityNumbers: ["Alpha": 7, "Beta": 3])
        let (join, table, index) = try Self.onlyJoin(schema)
        #expect(join.name == "Z_7THINGS")
        #expect(table == "CREATE TABLE Z_7THINGS ( Z_7OWNERS INTEGER, Z_3THINGS INTEGER, PRIMARY KEY (Z_7OWNERS, Z_3THINGS) )")
        #expect(index == "CREATE INDEX Z_7THINGS_Z_3THINGS_INDEX ON Z_7THINGS (Z_3THINGS, Z_7OWNERS)")
    }

    /// A sub-entity carries its parent's relationships into the walk, and the
    /// table keeps the declaring entity's number: Photos' GenericAlbum(29)
    /// .albumLists ↔ AlbumList(2).albums is Z_29ALBUMLISTS because GenericAlbum's
    /// sub-entity Album sorts before AlbumList.
    @Test func aSubEntityNameCanPutTheHigherNumberFirst() throws {
        let bee = EntityDescription(name: "Bee")
        let zoo = EntityDescription(name: "Zoo")
        let ant = EntityDescription(name: "Ant")
        zoo.subentities = [ant]
        Self.pair(bee, "zoos", zoo, "bees")
        let schema = try SQLiteSchema(model: Self.model([bee, zoo, ant]), configurationName: nil)
        #expect(schema.entityNames == ["Bee", "Zoo", "Ant"])
        let (join, table, _) = try Self.onlyJoin(schema)
        #expect(join.name == "Z_2BEES")
        #expect(table == "CREATE TABLE Z_2BEES ( Z_2ZOOS INTEGER, Z_1BEES INTEGER, PRIMARY KEY (Z_2ZOOS, Z_1BEES) )")
    }

    /// The order column belongs to the side whose inverse is ordered and is
    /// named like that side's column: Photos' Z_26ASSETS (Album.assets ordered)
    /// ends with Z_FOK_34ASSETS, Z_25ALBUMLISTS (the inverse AlbumList.albums
    /// ordered) with Z_FOK_25ALBUMS.
    @Test(arguments: [(true, false), (false, true)])
    func orderColumnFollowsTheOrderedSide(ordered: (Bool, Bool)) throws {
        let first = EntityDescription(name: "Alpha")
        let second = EntityDescription(name: "Beta")
        Self.pair(first, "betas", second, "alphas", aOrdered: ordered.0, bOrdered: ordered.1)
        let schema = try SQLiteSchema(model: Self.model([first, second]), configurationName: nil)
        let (join, table, _) = try Self.onlyJoin(schema)
        let order = ordered.0 ? "Z_FOK_2BETAS" : "Z_FOK_1ALPHAS"
        #expect(join.orderColumn == order)
        #expect(join.inverseOrderColumn == nil)
        #expect(table == "CREATE TABLE Z_1BETAS ( Z_1ALPHAS INTEGER, Z_2BETAS INTEGER, \(order) INTEGER, PRIMARY KEY (Z_1ALPHAS, Z_2BETAS) )")
    }

    /// Both sides ordered: no Apple file shows it. Core Data's SQL model gives
    /// each side its own order column; the order here (the naming side's own
    /// first) is unverified.
    @Test func bothSidesOrderedHaveTwoOrderColumns() throws {
        let first = EntityDescription(name: "Alpha")
        let second = EntityDescription(name: "Beta")
        Self.pair(first, "betas", second, "alphas", aOrdered: true, bOrdered: true)
        let schema = try SQLiteSchema(model: Self.model([first, second]), configurationName: nil)
        let (join, table, _) = try Self.onlyJoin(schema)
        #expect((join.orderColumn, join.inverseOrderColumn) == ("Z_FOK_1ALPHAS", "Z_FOK_2BETAS"))
        #expect(table == "CREATE TABLE Z_1BETAS ( Z_1ALPHAS INTEGER, Z_2BETAS INTEGER, Z_FOK_1ALPHAS INTEGER, Z_FOK_2BETAS INTEGER, PRIMARY KEY (Z_1ALPHAS, Z_2BETAS) )")
    }

    /// A join column name already used by an earlier join table gets a number,
    /// as AddressBook's Z_22PARENTGROUPS (Z_22CONTACTS, Z_19PARENTGROUPS1) after
    /// Z_18PARENTGROUPS (Z_18CHILDGROUPS, Z_19PARENTGROUPS).
    @Test func aTakenJoinColumnNameGetsANumber() throws {
        let contact = EntityDescription(name: "Contact")
        let group = EntityDescription(name: "Group")
        let folder = EntityDescription(name: "Folder")
        Self.pair(contact, "parentGroups", group, "contacts")
        Self.pair(folder, "parentGroups", group, "folders")
        let schema = try SQLiteSchema(model: Self.model([contact, folder, group]), configurationName: nil)
        let tables = schema.joinTables.map(SQLiteSchema.createTableSQL)
        #expect(tables == [
            "CREATE TABLE Z_1PARENTGROUPS ( Z_1CONTACTS INTEGER, Z_3PARENTGROUPS INTEGER, PRIMARY KEY (Z_1CONTACTS, Z_3PARENTGROUPS) )",
            "CREATE TABLE Z_2PARENTGROUPS ( Z_2FOLDERS INTEGER, Z_3PARENTGROUPS1 INTEGER, PRIMARY KEY (Z_2FOLDERS, Z_3PARENTGROUPS1) )",
        ])
    }

    // MARK: - Reflexive pairs

    /// Two different relationships of one entity, inverse of each other. Core
    /// Data meets them in the order of a private hash table; no Apple file shows
    /// such a pair, and the reverse name order used here reproduces the reported
    /// Apple table Z_2BLOCKING for blockedBy/blocking. Declaration order does
    /// not matter.
    @Test(arguments: [("blockedBy", "blocking"), ("blocking", "blockedBy"), ("after", "before"), ("before", "after")])
    func reflexivePairIsNamedByTheNameLastInOrder(declared: (String, String)) throws {
        let other = EntityDescription(name: "Account")
        let person = EntityDescription(name: "Person")
        Self.pair(person, declared.0, person, declared.1)
        let schema = try SQLiteSchema(model: Self.model([other, person]), configurationName: nil)
        let (join, table, index) = try Self.onlyJoin(schema)
        let later = max(declared.0, declared.1).uppercased(), earlier = min(declared.0, declared.1).uppercased()
        #expect(join.name == "Z_2\(later)")
        #expect(join.relationship.name.uppercased() == later)
        #expect((join.firstColumn, join.secondColumn) == ("Z_2\(earlier)", "Z_2\(later)"))
        #expect(table == "CREATE TABLE Z_2\(later) ( Z_2\(earlier) INTEGER, Z_2\(later) INTEGER, PRIMARY KEY (Z_2\(earlier), Z_2\(later)) )")
        #expect(index == "CREATE INDEX Z_2\(later)_Z_2\(later)_INDEX ON Z_2\(later) (Z_2\(later), Z_2\(earlier))")
    }

    /// A relationship that is its own inverse: one column named like the table,
    /// the other REFLEXIVE (Photos' Z_45MERGECANDIDATES and its index).
    @Test func selfInverseRelationshipUsesReflexiveColumn() throws {
        let person = EntityDescription(name: "Person")
        Self.pair(person, "friends", person, "friends")
        let schema = try SQLiteSchema(model: Self.model([person]), configurationName: nil)
        let (join, table, index) = try Self.onlyJoin(schema)
        #expect((join.name, join.firstColumn, join.secondColumn) == ("Z_1FRIENDS", "Z_1FRIENDS", "REFLEXIVE"))
        #expect(join.orderColumn == nil)
        #expect(table == "CREATE TABLE Z_1FRIENDS ( Z_1FRIENDS INTEGER, REFLEXIVE INTEGER, PRIMARY KEY (Z_1FRIENDS, REFLEXIVE) )")
        #expect(index == "CREATE INDEX Z_1FRIENDS_REFLEXIVE_INDEX ON Z_1FRIENDS (REFLEXIVE, Z_1FRIENDS)")
    }

    /// Ordered and its own inverse: no Apple file shows it; Core Data's SQL
    /// model names the columns Z_FOK_<n><NAME> and FOK_REFLEXIVE (unverified).
    @Test func orderedSelfInverseRelationshipHasBothOrderColumns() throws {
        let person = EntityDescription(name: "Person")
        Self.pair(person, "friends", person, "friends", aOrdered: true)
        let schema = try SQLiteSchema(model: Self.model([person]), configurationName: nil)
        let (join, table, _) = try Self.onlyJoin(schema)
        #expect((join.orderColumn, join.inverseOrderColumn) == ("Z_FOK_1FRIENDS", "FOK_REFLEXIVE"))
        #expect(table == "CREATE TABLE Z_1FRIENDS ( Z_1FRIENDS INTEGER, REFLEXIVE INTEGER, Z_FOK_1FRIENDS INTEGER, FOK_REFLEXIVE INTEGER, PRIMARY KEY (Z_1FRIENDS, REFLEXIVE) )")
    }

    /// Both reflexive kinds are written and read back through SQLiteStore from
    /// either side, and the rows sit in the columns named above.
    @Test func reflexiveJoinRowsRoundTripThroughTheStore() throws {
        let person = EntityDescription(name: "Person")
        person.properties = [AttributeDescription(name: "name", type: .string)]
        let (blocking, blockedBy) = Self.pair(person, "blocking", person, "blockedBy")
        let (friends, _) = Self.pair(person, "friends", person, "friends")
        let model = Self.model([person])
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Reflexive.sqlite")
        let store = try SQLiteFixtures.openStore(url, model: model)
        let ids = try store.newObjectIDs(for: person, count: 3)
        var request = StoreSaveRequest()
        request.inserted = ids.enumerated().map { StoreSnapshot(objectID: $1, version: 1, values: ["name": "p\($0)"]) }
        request.toManyChanges = [
            ToManyChange(objectID: ids[0], relationship: blocking, destinations: [ids[1], ids[2]]),
            ToManyChange(objectID: ids[1], relationship: blockedBy, destinations: [ids[0]]),
            ToManyChange(objectID: ids[2], relationship: blockedBy, destinations: [ids[0]]),
            ToManyChange(objectID: ids[0], relationship: friends, destinations: [ids[1]]),
        ]
        try store.save(request)
        store.close()

        let pk = ids.map { $0.primaryKey! }
        let blockRows = try RawSQLite.query(url.path, "SELECT Z_1BLOCKEDBY, Z_1BLOCKING FROM Z_1BLOCKING ORDER BY 1, 2")
        #expect(blockRows.map { $0.map(\.int) } == [[pk[0], pk[1]], [pk[0], pk[2]]])
        let friendRows = try RawSQLite.query(url.path, "SELECT Z_1FRIENDS, REFLEXIVE FROM Z_1FRIENDS")
        #expect(friendRows.map { $0.map(\.int) } == [[pk[0], pk[1]]])

        let reopened = try SQLiteFixtures.openStore(url, model: model)
        defer { reopened.close() }
        #expect(Set(try reopened.relatedObjectIDs(for: blocking, of: ids[0])) == [ids[1], ids[2]])
        #expect(try reopened.relatedObjectIDs(for: blockedBy, of: ids[2]) == [ids[0]])
        #expect(try reopened.relatedObjectIDs(for: friends, of: ids[0]) == [ids[1]])
    }

    // MARK: - Apple-written files

    /// Every XCServerCoreData store opens through SQLiteStore with its model
    /// (the schema check needs each join table and column by the names above),
    /// and each join table's rows read back from both sides.
    @Test(arguments: SQLiteFixtures.all)
    func xcServerJoinRowsReadFromBothSides(fixture: String) throws {
        let url = try SQLiteFixtures.copy(fixture)
        let model = try SQLiteFixtures.model(for: fixture)
        let store = try SQLiteFixtures.openStore(url, model: model)
        defer { store.close() }
        let schema = try SQLiteSchema(model: model, configurationName: nil)
        #expect(!schema.joinTables.isEmpty)
        for join in schema.joinTables {
            let rel = join.relationship
            let inverse = try #require(rel.inverseRelationship)
            let rows = try RawSQLite.query(url.path, "SELECT \(join.firstColumn), \(join.secondColumn) FROM \(join.name)")
            for owner in Set(rows.map { $0[0].int! }) {
                let id = ManagedObjectID(entity: rel.entity!, storeIdentifier: store.identifier, primaryKey: owner)
                let expected = Set(rows.filter { $0[0].int == owner }.map { $0[1].int! })
                #expect(Set(try store.relatedObjectIDs(for: rel, of: id).compactMap(\.primaryKey)) == expected, "\(join.name) from \(rel.name)")
            }
            for destination in Set(rows.map { $0[1].int! }) {
                let id = ManagedObjectID(entity: inverse.entity!, storeIdentifier: store.identifier, primaryKey: destination)
                let expected = Set(rows.filter { $0[1].int == destination }.map { $0[0].int! })
                #expect(Set(try store.relatedObjectIDs(for: inverse, of: id).compactMap(\.primaryKey)) == expected, "\(join.name) from \(inverse.name)")
            }
        }
    }

    /// A Photos.sqlite schema extract (Tests/Fixtures/apple/PhotoScript): its
    /// entities (Z_PRIMARYKEY), the many-to-many relationships of the model in
    /// its Z_MODELCACHE, and the join tables and indexes Apple wrote.
    struct PhotosExtract {
        var entities: [(number: Int, name: String, parent: Int)] = []
        var relationships: [(entity: String, name: String, destination: String, inverse: String, ordered: Bool)] = []
        var tables: [String: String] = [:]
        var indexes: [String: String] = [:]

        init(version: String) throws {
            let dir = TestPaths.appleFixtures.appendingPathComponent("PhotoScript")
            let sql = try String(contentsOf: dir.appendingPathComponent("Photos-\(version)-join-tables.sql"), encoding: .utf8)
            for line in sql.split(separator: "\n").map(String.init) {
                if line.hasPrefix("-- "), case let parts = line.dropFirst(3).split(separator: "|"), parts.count == 3,
                   let n = Int(parts[0]), let parent = Int(parts[2]) {
                    entities.append((n, String(parts[1]), parent))
                } else if line.hasPrefix("CREATE TABLE ") {
                    // A migrated store quotes the table names it rebuilt.
                    let statement = String(line.dropLast()).replacingOccurrences(of: "\"", with: "")
                    tables[String(statement.split(separator: " ")[2])] = statement
                } else if line.hasPrefix("CREATE INDEX ") {
                    indexes[String(line.split(separator: " ")[2])] = String(line.dropLast())
                }
            }
            let list = try String(contentsOf: dir.appendingPathComponent("Photos-\(version)-many-to-many.txt"), encoding: .utf8)
            for line in list.split(separator: "\n") where !line.hasPrefix("#") {
                let f = line.split(separator: " ").map(String.init)
                relationships.append((f[0], f[1], f[2], f[3], f[4] == "ordered"))
            }
        }

        /// The entities with their hierarchy and the many-to-many relationships.
        func model() throws -> ManagedObjectModel {
            var byNumber: [Int: EntityDescription] = [:]
            for e in entities { byNumber[e.number] = EntityDescription(name: e.name) }
            for e in entities where e.parent != 0 {
                let parent = try #require(byNumber[e.parent])
                parent.subentities += [byNumber[e.number]!]
            }
            let byName = Dictionary(uniqueKeysWithValues: byNumber.values.map { ($0.name, $0) })
            var made: [String: RelationshipDescription] = [:]
            for r in relationships {
                let rel = RelationshipDescription(name: r.name, destination: try #require(byName[r.destination]), toMany: true)
                rel.isOrdered = r.ordered
                let owner = byName[r.entity]!
                owner.properties = owner.directProperties + [rel]
                made["\(r.entity).\(r.name)"] = rel
            }
            for r in relationships {
                made["\(r.entity).\(r.name)"]!.inverseRelationship = try #require(made["\(r.destination).\(r.inverse)"])
            }
            let model = ManagedObjectModel()
            model.entities = entities.map { byNumber[$0.number]! }
            return model
        }

        var numbers: [String: Int] { Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0.number) }) }
    }

    /// The column list of a CREATE TABLE statement, without its primary key clause.
    static func columns(_ statement: String) -> [String] {
        let inner = statement.drop { $0 != "(" }.dropFirst()
        return inner.components(separatedBy: ", PRIMARY KEY")[0].split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).components(separatedBy: " ")[0] }
    }

    /// Table names, which side names each table, column names and order, order
    /// columns, REFLEXIVE columns and (10.15.7, never migrated) the indexes all
    /// equal Apple's. Which of two columns that would share a name gets the
    /// number depends on Core Data's hash-table order within one entity: the
    /// tables where Apple's file has such a suffix are compared with it set
    /// aside, and the suffixed names themselves must be the same set.
    @Test(arguments: ["10.15.7", "15.7.1"])
    func photosJoinTablesEqualApples(version: String) throws {
        let photos = try PhotosExtract(version: version)
        #expect(photos.relationships.count > 20)
        let schema = try SQLiteSchema(model: try photos.model(), configurationName: nil, entityNumbers: photos.numbers)
        var ours: [String: String] = [:]
        for join in schema.joinTables { ours[join.name] = SQLiteSchema.createTableSQL(join) }
        #expect(ours.keys.sorted() == photos.tables.keys.sorted())
        #expect(ours.values.contains { $0.contains("REFLEXIVE") })

        func suffixed(_ column: String) -> Bool { column.hasPrefix("Z_") && column.last!.isNumber && column.dropLast().last!.isLetter }
        func unsuffixed(_ statement: String) -> [String] {
            Self.columns(statement).map { suffixed($0) ? String($0.dropLast()) : $0 }
        }
        var appleSuffixed: Set<String> = [], ourSuffixed: Set<String> = []
        for (name, apple) in photos.tables {
            let mine = try #require(ours[name])
            let appleColumns = Self.columns(apple), ourColumns = Self.columns(mine)
            appleSuffixed.formUnion(appleColumns.filter(suffixed))
            ourSuffixed.formUnion(ourColumns.filter(suffixed))
            if appleColumns.contains(where: suffixed) || ourColumns.contains(where: suffixed) {
                #expect(unsuffixed(mine) == unsuffixed(apple), "\(name)")
            } else {
                #expect(mine == apple)
            }
        }
        #expect(!appleSuffixed.isEmpty)
        #expect(ourSuffixed == appleSuffixed)

        guard version == "10.15.7" else { return }
        var checked = 0, setAside = 0
        for join in schema.joinTables {
            let index = try #require(schema.indexes.first { $0.tableName == join.name })
            if (Self.columns(photos.tables[join.name]!) + Self.columns(ours[join.name]!)).contains(where: suffixed) {
                setAside += 1
                continue
            }
            #expect(photos.indexes[index.name] == index.sql)
            checked += 1
        }
        #expect(checked > 10)
        #expect(checked + setAside == photos.indexes.count)
    }
}
