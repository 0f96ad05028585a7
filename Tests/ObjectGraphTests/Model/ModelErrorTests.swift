import Foundation
import Testing
@testable import ObjectGraph

/// Bad models get an error naming the file, line, entity and property.
@Suite struct ModelErrorTests {
    /// Reads `xml` as if from `file`, expecting failure; returns the details.
    func problems(_ xml: String, file: String = "/models/Bad.xcdatamodel/contents") throws -> (CoreDataError, [CoreDataError]) {
        do {
            _ = try XcodeModelReader.read(data: Data(xml.utf8), file: file)
        } catch let error as CoreDataError {
            return (error, error.detailedErrors)
        }
        Issue.record("model was accepted")
        throw CoreDataError(.coreData, "accepted")
    }

    func expectProblem(_ details: [CoreDataError], line: Int, entity: String?, property: String?, containing text: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        let match = details.first { ($0.userInfo[CoreDataError.lineNumberErrorKey] as? Int) == line }
        #expect(match != nil, "no problem reported at line \(line): \(details.map(\.message))", sourceLocation: sourceLocation)
        guard let match else { return }
        #expect(match.userInfo[CoreDataError.filePathErrorKey] as? String == "/models/Bad.xcdatamodel/contents", sourceLocation: sourceLocation)
        #expect(match.userInfo[CoreDataError.entityNameErrorKey] as? String == entity, sourceLocation: sourceLocation)
        #expect(match.userInfo[CoreDataError.propertyNameErrorKey] as? String == property, sourceLocation: sourceLocation)
        #expect(match.message.contains(text), "\(match.message)", sourceLocation: sourceLocation)
        #expect(match.message.hasPrefix("/models/Bad.xcdatamodel/contents:\(line): error: "), sourceLocation: sourceLocation)
    }

    @Test func malformedXMLNamesFileAndLine() throws {
        let xml = "<?xml version=\"1.0\"?>\n<model>\n    <entity name=\"A\">\n        <attribute name=\"x\" attributeType=\"String\">\n    </entity>\n</model>\n"
        let (error, _) = try problems(xml)
        #expect(error.code == .fileReadCorruptFile)
        #expect(error.userInfo[CoreDataError.lineNumberErrorKey] as? Int == 5)
        #expect(error.message.hasPrefix("/models/Bad.xcdatamodel/contents:5:"))
        #expect(error.message.contains("malformed XML"))
    }

    @Test func notAModelFile() throws {
        let (error, details) = try problems("<plist><dict/></plist>")
        #expect(error.code == .coreData)
        #expect(details.first?.message.contains("expected <model>") == true)
    }

    @Test func unknownAttributeType() throws {
        let (error, details) = try problems("""
        <model>
            <entity name="Person">
                <attribute name="age" attributeType="Integer 8"/>
            </entity>
        </model>
        """)
        #expect(error.code == .coreData)
        #expect(error.detailedErrors.count == 1)
        expectProblem(details, line: 3, entity: "Person", property: "age", containing: "unknown attribute type 'Integer 8'")
    }

    @Test func relationshipToAMissingEntity() throws {
        let (_, details) = try problems("""
        <model>
            <entity name="Person">
                <relationship name="pets" toMany="YES" deletionRule="Cascade" destinationEntity="Pet" inverseName="owner" inverseEntity="Pet"/>
            </entity>
        </model>
        """)
        expectProblem(details, line: 3, entity: "Person", property: "pets", containing: "destination entity 'Pet' is not in the model")
    }

    @Test func inverseThatDoesNotPointBack() throws {
        let (_, details) = try problems("""
        <model>
            <entity name="Person">
                <relationship name="pets" toMany="YES" destinationEntity="Pet" inverseName="owner" inverseEntity="Pet"/>
                <relationship name="walked" toMany="YES" destinationEntity="Pet" inverseName="owner" inverseEntity="Pet"/>
            </entity>
            <entity name="Pet">
                <relationship name="owner" maxCount="1" destinationEntity="Person" inverseName="pets" inverseEntity="Person"/>
                <relationship name="vet" maxCount="1" destinationEntity="Person" inverseName="patients" inverseEntity="Person"/>
            </entity>
        </model>
        """)
        expectProblem(details, line: 4, entity: "Person", property: "walked", containing: "inverse 'Pet.owner' does not point back: its inverse is 'Person.pets'")
        expectProblem(details, line: 8, entity: "Pet", property: "vet", containing: "inverse relationship 'patients' is not declared on entity 'Person'")
        #expect(details.count == 2)
    }

