import Foundation
import Testing
@testable import ObjectGraph

/// Every version of Apple's XCServerCoreData model loads, and what loads
/// matches the XML, checked line by line with a scanner that shares no code
/// with the reader (MOD-02, MOM-IN-01).
@Suite struct XcodeFixtureModelTests {
    static let versions: [String] = {
        (try? XcodeModelBundle(url: TestPaths.xcServerBundle).versionNames) ?? []
    }()

    @Test func bundleListsSevenVersionsAndTheCurrentOne() throws {
        let bundle = try XcodeModelBundle(url: TestPaths.xcServerBundle)
        #expect(bundle.versionNames.count == 7)
        #expect(bundle.currentVersionName == "XCServerCoreData2.0.3.xcdatamodel")
        let current = try ManagedObjectModel(contentsOf: TestPaths.xcServerBundle)
        let explicit = try bundle.model(named: "XCServerCoreData2.0.3.xcdatamodel")
        #expect(current.differences(from: explicit) == [])
    }

    /// Without `.xccurrentversion` the current version is the last in
    /// version order, the one `StagedStoreMigration` migrates to: numbers
    /// compare as numbers and "Model" comes before "Model 2" (plain name
    /// order would pick "Model.xcdatamodel", since "." sorts after " ").
    @Test func bundleWithoutMarkerTakesTheLastInVersionOrder() throws {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("nomarker-\(UUID().uuidString)/Model.xcdatamodeld")
        defer { try? FileManager.default.removeItem(at: folder.deletingLastPathComponent()) }
        let source = TestPaths.xcServerBundle.appendingPathComponent("XCServerCoreData2.0.3.xcdatamodel")
        for name in ["Model.xcdatamodel", "Model 2.xcdatamodel", "Model 10.xcdatamodel"] {
            let target = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: source.appendingPathComponent("contents"),
                                             to: target.appendingPathComponent("contents"))
        }
        let bundle = try XcodeModelBundle(url: folder)
        #expect(bundle.versionNames == ["Model.xcdatamodel", "Model 2.xcdatamodel", "Model 10.xcdatamodel"])
        #expect(bundle.currentVersionName == "Model 10.xcdatamodel")
        #expect(ManagedObjectModel.versionOrder(bundle.versionNames).last == bundle.currentVersionName)
    }

    @Test(arguments: versions)
    func versionMatchesItsXML(_ version: String) throws {
        let contents = TestPaths.xcServerBundle.appendingPathComponent(version).appendingPathComponent("contents")
        let model = try ManagedObjectModel(contentsOf: contents)
        let scanned = try RawModelScan(contents)

        #expect(model.entities.count == scanned.entities.count)
        #expect(Set(model.entities.map(\.name)) == Set(scanned.entities.map(\.name)))
        for raw in scanned.entities {
            let entity = try #require(model.entitiesByName[raw.name])
            #expect(entity.managedObjectClassName == raw.fields["representedClassName"])
            let attributes = entity.directProperties.compactMap { $0 as? AttributeDescription }
            let relationships = entity.directProperties.compactMap { $0 as? RelationshipDescription }
            #expect(attributes.count == raw.attributes.count, "attributes of \(raw.name)")
            #expect(relationships.count == raw.relationships.count, "relationships of \(raw.name)")
            for fields in raw.attributes {
                let attribute = try #require(entity.attributesByName[fields["name"] ?? ""])
                #expect(attribute.attributeType.xcodeName == fields["attributeType"])
                #expect(attribute.isOptional == (fields["optional"] == "YES"))
                #expect(attribute.isIndexed == (fields["indexed"] == "YES"))
                if let text = fields["defaultValueString"], let value = attribute.defaultValue {
                    switch attribute.attributeType {
                    case .string: #expect(value as? String == text)
                    case .integer32: #expect(value as? Int32 == Int32(text))
                    case .float: #expect(value as? Float == Float(text))
                    case .boolean: #expect(value as? Bool == (text == "YES"))
                    default: break
                    }
                } else {
                    #expect(fields["defaultValueString"] == nil && attribute.defaultValue == nil,
                            "default of \(raw.name).\(attribute.name)")
                }
            }
            for fields in raw.relationships {
                let relationship = try #require(entity.relationshipsByName[fields["name"] ?? ""])
                #expect(relationship.destinationEntity?.name == fields["destinationEntity"])
                #expect(relationship.inverseRelationship?.name == fields["inverseName"])
                #expect(relationship.inverseRelationship?.entity?.name == fields["inverseEntity"])
                #expect(relationship.deleteRule.xcodeName == fields["deletionRule"])
                #expect(relationship.isToMany == (fields["toMany"] == "YES"))
                #expect(relationship.isOptional == (fields["optional"] == "YES"))
                // REL-05: every inverse in Apple's model points back.
                #expect(relationship.inverseRelationship?.inverseRelationship === relationship)
            }
        }
        #expect(model.problems().filter { !$0.isWarning } == [])
    }

    @Test func sampleOfTheCurrentVersion() throws {
        let model = try ManagedObjectModel(contentsOf: TestPaths.xcServerBundle)
        let bot = try #require(model.entitiesByName["Bot"])
        let identifier = try #require(bot.attributesByName["identifier"])
        #expect(identifier.attributeType == .string && !identifier.isOptional && identifier.isIndexed)
        #expect(identifier.defaultValue as? String == "_identifier")
        let type = try #require(bot.attributesByName["type"])
        #expect(type.attributeType == .integer32 && type.defaultValue as? Int32 == 0)
        let integrations = try #require(bot.relationshipsByName["integrations"])
        #expect(integrations.isToMany && integrations.deleteRule == .cascade)
        #expect(integrations.destinationEntity?.name == "Integration")
        #expect(integrations.inverseRelationship?.name == "bot")
        let xcodeServer = try #require(bot.relationshipsByName["xcodeServer"])
        #expect(!xcodeServer.isToMany && xcodeServer.deleteRule == .nullify)
        #expect(xcodeServer.inverseRelationship?.name == "bots")
        let integration = try #require(model.entitiesByName["Integration"])
        #expect(integration.attributesByName["testHierachy"]?.attributeType == .transformable)
        let lastUpdate = try #require(bot.attributesByName["lastUpdate"])
        #expect(lastUpdate.attributeType == .date && lastUpdate.isOptional)
        #expect(model.entities.count == 23)
    }

    @Test func everyVersionWritesAndReadsBackEquivalent() throws {
        for version in Self.versions {
            let model = try XcodeModelBundle(url: TestPaths.xcServerBundle).model(named: version)
            let reread = try XcodeModelReader.read(data: Data(XcodeModelWriter.contents(of: model).utf8), file: version)
            #expect(model.differences(from: reread) == [], "\(version)")
            #expect(model.entityVersionHashesByName == reread.entityVersionHashesByName)
        }
    }
}

