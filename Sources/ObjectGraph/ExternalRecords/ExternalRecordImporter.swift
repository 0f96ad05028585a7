import Foundation

/// Reads one store folder of external records and fills a new store from
/// them (`PersistentStoreCoordinator.importStore`, PC-41).
enum ExternalRecordImporter {
    typealias Failure = (_ message: String, _ path: URL, _ underlying: Error?) -> CoreDataError

    struct Record {
        var entity: EntityDescription
        var file: URL
        var uri: String
        var globalIdentifier: UUID?
        var attributes: [(AttributeDescription, Any?)]
        var relationships: [(RelationshipDescription, Any)]
    }

    /// Every record of the store folder, entity folders in name order and
    /// records in primary-key order, values already in their Swift types.
    static func read(storeFolder: URL, storeIdentifier: String, model: ManagedObjectModel, failure: Failure) throws -> [Record] {
        let fileManager = FileManager.default
        var out: [Record] = []
        for folder in ((try? fileManager.contentsOfDirectory(atPath: storeFolder.path)) ?? []).sorted() where !folder.hasPrefix(".") {
            let folderURL = ExternalRecordsLayout.entityFolder(storeFolder, folder)
            var isDirectory: ObjCBool = false
            guard fileManager.fileExists(atPath: folderURL.path, isDirectory: &isDirectory), isDirectory.boolValue else { continue }
            let names = (try? fileManager.contentsOfDirectory(atPath: folderURL.path)) ?? []
            // Record files grouped by primary key: `<pk>.<ext>`, and `<pk>.txt` renderings.
            var byKey: [Int64: [String]] = [:]
            for name in names {
                guard let (key, _) = ExternalRecordsLayout.primaryKey(inFileName: name) else { continue }
                byKey[key, default: []].append(name)
            }
            guard !byKey.isEmpty else { continue }
            guard let entity = model.entitiesByName[folder] else {
                throw failure("\(folderURL.path) holds records of entity '\(folder)', which the coordinator's model does not have", folderURL, nil)
            }
            for key in byKey.keys.sorted() {
                let files = byKey[key]!.sorted()
                let records = files.filter { !$0.hasSuffix(".\(ExternalRecordsLayout.plainTextExtension)") }
                if records.count > 1 {
                    throw failure("\(folderURL.path) holds \(records.count) records of object \(key) (\(records.joined(separator: ", "))); remove all but one", folderURL.appendingPathComponent(records[0]), nil)
                }
                if let name = records.first {
                    out.append(try record(at: folderURL.appendingPathComponent(name), entity: entity, storeIdentifier: storeIdentifier, failure: failure))
                } else if let rendering = files.first,
                          let data = fileManager.contents(atPath: folderURL.appendingPathComponent(rendering).path),
                          (try? ExternalRecordContent.parse(data)) != nil {
                    // Records written with the extension "txt" (no renderings then).
                    out.append(try record(at: folderURL.appendingPathComponent(rendering), entity: entity, storeIdentifier: storeIdentifier, failure: failure))
                }
                // Otherwise a rendering whose record is gone: not a record.
            }
        }
        return out
    }

