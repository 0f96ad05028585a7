import Foundation
import Testing
@testable import ObjectGraph

/// The Apple-written XCServerCoreData 1.2.0 store (a copy) migrated through
/// every later version of its bundle to the current one, 2.0.3 (issue 14's
/// acceptance; PC-38, MM-02, MG-08, MG-09): 1.2.0 → 2.0.0 needs a mapping
/// (three String attributes became Date, one was renamed without a renaming
/// identifier, an archived list became JSON data), so the tests give one; the
/// other steps are inferred and run in place. Every row is checked with
/// SQLite's C API before and after.
@Suite(.serialized) struct XCServerFixtureMigrationTests {
    static let fixture = "XCServerCoreData_1.2.0.sqlite"

    /// Turns CommitContributor's archived e-mail list (1.2.0 `emails`,
    /// Transformable) into the JSON data 2.0.0 keeps in `emailsData`.
    final class ContributorPolicy: EntityMigrationPolicy {
        override func evaluateFunction(_ selector: String, arguments: [Any?]) throws -> Any? {
            guard selector == "jsonData:" else { return try super.evaluateFunction(selector, arguments: arguments) }
            guard let value = arguments.first ?? nil else { return nil }
            return try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
        }
    }

    /// The mapping file of the tests' fixtures, with CommitContributor's
    /// e-mails carried over by `ContributorPolicy`, written where the staged
    /// migration looks for mappings.
    static func mappingDirectory() throws -> URL {
        EntityMigrationPolicy.register(ContributorPolicy.self, as: "XCServerContributorPolicy")
        let v120 = try MigrationFixtures.xcServerModel("1.2.0"), v200 = try MigrationFixtures.xcServerModel("2.0.0")
        let mapping = try MappingModel(contentsOf: MigrationFixtures.xcServerMapping, sourceModel: v120, destinationModel: v200)
        let contributor = try #require(mapping.entityMappings.first { $0.destinationEntityName == "CommitContributor" })
        contributor.entityMigrationPolicyClassName = "XCServerContributorPolicy"
        contributor.attributeMappings.removeAll { $0.name == "emailsData" }
        contributor.attributeMappings.append(try PropertyMapping(name: "emailsData", valueExpressionFormat: "FUNCTION($entityPolicy, 'jsonData:', $source.emails)"))
        let directory = try TestPaths.temporaryDirectory()
        try mapping.write(to: directory.appendingPathComponent("XCServer-1.2.0-2.0.0.json"))
        return directory
    }

