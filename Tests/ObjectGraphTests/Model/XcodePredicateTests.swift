import Foundation
import Testing
@testable import ObjectGraph

/// Fetch request predicates in model files are parsed when the model is read.
@Suite struct XcodePredicateTests {
    @Test func invalidPredicateStringIsAModelProblem() throws {
        let xml = """
        <model>
            <entity name="A">
                <attribute name="x" attributeType="String"/>
            </entity>
            <fetchRequest name="Broken" entity="A" predicateString="x ==== 'a'"/>
        </model>
        """
        let error = #expect(throws: CoreDataError.self) { try XcodeModelReader.read(data: Data(xml.utf8), file: "Broken.xcdatamodel") }
        let messages = (error?.detailedErrors.map(\.message) ?? []) + [error?.message ?? ""]
        #expect(messages.contains { $0.contains("x ==== 'a'") && $0.contains("invalid") })
    }

    @Test func validPredicateRoundTripsThroughTheWriter() throws {
        let xml = """
        <model>
            <entity name="A">
                <attribute name="x" attributeType="String"/>
            </entity>
            <fetchRequest name="ByX" entity="A" predicateString="x BEGINSWITH $PREFIX"/>
        </model>
        """
        let model = try XcodeModelReader.read(data: Data(xml.utf8), file: "Good.xcdatamodel")
        let predicate = try #require(model.fetchRequestTemplate(forName: "ByX")?.predicate)
        #expect(predicate.variableNames == ["PREFIX"])
        #expect(predicate == (try FetchPredicate(format: "x BEGINSWITH $PREFIX")))
    }
}
