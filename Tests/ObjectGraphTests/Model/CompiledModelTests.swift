import Foundation
import Testing
@testable import ObjectGraph

/// Core Data's compiled model form: the keyed archive Apple's Core Data
/// caches in every SQLite store (`Z_MODELCACHE`) and ships as `.mom`/`.momd`.
@Suite struct CompiledModelTests {
    /// The raw `Z_CONTENT` bytes of a fixture, read through SQLite.
    static func modelCache(_ fixture: String) throws -> Data {
        let path = SQLiteFixtures.directory.appendingPathComponent(fixture).path
        // immutable=1: reading an original fixture must leave no side file.
        let connection = try SQLiteConnection(path: path, mode: .readOnlyImmutable)
        defer { connection.close() }
        let rows = try connection.query("SELECT Z_CONTENT FROM Z_MODELCACHE")
        guard case let .blob(data)? = rows.first?.first else { throw CoreDataError(.coreData, "\(fixture) has no Z_MODELCACHE blob") }
        return data
    }

    /// The first difference between a decoded model and its Xcode source,
    /// or nil. Xcode writes a class in the app's own module as `.Name`; the
    /// compiler archives it as `Module.Name`.
    /// The app that wrote a store names the module (`XCServerCoreData`,
    /// `Pocket_Bot`), so only the part after it is compared. Xcode 9 rewrote
    /// `indexed="YES"` attributes as one-property `<fetchIndex>` elements
    /// (`byIdentifierIndex`); the 2.0.0 store was written from the model
    /// before that, so both sides count such an index as `isIndexed`.
    static func firstDifference(_ decoded: ManagedObjectModel, _ source: ManagedObjectModel) -> String? {
        let expected = source.copy()
        let decoded = decoded.copy()
        for entity in expected.entities where entity.managedObjectClassName.hasPrefix(".") {
            if let actual = decoded.entitiesByName[entity.name]?.managedObjectClassName, actual.hasSuffix(entity.managedObjectClassName) {
                entity.managedObjectClassName = actual
            }
        }
        for model in [expected, decoded] {
            for entity in model.entities {
                entity.indexes = entity.indexes.filter { index in
                    guard index.elements.count == 1, index.elements[0].collationType == .binary, index.elements[0].isAscending,
                          let property = entity.directProperties.first(where: { $0.name == index.elements[0].propertyName }) else { return true }
                    property.isIndexed = true
                    return false
                }
            }
        }
        if let first = decoded.differences(from: expected).first { return first }
        if decoded.entities.map(\.name) != expected.entities.map(\.name).sorted() { return "entity order: \(decoded.entities.map(\.name))" }
        for entity in decoded.entities {
            guard let match = expected.entitiesByName[entity.name] else { return "entity \(entity.name) missing" }
            for property in entity.directProperties {
                guard let other = match.propertiesByName[property.name] else { return "\(entity.name).\(property.name) missing" }
                if property.isIndexed != other.isIndexed { return "\(entity.name).\(property.name).isIndexed" }
                guard let r = property as? RelationshipDescription, let o = other as? RelationshipDescription else { continue }
                if r.destinationEntity !== decoded.entitiesByName[o.destinationEntity?.name ?? ""] {
                    return "\(entity.name).\(r.name): destination is not the decoded model's entity"
                }
                if let inverse = r.inverseRelationship, inverse.inverseRelationship !== r, o.inverseRelationship?.inverseRelationship === o {
                    return "\(entity.name).\(r.name): inverse does not point back"
                }
                if (r.inverseRelationship == nil) != (o.inverseRelationship == nil) { return "\(entity.name).\(r.name): inverse presence" }
            }
        }
        return nil
    }

    @Test(arguments: SQLiteFixtures.all)
    func modelCacheDecodesToTheSourceModel(fixture: String) throws {
        let decoded = try ManagedObjectModel(compiledModelCacheData: try Self.modelCache(fixture), source: fixture)
        let source = try SQLiteFixtures.model(for: fixture)
        #expect(decoded.entities.count == source.entities.count)
        let difference = Self.firstDifference(decoded, source)
        #expect(difference == nil, "\(fixture): \(difference ?? "")")
    }

