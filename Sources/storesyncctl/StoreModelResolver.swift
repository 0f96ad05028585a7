import ArgumentParser
import Foundation
import ObjectGraph

/// Chooses the model a command reads a store with: the version of a bundle
/// that fits the store, a model file as given, or, without `--model`, the
/// store's own model (cached in `Z_MODELCACHE`, else derived from its tables).
enum StoreModelResolver {
    struct Resolved {
        var model: ManagedObjectModel
        /// Where the model came from, for messages.
        var origin: String
        /// Derived from the schema: names are lowercased column names, and
        /// the store must be opened ignoring version hashes.
        var isDerived: Bool { model.isDerivedFromStoreSchema }
    }

    /// A versioned bundle: every version is a candidate for a store.
    static func isBundle(_ path: String) -> Bool {
        let ext = URL(fileURLWithPath: path).pathExtension
        return ext == "xcdatamodeld" || ext == "momd"
    }

    static func resolve(store: URL, modelPath: String?) throws -> Resolved {
        guard let modelPath else {
            let model = try SQLiteStore.storeModel(forStoreAt: store)
            return Resolved(model: model, origin: model.isDerivedFromStoreSchema
                            ? "derived from the schema of \(store.path) (property names are lowercased column names)"
                            : "cached in \(store.path) (Z_MODELCACHE)")
        }
        if isBundle(modelPath) {
            let match = try ManagedObjectModel.version(matchingStoreAt: store, inBundle: URL(fileURLWithPath: modelPath))
            let alike = match.alternatives.isEmpty ? "" : "; same schema: \(match.alternatives.joined(separator: ", "))"
            return Resolved(model: match.model, origin: "\(modelPath)/\(match.versionName) (matched by \(match.evidence.rawValue)\(alike))")
        }
        return Resolved(model: try ManagedObjectModel(contentsOf: URL(fileURLWithPath: modelPath)), origin: modelPath)
    }

    /// The sysexits status for a failure to find or read a model or store.
    static func exitCode(for error: CoreDataError) -> ExitCode {
        switch error.code {
        case .fileReadNoSuchFile, .fileNoSuchFile: return SysExit.noInput
        case .persistentStoreTimeout: return SysExit.temporaryFailure
        default: return SysExit.dataError
        }
    }
}
