import Foundation
import Testing
@testable import ObjectGraph

/// The reference Employee/Department model built in code, read from XML, and
/// written back out (AT-01, MOD-03…MOD-06, REL-01, REL-05, REL-10).
@Suite struct ReferenceModelTests {
    @Test func builtInCodeHasTheReferenceShape() throws {
        let model = ReferenceModel.make()
        try model.validate()
        let employee = try #require(model.entitiesByName["Employee"])
        let department = try #require(model.entitiesByName["Department"])
        // MOD-03, MOD-05, MOD-06
        #expect(employee.managedObjectClassName == "Employee")
        #expect(!employee.isAbstract && employee.superentity == nil)
        // PROP-02, ATTR-08
        let firstName = try #require(employee.attributesByName["firstName"])
        #expect(!firstName.isOptional && !firstName.isTransient && firstName.minLength == 2 && firstName.maxLength == nil)
        // ATTR-04, ATTR-07
        let salary = try #require(employee.attributesByName["salary"])
        #expect(salary.attributeType == .decimal && salary.minValue == 0)
        // REL-05, REL-10: symmetric inverses, including the reflexive pair.
        let manager = try #require(employee.relationshipsByName["manager"])
        let reports = try #require(employee.relationshipsByName["directReports"])
        #expect(manager.inverseRelationship === reports && reports.inverseRelationship === manager)
        #expect(manager.destinationEntity === employee && !manager.isToMany && reports.isToMany)
        let employees = try #require(department.relationshipsByName["employees"])
        #expect(employees.inverseRelationship?.inverseRelationship === employees)
        #expect(employees.deleteRule == .deny && employees.maxCount == 999)
        // MOM-EN-02
        #expect(model.entitiesByName.count == model.entities.count)
        #expect(Array(model).map(\.name) == model.entities.map(\.name))  // MOM-00g
    }

    @Test func codeAndXMLCompareEqual() throws {
        let fromXML = try ManagedObjectModel(contentsOf: TestPaths.companyModel)
        let inCode = ReferenceModel.make()
        #expect(inCode.differences(from: fromXML) == [])
        #expect(inCode.entityVersionHashesByName == fromXML.entityVersionHashesByName)
    }

    @Test func writeThenReadRoundTrips() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let original = ReferenceModel.make()
        let url = directory.appendingPathComponent("Company.xcdatamodel")
        try XcodeModelWriter.write(original, to: url)
        let reread = try ManagedObjectModel(contentsOf: url)
        #expect(original.differences(from: reread) == [])
        // MOM-IN-01: the hashes survive the file.
        #expect(reread.entityVersionHashesByName == original.entityVersionHashesByName)
        // And a second trip writes the same document.
        #expect(XcodeModelWriter.contents(of: reread) == XcodeModelWriter.contents(of: original))
    }

    @Test func roundTripKeepsEveryAttributeFeature() throws {
        let entity = EntityDescription(name: "Thing")
        entity.userInfo = ["table": "things & <stuff>"]
        entity.versionHashModifier = "v2"
        entity.renamingIdentifier = "OldThing"
        entity.uniquenessConstraints = [["code"]]
        var attributes: [PropertyDescription] = []
        let values: [(AttributeType, Any?)] = [
            (.integer16, Int16(-7)), (.integer32, Int32(42)), (.integer64, Int64.max), (.decimal, Decimal(string: "0.3")!),
            (.double, 2.5), (.float, Float(1.5)), (.string, "line\nbreak \"quoted\""), (.boolean, true),
            (.date, Date(timeIntervalSinceReferenceDate: 12345.5)), (.binaryData, nil),
            (.uuid, UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!), (.uri, URL(string: "https://example.com/a?b=c")!),
            (.transformable, nil), (.objectID, nil),
        ]
        for (index, (type, value)) in values.enumerated() {
            let a = AttributeDescription(name: "a\(index)", type: type)
            a.defaultValue = value
            a.isIndexedBySpotlight = index % 2 == 0
            a.isStoredInExternalRecord = index % 3 == 0
            attributes.append(a)
        }
        let code = AttributeDescription(name: "code", type: .string)
        code.regularExpression = "[A-Z]{3}"
        code.maxLength = 3
        code.setValidationPredicates(["SELF != 'XXX'"], withValidationWarnings: ["XXX is reserved"])
        code.renamingIdentifier = "oldCode"
        let when = AttributeDescription(name: "when", type: .date)
        when.minDate = Date(timeIntervalSinceReferenceDate: 0)
        when.maxDate = Date(timeIntervalSinceReferenceDate: 1e9)
        let shape = AttributeDescription(name: "shape", type: .transformable)
        shape.valueTransformerName = ValueTransformerRegistry.propertyListName
        shape.customValueClassName = "NSDictionary"
        let scratch = AttributeDescription(name: "scratch", type: .undefined)
        scratch.isTransient = true
        let fetched = FetchedPropertyDescription(name: "similar", fetchRequest: FetchRequest(entityName: "Thing"))
        fetched.fetchRequest?.predicate = try FetchPredicate(format: "code BEGINSWITH $FETCH_SOURCE.code")
        entity.properties = attributes + [code, when, shape, scratch, fetched]
        let model = ManagedObjectModel()
        model.entities = [entity]
        try model.validate()

        let reread = try XcodeModelReader.read(data: Data(XcodeModelWriter.contents(of: model).utf8))
        #expect(model.differences(from: reread) == [])
    }
}