    @Test(arguments: SQLiteFixtures.all)
    func cachedModelOfAStoreFile(fixture: String) throws {
        let url = SQLiteFixtures.directory.appendingPathComponent(fixture)
        let model = try #require(try SQLiteStore.cachedModel(forStoreAt: url))
        let bot = try #require(model.entitiesByName["Bot"])
        #expect(bot.managedObjectClassName.hasSuffix(".Bot"))
        let integrations = try #require(bot.relationshipsByName["integrations"])
        #expect(integrations.isToMany && integrations.deleteRule == .cascade)
        #expect(integrations.inverseRelationship?.name == "bot" && integrations.inverseRelationship?.inverseRelationship === integrations)
        #expect(bot.attributesByName["identifier"]?.isIndexed == true)
        #expect(bot.attributesByName["identifier"]?.isOptional == false)
        #expect(bot.attributesByName["identifier"]?.defaultValue as? String == "_identifier")
        #expect(bot.attributesByName["type"]?.defaultValue as? Int32 == 0)
    }

    /// Version hashes of the decoded model equal those of the source model
    /// read by our own hasher (both go through `VersionHasher`), and the
    /// decoded model freezes like any other.
    @Test func decodedModelHashesLikeItsSource() throws {
        let fixture = "XCServerCoreData_2.0.1.sqlite"
        let decoded = try ManagedObjectModel(compiledModelCacheData: try Self.modelCache(fixture), source: fixture)
        #expect(decoded.entityVersionHashesByName == (try SQLiteFixtures.model(for: fixture)).entityVersionHashesByName)
        try decoded.validate()
    }

    @Test func storeWithoutModelCacheGivesNil() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("CompiledModel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("plain.sqlite").path
        let connection = try SQLiteConnection(path: path, mode: .readWriteCreate)
        try connection.execute("CREATE TABLE T (x)")
        connection.close()
        #expect(try SQLiteStore.cachedModel(forStoreAt: URL(fileURLWithPath: path)) == nil)
        let again = try SQLiteConnection(path: path, mode: .readWrite)
        try again.execute("CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB)")
        again.close()
        #expect(try SQLiteStore.cachedModel(forStoreAt: URL(fileURLWithPath: path)) == nil)
    }

