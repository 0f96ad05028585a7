import Foundation

extension SQLiteStore {
    /// A model rebuilt from a store's schema alone, for stores without a
    /// `Z_MODELCACHE` row (written by an old Core Data, or by ObjectGraph,
    /// which leaves that table empty). Entity names, numbers and inheritance
    /// come from `Z_PRIMARYKEY` exactly; everything else is read back through
    /// Core Data's layout rules (docs/SQLITE-LAYOUT.md, "A model derived from
    /// the schema") and what those rules lose is written into each entity's
    /// and property's `userInfo` (`SQLiteSchemaModelDeriver.UserInfoKey`):
    /// property names are the lowercased column names, every property is
    /// optional, INTEGER columns are Integer 64, FLOAT Double, VARCHAR String,
    /// BLOB Binary Data.
    ///
    /// The model opens the store it came from (its schema is checked against
    /// the file before it is returned); open it with
    /// `PersistentStore.ignoreVersioningOption`, since its version hashes are
    /// not the store's.
    ///
    /// ```swift
    /// let model = try SQLiteStore.derivedModel(forStoreAt: URL(fileURLWithPath: "Old.sqlite"))
    /// model.entitiesByName["Bot"]?.attributesByName["lastupdate"]?.attributeType   // .date
    /// ```
    /// - Throws: 260 for a missing file, 134010 for a file that is not a Core
    ///   Data SQLite store, 134080 when SQLite cannot read it, 134020 when the
    ///   tables do not follow Core Data's layout closely enough to rebuild it.
    public static func derivedModel(forStoreAt url: URL) throws -> ManagedObjectModel {
        try checkFileSignature(at: url, requireExisting: true)
        let connection = try openWrappingErrors(path: url.path, mode: readOnlyOpenMode(forFileAt: url), busyTimeout: 5)
        defer { connection.close() }
        do {
            return try SQLiteSchemaModelDeriver(connection: connection, path: url.path).derive()
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw openError(from: error, url: url)
        }
    }

    /// The model to read a store with when none is given: the one Core Data
    /// cached in it (`cachedModel(forStoreAt:)`), else one derived from its
    /// schema (`derivedModel(forStoreAt:)`; `isDerivedFromStoreSchema` tells
    /// which).
    ///
    /// ```swift
    /// let model = try SQLiteStore.storeModel(forStoreAt: url)
    /// let store = SQLiteStore(model: model, configurationName: nil, url: url,
    ///                         options: [PersistentStore.readOnlyOption: true,
    ///                                   PersistentStore.ignoreVersioningOption: model.isDerivedFromStoreSchema])
    /// ```
    public static func storeModel(forStoreAt url: URL) throws -> ManagedObjectModel {
        if let cached = try cachedModel(forStoreAt: url) { return cached }
        return try derivedModel(forStoreAt: url)
    }

    /// True when the file at `url` starts with SQLite's signature (read
    /// through SQLite's file layer, never a `FileHandle`: see
    /// docs/SQLITE-LAYOUT.md, "Never open a store file outside SQLite").
    ///
    /// ```swift
    /// if SQLiteStore.hasSQLiteSignature(at: url) { model = try SQLiteStore.storeModel(forStoreAt: url) }
    /// ```
    public static func hasSQLiteSignature(at url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else { return false }
        return ((try? SQLiteConnection.readFileHeader(path: url.path, count: 16)) ?? nil) == sqliteSignature
    }
}

extension ManagedObjectModel {
    /// True for a model `SQLiteStore.derivedModel(forStoreAt:)` rebuilt from
    /// a store's tables (its names and types are guesses, see `userInfo`).
    ///
    /// ```swift
    /// if model.isDerivedFromStoreSchema { print("names are lowercased column names") }
    /// ```
    public var isDerivedFromStoreSchema: Bool {
        entities.contains { $0.userInfo[SQLiteSchemaModelDeriver.UserInfoKey.derivedFrom] != nil }
    }
}