/// A deliberately naive line scanner for Xcode's `contents` format: it reads
/// `name="value"` pairs of `<entity>`, `<attribute>` and `<relationship>`
/// lines, which is how Xcode writes them, one element per line.
struct RawModelScan {
    struct Entity {
        var name: String
        var fields: [String: String]
        var attributes: [[String: String]] = []
        var relationships: [[String: String]] = []
    }

    var entities: [Entity] = []

    init(_ url: URL) throws {
        let text = try String(contentsOf: url, encoding: .utf8)
        let pair = try NSRegularExpression(pattern: #"([A-Za-z]+)="([^"]*)""#)
        func fields(_ line: String) -> [String: String] {
            var out: [String: String] = [:]
            let ns = line as NSString
            for match in pair.matches(in: line, range: NSRange(location: 0, length: ns.length)) {
                out[ns.substring(with: match.range(at: 1))] = ns.substring(with: match.range(at: 2))
            }
            return out
        }
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("<entity ") {
                let f = fields(line)
                entities.append(Entity(name: f["name"] ?? "", fields: f))
            } else if line.hasPrefix("<attribute ") {
                entities[entities.count - 1].attributes.append(fields(line))
            } else if line.hasPrefix("<relationship ") {
                entities[entities.count - 1].relationships.append(fields(line))
            }
        }
    }
}

/// Xcode's `<fetchIndex>` elements become `EntityDescription.indexes`.
@Suite struct FetchIndexModelTests {
    @Test func fixtureFetchIndexesLoad() throws {
        let model = try XcodeModelBundle(url: TestPaths.xcServerBundle).model(named: "XCServerCoreData2.0.0.xcdatamodel")
        let bot = try #require(model.entitiesByName["Bot"])
        #expect(bot.indexes.map(\.name) == ["byIdentifierIndex"])
        #expect(bot.indexes.first?.elements == [FetchIndexElementDescription(propertyName: "identifier")])
        #expect(bot.indexes.first?.entity === bot)
        #expect(model.entities.reduce(0) { $0 + $1.indexes.count } == 7)
    }

    @Test func indexesRoundTripAndAreValidated() throws {
        let model = ReferenceModel.make()
        let employee = try #require(model.entitiesByName["Employee"])
        employee.indexes = [
            FetchIndexDescription(name: "byName", elements: [FetchIndexElementDescription(propertyName: "lastName"),
                                                             FetchIndexElementDescription(propertyName: "firstName", isAscending: false)]),
        ]
        let reread = try XcodeModelReader.read(data: Data(XcodeModelWriter.contents(of: model).utf8))
        #expect(model.differences(from: reread) == [])
        let before = model.entityVersionHashesByName
        employee.indexes.append(FetchIndexDescription(name: "bad", elements: [FetchIndexElementDescription(propertyName: "nickname"),
                                                                              FetchIndexElementDescription(propertyName: "directReports")]))
        #expect(model.entityVersionHashesByName == before)  // not a version-hash input
        let messages = model.problems().map(\.message)
        #expect(messages.contains("fetch index 'bad' names property 'nickname', which the entity does not have"))
        #expect(messages.contains("fetch index 'bad' names 'directReports', which is not stored in the entity's row"))
    }
}
