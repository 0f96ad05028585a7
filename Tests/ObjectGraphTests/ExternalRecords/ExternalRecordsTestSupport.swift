import Foundation
import Testing
@testable import ObjectGraph

/// The model and stacks the external-records tests share.
///
/// - `Note` flags some properties: `title` (indexed and stored), `body`,
///   `count`, `rating`, `created`, `blob`, `uid`, `link`, `amount`, `folder`
///   and `tags` (stored), `scratch` (transient, flagged: never exported,
///   PD-12a); `secret` is not flagged, so it is not exported.
/// - `Folder` flags nothing: with the default option every stored
///   attribute is exported (`name`, `position`).
/// - `Tag` stores `label`; `Log` flags nothing and has no attributes, so it writes no record.
enum RecordsModel {
    static func make() -> ManagedObjectModel {
        let note = EntityDescription(name: "Note")
        let folder = EntityDescription(name: "Folder")
        let tag = EntityDescription(name: "Tag")
        let log = EntityDescription(name: "Log")
        func attribute(_ name: String, _ type: AttributeType, stored: Bool = true, indexed: Bool = false) -> AttributeDescription {
            let a = AttributeDescription(name: name, type: type)
            a.isStoredInExternalRecord = stored
            a.isIndexedBySpotlight = indexed
            return a
        }
        let title = attribute("title", .string, indexed: true)
        let scratch = attribute("scratch", .string, indexed: true)
        scratch.isTransient = true
        let secret = attribute("secret", .string, stored: false)
        let count = attribute("count", .integer32)
        count.minValue = 0   // a negative count fails validation: a save that never commits
        let noteFolder = RelationshipDescription(name: "folder", destination: folder, toMany: false)
        noteFolder.isStoredInExternalRecord = true
        let folderNotes = RelationshipDescription(name: "notes", destination: note, toMany: true)
        noteFolder.inverseRelationship = folderNotes
        folderNotes.inverseRelationship = noteFolder
        let noteTags = RelationshipDescription(name: "tags", destination: tag, toMany: true)
        noteTags.isStoredInExternalRecord = true
        let tagNotes = RelationshipDescription(name: "notes", destination: note, toMany: true)
        noteTags.inverseRelationship = tagNotes
        tagNotes.inverseRelationship = noteTags
        for rel in [noteFolder, folderNotes, noteTags, tagNotes] { rel.deleteRule = .nullify }
        note.properties = [title, attribute("body", .string), count, attribute("rating", .double),
                           attribute("created", .date), attribute("blob", .binaryData), attribute("uid", .uuid),
                           attribute("link", .uri), attribute("amount", .decimal), scratch, secret, noteFolder, noteTags]
        folder.properties = [attribute("name", .string, stored: false), attribute("position", .integer16, stored: false), folderNotes]
        tag.properties = [attribute("label", .string), tagNotes]
        log.properties = []
        let model = ManagedObjectModel()
        model.entities = [note, folder, tag, log]
        return model
    }

    /// The exported properties of `Note`, as its records list them.
    static let noteExported = ["amount", "blob", "body", "count", "created", "folder", "link", "rating", "tags", "title", "uid"]

    struct Stack {
        var coordinator: PersistentStoreCoordinator
        var store: PersistentStore
        var context: ManagedObjectContext
        var records: URL
        var storeFolder: URL { records.appendingPathComponent(store.identifier) }
    }

    /// A coordinator with one store of `type` writing records into `records`.
    static func stack(_ directory: URL, type: String = PersistentStoreCoordinator.sqliteStoreType, name: String = "Notes.sqlite",
                      records: URL? = nil, options: [String: Any] = [:], model: ManagedObjectModel = make()) throws -> Stack {
        let recordsURL = records ?? directory.appendingPathComponent("records")
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        var all: [String: Any] = [PersistentStoreCoordinator.externalRecordsDirectoryOption: recordsURL]
        for (key, value) in options { all[key] = value }
        let url = type == PersistentStoreCoordinator.inMemoryStoreType ? nil : directory.appendingPathComponent(name)
        let store = try coordinator.addPersistentStore(ofType: type, at: url, options: all)
        return Stack(coordinator: coordinator, store: store, context: ManagedObjectContext(coordinator: coordinator), records: recordsURL)
    }

    static let created = Date(timeIntervalSinceReferenceDate: 800_000_000.25)

    /// Inserts a note with every exported attribute set.
    @discardableResult
    static func note(_ context: ManagedObjectContext, _ title: String, count: Int32 = 7, folder: ManagedObject? = nil, tags: [ManagedObject] = []) throws -> ManagedObject {
        let note = try context.insertNewObject(forEntityName: "Note")
        try note.setValue(title, forKey: "title")
        try note.setValue("Body of \(title)\nsecond line", forKey: "body")
        try note.setValue(count, forKey: "count")
        try note.setValue(2.5, forKey: "rating")
        try note.setValue(created, forKey: "created")
        try note.setValue(Data([0, 1, 2, 255]), forKey: "blob")
        try note.setValue(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!, forKey: "uid")
        try note.setValue(URL(string: "https://example.com/notes?id=1")!, forKey: "link")
        try note.setValue(Decimal(string: "12.34")!, forKey: "amount")
        try note.setValue("scratch value", forKey: "scratch")
        try note.setValue("do not export", forKey: "secret")
        if let folder { try note.setValue(folder, forKey: "folder") }
        if !tags.isEmpty { try note.setValue(Set(tags), forKey: "tags") }
        return note
    }

    /// Every file under `folder` (relative paths), hidden ones included.
    static func files(under folder: URL) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        var out: [String] = []
        while let path = enumerator.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent(path).path, isDirectory: &isDirectory), !isDirectory.boolValue {
                out.append(path)
            }
        }
        return out.sorted()
    }

    /// A record file's dictionary and format.
    static func read(_ url: URL) throws -> (record: [String: Any], format: ExternalRecordFormat) {
        try ExternalRecordContent.parse(try Data(contentsOf: url))
    }

    static func values(_ url: URL) throws -> [String: Any] {
        try #require(try read(url).record["values"] as? [String: Any])
    }
}
