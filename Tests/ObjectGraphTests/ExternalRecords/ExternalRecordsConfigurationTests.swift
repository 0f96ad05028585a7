import Foundation
import Testing
@testable import ObjectGraph

/// Reading the records options of a store (PC-35d–g, PC-35h): defaults,
/// and a clear error naming the option for a bad value.
@Suite struct ExternalRecordsConfigurationTests {
    typealias C = PersistentStoreCoordinator

    @Test func optionsAndDefaults() throws {
        #expect(try ExternalRecordsConfiguration(storeOptions: [:]) == nil)   // PC-35d: no directory, no records
        #expect(try ExternalRecordsConfiguration(storeOptions: [PersistentStore.readOnlyOption: true]) == nil)
        let plain = try #require(try ExternalRecordsConfiguration(storeOptions: [C.externalRecordsDirectoryOption: "/srv/records"]))
        #expect(plain == ExternalRecordsConfiguration(directory: URL(fileURLWithPath: "/srv/records")))
        #expect(plain.format == .json && plain.fileExtension == "json" && plain.exportsAllAttributesWhenNoneFlagged)
        #expect(!plain.writesPlainText && !plain.writesChangeFeed)
        #expect(C.xmlExternalRecordType == "xml" && C.binaryExternalRecordType == "binary" && C.jsonExternalRecordType == "json")
        #expect(ExternalRecordFormat.allCases.map(\.defaultFileExtension) == ["xml", "plist", "json"])
        let full = try #require(try ExternalRecordsConfiguration(storeOptions: [
            C.externalRecordsDirectoryOption: URL(fileURLWithPath: "/r"), C.externalRecordsFileFormatOption: C.binaryExternalRecordType,
            C.externalRecordExtensionOption: ".rec", C.externalRecordsPlainTextOption: true, C.externalRecordsChangeFeedOption: "yes",
            C.externalRecordsExportAllAttributesOption: NSNumber(value: false),
        ]))
        #expect(full == ExternalRecordsConfiguration(directory: URL(fileURLWithPath: "/r"), format: .binary, fileExtension: "rec",
                                                     exportsAllAttributesWhenNoneFlagged: false, writesPlainText: true, writesChangeFeed: true))
    }

    @Test(arguments: [
        ([C.externalRecordsDirectoryOption: 42], C.externalRecordsDirectoryOption),
        ([C.externalRecordsDirectoryOption: URL(string: "https://example.com/r")!], C.externalRecordsDirectoryOption),
        ([C.externalRecordsDirectoryOption: ""], C.externalRecordsDirectoryOption),
        ([C.externalRecordsDirectoryOption: "/r", C.externalRecordsFileFormatOption: "yaml"], C.externalRecordsFileFormatOption),
        ([C.externalRecordsDirectoryOption: "/r", C.externalRecordExtensionOption: "a/b"], C.externalRecordExtensionOption),
        ([C.externalRecordsDirectoryOption: "/r", C.externalRecordExtensionOption: "tmp"], C.externalRecordExtensionOption),
        ([C.externalRecordsDirectoryOption: "/r", C.externalRecordExtensionOption: 3], C.externalRecordExtensionOption),
        ([C.externalRecordsDirectoryOption: "/r", C.externalRecordExtensionOption: "txt", C.externalRecordsPlainTextOption: true], C.externalRecordExtensionOption),
        ([C.externalRecordsDirectoryOption: "/r", C.externalRecordsChangeFeedOption: "maybe"], C.externalRecordsChangeFeedOption),
    ] as [([String: any Sendable], String)])
    func aBadValueIsRefusedNamingItsOption(options: [String: any Sendable], key: String) throws {
        let error = try #require(throws: CoreDataError.self) { try ExternalRecordsConfiguration(storeOptions: options) }
        #expect(error.code == .persistentStoreOpen)
        #expect(error.message.hasPrefix("\(key): "))
    }

    // The store is refused before its file is touched.
    @Test func addingAStoreWithABadRecordsOptionFailsAndCreatesNoFile() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: RecordsModel.make())
        let url = directory.appendingPathComponent("Refused.sqlite")
        #expect(throws: CoreDataError.self) {
            try coordinator.addPersistentStore(ofType: C.sqliteStoreType, at: url, options: [
                C.externalRecordsDirectoryOption: directory.appendingPathComponent("records"), C.externalRecordsFileFormatOption: "csv"])
        }
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(coordinator.persistentStores.isEmpty)
    }

    // The option to export nothing for entities that flag nothing.
    @Test func anEntityFlaggingNothingExportsNothingWhenAskedTo() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let s = try RecordsModel.stack(directory, options: [C.externalRecordsExportAllAttributesOption: false])
        try s.context.performAndWait {
            let folder = try s.context.insertNewObject(forEntityName: "Folder")
            try folder.setValue("quiet", forKey: "name")
            try RecordsModel.note(s.context, "loud", folder: folder)
            try s.context.save()
        }
        let files = RecordsModel.files(under: s.storeFolder)
        #expect(files.filter { $0.hasPrefix("Note/") }.count == 1)
        #expect(!files.contains { $0.hasPrefix("Folder/") })
        let writer = try #require(s.store.externalRecordWriter)
        #expect(writer.exportedPropertyNames(of: s.coordinator.managedObjectModel.entitiesByName["Folder"]!).stored.isEmpty)
        #expect(writer.exportedPropertyNames(of: s.coordinator.managedObjectModel.entitiesByName["Note"]!) == (RecordsModel.noteExported, ["title"]))
    }
}
