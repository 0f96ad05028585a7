import Foundation
import ObjectGraph
@testable import StoreSync

/// Models, stores and writers the sync tests share.
enum SyncFixtures {
    /// `Record` (a, b, c integers and a name) and `Folder` (name, records to-many;
    /// records ↔ labels many-to-many through `Label`).
    static func model() -> ManagedObjectModel {
        let record = EntityDescription(name: "Record")
        let folder = EntityDescription(name: "Folder")
        let label = EntityDescription(name: "Label")
        let records = RelationshipDescription(name: "records", destination: record, toMany: true)
        let recordFolder = RelationshipDescription(name: "folder", destination: folder, toMany: false)
        records.inverseRelationship = recordFolder
        recordFolder.inverseRelationship = records
        let labels = RelationshipDescription(name: "labels", destination: label, toMany: true)
        let labelRecords = RelationshipDescription(name: "records", destination: record, toMany: true)
        labels.inverseRelationship = labelRecords
        labelRecords.inverseRelationship = labels
        for rel in [records, recordFolder, labels, labelRecords] { rel.deleteRule = .nullify }
        record.properties = ["a", "b", "c"].map { AttributeDescription(name: $0, type: .integer32) }
            + [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "when", type: .date), recordFolder, labels]
        folder.properties = [AttributeDescription(name: "name", type: .string), records]
        label.properties = [AttributeDescription(name: "name", type: .string), labelRecords]
        let model = ManagedObjectModel()
        model.entities = [folder, label, record]
        return model
    }

    static func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A group of stores named s1, s2, … with the given policies.
    static func group(_ policies: [SyncPolicy], model: ManagedObjectModel = model(), hub kind: HubKind = .embedded,
                      in directory: URL) throws -> SyncGroup {
        let stores = policies.enumerated().map { SyncStoreConfiguration(name: "s\($0.offset + 1)", url: directory.appendingPathComponent("s\($0.offset + 1).sqlite"), policy: $0.element) }
        let state = directory.appendingPathComponent("state")
        return try SyncGroup(configuration: SyncGroupConfiguration(name: "test", model: model, stateDirectory: state, stores: stores),
                             hub: try kind.makeHub(model: model, directory: state))
    }

    /// How the stores differ from the hub, object by object (empty: they
    /// hold exactly its objects, values and relationships), read through
    /// `SyncHub`, so for any kind of hub; and how many objects the hub has.
    static func differences(hub: SyncHub, stores: [URL], model: ManagedObjectModel = model()) throws -> (hubObjects: Int, differences: [String]) {
        var hubObjects: [UUID: [String: String]] = [:]
        for gid in try hub.allObjects() { hubObjects[gid] = try hubContents(hub, gid) }
        var out: [String] = []
        for url in stores {
            let store = try contents(url, model: model)
            for (gid, fields) in hubObjects where store[gid] != fields {
                out.append("\(url.lastPathComponent) \(gid): \(store[gid].map { "\($0)" } ?? "missing"), hub \(fields)")
            }
            for gid in store.keys where hubObjects[gid] == nil { out.append("\(url.lastPathComponent) has \(gid), the hub has not") }
        }
        return (hubObjects.count, out)
    }

    /// An object as the hub holds it, as comparable text (nil: the hub does not have it).
    static func hubContents(_ hub: SyncHub, _ object: UUID) throws -> [String: String]? {
        guard let state = try hub.state(of: object) else { return nil }
        var fields = SyncGroup.describe(state.values)
        fields["entity"] = state.entityName
        return fields
    }

    /// An application's own stack on a store file (no history option: the
    /// file's triggers record its changes anyway).
    static func app(_ url: URL, model: ManagedObjectModel = model(), author: String = "app") throws -> ManagedObjectContext {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = author
        return context
    }

    /// Every object of a store or hub file by global identifier, as comparable text.
    static func contents(_ url: URL, model: ManagedObjectModel = model()) throws -> [UUID: [String: String]] {
        // The hub's file holds the model plus the engine's bookkeeping entities.
        let isHub = url.lastPathComponent == "hub.sqlite"
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: isHub ? EmbeddedHub.hubModel(model) : model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                           options: [PersistentStore.persistentHistoryTrackingKey: true])
        defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }
        let context = ManagedObjectContext(coordinator: coordinator)
        let access = GraphAccess(context: context)
        return try context.performAndWait {
            var out: [UUID: [String: String]] = [:]
            for entity in model.entities where entity.superentity == nil {
                for object in try context.fetch(FetchRequest(entityName: entity.name)) {
                    guard let gid = try access.globalIdentifier(of: object) else { continue }
                    var fields = SyncGroup.describe(try access.state(of: object).values)
                    fields["entity"] = object.entity.name
                    out[gid] = fields
                }
            }
            return out
        }
    }
}
