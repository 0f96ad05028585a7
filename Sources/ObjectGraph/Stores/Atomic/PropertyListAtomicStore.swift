import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The shared engine of the XML and binary stores: an atomic store whose
/// file is one property list (format in docs/STORE-FORMATS.md). Saving
/// writes a temporary file in the same directory and renames it over the
/// store, so a crash leaves the old file or the new one, never half of one.
/// A file that is not a store of this type fails to open with 134010 (wrong
/// type) or 259 (corrupt), and is never written.
///
/// ```swift
/// final class ArchiveStore: PropertyListAtomicStore {
///     override class var storeType: String { "Archive" }
///     override class var fileFormat: PropertyListSerialization.PropertyListFormat { .binary }
/// }
/// ```
open class PropertyListAtomicStore: AtomicStore {
    /// The property-list format this store class writes and accepts.
    open class var fileFormat: PropertyListSerialization.PropertyListFormat { .xml }
    static let formatMarker = "ObjectGraph.AtomicStore"
    static let formatVersion = 1

    public required init(model: ManagedObjectModel, configurationName: String?, url: URL?, options: [String: Any]) {
        super.init(model: model, configurationName: configurationName, url: url, options: options)
    }

    // MARK: - Metadata of an unopened file (AS-03)

    open override class func metadataForPersistentStore(at url: URL) throws -> [String: Any] {
        guard let root = try readRoot(at: url) else {
            throw CoreDataError(.fileReadNoSuchFile, "No store file at \(url.path)", userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        return try decodeMetadata(root, url: url)
    }

    open override class func setMetadata(_ metadata: [String: Any], forPersistentStoreAt url: URL) throws {
        guard var root = try readRoot(at: url) else {
            throw CoreDataError(.fileReadNoSuchFile, "No store file at \(url.path)", userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        var merged = metadata
        let old = try decodeMetadata(root, url: url)
        merged[PersistentStore.storeTypeKey] = old[PersistentStore.storeTypeKey]
        merged[PersistentStore.storeUUIDKey] = old[PersistentStore.storeUUIDKey]
        root["metadata"] = try encodeMetadata(merged)
        try writeAtomically(root, to: url)
    }

    // MARK: - Load and save

    open override func load() throws {
        guard let url else { throw CoreDataError(.persistentStoreOpen, "\(type(of: self)) needs a file URL (AS-06)") }
        guard let root = try Self.readRoot(at: url) else { return }   // AS-08, AS-09: a new store
        let stored = try Self.decodeMetadata(root, url: url)
        metadata = stored
        guard let records = root["objects"] as? [[String: Any]] else { throw Self.corrupt(url, "no object list") }
        var byKey: [Int64: (AtomicStoreCacheNode, [String: Any])] = [:]
        let entities = Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0) })
        for record in records {
            guard let name = record["entity"] as? String, let key = Self.int64(record["pk"]) else { throw Self.corrupt(url, "a record lacks its entity or key") }
            guard let entity = entities[name] else { throw Self.corrupt(url, "record \(key) is of entity \(name), which this model/configuration lacks") }
            let node = AtomicStoreCacheNode(objectID: objectID(for: entity, referenceObject: key))
            node.version = Self.int64(record["version"]) ?? 1
            byKey[key] = (node, record)
        }
        for (node, record) in byKey.values {
            let layout = EntityLayout.of(node.objectID.entity)
            var cache: [String: Any] = [:]
            for (name, raw) in record["attributes"] as? [String: Any] ?? [:] {
                guard let attribute = layout.attributesByName[name] else { throw Self.corrupt(url, "unknown attribute \(node.objectID.entityName).\(name)") }
                cache[name] = try Self.decode(raw, as: attribute, url: url)
            }
            for (name, raw) in record["toOne"] as? [String: Any] ?? [:] {
                guard let key = Self.int64(raw), let target = byKey[key]?.0 else { throw Self.corrupt(url, "\(node.objectID.entityName).\(name) points at a missing record") }
                cache[name] = target
            }
            for (name, raw) in record["toMany"] as? [String: Any] ?? [:] {
                guard let keys = raw as? [Any] else { throw Self.corrupt(url, "\(node.objectID.entityName).\(name) is not a list") }
                cache[name] = try keys.map { k -> AtomicStoreCacheNode in
                    guard let key = Self.int64(k), let target = byKey[key]?.0 else { throw Self.corrupt(url, "\(node.objectID.entityName).\(name) points at a missing record") }
                    return target
                }
            }
            node.propertyCache = cache
        }
        addCacheNodes(byKey.values.map(\.0))
    }

    open override func save() throws {
        guard let url else { throw CoreDataError(.persistentStoreSave, "\(type(of: self)) needs a file URL") }
        var records: [[String: Any]] = []
        for node in cacheNodes().sorted(by: { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }) {
            let layout = EntityLayout.of(node.objectID.entity)
            var attributes: [String: Any] = [:], toOne: [String: Any] = [:], toMany: [String: Any] = [:]
            for (key, value) in node.propertyCache ?? [:] {
                if let other = value as? AtomicStoreCacheNode { toOne[key] = other.objectID.primaryKey ?? 0 }
                else if let many = value as? [AtomicStoreCacheNode] { toMany[key] = many.map { $0.objectID.primaryKey ?? 0 } }
                else if let attribute = layout.attributesByName[key] { attributes[key] = try Self.encode(value, as: attribute) }
            }
            records.append(["entity": node.objectID.entityName, "pk": referenceObject(for: node.objectID) ?? 0, "version": node.version,
                            "attributes": attributes, "toOne": toOne, "toMany": toMany])
        }
        let root: [String: Any] = ["format": Self.formatMarker, "formatVersion": Self.formatVersion,
                                   "metadata": try Self.encodeMetadata(metadata), "objects": records]
        try Self.writeAtomically(root, to: url)
    }

    // MARK: - File access

    /// The file's root dictionary; nil for a missing or zero-length file.
    class func readRoot(at url: URL) throws -> [String: Any]? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw CoreDataError(.fileReadUnknown, "Cannot read the store file \(url.path): \(error.localizedDescription)", userInfo: [CoreDataError.filePathErrorKey: url.path, CoreDataError.underlyingErrorKey: error])
        }
        if data.isEmpty { return nil }
        var format = PropertyListSerialization.PropertyListFormat.xml
        let parsed: Any
        do { parsed = try PropertyListSerialization.propertyList(from: data, options: [], format: &format) } catch {
            throw corrupt(url, "not a property list")
        }
        guard let root = parsed as? [String: Any], root["format"] as? String == formatMarker else { throw corrupt(url, "not an ObjectGraph atomic store") }
        guard format == fileFormat else {
            throw CoreDataError(.persistentStoreTypeMismatch, "The file at \(url.path) is a \(format == .binary ? "binary" : "XML") store, not a \(storeType) store",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        guard (root["formatVersion"] as? Int ?? 0) <= formatVersion else { throw corrupt(url, "written by a newer format version") }
        return root
    }

    class func decodeMetadata(_ root: [String: Any], url: URL) throws -> [String: Any] {
        guard let metadata = root["metadata"] as? [String: Any] else { throw corrupt(url, "no metadata") }
        guard metadata[PersistentStore.storeTypeKey] as? String == storeType else {
            throw CoreDataError(.persistentStoreTypeMismatch, "The file at \(url.path) holds a store of type \(metadata[PersistentStore.storeTypeKey] ?? "unknown"), not \(storeType)",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        return metadata
    }

    class func encodeMetadata(_ metadata: [String: Any]) throws -> [String: Any] {
        var out = metadata
        for (key, value) in metadata where !PropertyListSerialization.propertyList(value, isValidFor: .binary) {
            out[key] = nil
            if let number = value as? Int64 { out[key] = Int(number) }
        }
        return out
    }

    static func writeAtomically(_ root: [String: Any], to url: URL) throws {
        let data: Data
        do { data = try PropertyListSerialization.data(fromPropertyList: root, format: fileFormat, options: 0) } catch {
            throw CoreDataError(.persistentStoreSave, "Cannot encode the store: \(error)", userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            try data.write(to: temporary)
            guard rename(temporary.path, url.path) == 0 else {
                throw CoreDataError(.fileWriteUnknown, "Cannot replace \(url.path): \(String(cString: strerror(errno)))")
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            if let e = error as? CoreDataError { throw e }
            throw CoreDataError(.persistentStoreSave, "Cannot write the store file \(url.path): \(error.localizedDescription)", userInfo: [CoreDataError.filePathErrorKey: url.path, CoreDataError.underlyingErrorKey: error])
        }
    }

    static func corrupt(_ url: URL, _ why: String) -> CoreDataError {
        CoreDataError(.fileReadCorruptFile, "The store file at \(url.path) is corrupt: \(why)", userInfo: [CoreDataError.filePathErrorKey: url.path])
    }

    // MARK: - Values

    static func int64(_ raw: Any?) -> Int64? {
        switch raw {
        case let n as Int64: return n
        case let n as Int: return Int64(n)
        case let n as NSNumber: return n.int64Value
        default: return nil
        }
    }

    static func encode(_ value: Any, as attribute: AttributeDescription) throws -> Any {
        switch (attribute.attributeType, value) {
        case (.integer16, let n as Int16): return Int(n)
        case (.integer32, let n as Int32): return Int(n)
        case (.integer64, let n as Int64): return Int(n)
        case (.decimal, let d as Decimal): return NSDecimalNumber(decimal: d).stringValue
        case (.double, let d as Double): return d
        case (.float, let f as Float): return Double(f)
        case (.string, let s as String): return s
        case (.boolean, let b as Bool): return b
        case (.date, let d as Date): return d
        case (.binaryData, let d as Data): return d
        case (.uuid, let u as UUID): return u.uuidString
        case (.uri, let u as URL): return u.absoluteString
        default:
            if PropertyListSerialization.propertyList(value, isValidFor: .binary) { return value }
            throw CoreDataError(.persistentStoreSave, "\(attribute.entity?.name ?? "?").\(attribute.name) holds a \(type(of: value)), which a property-list store cannot write; transform it to Data first")
        }
    }

    static func decode(_ raw: Any, as attribute: AttributeDescription, url: URL) throws -> Any {
        let bad = corrupt(url, "\(attribute.entity?.name ?? "?").\(attribute.name) holds \(raw), not a \(attribute.attributeType.xcodeName)")
        switch attribute.attributeType {
        case .integer16: guard let n = int64(raw), let v = Int16(exactly: n) else { throw bad }; return v
        case .integer32: guard let n = int64(raw), let v = Int32(exactly: n) else { throw bad }; return v
        case .integer64: guard let n = int64(raw) else { throw bad }; return n
        case .decimal: guard let s = raw as? String, let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) else { throw bad }; return d
        case .double: guard let n = raw as? NSNumber else { throw bad }; return n.doubleValue
        case .float: guard let n = raw as? NSNumber else { throw bad }; return n.floatValue
        case .string: guard let s = raw as? String else { throw bad }; return s
        case .boolean: guard let b = raw as? Bool else { throw bad }; return b
        case .date: guard let d = raw as? Date else { throw bad }; return d
        case .binaryData: guard let d = raw as? Data else { throw bad }; return d
        case .uuid: guard let s = raw as? String, let u = UUID(uuidString: s) else { throw bad }; return u
        case .uri: guard let s = raw as? String, let u = URL(string: s) else { throw bad }; return u
        case .transformable, .objectID, .undefined: return raw
        }
    }
}
