import Foundation
import Testing
@testable import ObjectGraph

/// Attribute type numbers, names and value classes (AT-00…AT-12, AD-05).
@Suite struct AttributeTypeTests {
    @Test func rawValuesAreCoreDatas() {
        let expected: [AttributeType: UInt] = [
            .undefined: 0, .integer16: 100, .integer32: 200, .integer64: 300, .decimal: 400, .double: 500,
            .float: 600, .string: 700, .boolean: 800, .date: 900, .binaryData: 1000, .uuid: 1100, .uri: 1200,
            .transformable: 1800, .objectID: 2000,
        ]
        for type in AttributeType.allCases { #expect(type.rawValue == expected[type], "\(type)") }
        #expect(AttributeType.allCases.count == expected.count)
    }

    @Test func xcodeNamesRoundTrip() {
        for type in AttributeType.allCases { #expect(AttributeType(xcodeName: type.xcodeName) == type) }
        #expect(AttributeType(xcodeName: "Integer 8") == nil)
    }

    @Test func valueClassNames() {
        #expect(AttributeDescription(name: "a", type: .decimal).attributeValueClassName == "NSDecimalNumber")
        #expect(AttributeDescription(name: "a", type: .integer16).attributeValueClassName == "NSNumber")
        #expect(AttributeDescription(name: "a", type: .string).attributeValueClassName == "NSString")
        let t = AttributeDescription(name: "a", type: .transformable)
        t.customValueClassName = "Color"
        #expect(t.attributeValueClassName == "Color")
    }

    @Test func integerRanges() {
        // AT-01…AT-03
        #expect(AttributeType.integer16.integerRange == -32768...32767)
        #expect(AttributeType.integer32.integerRange?.upperBound == Int64(Int32.max))
        #expect(AttributeType.string.integerRange == nil)
    }

    @Test func deleteRuleNumbersAndNames() {
        #expect(DeleteRule.allCases.map(\.rawValue) == [0, 1, 2, 3])
        #expect(DeleteRule.allCases.map(\.xcodeName) == ["No Action", "Nullify", "Cascade", "Deny"])
    }

    @Test func defaultValuesMustFitTheType() {
        let model = ManagedObjectModel()
        let entity = EntityDescription(name: "E")
        let a = AttributeDescription(name: "count", type: .integer16)
        a.defaultValue = "twelve"
        entity.properties = [a]
        model.entities = [entity]
        #expect(model.problems().contains { $0.message.contains("default value twelve (String) does not fit attribute type Integer 16") })
    }
}

/// Transformable attributes: the registry and its default transformers (AD-10…AD-12).
@Suite struct ValueTransformerRegistryTests {
    struct Irreversible: AttributeValueTransformer {
        var allowsReverseTransformation: Bool { false }
        func transformedValue(_ value: Any?) throws -> Data? { Data() }
        func reverseTransformedValue(_ data: Data?) throws -> Any? { nil }
    }

    struct Upper: AttributeValueTransformer {
        func transformedValue(_ value: Any?) throws -> Data? { (value as? String).map { Data($0.uppercased().utf8) } }
        func reverseTransformedValue(_ data: Data?) throws -> Any? { data.map { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func irreversibleTransformersAreRefused() {
        #expect(throws: CoreDataError.self) { try ValueTransformerRegistry.shared.register(Irreversible(), forName: "Nope") }
        #expect(ValueTransformerRegistry.shared.transformer(forName: "Nope") == nil)
    }

    @Test func namedTransformerIsFound() throws {
        try ValueTransformerRegistry.shared.register(Upper(), forName: "UpperTransformer")
        let attribute = AttributeDescription(name: "code", type: .transformable)
        attribute.valueTransformerName = "UpperTransformer"
        let transformer = try #require(ValueTransformerRegistry.shared.transformer(for: attribute))
        let data = try transformer.transformedValue("abc")
        #expect(try transformer.reverseTransformedValue(data) as? String == "ABC")
    }

    @Test func defaultTransformerArchivesWithKeyedArchiver() throws {
        // AD-12: no name means the keyed archiver.
        let attribute = AttributeDescription(name: "tags", type: .transformable)
        let transformer = try #require(ValueTransformerRegistry.shared.transformer(for: attribute))
        let value = NSArray(array: [NSString(string: "a"), NSNumber(value: 2)])
        let data = try #require(try transformer.transformedValue(value))
        let back = try #require(try transformer.reverseTransformedValue(data) as? NSArray)
        #expect(back == value)
    }

    @Test func propertyListTransformerRoundTrips() throws {
        let transformer = try #require(ValueTransformerRegistry.shared.transformer(forName: ValueTransformerRegistry.propertyListName))
        let data = try transformer.transformedValue(["a": 1, "b": ["x", "y"]] as [String: Any])
        let back = try #require(try transformer.reverseTransformedValue(data) as? [String: Any])
        #expect(back["a"] as? Int == 1)
        #expect(back["b"] as? [String] == ["x", "y"])
    }

    @Test func unregisteredTransformerNameIsAWarning() {
        let model = ManagedObjectModel()
        let entity = EntityDescription(name: "E")
        let a = AttributeDescription(name: "t", type: .transformable)
        a.valueTransformerName = "MissingTransformer"
        entity.properties = [a]
        model.entities = [entity]
        #expect(model.problems().contains { $0.isWarning && $0.message.contains("'MissingTransformer' is not registered") })
    }
}
