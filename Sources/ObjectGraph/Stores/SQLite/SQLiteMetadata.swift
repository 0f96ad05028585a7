import Foundation

/// Reads and writes a SQLite store's metadata, kept as Core Data keeps it: one
/// `Z_METADATA` row with `Z_VERSION = 1`, the store UUID in `Z_UUID`, and the
/// other entries as a binary property list in `Z_PLIST`. Apple's files (all
/// XCServerCoreData fixtures) do not repeat `NSStoreUUID` inside the plist; it
/// is merged in from `Z_UUID` on reading.
///
/// ```swift
/// let metadata = try SQLiteMetadata.metadataForStore(at: url)
/// metadata["NSStoreType"]                      // "SQLite"
/// metadata["NSStoreModelVersionHashes"]        // [String: Data]
/// ```
public enum SQLiteMetadata {
    public static let storeTypeKey = "NSStoreType"
    public static let storeUUIDKey = "NSStoreUUID"
    public static let versionHashesKey = "NSStoreModelVersionHashes"
    public static let versionHashesVersionKey = "NSStoreModelVersionHashesVersion"
    public static let versionIdentifiersKey = "NSStoreModelVersionIdentifiers"
    public static let frameworkVersionKey = "NSPersistenceFrameworkVersion"
    public static let autoVacuumLevelKey = "_NSAutoVacuumLevel"
    /// Marks a store written by ObjectGraph: its version hashes come from
    /// ObjectGraph's hasher, which is not byte-compatible with Apple's, so
    /// they are compared strictly only when this key is present.
    public static let hashSchemeKey = "ObjectGraphVersionHashScheme"
    public static let currentHashScheme = 1
    /// What ObjectGraph writes as `NSPersistenceFrameworkVersion`. Apple's
    /// files hold 754, 836 and 851; ObjectGraph uses its own number so the
    /// two are never confused.
    public static let frameworkVersion = 1

    /// The metadata Core Data would write for a new store of `model`.
    public static func newMetadata(model: ManagedObjectModel, configurationName: String?, storeUUID: String) -> [String: Any] {
        let entities = model.entities(forConfiguration: configurationName) ?? []
        var hashes: [String: Data] = [:]
        for entity in entities { hashes[entity.name] = entity.versionHash }
        let identifiers = model.versionIdentifiers.isEmpty ? [""] : model.versionIdentifiers.sorted()
        return [
            storeTypeKey: SQLiteStore.storeType,
            storeUUIDKey: storeUUID,
            versionHashesKey: hashes,
            versionHashesVersionKey: 3,
            versionIdentifiersKey: identifiers,
            frameworkVersionKey: frameworkVersion,
            autoVacuumLevelKey: "2",
            hashSchemeKey: currentHashScheme,
        ]
    }

    /// Encodes metadata as Core Data stores it in `Z_PLIST` (binary plist,
    /// without the UUID).
    public static func encodePlist(_ metadata: [String: Any]) throws -> Data {
        var plist = metadata
        plist.removeValue(forKey: storeUUIDKey)
        do {
            return try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
        } catch {
            throw CoreDataError(.persistentStoreSave, "store metadata is not a property list: \(error)",
                                userInfo: [CoreDataError.underlyingErrorKey: error])
        }
    }

