import Foundation
import Testing
@testable import ObjectGraph

/// Entity inheritance: built top-down, inherited properties, kind-of checks
/// (ED-10…ED-16, ED-27, MOD-05, MOD-06).
@Suite struct EntityInheritanceTests {
    let shape = EntityDescription(name: "Shape")
    let polygon = EntityDescription(name: "Polygon")
    let square = EntityDescription(name: "Square")
    let circle = EntityDescription(name: "Circle")

    init() {
        shape.isAbstract = true
        shape.properties = [AttributeDescription(name: "color", type: .string)]
        polygon.properties = [AttributeDescription(name: "sides", type: .integer16)]
        square.properties = [AttributeDescription(name: "edge", type: .double)]
        shape.subentities = [polygon, circle]
        polygon.subentities = [square]
    }

    @Test func subentitiesSetTheParent() {
        #expect(square.superentity === polygon && polygon.superentity === shape)   // ED-10, ED-13
        #expect(shape.superentity == nil)
        #expect(shape.subentitiesByName.keys.sorted() == ["Circle", "Polygon"])    // ED-12
        #expect(square.ancestors.map(\.name) == ["Polygon", "Shape"])
    }

    @Test func droppedChildrenLoseTheirParent() {
        shape.subentities = [polygon]   // ED-14
        #expect(circle.superentity == nil)
    }

    @Test func anEntityHasOneParent() async {
        await #expect(processExitsWith: .failure) {
            let a = EntityDescription(name: "A"), b = EntityDescription(name: "B"), c = EntityDescription(name: "C")
            a.subentities = [c]
            b.subentities = [c]
        }
    }

    @Test func kindOfIsReflexiveAndTransitive() {
        // ED-15
        #expect(square.isKindOf(entity: square))
        #expect(square.isKindOf(entity: shape))
        #expect(!shape.isKindOf(entity: square))
        #expect(!circle.isKindOf(entity: polygon))
    }

    @Test func propertiesIncludeInheritedOnes() {
        // ED-16, ED-17, ED-19, ED-20
        #expect(square.properties.map(\.name) == ["color", "sides", "edge"])
        #expect(square.directProperties.map(\.name) == ["edge"])
        #expect(square.attributesByName.keys.sorted() == ["color", "edge", "sides"])
        #expect(square.attributesByName["color"]?.entity === shape)
        #expect(Array(square).map(\.name) == square.properties.map(\.name))   // ED-23
        #expect(square.selfAndDescendants.map(\.name) == ["Square"])
        #expect(shape.selfAndDescendants.map(\.name) == ["Shape", "Polygon", "Square", "Circle"])
    }

    @Test func parentChangesReachChildHashesButNotTheReverse() {
        // ED-27
        let squareBefore = square.versionHash, shapeBefore = shape.versionHash
        square.subentities = [EntityDescription(name: "Tile")]
        #expect(square.versionHash == squareBefore)
        shape.properties += [AttributeDescription(name: "opacity", type: .float)]
        #expect(square.versionHash != squareBefore)
        #expect(shape.versionHash != shapeBefore)
    }

    @Test func relationshipsByDestinationAreExactMatches() {
        // ED-21, ED-22
        let canvas = EntityDescription(name: "Canvas")
        let shapes = RelationshipDescription(name: "shapes", destination: shape, toMany: true)
        let squares = RelationshipDescription(name: "squares", destination: square, toMany: true)
        let fetched = FetchedPropertyDescription(name: "recent", fetchRequest: FetchRequest(entityName: "Shape"))
        canvas.properties = [shapes, squares, fetched]
        #expect(canvas.relationships(forDestination: shape).map(\.name) == ["shapes"])
        #expect(canvas.relationshipsByName.keys.sorted() == ["shapes", "squares"])
        #expect(canvas.propertiesByName.keys.sorted() == ["recent", "shapes", "squares"])
        #expect(canvas.fetchedPropertiesByName.keys.sorted() == ["recent"])
    }

    @Test func defaultsOfANewEntity() {
        // ED-02, ED-08, MOD-07, AD-01, AD-07
        let entity = EntityDescription(name: "Plain")
        #expect(entity.managedObjectClassName == "NSManagedObject")
        #expect(entity.renamingIdentifier == "Plain")
        #expect(entity.userInfo.isEmpty && !entity.isAbstract)
        let attribute = AttributeDescription(name: "x")
        #expect(attribute.attributeType == .undefined && attribute.defaultValue == nil && attribute.isOptional)
        #expect(attribute.renamingIdentifier == "x")
        entity.renamingIdentifier = nil
        entity.name = "Renamed"
        #expect(entity.renamingIdentifier == "Renamed")
    }

    @Test func inheritanceLoadsFromXML() throws {
        let model = try XcodeModelReader.read(data: Data("""
        <model>
            <entity name="Shape" isAbstract="YES">
                <attribute name="color" optional="YES" attributeType="String"/>
            </entity>
            <entity name="Circle" parentEntity="Shape">
                <attribute name="radius" attributeType="Double" defaultValueString="1"/>
            </entity>
        </model>
        """.utf8))
        let circle = try #require(model.entitiesByName["Circle"])
        #expect(circle.superentity?.name == "Shape" && model.entitiesByName["Shape"]!.isAbstract)
        #expect(circle.attributesByName["color"] != nil)
        #expect(circle.attributesByName["radius"]?.defaultValue as? Double == 1)
    }
}
