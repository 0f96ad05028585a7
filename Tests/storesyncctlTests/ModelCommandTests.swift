import Foundation
import ObjectGraph
import Testing

/// `storesyncctl model show|check`, run as a separate process.
@Suite struct ModelCommandTests {
    @Test func showJSONHasTheDocumentedShape() throws {
        let result = try CLI.run(["model", "show", "--json", CLI.companyModel])
        try #require(result.status == 0, "model show failed: \(result.stderr)")
        let json = try #require(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let entities = try #require(json["entities"] as? [[String: Any]])
        try #require(entities.map { $0["name"] as? String } == ["Department", "Employee"])
        let employee = entities[1]
        #expect(employee["abstract"] as? Bool == false)
        let attributes = try #require(employee["attributes"] as? [[String: Any]])
        let salary = try #require(attributes.first { $0["name"] as? String == "salary" })
        #expect(salary["type"] as? String == "Decimal" && salary["optional"] as? Bool == false)
        let relationships = try #require(employee["relationships"] as? [[String: Any]])
        let department = try #require(relationships.first { $0["name"] as? String == "department" })
        #expect(department["destination"] as? String == "Department")
        #expect(department["inverse"] as? String == "employees")
        #expect(department["toMany"] as? Bool == false && department["deleteRule"] as? String == "Nullify")
        let hash = try #require(employee["versionHash"] as? String)
        #expect(Data(base64Encoded: hash)?.count == 32)
    }

    /// ED-29: two processes compute the hashes this process does.
    @Test func twoProcessesComputeTheSameHashes() throws {
        let expected = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: CLI.companyModel)).entityVersionHashesByName
            .mapValues { $0.base64EncodedString() }
        for _ in 0..<2 {
            let output = try CLI.run(["model", "show", "--json", CLI.companyModel])
            let json = try #require(JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
            var hashes: [String: String] = [:]
            for entity in json["entities"] as? [[String: Any]] ?? [] {
                hashes[entity["name"] as? String ?? ""] = entity["versionHash"] as? String
            }
            #expect(hashes == expected)
        }
    }

    @Test func showTextAcceptsBundleFolderAndContentsFile() throws {
        let bundle = try CLI.run(["model", "show", CLI.xcServerBundle])
        let folder = try CLI.run(["model", "show", CLI.xcServerBundle + "/XCServerCoreData2.0.3.xcdatamodel"])
        let file = try CLI.run(["model", "show", CLI.xcServerBundle + "/XCServerCoreData2.0.3.xcdatamodel/contents"])
        #expect(bundle.status == 0 && folder.status == 0 && file.status == 0)
        #expect(bundle.stdout == folder.stdout && folder.stdout == file.stdout)
        #expect(bundle.stdout.contains("entity Bot\n"))
        #expect(bundle.stdout.contains("relationship integrations ->> Integration (inverse bot) [delete=Cascade"))
    }

    @Test func checkAcceptsAValidModel() throws {
        let result = try CLI.run(["model", "check", CLI.xcServerBundle])
        #expect(result.status == 0)
        #expect(result.stdout.contains("ok (23 entities)"))
    }

    @Test func checkPrintsEveryProblemAndExits65() throws {
        let path = try CLI.temporaryFile("contents", """
        <?xml version="1.0" encoding="UTF-8"?>
        <model>
            <entity name="A">
                <attribute name="size" attributeType="Integer 128"/>
                <attribute name="entity" attributeType="String"/>
                <relationship name="b" maxCount="1" destinationEntity="Missing"/>
            </entity>
        </model>
        """)
        let result = try CLI.run(["model", "check", path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("\(path):4: error: entity 'A', property 'size': unknown attribute type 'Integer 128'"))
        #expect(result.stderr.contains("\(path):5: error: entity 'A', property 'entity': 'entity' is a reserved name"))
        #expect(result.stderr.contains("\(path):6: error: entity 'A', property 'b': destination entity 'Missing' is not in the model"))
    }

    @Test func missingFileExits66AndMalformedXMLExits65() throws {
        let missing = try CLI.run(["model", "show", "/nonexistent/Model.xcdatamodeld"])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("/nonexistent/Model.xcdatamodeld: no such model file or folder"))
        let path = try CLI.temporaryFile("contents", "<model>\n  <entity name=\"A\">\n</model>\n")
        let malformed = try CLI.run(["model", "show", path])
        #expect(malformed.status == 65)
        #expect(malformed.stderr.contains("\(path):3:"))
        #expect(malformed.stderr.contains("malformed XML"))
    }
}