/// Rebuilds a model from a Core Data SQLite store's tables (see
/// `SQLiteStore.derivedModel(forStoreAt:)`). The layout loses names' case,
/// optionality, defaults, validation, transient and fetched properties,
/// the exact integer and floating widths, Booleans, and the to-many side of
/// every one-to-many; a to-one's destination is only named by its column,
/// so it is guessed from entity names and may stay unknown (the column then
/// becomes an Integer 64 attribute).
public struct SQLiteSchemaModelDeriver {
    /// `userInfo` keys the derived model uses to say where each part came
    /// from and what it cannot know.
    public enum UserInfoKey {
        /// On every entity: the store file the model was derived from.
        public static let derivedFrom = "StoreSync.derivedFrom"
        /// On properties: the column (or join table) the property was read from.
        public static let column = "StoreSync.column"
        /// On attributes: the column's declared SQL type.
        public static let sqlType = "StoreSync.sqlType"
        /// On entities and properties: what the schema cannot tell, in words.
        public static let unknown = "StoreSync.unknown"
    }

    let connection: SQLiteConnection
    let path: String

    /// The attribute type each declared column type is read as, and what the
    /// same declaration could also have been.
    static let typeGuesses: [String: (AttributeType, String)] = [
        "INTEGER": (.integer64, "Integer 16, Integer 32, Integer 64 or Boolean; read as Integer 64"),
        "FLOAT": (.double, "Float or Double; read as Double"),
        "TIMESTAMP": (.date, "Date"),
        "VARCHAR": (.string, "String or URI; read as String"),
        "BLOB": (.binaryData, "Binary Data, Transformable or UUID (values kept in external storage are not resolved); read as Binary Data"),
        "DECIMAL": (.decimal, "Decimal"),
    ]

    static let entityUnknowns = "property names' case (lowercased column names), optionality, defaults, validation, "
        + "transient and fetched properties, to-many relationships whose inverse is a to-one, class name, abstractness"

    private struct Column {
        let name: String
        let type: String
    }

    private enum Reading {
        case attribute(name: String, column: Column, note: String?)
        case toOne(name: String, column: Column, entityColumn: String?, declaringNumber: Int?, ordered: Bool)
        case hiddenOwner(name: String, column: Column, ownerNumber: Int)
    }