    public static func decodePlist(_ data: Data) throws -> [String: Any] {
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw CoreDataError(.persistentStoreOpen, "Z_METADATA.Z_PLIST is not a property list: \(error)",
                                userInfo: [CoreDataError.underlyingErrorKey: error])
        }
        guard let dictionary = object as? [String: Any] else {
            throw CoreDataError(.persistentStoreOpen, "Z_METADATA.Z_PLIST is not a dictionary")
        }
        return normalise(dictionary)
    }

    /// Gives callers Swift types whatever Foundation's plist reader returned
    /// (`[String: Data]` hashes, `[String]` identifiers, `Int` numbers).
    private static func normalise(_ dictionary: [String: Any]) -> [String: Any] {
        var out = dictionary
        if let hashes = dictionary[versionHashesKey] as? [String: Any] {
            var typed: [String: Data] = [:]
            for (k, v) in hashes { if let d = v as? Data { typed[k] = d } }
            out[versionHashesKey] = typed
        }
        if let ids = dictionary[versionIdentifiersKey] as? [Any] {
            out[versionIdentifiersKey] = ids.compactMap { $0 as? String }
        }
        for key in [versionHashesVersionKey, frameworkVersionKey, hashSchemeKey] {
            if let n = dictionary[key] as? NSNumber { out[key] = n.intValue } else if let n = dictionary[key] as? Int { out[key] = n }
        }
        return out
    }

    /// Whether two metadata dictionaries hold the same property-list values.
    /// Compared by value, not by encoding: a binary plist's key order follows
    /// the dictionary's iteration order, so equal dictionaries can encode to
    /// different bytes, and a save must not rewrite (and so change) the
    /// `Z_PLIST` Apple's Core Data wrote when nothing in it changed.
    public static func isEqual(_ a: [String: Any], _ b: [String: Any]) -> Bool {
        propertyListValuesEqual(a, b)
    }

    private static func propertyListValuesEqual(_ a: Any, _ b: Any) -> Bool {
        switch (a, b) {
        case let (a as [String: Any], b as [String: Any]):
            return a.count == b.count && a.allSatisfy { key, value in b[key].map { propertyListValuesEqual(value, $0) } ?? false }
        case let (a as [Any], b as [Any]):
            return a.count == b.count && zip(a, b).allSatisfy(propertyListValuesEqual)
        case let (a as String, b as String): return a == b
        case let (a as Data, b as Data): return a == b
        case let (a as Date, b as Date): return a == b
        case let (a as Bool, b as Bool): return a == b
        case let (a as Int, b as Int): return a == b
        case let (a as NSNumber, b as NSNumber): return a == b
        case let (a as Double, b as Double): return a == b
        default: return false
        }
    }

    /// Reads the metadata row through an open connection.
    /// - Throws: 134080 when the table or row is missing or unreadable.
    public static func read(from connection: SQLiteConnection) throws -> [String: Any] {
        let rows = try connection.query("SELECT Z_UUID, Z_PLIST FROM Z_METADATA WHERE Z_VERSION = 1")
        guard let row = rows.first else {
            throw CoreDataError(.persistentStoreOpen, "Z_METADATA has no row in \(connection.path)",
                                userInfo: [CoreDataError.filePathErrorKey: connection.path])
        }
        var metadata: [String: Any] = [:]
        if let data = row[1].dataValue { metadata = try decodePlist(data) }
        if let uuid = row[0].stringValue { metadata[storeUUIDKey] = uuid }
        if metadata[storeTypeKey] == nil { metadata[storeTypeKey] = SQLiteStore.storeType }
        return metadata
    }

    /// Replaces the metadata row.
    public static func write(_ metadata: [String: Any], to connection: SQLiteConnection) throws {
        let uuid = metadata[storeUUIDKey] as? String ?? UUID().uuidString
        let plist = try encodePlist(metadata)
        try connection.run("INSERT OR REPLACE INTO Z_METADATA (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, ?, ?)",
                           [.text(uuid), .blob(plist)])
    }

    /// Reads a store file's metadata without opening it as a store (PC-23):
    /// read-only, no schema check, the file left untouched.
    /// - Throws: 260 for a missing file, 134010 for a file that is not
    ///   SQLite, 134080 for a SQLite file without Core Data metadata.
    public static func metadataForStore(at url: URL) throws -> [String: Any] {
        try SQLiteStore.checkFileSignature(at: url, requireExisting: true)
        // As a read-only store opens: a WAL file without a pending -wal is read
        // immutable, so reading metadata leaves no -wal/-shm files beside it.
        let connection = try SQLiteStore.openWrappingErrors(path: url.path, mode: SQLiteStore.readOnlyOpenMode(forFileAt: url), busyTimeout: 5)
        defer { connection.close() }
        do {
            return try read(from: connection)
        } catch let error as CoreDataError where error.code == .sqlite || error.code == .persistentStoreTimeout {
            throw SQLiteStore.openError(from: error, url: url)
        }
    }
}
