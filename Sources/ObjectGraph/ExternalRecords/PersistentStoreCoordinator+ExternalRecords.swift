import Foundation

/// Core Data's Spotlight external records (§18.10), on Linux: the store
/// options (PC-35d–g), the element keys (PC-42), reading a record's
/// location (PC-40) and building a store from records (PC-41). See
/// docs/EXTERNAL-RECORDS.md.
///
/// ```swift
/// let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: storeURL, options: [
///     PersistentStoreCoordinator.externalRecordsDirectoryOption: recordsURL,
///     PersistentStoreCoordinator.externalRecordsFileFormatOption: PersistentStoreCoordinator.jsonExternalRecordType,
/// ])
/// try context.save()   // then <records>/<store UUID>/<Entity>/<pk>.json for each saved object
/// ```
extension PersistentStoreCoordinator {
    // MARK: - Store options

    /// `NSExternalRecordsDirectoryOption` (PC-35d): the directory records are
    /// written to, as a file `URL` or a path. No default: without it a store
    /// writes no records.
    public static let externalRecordsDirectoryOption = "NSExternalRecordsDirectoryOption"
    /// `NSExternalRecordExtensionOption` (PC-35e): the records' file
    /// extension; default "json", "xml" or "plist" by format.
    public static let externalRecordExtensionOption = "NSExternalRecordExtensionOption"
    /// `NSExternalRecordsFileFormatOption` (PC-35f): one of the record types below; default JSON.
    public static let externalRecordsFileFormatOption = "NSExternalRecordsFileFormatOption"
    /// `NSXMLExternalRecordType` (PC-35g): XML property lists.
    public static let xmlExternalRecordType = ExternalRecordFormat.xml.rawValue
    /// `NSBinaryExternalRecordType` (PC-35g): binary property lists.
    public static let binaryExternalRecordType = ExternalRecordFormat.binary.rawValue
    /// ObjectGraph's JSON record type, the default on Linux.
    public static let jsonExternalRecordType = ExternalRecordFormat.json.rawValue
    /// ObjectGraph's: also write a `.txt` rendering beside each record (Bool).
    public static let externalRecordsPlainTextOption = "ObjectGraphExternalRecordsPlainTextOption"
    /// ObjectGraph's: also append to `changes.ndjson` in the store folder (Bool).
    public static let externalRecordsChangeFeedOption = "ObjectGraphExternalRecordsChangeFeedOption"
    /// ObjectGraph's: whether an entity that flags no property exports all
    /// its stored attributes (Bool, default true) or nothing.
    public static let externalRecordsExportAllAttributesOption = "ObjectGraphExternalRecordsExportAllAttributesOption"

    // MARK: - Element keys (PC-42)

    /// The entity name, from the record's folder.
    public static let entityNameInPathKey = "NSEntityNameInPathKey"
    /// The store UUID, from the store folder's name.
    public static let storeUUIDInPathKey = "NSStoreUUIDInPathKey"
    /// The URL of the `store-file` in the store folder (it holds the store's URL).
    public static let storePathKey = "NSStorePathKey"
    /// The URL of the `model.mom` in the store folder (the store's model, compiled).
    public static let modelPathKey = "NSModelPathKey"
    /// The object URI of the record's object (PC-20).
    public static let objectURIKey = "NSObjectURIKey"

