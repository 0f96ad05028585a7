import Foundation
import ObjectGraph

/// The model writer processes save (`docs/WORKLOAD.md`): `Record` (name,
/// a, note, folder) and `Folder` (name, records). A writer needs only
/// part of it, so it also writes other models that have `Record.name`
/// (string), `Record.a` (any integer type) and, for relationship edits,
/// `Record.folder` to `Folder` with a `name` (the engine tests' model has them).
public enum WorkloadModel {
    public static func model() -> ManagedObjectModel {
        let record = EntityDescription(name: "Record")
        let folder = EntityDescription(name: "Folder")
        let records = RelationshipDescription(name: "records", destination: record, toMany: true)
        let recordFolder = RelationshipDescription(name: "folder", destination: folder, toMany: false)
        records.inverseRelationship = recordFolder
        recordFolder.inverseRelationship = records
        records.deleteRule = .nullify
        recordFolder.deleteRule = .nullify
        record.properties = [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "a", type: .integer64),
                             AttributeDescription(name: "note", type: .string), recordFolder]
        folder.properties = [AttributeDescription(name: "name", type: .string), records]
        let model = ManagedObjectModel()
        model.entities = [folder, record]
        return model
    }

    /// The file name `setUp` writes the model to.
    public static let modelFileName = "Workload.xcdatamodel"

    /// Creates `directory` with the model (`Workload.xcdatamodel`), empty
    /// stores `s1.sqlite`… with history on, and `storesyncd.toml` syncing
    /// them in one group `workload` (state in `state/`, runtime in `run/`).
    /// `policies` gives each store's policy (its count is the number of
    /// stores); `settings` are extra top-level lines of the config.
    /// - Returns: the config's path.
    @discardableResult
    public static func setUp(in directory: URL, policies: [String], settings: [String: String] = [:]) throws -> URL {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let model = model()
        try XcodeModelWriter.write(model, to: directory.appendingPathComponent(modelFileName))
        for index in policies.indices {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
            let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType,
                                                           at: directory.appendingPathComponent("s\(index + 1).sqlite"),
                                                           options: [PersistentStore.persistentHistoryTrackingKey: true])
            try coordinator.remove(store)
        }
        var lines = [
            "state_directory": "\"state\"", "runtime_directory": "\"run\"", "log_format": "\"logfmt\"", "debounce": "\"20ms\"",
        ]
        lines.merge(settings) { $1 }
        var text = lines.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "\n")
        text += "\n\n[[group]]\nname = \"workload\"\nmodel = \"\(modelFileName)\"\n"
        for (index, policy) in policies.enumerated() {
            text += "\n[[group.store]]\nname = \"s\(index + 1)\"\npath = \"s\(index + 1).sqlite\"\npolicy = \"\(policy)\"\n"
        }
        let config = directory.appendingPathComponent("storesyncd.toml")
        try Data(text.utf8).write(to: config)
        return config
    }
}

/// SplitMix64: deterministic, so a run reproduces from its printed seed.
public struct WorkloadRandom: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the
/// machine, so a writer's commit time and another process's observation
/// can be subtracted.
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