    /// A store ObjectGraph creates caches its model in Z_MODELCACHE in
    /// Apple's format, and it decodes back to the same model.
    @Test func createdStoresCacheTheirModel() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Cached.sqlite")
        let (coordinator, _) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        let cached = try #require(try SQLiteStore.cachedModel(forStoreAt: url))
        let original = ReferenceModel.make()
        #expect(cached.entityVersionHashesByName == original.entityVersionHashesByName)
        #expect(cached.entities.map(\.name).sorted() == original.entities.map(\.name).sorted())
        for entity in original.entities {
            #expect(cached.entitiesByName[entity.name]?.properties.map(\.name).sorted() == entity.properties.map(\.name).sorted())
        }
    }

    @Test func momFileAndMomdFolderLoadThroughContentsOf() throws {
        let archive = try RawDeflate.decompress(try Self.modelCache("XCServerCoreData_2.0.1.sqlite"))
        let old = try RawDeflate.decompress(try Self.modelCache("XCServerCoreData_1.2.0.sqlite"))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("CompiledModel-\(UUID().uuidString)")
        let momd = dir.appendingPathComponent("XCServerCoreData.momd")
        try FileManager.default.createDirectory(at: momd, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try archive.write(to: momd.appendingPathComponent("XCServerCoreData 2.0.1.mom"))
        try old.write(to: momd.appendingPathComponent("XCServerCoreData 1.2.0.mom"))
        let info = try PropertyListSerialization.data(fromPropertyList: ["NSManagedObjectModel_CurrentVersionName": "XCServerCoreData 2.0.1"], format: .xml, options: 0)
        try info.write(to: momd.appendingPathComponent("VersionInfo.plist"))

        let single = try ManagedObjectModel(contentsOf: momd.appendingPathComponent("XCServerCoreData 1.2.0.mom"))
        #expect(Self.firstDifference(single, try SQLiteFixtures.model(for: "XCServerCoreData_1.2.0.sqlite")) == nil)
        let current = try ManagedObjectModel(contentsOf: momd)
        #expect(Self.firstDifference(current, try SQLiteFixtures.model(for: "XCServerCoreData_2.0.1.sqlite")) == nil)
        #expect(try CompiledModelBundle(url: momd).versionNames == ["XCServerCoreData 1.2.0", "XCServerCoreData 2.0.1"])

        let info2 = try PropertyListSerialization.data(fromPropertyList: ["NSManagedObjectModel_CurrentVersionName": "Missing"], format: .xml, options: 0)
        try info2.write(to: momd.appendingPathComponent("VersionInfo.plist"))
        let error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(contentsOf: momd) }
        #expect(error.code == .fileReadCorruptFile && error.message.contains("Missing"))
    }

    @Test func badFilesThrowErrorsNamingTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("CompiledModel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // Not a property list at all.
        let text = dir.appendingPathComponent("Text.mom")
        try Data("hello, not an archive".utf8).write(to: text)
        var error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(contentsOf: text) }
        #expect(error.code == .fileReadCorruptFile && error.message.contains(text.path))
        // A property list that is not a keyed archive.
        let plist = dir.appendingPathComponent("Plist.mom")
        try PropertyListSerialization.data(fromPropertyList: ["a": 1], format: .binary, options: 0).write(to: plist)
        error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(contentsOf: plist) }
        #expect(error.code == .fileReadCorruptFile && error.message.contains("NSKeyedArchiver"))
        // A keyed archive of something other than a model.
        let other = dir.appendingPathComponent("Other.mom")
        let archive: [String: Any] = [
            "$archiver": "NSKeyedArchiver", "$version": 100000,
            "$top": ["root": ["CF$UID": 1]],
            "$objects": ["$null", ["$class": ["CF$UID": 2], "NS.string": "x"], ["$classname": "NSColor", "$classes": ["NSColor", "NSObject"]]],
        ]
        try PropertyListSerialization.data(fromPropertyList: archive, format: .xml, options: 0).write(to: other)
        error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(contentsOf: other) }
        #expect(error.code == .coreData && error.message.contains("NSColor") && error.message.contains(other.path))
        // Truncated and corrupt deflate.
        let cache = try Self.modelCache("XCServerCoreData_1.2.0.sqlite")
        error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(compiledModelCacheData: cache.prefix(cache.count / 2), source: "half") }
        #expect(error.code == .fileReadCorruptFile && error.message.contains("truncated"))
        error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(compiledModelCacheData: Data([0xFF, 0xFF, 0xFF]), source: "junk") }
        #expect(error.code == .fileReadCorruptFile)
        // A missing file.
        error = try #require(throws: CoreDataError.self) { try ManagedObjectModel(contentsOf: dir.appendingPathComponent("None.mom")) }
        #expect(error.code == .fileReadNoSuchFile)
    }

    // MARK: - Writing

    /// A model using every field the model layer has.
    static func richModel() throws -> ManagedObjectModel {
        let person = EntityDescription(name: "Person")
        person.isAbstract = true
        person.userInfo = ["table": "people"]
        person.versionHashModifier = "v2"
        person.renamingIdentifier = "Human"
        let employee = EntityDescription(name: "Employee")
        employee.managedObjectClassName = "App.Employee"
        let department = EntityDescription(name: "Department")
        person.subentities = [employee]
        let name = AttributeDescription(name: "name", type: .string)
        name.isOptional = false
        name.minLength = 2
        name.maxLength = 40
        name.regularExpression = "[A-Z].*"
        name.defaultValue = "Anon"
        name.isIndexed = true
        name.userInfo = ["k": "v"]
        // Predicates come back in canonical format, so the model uses it.
        name.setValidationPredicates(["SELF != \"root\""], withValidationWarnings: ["no root"])
        let born = AttributeDescription(name: "born", type: .date)
        born.minDate = Date(timeIntervalSinceReferenceDate: -1000)
        born.defaultValue = Date(timeIntervalSinceReferenceDate: 5)
        let salary = AttributeDescription(name: "salary", type: .decimal)
        salary.minValue = 0
        salary.maxValue = Decimal(string: "12345.67")
        salary.defaultValue = Decimal(string: "-1.5")
        let level = AttributeDescription(name: "level", type: .integer16)
        level.defaultValue = Int16(3)
        level.maxValue = 10
        let photo = AttributeDescription(name: "photo", type: .binaryData)
        photo.allowsExternalBinaryDataStorage = true
        photo.maxLength = 1000
        let token = AttributeDescription(name: "token", type: .uuid)
        token.defaultValue = UUID(uuidString: "12345678-1234-1234-1234-123456789ABC")
        token.isTransient = true
        let home = AttributeDescription(name: "home", type: .uri)
        home.defaultValue = URL(string: "https://example.com/a")
        let ratio = AttributeDescription(name: "ratio", type: .float)
        ratio.defaultValue = Float(0.5)
        let flag = AttributeDescription(name: "flag", type: .boolean)
        flag.defaultValue = true
        flag.isIndexedBySpotlight = true
        flag.isStoredInExternalRecord = true
        let blob = AttributeDescription(name: "blob", type: .transformable)
        blob.valueTransformerName = "NSSecureUnarchiveFromData"
        blob.customValueClassName = "NSArray"
        blob.renamingIdentifier = "oldBlob"
        blob.versionHashModifier = "b"
        person.properties = [name, born, ratio]
        employee.properties = [salary, level, photo, token, home, flag, blob]
        let works = RelationshipDescription(name: "department", destination: department)
        works.minCount = 1
        works.isOptional = false
        works.deleteRule = .deny
        let staff = RelationshipDescription(name: "staff", destination: employee, toMany: true)
        staff.isOrdered = true
        staff.maxCount = 50
        staff.deleteRule = .cascade
        works.inverseRelationship = staff
        staff.inverseRelationship = works
        let request = FetchRequest(entityName: "Employee")
        request.predicate = try FetchPredicate(format: "department == $FETCH_SOURCE AND (name BEGINSWITH[cd] 'A' OR salary > 10 OR NOT level IN {1, 2}) AND ANY department.staff.name LIKE 'x*'")
        request.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: false, comparison: .caseInsensitiveCompare)]
        request.fetchLimit = 7
        request.fetchBatchSize = 3
        request.includesSubentities = false
        let seniors = FetchedPropertyDescription(name: "seniors", fetchRequest: request)
        employee.properties = employee.directProperties + [works]
        // A uniqueness constraint names stored properties (a fetched
        // property is refused by validation); a compound one keeps its order.
        let code = AttributeDescription(name: "code", type: .string)
        let region = AttributeDescription(name: "region", type: .string)
        department.properties = [code, region, staff, seniors]
        department.uniquenessConstraints = [["region", "code"]]
        employee.indexes = [FetchIndexDescription(name: "bySalary", elements: [
            FetchIndexElementDescription(propertyName: "salary", isAscending: false),
            FetchIndexElementDescription(propertyName: "level", collationType: .rTree),
        ])]
        let model = ManagedObjectModel()
        model.entities = [person, employee, department]
        model.setEntities([employee, department], forConfiguration: "Main")
        model.setEntities([department], forConfiguration: "Small")
        let template = FetchRequest(entityName: "Department")
        template.predicate = try FetchPredicate(format: "staff.@count >= $MIN AND TRUEPREDICATE")
        model.setFetchRequestTemplate(template, forName: "Busy")
        model.versionIdentifiers = ["3.1"]
        return model
    }

    @Test func writtenModelDecodesBackEqual() throws {
        let model = try Self.richModel()
        try model.validate()
        let cache = try CompiledModelWriter.modelCacheData(model)
        let decoded = try ManagedObjectModel(compiledModelCacheData: cache, source: "written")
        #expect(decoded.differences(from: model) == [])
        #expect(decoded.entityVersionHashesByName == model.entityVersionHashesByName)
        #expect(decoded.entitiesByName["Employee"]?.superentity?.name == "Person")
        #expect(decoded.entitiesByName["Department"]?.relationshipsByName["staff"]?.inverseRelationship?.name == "department")
        #expect(decoded.entitiesByName["Employee"]?.attributesByName["name"]?.isIndexed == true)
        // Apple's stores round-trip too: decode, write, decode.
        let apple = try ManagedObjectModel(compiledModelCacheData: try Self.modelCache("XCServerCoreData_2.0.1.sqlite"))
        let again = try ManagedObjectModel(compiledModelData: try CompiledModelWriter.archive(apple))
        #expect(again.differences(from: apple) == [])
    }

    // MARK: - Fuzzing

    /// Decodes, accepting a model or a `CoreDataError`; anything else (or a
    /// trap, which ends the test process) fails.
    static func expectOnlyCoreDataErrors(_ label: String, _ body: () throws -> ManagedObjectModel) -> Bool {
        do {
            _ = try body()
            return true
        } catch is CoreDataError {
            return false
        } catch {
            Issue.record("\(label): \(type(of: error)) is not a CoreDataError: \(error)")
            return false
        }
    }

    @Test func fuzzedArchivesOnlyThrow() throws {
        var rng = SplitMix64(seed: 0x5EED_C0DE)
        let cache = try Self.modelCache("XCServerCoreData_1.2.0.sqlite")
        let binary = try RawDeflate.decompress(cache)
        let xmlData = try PropertyListSerialization.data(
            fromPropertyList: try PropertyListSerialization.propertyList(from: binary, options: [], format: nil), format: .xml, options: 0)
        let xml = String(decoding: xmlData, as: UTF8.self)
        var decodedCount = 0

        // Bit flips and truncation of the binary archive and of the deflated cache.
        for round in 0..<150 {
            var bytes = [UInt8](binary)
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            }
            if Self.expectOnlyCoreDataErrors("bit flip \(round)", { try CompiledModelDecoder.decode(archive: Data(bytes), source: "flip") }) { decodedCount += 1 }
            let cut = Int.random(in: 0..<binary.count, using: &rng)
            _ = Self.expectOnlyCoreDataErrors("truncate \(round)", { try CompiledModelDecoder.decode(archive: binary.prefix(cut), source: "cut") })
            var packed = [UInt8](cache)
            packed[Int.random(in: 0..<packed.count, using: &rng)] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            _ = Self.expectOnlyCoreDataErrors("deflate flip \(round)", { try CompiledModelDecoder.decode(modelCache: Data(packed), source: "dflip") })
            _ = Self.expectOnlyCoreDataErrors("deflate cut \(round)", {
                try CompiledModelDecoder.decode(modelCache: cache.prefix(Int.random(in: 0..<cache.count, using: &rng)), source: "dcut")
            })
        }

        // Structural damage, made on the XML form where references are visible:
        // dangling references, references to the wrong object (cycles among
        // them), values of the wrong type at a key.
        let uidPattern = try NSRegularExpression(pattern: "<key>CF\\$UID</key>\\s*<integer>(\\d+)</integer>")
        let valuePattern = try NSRegularExpression(pattern: "<integer>-?\\d+</integer>|<true/>|<false/>|<string>[^<]*</string>|<real>[^<]*</real>")
        let uidMatches = uidPattern.matches(in: xml, range: NSRange(xml.startIndex..., in: xml))
        let valueMatches = valuePattern.matches(in: xml, range: NSRange(xml.startIndex..., in: xml))
        let replacements = ["<string>x</string>", "<integer>-1</integer>", "<integer>99999999</integer>", "<true/>",
                            "<array/>", "<dict/>", "<real>1e308</real>", "<data>AAAA</data>", "<date>2001-01-01T00:00:00Z</date>"]
        let objectCount = 1000
        for round in 0..<300 {
            let text = NSMutableString(string: xml)
            // Replace from the end so earlier ranges stay valid.
            var edits: [(NSRange, String)] = []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                if Bool.random(using: &rng) {
                    let match = uidMatches[Int.random(in: 0..<uidMatches.count, using: &rng)]
                    let target = [0, 1, 2, 3, Int.random(in: 0..<objectCount, using: &rng), objectCount * 10][Int.random(in: 0..<6, using: &rng)]
                    edits.append((match.range(at: 1), String(target)))
                } else {
                    let match = valueMatches[Int.random(in: 0..<valueMatches.count, using: &rng)]
                    edits.append((match.range, replacements[Int.random(in: 0..<replacements.count, using: &rng)]))
                }
            }
            var seen = IndexSet()
            for (range, replacement) in edits.sorted(by: { $0.0.location > $1.0.location }) where !seen.intersects(integersIn: range.location..<range.location + range.length) {
                seen.insert(integersIn: range.location..<range.location + range.length)
                text.replaceCharacters(in: range, with: replacement)
            }
            let data = Data((text as String).utf8)
            if Self.expectOnlyCoreDataErrors("structure \(round)", { try CompiledModelDecoder.decode(archive: data, source: "mutated") }) { decodedCount += 1 }
        }
        // Some mutations hit bytes nothing reads; most must be refused.
        #expect(decodedCount < 450)
    }
}
