import Foundation
import Testing
@testable import ObjectGraph

/// Attributes with `allowsExternalBinaryDataStorage` in Core Data's framing:
/// 0x01 + bytes inline, 0x02 + UUID + NUL for a file in
/// `.<Store>_SUPPORT/_EXTERNAL_DATA/` (SQLITE-LAYOUT.md, "External binary storage").
@Suite struct SQLiteExternalBinaryTests {
    /// Photo(name, image: binary, external storage allowed; thumbnail: binary, not allowed).
    static func model() -> ManagedObjectModel {
        let photo = EntityDescription(name: "Photo")
        let image = AttributeDescription(name: "image", type: .binaryData)
        image.allowsExternalBinaryDataStorage = true
        photo.properties = [AttributeDescription(name: "name", type: .string), image, AttributeDescription(name: "thumbnail", type: .binaryData)]
        let model = ManagedObjectModel()
        model.entities = [photo]
        return model
    }

    static let large = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    static let otherLarge = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    static let small = Data("a small value".utf8)

    struct Stack {
        let url: URL
        let coordinator: PersistentStoreCoordinator
        let store: SQLiteStore
        let context: ManagedObjectContext
        var directory: URL { store.externalDataDirectory! }

        init(_ url: URL) throws {
            self.url = url
            coordinator = try PersistentStoreCoordinator(managedObjectModel: SQLiteExternalBinaryTests.model())
            store = try #require(try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url) as? SQLiteStore)
            context = ManagedObjectContext(coordinator: coordinator)
        }

        func files() -> Set<String> { Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []) }

        /// The raw framed column of the photo named `name`.
        func column(_ name: String) throws -> Data? {
            let rows = try RawSQLite.query(url.path, "SELECT ZIMAGE FROM ZPHOTO WHERE ZNAME = '\(name)'")
            guard case .blob(let bytes)? = rows.first?.first else { return nil }
            return Data(bytes)
        }

