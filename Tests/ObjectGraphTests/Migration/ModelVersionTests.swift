import Foundation
import Testing
@testable import ObjectGraph

/// Model versions (MOM-IN-03, MOM-IN-05, MOM-VR-01, MOM-VR-03): the current
/// version of a bundle, finding the version a store was made with, names.
@Suite struct ModelVersionTests {
    /// `.xccurrentversion` names the current version; versions are ordered
    /// for migration with numbers compared as numbers.
    @Test func currentVersionAndOrder() throws {
        let bundle = try XcodeModelBundle(url: TestPaths.xcServerBundle)
        #expect(bundle.currentVersionName == "XCServerCoreData2.0.3.xcdatamodel")
        #expect(try bundle.currentModel().versionName == "XCServerCoreData2.0.3.xcdatamodel")
        #expect(ManagedObjectModel.versionOrder(bundle.versionNames) == [
            "XCServerCoreData.xcdatamodel", "XCServerCoreData1.1.0.xcdatamodel", "XCServerCoreData1.2.0.xcdatamodel",
            "XCServerCoreData2.0.0.xcdatamodel", "XCServerCoreData2.0.1.xcdatamodel", "XCServerCoreData2.0.2.xcdatamodel",
            "XCServerCoreData2.0.3.xcdatamodel",
        ])
        #expect(ManagedObjectModel.versionOrder(["Model 10.xcdatamodel", "Model 2.xcdatamodel", "Model.xcdatamodel"])
                == ["Model.xcdatamodel", "Model 2.xcdatamodel", "Model 10.xcdatamodel"])
    }

    /// MOM-IN-03: among the versions at some URLs, the one whose hashes a
    /// store's metadata records; nil for metadata of an unknown version.
    /// MOM-IN-05: a model merged from several whose entities together are
    /// the store's. MOM-VR-03: identifiers change no hash.
    @Test func mergedModelForStoreMetadata() throws {
        let directory = try TestPaths.temporaryDirectory()
        let v1 = SmallModel.make()
        v1.versionIdentifiers = ["1"]
        let v2 = SmallModel.make()
        v2.entitiesByName["Person"]!.properties += [AttributeDescription(name: "email", type: .string)]
        try XcodeModelWriter.write(v1, to: directory.appendingPathComponent("Small.xcdatamodeld/Small.xcdatamodel"))
        try XcodeModelWriter.write(v2, to: directory.appendingPathComponent("Small.xcdatamodeld/Small 2.xcdatamodel"))
        let url = try SmallModel.store(SmallModel.make())
        let metadata = try SQLiteStore.metadataForStore(at: url)

        let found = try #require(try ManagedObjectModel.mergedModel(from: [directory], forStoreMetadata: metadata))
        #expect(found.versionName == "Small.xcdatamodel")
        #expect(found.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        #expect(found.versionIdentifiers == ["1"])
        var unknown = metadata
        var hashes = metadata[ManagedObjectModel.storeModelVersionHashesKey] as! [String: Data]
        hashes["Person"] = Data(repeating: 7, count: 32)
        unknown[ManagedObjectModel.storeModelVersionHashesKey] = hashes
        #expect(try ManagedObjectModel.mergedModel(from: [directory], forStoreMetadata: unknown) == nil)

        // Two models each holding part of the store's entities.
        let people = SmallModel.make(), rest = SmallModel.make()
        people.entities = people.entities.filter { ["Person", "Department", "Tag"].contains($0.name) }
        rest.entities = rest.entities.filter { $0.name == "Note" }
        let merged = try #require(try ManagedObjectModel.modelByMerging([v2, rest, people], forStoreMetadata: metadata))
        #expect(Set(merged.entities.map(\.name)) == ["Department", "Note", "Person", "Tag"])
        #expect(merged.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
    }

    /// The version of an Apple-written store among its bundle's, by schema
    /// and cached model (`version(matchingStoreAt:inBundle:)`), is where a
    /// staged migration starts; a store of a model not in the bundle is
    /// refused with 134130 naming, per version, what did not match.
    @Test func storeOfAModelNotInTheBundle() throws {
        let url = try SmallModel.store(SmallModel.make())
        let error = #expect(throws: CoreDataError.self) {
            try StagedStoreMigration(storeAt: url, bundle: TestPaths.xcServerBundle)
        }
        #expect(error?.code == .migrationMissingSourceModel)
        #expect(error?.message.contains("XCServerCoreData2.0.3.xcdatamodel: ") == true)
        #expect(error?.message.contains("version hashes differ for") == true)
    }
}
