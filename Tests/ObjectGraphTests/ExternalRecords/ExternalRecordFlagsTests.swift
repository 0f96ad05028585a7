import Foundation
import Testing
@testable import ObjectGraph

/// The two Spotlight flags of a property (PD-11, PD-12): defaults, Xcode
/// model files (`spotlightIndexingEnabled`, `storedInTruthFile`), compiled
/// models, copies, and version hashes (which, as in Core Data, they do not change).
@Suite struct ExternalRecordFlagsTests {
    static func model(indexed: Bool, stored: Bool) -> ManagedObjectModel {
        let entity = EntityDescription(name: "Doc")
        let title = AttributeDescription(name: "title", type: .string)
        title.isIndexedBySpotlight = indexed
        title.isStoredInExternalRecord = stored
        let plain = AttributeDescription(name: "plain", type: .integer32)
        let owner = EntityDescription(name: "Owner")
        let docs = RelationshipDescription(name: "docs", destination: entity, toMany: true)
        let docOwner = RelationshipDescription(name: "owner", destination: owner, toMany: false)
        docs.inverseRelationship = docOwner
        docOwner.inverseRelationship = docs
        docOwner.isStoredInExternalRecord = stored
        entity.properties = [title, plain, docOwner]
        owner.properties = [docs]
        let model = ManagedObjectModel()
        model.entities = [entity, owner]
        return model
    }

    @Test func flagsDefaultToFalse() {
        let attribute = AttributeDescription(name: "a", type: .string)
        #expect(!attribute.isIndexedBySpotlight && !attribute.isStoredInExternalRecord)
        let relationship = RelationshipDescription(name: "r", destination: EntityDescription(name: "E"), toMany: false)
        #expect(!relationship.isIndexedBySpotlight && !relationship.isStoredInExternalRecord)
    }

    // PD-11, PD-12: an Xcode model keeps the flags, as Xcode writes them.
    @Test func xcodeModelsReadAndWriteTheFlags() throws {
        let model = Self.model(indexed: true, stored: true)
        let contents = XcodeModelWriter.contents(of: model)
        #expect(contents.contains(#"name="title""#) && contents.contains(#"spotlightIndexingEnabled="YES""#))
        #expect(contents.components(separatedBy: #"storedInTruthFile="YES""#).count == 3)   // title and owner
        let plainLine = try #require(contents.split(separator: "\n").first { $0.contains(#"name="plain""#) })
        #expect(!plainLine.contains("spotlightIndexingEnabled") && !plainLine.contains("storedInTruthFile"))
        let reread = try XcodeModelReader.read(data: Data(contents.utf8))
        let title = try #require(reread.entitiesByName["Doc"]?.attributesByName["title"])
        #expect(title.isIndexedBySpotlight && title.isStoredInExternalRecord)
        let plain = try #require(reread.entitiesByName["Doc"]?.attributesByName["plain"])
        #expect(!plain.isIndexedBySpotlight && !plain.isStoredInExternalRecord)
        #expect(try #require(reread.entitiesByName["Doc"]?.relationshipsByName["owner"]).isStoredInExternalRecord)
        #expect(model.differences(from: reread) == [])
        // Xcode's own spelling, read from a hand-written contents file.
        let xml = """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <entity name="Doc" representedClassName="Doc" syncable="YES">
                <attribute name="title" optional="YES" attributeType="String" spotlightIndexingEnabled="YES" storedInTruthFile="YES"/>
                <attribute name="body" optional="YES" attributeType="String" storedInTruthFile="YES"/>
                <attribute name="draft" optional="YES" attributeType="String" spotlightIndexingEnabled="NO"/>
            </entity>
        </model>
        """
        let read = try XcodeModelReader.read(data: Data(xml.utf8))
        let doc = try #require(read.entitiesByName["Doc"])
        #expect(doc.attributesByName["title"].map { $0.isIndexedBySpotlight && $0.isStoredInExternalRecord } == true)
        #expect(doc.attributesByName["body"].map { !$0.isIndexedBySpotlight && $0.isStoredInExternalRecord } == true)
        #expect(doc.attributesByName["draft"].map { !$0.isIndexedBySpotlight && !$0.isStoredInExternalRecord } == true)
    }

    // PD-03: compiled models and copies keep the flags.
    @Test func compiledModelsAndCopiesKeepTheFlags() throws {
        let model = Self.model(indexed: true, stored: true)
        let decoded = try CompiledModelDecoder.decode(archive: try CompiledModelWriter.archive(model), source: "test.mom")
        let title = try #require(decoded.entitiesByName["Doc"]?.attributesByName["title"])
        #expect(title.isIndexedBySpotlight && title.isStoredInExternalRecord)
        #expect(try #require(decoded.entitiesByName["Doc"]?.relationshipsByName["owner"]).isStoredInExternalRecord)
        let copy = try #require(model.entitiesByName["Doc"]?.attributesByName["title"]).copy()
        #expect(copy.isIndexedBySpotlight && copy.isStoredInExternalRecord)
    }

    // Not part of version hashes (Core Data's rule): turning export on needs no migration.
    @Test func theFlagsDoNotChangeVersionHashes() {
        let off = Self.model(indexed: false, stored: false)
        let on = Self.model(indexed: true, stored: true)
        #expect(off.entityVersionHashesByName == on.entityVersionHashesByName)
        #expect(off.entitiesByName["Doc"]!.attributesByName["title"]!.versionHash == on.entitiesByName["Doc"]!.attributesByName["title"]!.versionHash)
    }

    // PD-12a: a transient property is never exported, flagged or not.
    @Test func transientPropertiesAreNeverExported() throws {
        let entity = EntityDescription(name: "T")
        let kept = AttributeDescription(name: "kept", type: .string)
        kept.isStoredInExternalRecord = true
        let flaggedTransient = AttributeDescription(name: "temp", type: .string)
        flaggedTransient.isTransient = true
        flaggedTransient.isStoredInExternalRecord = true
        flaggedTransient.isIndexedBySpotlight = true
        entity.properties = [kept, flaggedTransient]
        let onlyTransient = EntityDescription(name: "U")
        let scratch = AttributeDescription(name: "scratch", type: .string)
        scratch.isTransient = true
        scratch.isIndexedBySpotlight = true
        onlyTransient.properties = [scratch, AttributeDescription(name: "stored", type: .string)]
        let model = ManagedObjectModel()
        model.entities = [entity, onlyTransient]
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let writer = try ExternalRecordWriter(configuration: .init(directory: directory), model: model, storeIdentifier: "S", storeURL: nil)
        #expect(writer.exportedPropertyNames(of: entity) == (["kept"], []))
        // A flagged transient counts as no flag: every stored attribute is exported.
        #expect(writer.exportedPropertyNames(of: onlyTransient) == (["stored"], ["stored"]))
    }
}