        func photo(_ name: String) throws -> ManagedObject {
            let request = FetchRequest(entityName: "Photo")
            request.predicate = try FetchPredicate(format: "name == %@", name)
            return try #require(try context.fetch(request).first)
        }
    }

    static func newStack() throws -> Stack {
        try Stack(try TestPaths.temporaryDirectory().appendingPathComponent("Photos.sqlite"))
    }

    @Test func framesEncodeAndDecode() {
        typealias Frame = SQLiteValueCodec.ExternalBinaryFrame
        #expect(Frame.inline(Data([7, 8])).encoded == Data([1, 7, 8]))
        #expect(Frame(decoding: Data([1, 7, 8])) == .inline(Data([7, 8])))
        #expect(Frame(decoding: Data([1])) == .inline(Data()))
        let name = "5E9B3A0C-1D2E-4F60-8A7B-9C0D1E2F3A4B"
        #expect(Frame.external(name).encoded == Data([2]) + Data(name.utf8) + Data([0]))
        #expect(Frame(decoding: Data([2]) + Data(name.utf8) + Data([0])) == .external(name))
        #expect(Frame(decoding: Data([2]) + Data(name.utf8)) == .external(name))
        // Not a frame: empty, unknown marker, a reference that is not a UUID (no path escapes).
        #expect(Frame(decoding: Data()) == nil)
        #expect(Frame(decoding: Data([3, 1])) == nil)
        #expect(Frame(decoding: Data([2]) + Data("../../etc/passwd".utf8) + Data([0])) == nil)
    }

    @Test func externalDataFolderSitsBesideTheStore() throws {
        let stack = try Self.newStack()
        #expect(stack.directory == stack.url.deletingLastPathComponent().appendingPathComponent(".Photos_SUPPORT/_EXTERNAL_DATA"))
    }

    @Test func readsHandMadeAppleRowsOfBothForms() throws {
        // Rows written as Apple's Core Data writes them, straight into the table.
        let stack = try Self.newStack()
        let uuid = "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0"
        try FileManager.default.createDirectory(at: stack.directory, withIntermediateDirectories: true)
        try Self.large.write(to: stack.directory.appendingPathComponent(uuid))
        let db = try SQLiteConnection(path: stack.url.path, mode: .readWrite)
        try db.run("INSERT INTO ZPHOTO (Z_PK, Z_ENT, Z_OPT, ZNAME, ZIMAGE, ZTHUMBNAIL) VALUES (1, 1, 1, 'inline', ?, ?)",
                   [.blob(Data([0x01]) + Self.small), .blob(Data([0x01, 0x02]))])
        try db.run("INSERT INTO ZPHOTO (Z_PK, Z_ENT, Z_OPT, ZNAME, ZIMAGE) VALUES (2, 1, 1, 'external', ?)",
                   [.blob(Data([0x02]) + Data(uuid.utf8) + Data([0x00]))])
        try db.run("UPDATE Z_PRIMARYKEY SET Z_MAX = 2 WHERE Z_NAME = 'Photo'")
        db.close()

        let fresh = try Stack(stack.url)
        try fresh.context.performAndWait { () throws -> Void in
            #expect(try fresh.photo("inline").value(forKey: "image") as? Data == Self.small)
            // An attribute without external storage is a plain BLOB: its first byte is data.
            #expect(try fresh.photo("inline").value(forKey: "thumbnail") as? Data == Data([0x01, 0x02]))
            #expect(try fresh.photo("external").value(forKey: "image") as? Data == Self.large)
        }
    }

    @Test func missingExternalFileIsAClearErrorAndChangesNothing() throws {
        let stack = try Self.newStack()
        let uuid = "11111111-2222-3333-4444-555555555555"
        let framed = Data([0x02]) + Data(uuid.utf8) + Data([0x00])
        let db = try SQLiteConnection(path: stack.url.path, mode: .readWrite)
        try db.run("INSERT INTO ZPHOTO (Z_PK, Z_ENT, Z_OPT, ZNAME, ZIMAGE) VALUES (1, 1, 1, 'lost', ?)", [.blob(framed)])
        db.close()

        let fresh = try Stack(stack.url)
        try fresh.context.performAndWait { () throws -> Void in
            let error = #expect(throws: CoreDataError.self) { try fresh.context.fetch(FetchRequest(entityName: "Photo")) }
            #expect(error?.code == .fileReadNoSuchFile)
            #expect(error?.message.contains(uuid) == true)
            #expect(error?.message.contains("Photo.image") == true)
            #expect(error?.userInfo[CoreDataError.filePathErrorKey] as? String == fresh.directory.appendingPathComponent(uuid).path)
            #expect(error?.userInfo[CoreDataError.propertyNameErrorKey] as? String == "image")
        }
        #expect(try fresh.column("lost") == framed)
        #expect(!FileManager.default.fileExists(atPath: fresh.directory.path))
        // Once the file is back, the row reads.
        try FileManager.default.createDirectory(at: fresh.directory, withIntermediateDirectories: true)
        try Self.small.write(to: fresh.directory.appendingPathComponent(uuid))
        try fresh.context.performAndWait { () throws -> Void in
            #expect(try fresh.photo("lost").value(forKey: "image") as? Data == Self.small)
        }
    }

    @Test func roundTripsInlineBelowAndExternalAboveTheThreshold() throws {
        let stack = try Self.newStack()
        let threshold = SQLiteStore.externalBinaryDataThreshold
        let atThreshold = Data(repeating: 9, count: threshold)
        let aboveThreshold = Data(repeating: 8, count: threshold + 1)
        try stack.context.performAndWait { () throws -> Void in
            for (name, data) in [("small", Self.small), ("at", atThreshold), ("above", aboveThreshold), ("large", Self.large), ("empty", Data())] {
                let photo = try stack.context.insertNewObject(forEntityName: "Photo")
                try photo.setValue(name, forKey: "name")
                try photo.setValue(data, forKey: "image")
            }
            try stack.context.insertNewObject(forEntityName: "Photo").setValue("none", forKey: "name")
            try stack.context.save()
        }
        #expect(try stack.column("small") == Data([0x01]) + Self.small)
        #expect(try stack.column("at") == Data([0x01]) + atThreshold)
        #expect(try stack.column("empty") == Data([0x01]))
        #expect(try stack.column("none") == nil)
        #expect(stack.files().count == 2)
        for (name, data) in [("above", aboveThreshold), ("large", Self.large)] {
            let column = try #require(try stack.column(name))
            #expect(column.count == 1 + 36 + 1 && column.first == 0x02 && column.last == 0x00)
            guard case .external(let file)? = SQLiteValueCodec.ExternalBinaryFrame(decoding: column) else {
                Issue.record("\(name) is not stored externally")
                continue
            }
            #expect(FileManager.default.contents(atPath: stack.directory.appendingPathComponent(file).path) == data)
        }
        let fresh = try Stack(stack.url)
        try fresh.context.performAndWait { () throws -> Void in
            for (name, data) in [("small", Self.small), ("at", atThreshold), ("above", aboveThreshold), ("large", Self.large), ("empty", Data())] {
                #expect(try fresh.photo(name).value(forKey: "image") as? Data == data, "\(name)")
            }
            #expect(try fresh.photo("none").value(forKey: "image") == nil)
            // Predicates on such an attribute are evaluated on the values, not the framed column.
            let request = FetchRequest(entityName: "Photo")
            request.predicate = try FetchPredicate(format: "image == %@", Self.small as NSData)
            #expect(try fresh.context.fetch(request).compactMap { try $0.value(forKey: "name") as? String } == ["small"])
        }
    }

    @Test func updatesReplaceFilesAfterCommitAndKeepUnchangedOnes() throws {
        let stack = try Self.newStack()
        try stack.context.performAndWait { () throws -> Void in
            let photo = try stack.context.insertNewObject(forEntityName: "Photo")
            try photo.setValue("p", forKey: "name")
            try photo.setValue(Self.large, forKey: "image")
            try stack.context.save()
        }
        let first = stack.files()
        let firstColumn = try stack.column("p")
        #expect(first.count == 1)
        try stack.context.performAndWait { () throws -> Void in
            // Another attribute changes: the row keeps its file.
            try stack.photo("p").setValue(Data([1]), forKey: "thumbnail")
            try stack.context.save()
        }
        #expect(stack.files() == first)
        #expect(try stack.column("p") == firstColumn)
        try stack.context.performAndWait { () throws -> Void in
            try stack.photo("p").setValue(Self.otherLarge, forKey: "image")
            try stack.context.save()
        }
        let second = stack.files()
        #expect(second.count == 1 && second != first)
        #expect(FileManager.default.contents(atPath: stack.directory.appendingPathComponent(second.first!).path) == Self.otherLarge)
        try stack.context.performAndWait { () throws -> Void in
            try stack.photo("p").setValue(Self.small, forKey: "image")
            try stack.context.save()
        }
        #expect(stack.files().isEmpty)
        #expect(try stack.column("p") == Data([0x01]) + Self.small)
        try stack.context.performAndWait { () throws -> Void in
            try stack.photo("p").setValue(Self.large, forKey: "image")
            try stack.context.save()
            #expect(stack.files().count == 1)
            stack.context.delete(try stack.photo("p"))
            try stack.context.save()
        }
        // Deleting the object removes its file.
        #expect(stack.files().isEmpty)
    }

    @Test func failedSaveRemovesTheFilesItWroteAndKeepsTheOldOnes() throws {
        let stack = try Self.newStack()
        try stack.context.performAndWait { () throws -> Void in
            let photo = try stack.context.insertNewObject(forEntityName: "Photo")
            try photo.setValue("p", forKey: "name")
            try photo.setValue(Self.large, forKey: "image")
            try stack.context.save()
        }
        let before = stack.files()
        let column = try stack.column("p")
        let id = try stack.context.performAndWait { try stack.photo("p").objectID }

        // An update whose optimistic-lock check fails inside the transaction,
        // after its new file was written.
        var update = StoreSaveRequest()
        update.updated = [(StoreSnapshot(objectID: id, version: 9, values: ["name": "p", "image": Self.otherLarge]), expectedVersion: 8)]
        #expect(throws: StoreVersionConflict.self) { try stack.store.save(update) }
        #expect(stack.files() == before)

        // An insert SQLite refuses (the primary key exists) after its file was written.
        var insert = StoreSaveRequest()
        insert.inserted = [StoreSnapshot(objectID: id, version: 1, values: ["name": "q", "image": Self.otherLarge])]
        #expect(throws: CoreDataError.self) { try stack.store.save(insert) }
        #expect(stack.files() == before)

        #expect(try stack.column("p") == column)
        let fresh = try Stack(stack.url)
        try fresh.context.performAndWait { () throws -> Void in
            #expect(try fresh.photo("p").value(forKey: "image") as? Data == Self.large)
        }
    }
}