    func derive() throws -> ManagedObjectModel {
        let tables = try SQLiteStore.readTables(connection)
        guard tables["Z_PRIMARYKEY"] != nil else {
            throw CoreDataError(.persistentStoreTypeMismatch, "\(path) is a SQLite file but not a Core Data store (no Z_PRIMARYKEY table)",
                                userInfo: [CoreDataError.filePathErrorKey: path])
        }
        // Entities, numbers and inheritance: the one part kept exactly.
        var entities: [Int: EntityDescription] = [:]
        var parents: [Int: Int] = [:]
        for row in try connection.query("SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT") {
            guard let number = row[0].int64Value, let name = row[1].stringValue, !name.isEmpty else { continue }
            entities[Int(number)] = EntityDescription(name: name)
            if let parent = row[2].int64Value, parent != 0 { parents[Int(number)] = Int(parent) }
        }
        for (child, parent) in parents.sorted(by: { $0.key < $1.key }) {
            guard let c = entities[child], let p = entities[parent], c !== p, !p.isKindOf(entity: c) else { continue }
            p.subentities.append(c)
        }
        func rootNumber(_ n: Int) -> Int {
            var current = n
            var seen: Set<Int> = []
            while let p = parents[current], entities[p] != nil, seen.insert(current).inserted { current = p }
            return current
        }
        // Entities whose table is missing cannot be read; leaving them out
        // keeps the rest usable.
        var numbers: [ObjectIdentifier: Int] = [:]
        var included: [Int: EntityDescription] = [:]
        for (n, e) in entities where tables["Z" + entities[rootNumber(n)]!.name.uppercased()] != nil {
            included[n] = e
            numbers[ObjectIdentifier(e)] = n
        }
        let entityNumbersByName = Dictionary(included.map { ($0.value.name, $0.key) }, uniquingKeysWith: { a, _ in a })
        let indexNames = Set(try connection.query("SELECT name FROM sqlite_master WHERE type = 'index'").compactMap { $0[0].stringValue })

        // The deepest entity every given entity number descends from.
        func commonAncestor(_ numbers: [Int]) -> EntityDescription? {
            let found = numbers.compactMap { included[$0] }
            guard var candidate = found.first else { return nil }
            while !found.allSatisfy({ $0.isKindOf(entity: candidate) }) {
                guard let up = candidate.superentity else { return nil }
                candidate = up
            }
            return candidate
        }

        // Pass 1: read each entity table's columns into attributes, to-ones
        // (destination still open) and hidden owner columns.
        var readings: [(root: Int, table: String, reading: Reading)] = []
        for (n, root) in included.sorted(by: { $0.key < $1.key }) where parents[n] == nil || included[parents[n]!] == nil {
            let table = "Z" + root.name.uppercased()
            let columns = (tables[table] ?? []).map { Column(name: $0.name, type: $0.type.uppercased()) }
                .filter { !["Z_PK", "Z_ENT", "Z_OPT"].contains($0.name) }
            // Core Data orders INTEGER attributes by name, then the to-one
            // group (foreign keys with their entity and order columns), also
            // by name: where the name order breaks, the to-one group starts.
            let integerRun = Array(columns.prefix { $0.type == "INTEGER" })
            func isIndexed(_ c: Column) -> Bool { indexNames.contains("\(table)_\(c.name)_INDEX") }
            func isToOneGroupColumn(_ c: Column) -> Bool {
                isIndexed(c) || c.name.hasPrefix("Z_FOK_") || Self.entityColumnParts(c.name) != nil
            }
            var groupStart = integerRun.count
            if let breakIndex = integerRun.indices.dropFirst().first(where: { integerRun[$0].name < integerRun[$0 - 1].name }) {
                groupStart = breakIndex
            } else {
                while groupStart > 0 && isToOneGroupColumn(integerRun[groupStart - 1]) { groupStart -= 1 }
            }
            var entityColumns: [String: (column: String, number: Int)] = [:]
            var orderedToOnes: Set<String> = []
            for c in integerRun[groupStart...] {
                if let (number, rel) = Self.entityColumnParts(c.name) { entityColumns[rel] = (c.name, number) }
                if c.name.hasPrefix("Z_FOK_") { orderedToOnes.insert(String(c.name.dropFirst(6))) }
            }
            for (index, c) in columns.enumerated() {
                let inToOneGroup = index >= groupStart && index < integerRun.count
                if c.name.hasPrefix("Z_FOK_") || Self.entityColumnParts(c.name) != nil { continue }
                if let (owner, rel) = Self.hiddenOwnerParts(c.name), c.type == "INTEGER", included[owner] != nil {
                    readings.append((n, table, .hiddenOwner(name: rel.lowercased(), column: c, ownerNumber: owner)))
                    continue
                }
                guard c.name.hasPrefix("Z"), c.name.count > 1, !c.name.hasPrefix("Z_") else { continue }
                let base = String(c.name.dropFirst())
                if inToOneGroup && isIndexed(c) {
                    let entityColumn = entityColumns[base]
                    readings.append((n, table, .toOne(name: base.lowercased(), column: c, entityColumn: entityColumn?.column,
                                                       declaringNumber: entityColumn?.number, ordered: orderedToOnes.contains(base))))
                } else {
                    readings.append((n, table, .attribute(name: base.lowercased(), column: c, note: nil)))
                }
            }
        }

        // Names of to-one columns per root table, for the "inverse" naming convention below.
        var toOneColumnsByTable: [String: [String]] = [:]
        for r in readings { if case let .toOne(_, column, _, _, _) = r.reading { toOneColumnsByTable[r.table, default: []].append(column.name) } }
        let entityNamesUpper = included.map { (name: $0.value.name.uppercased(), number: $0.key) }

        // A to-one's destination: the entity numbers in its entity column when
        // the destination is a hierarchy; else an entity its name is (BOT),
        // ends with (LASTCLEANINTEGRATION) or begins with; else the one table
        // holding the other half of an "inverse"-named pair (INVERSEARCHIVE
        // here, ARCHIVE there).
        func destination(of rel: String, entityColumn: String?, table: String) throws -> (EntityDescription, String)? {
            if let entityColumn {
                let found = try connection.query("SELECT DISTINCT \(entityColumn) FROM \(table) WHERE \(entityColumn) IS NOT NULL")
                    .compactMap { $0[0].int64Value.map(Int.init) }
                // The column exists because the destination has sub-entities:
                // the rows' entities may all be one leaf, the destination is above it.
                var e = commonAncestor(found)
                while let leaf = e, leaf.subentities.isEmpty, let up = leaf.superentity { e = up }
                if let e { return (e, "destination from the entity numbers in \(entityColumn) (the nearest entity with sub-entities above them)") }
            }
            if let exact = entityNamesUpper.first(where: { $0.name == rel }) { return (included[exact.number]!, "destination guessed from the name") }
            // One-to-ones named by the "inverse" convention (INVERSEARCHIVE here, ARCHIVE there) come
            // before name parts: INVERSELASTCLEANINTEGRATION points at Stats, not Integration.
            var pairs: [String] = []
            for (other, columns) in toOneColumnsByTable where other != table {
                if rel.hasPrefix("INVERSE"), columns.contains("Z" + rel.dropFirst(7)) { pairs.append(other) }
                if columns.contains("ZINVERSE" + rel) { pairs.append(other) }
            }
            if Set(pairs).count == 1, let e = included.values.first(where: { "Z" + $0.name.uppercased() == pairs[0] && $0.superentity == nil }) {
                return (e, "destination guessed from the column \(pairs[0]).Z\(rel.hasPrefix("INVERSE") ? String(rel.dropFirst(7)) : "INVERSE" + rel) it seems to pair with")
            }
            // LASTCLEANINTEGRATION → Integration; ASSETS → IntegrationAssets; ASSET… → Asset.
            let endsWithEntity = entityNamesUpper.filter { rel.hasSuffix($0.name) }.max { $0.name.count < $1.name.count }
            let entityEndsWith = entityNamesUpper.filter { $0.name.hasSuffix(rel) }
            let startsWithEntity = entityNamesUpper.filter { rel.hasPrefix($0.name) }.max { $0.name.count < $1.name.count }
            if let best = endsWithEntity ?? (entityEndsWith.count == 1 ? entityEndsWith[0] : nil) ?? startsWithEntity {
                return (included[best.number]!, "destination guessed from the name")
            }
            return nil
        }

        // The entity that declares a column of a table shared by a hierarchy:
        // the deepest one every row holding a value belongs to (the root when
        // no row holds one).
        func declaringEntity(rootNumber: Int, table: String, column: String) throws -> EntityDescription {
            let root = included[rootNumber]!
            guard root.selfAndDescendants.count > 1 else { return root }
            let found = try connection.query("SELECT DISTINCT Z_ENT FROM \(table) WHERE \(column) IS NOT NULL").compactMap { $0[0].int64Value.map(Int.init) }
            return commonAncestor(found).flatMap { $0.isKindOf(entity: root) ? $0 : nil } ?? root
        }

        var ownProperties: [ObjectIdentifier: [PropertyDescription]] = [:]
        func add(_ property: PropertyDescription, to entity: EntityDescription) {
            ownProperties[ObjectIdentifier(entity), default: []].append(property)
        }
        let hierarchyNote = "declaring entity within the hierarchy (guessed from which rows hold values)"

        // Pass 2: make the properties.
        for (rootN, table, reading) in readings {
            let shared = included[rootN]!.selfAndDescendants.count > 1
            switch reading {
            case let .attribute(name, column, _):
                guard let (type, note) = Self.typeGuesses[column.type] else { continue }
                let attribute = AttributeDescription(name: name, type: type)
                attribute.userInfo = [UserInfoKey.column: "\(table).\(column.name)", UserInfoKey.sqlType: column.type,
                                      UserInfoKey.unknown: "name's case; optionality; type: \(note)" + (shared ? "; \(hierarchyNote)" : "")]
                add(attribute, to: try declaringEntity(rootNumber: rootN, table: table, column: column.name))
            case let .toOne(name, column, entityColumn, declaringNumber, ordered):
                let base = String(column.name.dropFirst())
                let declaring = try declaringNumber.flatMap { included[$0] } ?? declaringEntity(rootNumber: rootN, table: table, column: column.name)
                // A destination with sub-entities needs its entity column in the file.
                if let (dest, how) = try destination(of: base, entityColumn: entityColumn, table: table),
                   dest.selfAndDescendants.count == 1 || entityColumn != nil {
                    let rel = RelationshipDescription(name: name, destination: dest, toMany: false)
                    var unknown = "name's case; optionality; delete rule; \(how); inverse (a to-many has no column)"
                    if ordered { unknown += "; the inverse is an ordered to-many (a Z_FOK_ column holds positions)" }
                    rel.userInfo = [UserInfoKey.column: "\(table).\(column.name)", UserInfoKey.unknown: unknown]
                    add(rel, to: declaring)
                } else {
                    let attribute = AttributeDescription(name: name, type: .integer64)
                    attribute.userInfo = [UserInfoKey.column: "\(table).\(column.name)", UserInfoKey.sqlType: column.type,
                                          UserInfoKey.unknown: "a to-one relationship's foreign key (indexed INTEGER column) whose destination entity could not be determined; read as the destination's Z_PK"]
                    add(attribute, to: declaring)
                }
            case let .hiddenOwner(name, column, ownerNumber):
                let owner = included[ownerNumber]!
                let rel = RelationshipDescription(name: name, destination: included[rootN]!, toMany: true)
                rel.maxCount = 0
                rel.userInfo = [UserInfoKey.column: "\(table).\(column.name)",
                                UserInfoKey.unknown: "name's case; optionality; delete rule; count bounds; destination within the hierarchy (the table's root is used); a to-many without inverse"]
                add(rel, to: owner)
            }
        }

        // Many-to-many join tables: Z_<n><R> ( Z_<n><R'>, Z_<m><R>[, Z_FOK_…] ),
        // or ( Z_<n><R>, REFLEXIVE ) for a relationship that is its own inverse.
        let joinTables = tables.filter { Self.joinTableParts($0.key) != nil }
        let allJoinColumns = Set(joinTables.values.flatMap { $0.map(\.name) })
        /// Core Data numbers a join column whose name is taken (`Z_3KEYASSETS1`); the bare name then exists elsewhere.
        func withoutUniquingSuffix(_ column: String) -> String {
            let base = String(column.reversed().drop { $0.isNumber }.reversed())
            return base != column && allJoinColumns.contains(base) ? base : column
        }
        for (table, columns) in joinTables.sorted(by: { $0.key < $1.key }) {
            guard let (n, r) = Self.joinTableParts(table), let owner = included[n] else { continue }
            let keyColumns = columns.map(\.name).filter { !$0.hasPrefix("Z_FOK_") && $0 != "FOK_REFLEXIVE" }
            let orderColumns = columns.map(\.name).filter { $0.hasPrefix("Z_FOK_") || $0 == "FOK_REFLEXIVE" }
            guard keyColumns.count == 2 else { continue }
            let note = "name's case; optionality; delete rule; count bounds"
            if keyColumns[1] == "REFLEXIVE" {
                let rel = RelationshipDescription(name: r.lowercased(), destination: owner, toMany: true)
                rel.maxCount = 0
                rel.isOrdered = !orderColumns.isEmpty
                rel.inverseRelationship = rel
                rel.userInfo = [UserInfoKey.column: table, UserInfoKey.unknown: note + "; destination within the hierarchy"]
                add(rel, to: owner)
                continue
            }
            guard let (m, secondName) = Self.joinTableParts(withoutUniquingSuffix(keyColumns[1])), secondName == r,
                  let destination = included[m] else { continue }
            let firstPrefix = "Z_\(n)"
            let first = withoutUniquingSuffix(keyColumns[0])
            guard first.hasPrefix(firstPrefix), first.count > firstPrefix.count else { continue }
            let inverseName = String(first.dropFirst(firstPrefix.count))
            let rel = RelationshipDescription(name: r.lowercased(), destination: destination, toMany: true)
            let inverse = RelationshipDescription(name: inverseName.lowercased(), destination: owner, toMany: true)
            rel.maxCount = 0
            inverse.maxCount = 0
            rel.isOrdered = orderColumns.contains { withoutUniquingSuffix($0) == "Z_FOK_\(m)\(r)" }
            inverse.isOrdered = orderColumns.contains { withoutUniquingSuffix($0) == "Z_FOK_\(n)\(inverseName)" }
            rel.inverseRelationship = inverse
            inverse.inverseRelationship = rel
            rel.userInfo = [UserInfoKey.column: table, UserInfoKey.unknown: note]
            inverse.userInfo = [UserInfoKey.column: table, UserInfoKey.unknown: note]
            add(rel, to: owner)
            add(inverse, to: destination)
        }

        let model = ManagedObjectModel()
        let ordered = included.sorted { $0.key < $1.key }.map(\.value)
        for entity in ordered {
            let own = ownProperties[ObjectIdentifier(entity)] ?? []
            let attributes = own.filter { $0 is AttributeDescription }.sorted { $0.name < $1.name }
            let relationships = own.filter { $0 is RelationshipDescription }.sorted { $0.name < $1.name }
            entity.properties = attributes + relationships
            entity.userInfo = [UserInfoKey.derivedFrom: path, UserInfoKey.unknown: Self.entityUnknowns]
        }
        // Sub-entities of entities left out go too.
        for entity in ordered { entity.subentities = entity.subentities.filter { numbers[ObjectIdentifier($0)] != nil } }
        model.entities = ordered

        // What was rebuilt must map back onto the very tables it came from.
        let schema = try SQLiteSchema(model: model, configurationName: nil, entityNumbers: entityNumbersByName)
        let differences = schema.differences(fromFileTables: tables)
        guard differences.isEmpty else {
            throw CoreDataError(.persistentStoreIncompatibleSchema,
                                "\(path): the model derived from the store's schema does not map back onto its tables: " + differences.joined(separator: "; "),
                                userInfo: [CoreDataError.filePathErrorKey: path])
        }
        return model
    }