    private static func record(at file: URL, entity: EntityDescription, storeIdentifier: String, failure: Failure) throws -> Record {
        let data: Data
        do { data = try Data(contentsOf: file) } catch { throw failure("cannot read \(file.path): \(error.localizedDescription)", file, error) }
        let dictionary: [String: Any]
        do { dictionary = try ExternalRecordContent.parse(data).record } catch {
            throw failure("\(file.path) is not a readable record (neither JSON nor a property list holding a dictionary)", file, error)
        }
        guard let entityName = dictionary[ExternalRecordContent.entityKey] as? String,
              let store = dictionary[ExternalRecordContent.storeKey] as? String,
              let uri = dictionary[ExternalRecordContent.uriKey] as? String else {
            throw failure("\(file.path) is not a record: it lacks the '\(ExternalRecordContent.entityKey)', '\(ExternalRecordContent.storeKey)' or '\(ExternalRecordContent.uriKey)' key", file, nil)
        }
        guard store == storeIdentifier else {
            throw failure("\(file.path) is a record of store \(store), not of store \(storeIdentifier) whose folder holds it", file, nil)
        }
        guard entityName == entity.name else {
            throw failure("\(file.path) is a record of entity '\(entityName)' in the folder of entity '\(entity.name)'", file, nil)
        }
        let values = dictionary[ExternalRecordContent.valuesKey] as? [String: Any] ?? [:]
        var attributes: [(AttributeDescription, Any?)] = []
        var relationships: [(RelationshipDescription, Any)] = []
        for (name, raw) in values.sorted(by: { $0.key < $1.key }) {
            switch entity.propertiesByName[name] {
            case let attribute as AttributeDescription where !attribute.isTransient:
                do { attributes.append((attribute, try ExternalRecordContent.decode(raw, attribute: attribute))) } catch let problem as ExternalRecordContent.ImportValueError {
                    throw failure("\(file.path): \(problem.message)", file, nil)
                }
            case let relationship as RelationshipDescription where !relationship.isTransient:
                if !isNSNull(raw) { relationships.append((relationship, raw)) }
            default:
                throw failure("\(file.path) holds a value for '\(name)', which is not a stored property of entity '\(entity.name)' in the coordinator's model", file, nil)
            }
        }
        let gid = (dictionary[ExternalRecordContent.globalIdentifierKey] as? String).flatMap(UUID.init(uuidString:))
        return Record(entity: entity, file: file, uri: uri, globalIdentifier: gid, attributes: attributes, relationships: relationships)
    }

    /// Inserts one object per record into `store` and saves.
    static func insert(_ records: [Record], into store: PersistentStore, coordinator: PersistentStoreCoordinator, failure: Failure) throws {
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            var objects: [String: ManagedObject] = [:]
            var made: [ManagedObject] = []
            made.reserveCapacity(records.count)
            for record in records {
                let object = try context.insertNewObject(forEntityName: record.entity.name)
                context.assign(object, to: store)
                for (attribute, value) in record.attributes {
                    do { try object.setValue(value, forKey: attribute.name) } catch {
                        throw failure("\(record.file.path): '\(attribute.name)' cannot take its value: \(error)", record.file, error)
                    }
                }
                if let gid = record.globalIdentifier, store.recordsPersistentHistory {
                    try context.assignGlobalIdentifier(gid, to: object)
                }
                objects[record.uri] = object
                made.append(object)
            }
            // Relationships, once every object exists: destinations that were
            // not imported (not exported, or of another store) are left out.
            for (record, object) in zip(records, made) {
                for (relationship, raw) in record.relationships {
                    do {
                        if relationship.isToMany {
                            guard let uris = raw as? [Any] else { throw ExternalRecordContent.ImportValueError(message: "'\(relationship.name)' must be an array of object URIs") }
                            let members = uris.compactMap { ($0 as? String).flatMap { objects[$0] } }
                            try object.setValue(relationship.isOrdered ? members as Any : Set(members) as Any, forKey: relationship.name)
                        } else {
                            guard let uri = raw as? String else { throw ExternalRecordContent.ImportValueError(message: "'\(relationship.name)' must be an object URI") }
                            if let target = objects[uri] { try object.setValue(target, forKey: relationship.name) }
                        }
                    } catch let problem as ExternalRecordContent.ImportValueError {
                        throw failure("\(record.file.path): \(problem.message)", record.file, nil)
                    } catch {
                        throw failure("\(record.file.path): '\(relationship.name)' cannot be set: \(error)", record.file, error)
                    }
                }
            }
            do { try context.save() } catch {
                throw failure("the imported objects could not be saved to \(store.url?.path ?? "the new store"): \(error)", store.url ?? URL(fileURLWithPath: "/"), error)
            }
        }
    }
}
