import Foundation
@testable import ObjectGraph

/// Files and helpers the migration tests share.
enum MigrationFixtures {
    static let directory = TestPaths.repositoryRoot.appendingPathComponent("Tests/Fixtures/migration")
    static let xcServerMapping = directory.appendingPathComponent("XCServerCoreData-1.2.0-to-2.0.0.json")

    static func xcServerModel(_ version: String) throws -> ManagedObjectModel {
        try XcodeModelBundle(url: TestPaths.xcServerBundle).model(named: "XCServerCoreData\(version).xcdatamodel")
    }
}

/// A store file's rows as `sqlite3` sees them, read through SQLite's C API
/// (`RawSQLite`), independently of ObjectGraph's store.
struct StoreDump {
    /// Table → rows, each row column name → value.
    var tables: [String: [[String: RawSQLite.Value]]] = [:]

    init(_ url: URL) throws {
        for row in try RawSQLite.query(url.path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%' AND name NOT IN ('Z_PRIMARYKEY', 'Z_METADATA', 'Z_MODELCACHE')") {
            let table = row[0].text!
            let columns = try RawSQLite.query(url.path, "PRAGMA table_info(\(table))").map { $0[1].text! }
            tables[table] = try RawSQLite.query(url.path, "SELECT \(columns.joined(separator: ", ")) FROM \(table)").map {
                Dictionary(uniqueKeysWithValues: zip(columns, $0))
            }
        }
    }

    func rows(_ table: String) -> [[String: RawSQLite.Value]] { tables[table] ?? [] }

    /// Rows by primary key.
    func byKey(_ table: String) -> [Int64: [String: RawSQLite.Value]] {
        Dictionary(uniqueKeysWithValues: rows(table).map { ($0["Z_PK"]!.int!, $0) })
    }
}

extension RawSQLite.Value: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let v): return "i\(v)"
        case .real(let v): return "r\(v)"
        case .text(let v): return "t\(v.debugDescription)"
        case .blob(let v): return "b\(v.count):\(v.prefix(8).map { String($0) }.joined(separator: ","))"
        }
    }
}

/// A small model the migration tests change one way or another: Person
/// (name, age Integer 16, nickname, department ↔ Department.people), Department
/// (title), Note (text, a separate table to remove), Tag (label, people ↔
/// Person.tags, many-to-many).
enum SmallModel {
    static func make() -> ManagedObjectModel {
        let person = EntityDescription(name: "Person")
        let department = EntityDescription(name: "Department")
        let note = EntityDescription(name: "Note")
        let tag = EntityDescription(name: "Tag")
        let name = AttributeDescription(name: "name", type: .string)
        let age = AttributeDescription(name: "age", type: .integer16)
        let nickname = AttributeDescription(name: "nickname", type: .string)
        let toDepartment = RelationshipDescription(name: "department", destination: department, toMany: false)
        let people = RelationshipDescription(name: "people", destination: person, toMany: true)
        toDepartment.inverseRelationship = people
        people.inverseRelationship = toDepartment
        let tags = RelationshipDescription(name: "tags", destination: tag, toMany: true)
        let tagged = RelationshipDescription(name: "people", destination: person, toMany: true)
        tags.inverseRelationship = tagged
        tagged.inverseRelationship = tags
        person.properties = [name, age, nickname, toDepartment, tags]
        department.properties = [AttributeDescription(name: "title", type: .string), people]
        note.properties = [AttributeDescription(name: "text", type: .string)]
        tag.properties = [AttributeDescription(name: "label", type: .string), tagged]
        let model = ManagedObjectModel()
        model.entities = [department, note, person, tag]
        return model
    }

    /// A store of `model` at a new path with `people` people in two
    /// departments, tags on every third person, and a note per person.
    static func store(_ model: ManagedObjectModel, people count: Int = 30) throws -> URL {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Small.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let departments = try ["Sales", "Research"].map { title -> ManagedObject in
                let d = try context.insertNewObject(forEntityName: "Department")
                try d.setValue(title, forKey: "title")
                return d
            }
            let tags = try ["red", "green"].map { label -> ManagedObject in
                let t = try context.insertNewObject(forEntityName: "Tag")
                try t.setValue(label, forKey: "label")
                return t
            }
            for i in 0..<count {
                let p = try context.insertNewObject(forEntityName: "Person")
                try p.setValue("person \(i)", forKey: "name")
                try p.setValue(Int16(20 + i % 50), forKey: "age")
                try p.setValue(i % 4 == 0 ? nil : "nick\(i)", forKey: "nickname")
                try p.setValue(departments[i % 2], forKey: "department")
                if i % 3 == 0 { try p.setValue(Set([tags[i % 2]]), forKey: "tags") }
                let n = try context.insertNewObject(forEntityName: "Note")
                try n.setValue("note \(i)", forKey: "text")
            }
            try context.save()
        }
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        return url
    }

    /// Migrates the store at `url` from `source` to `destination` with the
    /// inferred mapping, through the SQLite store class; returns what it planned.
    @discardableResult
    static func migrate(_ url: URL, from source: ManagedObjectModel, to destination: ManagedObjectModel,
                        mapping: MappingModel? = nil) throws -> MigrationPreview {
        let mapping = try mapping ?? MappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        let preview = try SQLiteStore.migrationPreview(at: url, sourceModel: source, destinationModel: destination, mappingModel: mapping)
        let manager = MigrationManager(sourceModel: source, destinationModel: destination)
        try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: mapping, manager: manager)
        return preview
    }

    /// The objects of `entity` through a coordinator with `model`, as
    /// dictionaries of the given keys (to-ones by the value of `via`).
    static func read(_ url: URL, _ model: ManagedObjectModel, _ entity: String, keys: [String]) throws -> [[String: String]] {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            try context.fetch(FetchRequest(entityName: entity)).map { object in
                var row: [String: String] = [:]
                for key in keys {
                    let value = try object.value(forKeyPath: key)
                    switch value {
                    case nil: row[key] = "nil"
                    case let set as Set<ManagedObject>: row[key] = "\(set.count)"
                    case let array as [Any]: row[key] = array.map { "\($0)" }.sorted().joined(separator: ",")
                    default: row[key] = "\(value!)"
                    }
                }
                return row
            }.sorted { ($0["name"] ?? $0.description) < ($1["name"] ?? $1.description) }
        }
    }
}