    /// `Z<n>_<REL>` (a to-one's destination-entity column) → (n, REL).
    static func entityColumnParts(_ name: String) -> (Int, String)? {
        guard name.hasPrefix("Z"), let underscore = name.firstIndex(of: "_") else { return nil }
        let digits = name[name.index(after: name.startIndex)..<underscore]
        guard !digits.isEmpty, digits.allSatisfy(\.isNumber), let n = Int(digits) else { return nil }
        let rest = name[name.index(after: underscore)...]
        return rest.isEmpty ? nil : (n, String(rest))
    }

    /// `Z<n><REL>` (a to-many without inverse: the owner's key on the destination's table) → (n, REL).
    static func hiddenOwnerParts(_ name: String) -> (Int, String)? {
        guard name.hasPrefix("Z") else { return nil }
        let body = name.dropFirst()
        let digits = body.prefix { $0.isNumber }
        let rest = body.dropFirst(digits.count)
        guard !digits.isEmpty, let n = Int(digits), let first = rest.first, first.isLetter else { return nil }
        return (n, String(rest))
    }

    /// `Z_<n><NAME>` (a join table or join column) → (n, NAME).
    static func joinTableParts(_ name: String) -> (Int, String)? {
        guard name.hasPrefix("Z_") else { return nil }
        let body = name.dropFirst(2)
        let digits = body.prefix { $0.isNumber }
        let rest = body.dropFirst(digits.count)
        guard !digits.isEmpty, let n = Int(digits), let first = rest.first, first.isLetter else { return nil }
        return (n, String(rest))
    }
}