    @Test func appleStoreMigratesThroughEveryVersionToTheCurrentOne() throws {
        let url = try SQLiteFixtures.copy(Self.fixture)
        let original = try StoreDump(url)
        let migration = try StagedStoreMigration(storeAt: url, bundle: TestPaths.xcServerBundle, mappingURLs: [try Self.mappingDirectory()])
        #expect(migration.sourceVersionName == "XCServerCoreData1.2.0.xcdatamodel")
        #expect(migration.destinationVersionName == "XCServerCoreData2.0.3.xcdatamodel")
        #expect(migration.steps.map { "\($0.sourceVersionName)->\($0.destinationVersionName)" } == [
            "XCServerCoreData1.2.0.xcdatamodel->XCServerCoreData2.0.0.xcdatamodel",
            "XCServerCoreData2.0.0.xcdatamodel->XCServerCoreData2.0.1.xcdatamodel",
            "XCServerCoreData2.0.1.xcdatamodel->XCServerCoreData2.0.2.xcdatamodel",
            "XCServerCoreData2.0.2.xcdatamodel->XCServerCoreData2.0.3.xcdatamodel",
        ])
        #expect(migration.steps.map { $0.mappingModel.isInferred } == [false, true, true, true])
        let previews = try migration.preview()
        #expect(previews.map(\.inPlace) == [false, true, true, true])

        var dumps = [original]
        var urls: [URL] = []
        for step in migration.steps {
            let manager = MigrationManager(sourceModel: step.sourceModel, destinationModel: step.destinationModel)
            try SQLiteStore.migrateStore(at: url, options: [:], mappingModel: step.mappingModel, manager: manager)
            #expect(try RawSQLite.query(url.path, "PRAGMA integrity_check").first?.first?.text == "ok")
            dumps.append(try StoreDump(url))
            // A copy of each step's result, to compare its schema with a new store's.
            let copy = try TestPaths.temporaryDirectory().appendingPathComponent("Step.sqlite")
            _ = try RawSQLite.query(url.path, "VACUUM INTO '\(copy.path)'")
            urls.append(copy)
        }

        try Self.checkCopyStep(before: dumps[0], after: dumps[1],
                               sourceModel: migration.steps[0].sourceModel, destinationModel: migration.steps[0].destinationModel)
        for (index, step) in migration.steps.enumerated().dropFirst() {
            try Self.checkInPlaceStep(before: dumps[index], after: dumps[index + 1], step: step, migrated: urls[index])
        }

        // Opens with the newest model, with every object.
        let newest = try MigrationFixtures.xcServerModel("2.0.3")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: newest)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        for entity in newest.entities {
            let table = "Z" + entity.name.uppercased()
            let count = try context.performAndWait { try context.count(for: FetchRequest(entityName: entity.name)) }
            #expect(count == original.rows(table).count, "\(entity.name)")
        }
        // A date converted by the mapping reads back as the text said.
        let integrations = try context.performAndWait { try context.fetch(FetchRequest(entityName: "Integration")) }
        let beforeByIdentifier = Dictionary(uniqueKeysWithValues: original.rows("ZINTEGRATION").map { ($0["ZIDENTIFIER"]!.text!, $0) })
        #expect(integrations.count == beforeByIdentifier.count)
        for integration in integrations {
            let identifier = try #require(integration.value(forKey: "identifier") as? String)
            let text = try #require(beforeByIdentifier[identifier]?["ZENDEDTIME"]?.text)
            #expect(try integration.value(forKey: "endedTime") as? Date == (try EntityMigrationPolicy.date(fromISO8601: text)))
        }
    }

    // MARK: - Checks

    /// Columns whose values the step carries over unchanged, by name, with
    /// the old column each comes from.
    static func carriedColumns(_ table: String, before: StoreDump, after: StoreDump, renamed: [String: String]) -> [(old: String, new: String)] {
        guard let oldRow = before.rows(table).first.map({ Set($0.keys) }) ?? Optional(Set()),
              let newColumns = after.rows(table).first.map({ Set($0.keys) }) else { return [] }
        return newColumns.sorted().compactMap { column in
            if let old = renamed[column] { return (old, column) }
            return oldRow.contains(column) ? (column, column) : nil
        }
    }

    /// The foreign-key columns (and entity and order columns) of a schema.
    static func referenceColumns(_ schema: SQLiteSchema) -> Set<String> {
        var out: Set<String> = ["Z_PK", "Z_ENT", "Z_OPT"]
        for table in schema.tables {
            for column in table.columns {
                switch column.role {
                case .foreignKey, .foreignEntity, .foreignOrder, .hiddenOwner: out.insert("\(table.name).\(column.name)")
                default: break
                }
            }
        }
        return out
    }

    /// 1.2.0 → 2.0.0 copies every object into new rows (new keys): rows are
    /// compared by their values, relationships by the values at both ends.
    static func checkCopyStep(before: StoreDump, after: StoreDump, sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) throws {
        let oldSchema = try SQLiteSchema(model: sourceModel, configurationName: nil, entityNumbers: Dictionary(uniqueKeysWithValues:
            try SQLiteSchema(model: sourceModel, configurationName: nil).entityNames.enumerated().map { ($1, $0 + 1) }))
        let newSchema = try SQLiteSchema(model: destinationModel, configurationName: nil)
        let references = referenceColumns(oldSchema).union(referenceColumns(newSchema))
        let converted: Set<String> = ["ZINTEGRATION.ZENDEDTIME", "ZINTEGRATION.ZQUEUEDDATE", "ZINTEGRATION.ZSTARTEDTIME"]
        let renamed = ["ZINTEGRATION": ["ZSUCCESSSTREAK": "ZSUCCESS_STREAK"], "ZCOMMITCONTRIBUTOR": ["ZEMAILSDATA": "ZEMAILS"]]

        var transformable: Set<String> = []
        for entity in destinationModel.entities {
            for case let attribute as AttributeDescription in entity.properties where attribute.attributeType == .transformable {
                transformable.insert("Z\(entity.name.uppercased()).Z\(attribute.name.uppercased())")
            }
        }
        /// What an archived value holds, in a form that compares equal for equal values.
        func decoded(_ bytes: [UInt8]) -> String {
            let transformer = ValueTransformerRegistry.shared.transformer(forName: ValueTransformerRegistry.keyedUnarchiveFromDataName)!
            guard let value = try? transformer.reverseTransformedValue(Data(bytes)) else { return "undecodable \(bytes.count) bytes" }
            if JSONSerialization.isValidJSONObject(value), let json = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) {
                return String(decoding: json, as: UTF8.self)
            }
            return String(describing: value)
        }
        var memo: [String: String] = [:]
        func signature(_ table: String, _ row: [String: RawSQLite.Value], old: Bool) throws -> String {
            let key = "\(old) \(table) \(row["Z_PK"]?.int ?? -1)"
            if let known = memo[key] { return known }
            let made = try computeSignature(table, row, old: old)
            memo[key] = made
            return made
        }
        /// A row's values in the new layout, computed from an old row the way the mapping should.
        func computeSignature(_ table: String, _ row: [String: RawSQLite.Value], old: Bool) throws -> String {
            let columns = carriedColumns(table, before: before, after: after, renamed: renamed[table] ?? [:])
            if !old {
                return columns.filter { !references.contains("\(table).\($0.new)") && !["Z_PK", "Z_ENT", "Z_OPT"].contains($0.new) }.map { pair -> String in
                    let value = row[pair.new] ?? .null
                    if transformable.contains("\(table).\(pair.new)"), case .blob(let bytes) = value { return "archive of \(decoded(bytes))" }
                    return "\(value)"
                }.joined(separator: "|")
            }
            return try columns.filter { !references.contains("\(table).\($0.new)") && !["Z_PK", "Z_ENT", "Z_OPT"].contains($0.new) }.map { pair -> String in
                let value = row[old ? pair.old : pair.new] ?? .null
                guard old else { return "\(value)" }
                if converted.contains("\(table).\(pair.new)"), let text = value.text {
                    return "\(RawSQLite.Value.real(try EntityMigrationPolicy.date(fromISO8601: text).timeIntervalSinceReferenceDate))"
                }
                if transformable.contains("\(table).\(pair.new)"), case .blob(let bytes) = value {
                    // Archived again by the destination store: compare what it holds.
                    return "archive of \(decoded(bytes))"
                }
                if table == "ZCOMMITCONTRIBUTOR", pair.new == "ZEMAILSDATA", case .blob(let bytes) = value {
                    let emails = try ValueTransformerRegistry.shared.transformer(forName: ValueTransformerRegistry.keyedUnarchiveFromDataName)!
                        .reverseTransformedValue(Data(bytes))
                    return "\(RawSQLite.Value.blob(Array(try JSONSerialization.data(withJSONObject: emails!, options: [.sortedKeys]))))"
                }
                return "\(value)"
            }.map { text in text }.joined(separator: "|")
        }

        for table in newSchema.tables.map(\.name) {
            let expected = try before.rows(table).map { try signature(table, $0, old: true) }.sorted()
            let actual = try after.rows(table).map { try signature(table, $0, old: false) }.sorted()
            #expect(expected == actual, "\(table)")
            #expect(!expected.isEmpty || before.rows(table).isEmpty)
        }
        // To-one relationships kept by name: the same value pairs at both ends.
        var checked = 0
        for table in oldSchema.tables {
            for column in table.columns {
                guard case .foreignKey(let relationship) = column.role, let owner = relationship.entity,
                      let newOwner = newSchema.entity(named: owner.name),
                      let newColumn = newOwner.columnsByProperty[relationship.name],
                      let target = relationship.destinationEntity.flatMap({ oldSchema.entity(named: $0.name)?.tableName }) else { continue }
                func pairs(_ dump: StoreDump, _ column: String, old: Bool) throws -> [String] {
                    let targets = dump.byKey(target)
                    return try dump.rows(table.name).compactMap { row -> String? in
                        guard let key = row[column]?.int else { return nil }
                        return try signature(table.name, row, old: old) + " -> " + signature(target, targets[key]!, old: old)
                    }.sorted()
                }
                let expected = try pairs(before, column.name, old: true)
                #expect(expected == (try pairs(after, newColumn, old: false)), "\(table.name).\(column.name)")
                checked += expected.isEmpty ? 0 : 1
            }
        }
        // Many-to-many relationships: the same pairs through the join tables.
        for join in oldSchema.joinTables {
            guard let newJoin = newSchema.joinTables.first(where: { $0.relationship.name == join.relationship.name && $0.relationship.entity?.name == join.relationship.entity?.name }),
                  let ownerTable = oldSchema.entity(named: join.relationship.entity!.name)?.tableName,
                  let targetTable = oldSchema.entity(named: join.relationship.destinationEntity!.name)?.tableName else { continue }
            func pairs(_ dump: StoreDump, _ join: SQLiteSchema.JoinTable, old: Bool) throws -> [String] {
                let owners = dump.byKey(ownerTable), targets = dump.byKey(targetTable)
                return try dump.rows(join.name).map { row in
                    try signature(ownerTable, owners[row[join.firstColumn]!.int!]!, old: old) + " <-> " + signature(targetTable, targets[row[join.secondColumn]!.int!]!, old: old)
                }.sorted()
            }
            let expected = try pairs(before, join, old: true)
            #expect(expected == (try pairs(after, newJoin, old: false)), "\(join.name)")
            #expect(expected.count == before.rows(join.name).count)
            checked += expected.isEmpty ? 0 : 1
        }
        // The fixture holds values for most of its relationships (22 to-ones and 2 join tables).
        #expect(checked >= 20)
    }

    /// An inferred step runs in place: every row keeps its key and every
    /// carried column its value; new columns are nil; the tables are a new
    /// store's of the destination version.
    static func checkInPlaceStep(before: StoreDump, after: StoreDump, step: StagedStoreMigration.Step, migrated: URL) throws {
        #expect(Set(before.tables.keys) == Set(after.tables.keys), "\(step.destinationVersionName)")
        for (table, rows) in before.tables {
            guard rows.first?["Z_PK"] != nil || after.rows(table).first?["Z_PK"] != nil else {
                // A join table: the same rows.
                func sorted(_ dump: StoreDump) -> [String] { dump.rows(table).map { $0.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") }.sorted() }
                #expect(sorted(before) == sorted(after), "\(table)")
                continue
            }
            let old = before.byKey(table), new = after.byKey(table)
            #expect(Set(old.keys) == Set(new.keys), "\(table) keys")
            let columns = Set(rows.first?.keys.map { $0 } ?? [])
            for (key, row) in new {
                for (column, value) in row {
                    if columns.contains(column) {
                        #expect(value == old[key]?[column], "\(table) \(key) \(column)")
                    } else {
                        #expect(value == .null, "\(table) \(key) new column \(column)")
                    }
                }
            }
        }
        // The schema a new store of the destination version has (column order aside).
        let fresh = try TestPaths.temporaryDirectory().appendingPathComponent("Fresh.sqlite")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: step.destinationModel)
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: fresh)
        try coordinator.remove(store)
        let want = try RawSQLite.tableColumns(fresh.path).mapValues { Set($0) }
        let have = try RawSQLite.tableColumns(migrated.path).mapValues { Set($0) }
        #expect(have == want, "\(step.destinationVersionName)")
        let indexes = "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
        #expect(try RawSQLite.query(migrated.path, indexes) == (try RawSQLite.query(fresh.path, indexes)), "\(step.destinationVersionName)")
        #expect(try RawSQLite.query(migrated.path, "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
                == (try RawSQLite.query(fresh.path, "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")))
    }
}