    /// The elements of an external record read from its location (PC-40):
    /// entity name, store UUID, store-file URL, model URL and object URI,
    /// under the keys above. Nil for a URL that is not
    /// `<directory>/<store UUID>/<Entity>/<pk>.<ext>` inside a store folder
    /// holding a `store-file` (a `.txt` rendering is not a record). The
    /// record itself need not exist: an indexer told of a deletion can
    /// still find which object it was.
    ///
    /// ```swift
    /// let elements = PersistentStoreCoordinator.elementsDerived(fromExternalRecordAt: url)
    /// let uri = elements?[PersistentStoreCoordinator.objectURIKey] as? URL
    /// let id = uri.flatMap(coordinator.managedObjectID(forURIRepresentation:))
    /// ```
    public static func elementsDerived(fromExternalRecordAt url: URL) -> [String: Any]? {
        guard url.isFileURL else { return nil }
        let file = url.standardizedFileURL
        guard let (key, ext) = ExternalRecordsLayout.primaryKey(inFileName: file.lastPathComponent),
              ext != ExternalRecordsLayout.plainTextExtension else { return nil }
        let entityFolder = file.deletingLastPathComponent()
        let storeFolder = entityFolder.deletingLastPathComponent()
        let entityName = entityFolder.lastPathComponent
        let storeIdentifier = storeFolder.lastPathComponent
        guard !entityName.isEmpty, entityName != "/", !storeIdentifier.isEmpty, storeIdentifier != "/",
              !entityName.hasPrefix("."), !storeIdentifier.hasPrefix(".") else { return nil }
        let storeFile = storeFolder.appendingPathComponent(ExternalRecordsLayout.storeFileName)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: storeFile.path, isDirectory: &isDirectory), !isDirectory.boolValue,
              let uri = ExternalRecordsLayout.objectURI(storeIdentifier: storeIdentifier, entityName: entityName, primaryKey: key) else { return nil }
        return [
            entityNameInPathKey: entityName,
            storeUUIDInPathKey: storeIdentifier,
            storePathKey: storeFile,
            modelPathKey: storeFolder.appendingPathComponent(ExternalRecordsLayout.modelFileName),
            objectURIKey: uri,
        ]
    }

    /// `elementsDerived(fromExternalRecordAt:)` called on a coordinator, as Core Data's class method can be.
    public func elementsDerived(fromExternalRecordAt url: URL) -> [String: Any]? {
        Self.elementsDerived(fromExternalRecordAt: url)
    }

    /// The store URL a `store-file` (`storePathKey`) holds; nil for an in-memory store's.
    public static func storeURL(fromExternalRecordsStoreFile url: URL) throws -> URL? {
        try ExternalRecordsLayout.storeURL(inStoreFile: url)
    }

    // MARK: - Import (PC-41)

    /// Creates a new store of `type` at `destination`, adds it to this
    /// coordinator and fills it with one object per record of one store's
    /// folder in `directory`: the records' exported attribute values, and
    /// their exported relationships where the destination was imported too.
    /// Properties a record does not hold stay nil or at their default.
    /// Objects get new IDs (the new store has its own UUID); global
    /// identifiers are kept when the new store records history.
    ///
    /// `identifier` picks the store folder; nil takes the first in sorted
    /// order. Files that are not records (`README.txt`, hidden or temporary
    /// files, `.txt` renderings) are ignored.
    ///
    /// ```swift
    /// let restored = try coordinator.importStore(identifier: nil, fromExternalRecordsDirectory: recordsURL,
    ///                                            to: newStoreURL, type: PersistentStoreCoordinator.sqliteStoreType)
    /// ```
    /// - Throws: 134200 (`NSExternalRecordImportError`) with
    ///   `NSFilePathErrorKey` naming the file or folder: something already
    ///   at `destination` (left untouched), no store folder, an unknown
    ///   identifier, a record that cannot be read or holds a value of the
    ///   wrong form, a record of another store or entity, an entity or
    ///   property the model lacks, or a save that fails (nothing is left
    ///   at `destination` then).
    @discardableResult
    public func importStore(identifier: String?, fromExternalRecordsDirectory directory: URL, to destination: URL,
                            options: [String: Any] = [:], type: String) throws -> PersistentStore {
        func failure(_ message: String, _ path: URL, underlying: Error? = nil) -> CoreDataError {
            var info: [String: Any] = [CoreDataError.filePathErrorKey: path.path]
            if let underlying { info[CoreDataError.underlyingErrorKey] = underlying }
            return CoreDataError(.externalRecordImport, "importing external records: \(message)", userInfo: info)
        }
        if FileManager.default.fileExists(atPath: destination.path) || persistentStore(for: destination) != nil {
            throw failure("\(destination.path) already exists; an import creates a new store and never adds to one", destination)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw failure("\(directory.path) is not a directory", directory)
        }
        let folders = ExternalRecordsLayout.storeFolders(in: directory)
        let chosen: String
        if let identifier {
            guard folders.contains(identifier) else {
                let known = folders.isEmpty ? "none" : folders.joined(separator: ", ")
                throw failure("\(directory.path) holds no records of store \(identifier) (stores there: \(known))", directory.appendingPathComponent(identifier))
            }
            chosen = identifier
        } else {
            guard let first = folders.first else {
                throw failure("\(directory.path) holds no store folder (a folder with a store-file)", directory)
            }
            chosen = first
        }
        let records = try ExternalRecordImporter.read(storeFolder: ExternalRecordsLayout.storeFolder(directory, chosen),
                                                      storeIdentifier: chosen, model: managedObjectModel, failure: failure)

        let store = try addPersistentStore(ofType: type, at: destination, options: options)
        do {
            try ExternalRecordImporter.insert(records, into: store, coordinator: self, failure: failure)
        } catch {
            try? remove(store)
            for suffix in ["", "-wal", "-shm", "-journal"] {
                try? FileManager.default.removeItem(atPath: destination.path + suffix)
            }
            throw error
        }
        return store
    }
}