    @Test func reservedPropertyNames() throws {
        // MOD-10
        let (_, details) = try problems("""
        <model>
            <entity name="Item">
                <attribute name="description" attributeType="String"/>
                <attribute name="objectID" attributeType="String"/>
                <attribute name="isDeleted" attributeType="Boolean"/>
                <attribute name="title" attributeType="String"/>
            </entity>
        </model>
        """)
        expectProblem(details, line: 3, entity: "Item", property: "description", containing: "reserved name")
        expectProblem(details, line: 4, entity: "Item", property: "objectID", containing: "reserved name")
        expectProblem(details, line: 5, entity: "Item", property: "isDeleted", containing: "reserved name")
        #expect(details.count == 3)
    }

    @Test func cycleInInheritance() throws {
        let (_, details) = try problems("""
        <model>
            <entity name="A" parentEntity="C"/>
            <entity name="B" parentEntity="A"/>
            <entity name="C" parentEntity="B"/>
        </model>
        """)
        expectProblem(details, line: 2, entity: "A", property: nil, containing: "cycle in entity inheritance: A -> C -> B -> A")
        #expect(details.count == 3)  // each entity in the cycle is reported
    }

    @Test func missingParentDuplicatesAndUndefinedTypes() throws {
        let (_, details) = try problems("""
        <model>
            <entity name="A" parentEntity="Nowhere">
                <attribute name="x" attributeType="String"/>
                <attribute name="x" attributeType="String"/>
                <attribute name="y" attributeType="Undefined"/>
                <attribute name="n" attributeType="Integer 16" defaultValueString="seven"/>
                <relationship name="r" maxCount="1" destinationEntity="A" deletionRule="Explode"/>
            </entity>
            <entity name="A"/>
        </model>
        """)
        expectProblem(details, line: 2, entity: "A", property: nil, containing: "parent entity 'Nowhere' is not in the model")
        expectProblem(details, line: 4, entity: "A", property: "x", containing: "duplicate property name")
        expectProblem(details, line: 5, entity: "A", property: "y", containing: "undefined type")  // AD-03
        expectProblem(details, line: 6, entity: "A", property: "n", containing: "default value 'seven' is not a valid Integer 16")
        expectProblem(details, line: 7, entity: "A", property: "r", containing: "unknown deletion rule 'Explode'")
        expectProblem(details, line: 9, entity: "A", property: nil, containing: "duplicate entity name")
    }

    @Test func propertyShadowingAnInheritedOne() throws {
        let (_, details) = try problems("""
        <model>
            <entity name="Base" isAbstract="YES">
                <attribute name="name" attributeType="String"/>
            </entity>
            <entity name="Leaf" parentEntity="Base">
                <attribute name="name" attributeType="String"/>
            </entity>
        </model>
        """)
        expectProblem(details, line: 6, entity: "Leaf", property: "name", containing: "already inherited from entity 'Base'")
    }

    @Test func codeBuiltModelsReportProblemsToo() throws {
        let model = ManagedObjectModel()
        let a = EntityDescription(name: "A")
        let orphan = RelationshipDescription(name: "orphan")
        a.properties = [orphan, AttributeDescription(name: "hash", type: .string)]
        model.entities = [a]
        #expect(throws: CoreDataError.self) { try model.validate() }
        let messages = model.problems().map(\.description)
        #expect(messages.contains("error: entity 'A', property 'orphan': relationship has no destination entity"))
        #expect(messages.contains { $0.contains("'hash' is a reserved name") })
    }

    @Test func missingInverseIsOnlyAWarning() throws {
        // REL-06
        let model = try XcodeModelReader.read(data: Data("""
        <model>
            <entity name="A">
                <relationship name="b" maxCount="1" destinationEntity="B"/>
            </entity>
            <entity name="B"/>
        </model>
        """.utf8))
        let warnings = model.problems().filter(\.isWarning)
        #expect(warnings.count == 1)
        #expect(warnings.first?.message.contains("no inverse") == true)
    }

    @Test func missingFile() {
        #expect {
            try ManagedObjectModel(contentsOf: URL(fileURLWithPath: "/no/such/Model.xcdatamodeld"))
        } throws: { error in
            (error as? CoreDataError)?.code == .fileReadNoSuchFile
        }
    }

    @Test func bundleWhoseCurrentVersionIsMissing() throws {
        let dir = try TestPaths.temporaryDirectory().appendingPathComponent("M.xcdatamodeld")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("M.xcdatamodel"), withIntermediateDirectories: true)
        let plist = try PropertyListSerialization.data(fromPropertyList: ["_XCCurrentVersionName": "M 2.xcdatamodel"], format: .xml, options: 0)
        try plist.write(to: dir.appendingPathComponent(".xccurrentversion"))
        #expect {
            try XcodeModelBundle(url: dir)
        } throws: { error in
            (error as? CoreDataError)?.message.contains("current version 'M 2.xcdatamodel' is not in the bundle") == true
        }
    }
}
