import Foundation

/// A compiled model as apps ship it: a `.mom` file (one keyed archive) or a
/// `.momd` folder holding one `.mom` per version and a `VersionInfo.plist`
/// whose `NSManagedObjectModel_CurrentVersionName` names the current one.
/// (The `.omo` files newer compilers put beside each `.mom` are a faster
/// loading form of the same model and are not read.)
///
/// ```swift
/// let bundle = try CompiledModelBundle(url: URL(fileURLWithPath: "Model.momd"))
/// bundle.versionNames                         // ["Model", "Model 2"]
/// let current = try bundle.currentModel()     // Model 2.mom
/// let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: "Model.momd"))
/// ```
public struct CompiledModelBundle: Sendable {
    public let url: URL
    /// Every version's file name without `.mom`, sorted.
    public let versionNames: [String]
    /// The version `VersionInfo.plist` names; without that file, the only version.
    public let currentVersionName: String

    public init(url: URL) throws {
        self.url = url
        let items: [String]
        do {
            items = try FileManager.default.contentsOfDirectory(atPath: url.path)
        } catch {
            throw CoreDataError(.fileReadNoSuchFile, "\(url.path): cannot list compiled model folder: \(error.localizedDescription)",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        versionNames = items.filter { $0.hasSuffix(".mom") }.map { String($0.dropLast(4)) }.sorted()
        guard !versionNames.isEmpty else {
            throw CoreDataError(.fileReadCorruptFile, "\(url.path): compiled model folder holds no .mom version",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        let info = url.appendingPathComponent("VersionInfo.plist")
        if let data = FileManager.default.contents(atPath: info.path) {
            let plist = try? PropertyListSerialization.propertyList(from: data, options: [], format: nil)
            guard let name = (plist as? [String: Any])?["NSManagedObjectModel_CurrentVersionName"] as? String else {
                throw CoreDataError(.fileReadCorruptFile, "\(info.path): not a property list with NSManagedObjectModel_CurrentVersionName",
                                    userInfo: [CoreDataError.filePathErrorKey: info.path])
            }
            guard versionNames.contains(name) else {
                throw CoreDataError(.fileReadCorruptFile, "\(info.path): current version '\(name)' has no \(name).mom in the folder (versions: \(versionNames.joined(separator: ", ")))",
                                    userInfo: [CoreDataError.filePathErrorKey: info.path])
            }
            currentVersionName = name
        } else if versionNames.count == 1 {
            currentVersionName = versionNames[0]
        } else {
            throw CoreDataError(.fileReadCorruptFile, "\(url.path): several .mom versions and no VersionInfo.plist naming the current one",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
    }

    /// Reads one version by name (without `.mom`).
    public func model(named name: String) throws -> ManagedObjectModel {
        try CompiledModelBundle.readFile(url.appendingPathComponent(name + ".mom"))
    }

    /// Reads the current version.
    public func currentModel() throws -> ManagedObjectModel { try model(named: currentVersionName) }

    /// True for what `read(contentsOf:)` reads: a `.mom` file or `.momd` folder.
    public static func isCompiledModel(_ url: URL) -> Bool {
        url.pathExtension == "mom" || url.pathExtension == "momd"
    }

    /// Reads a `.mom` file or a `.momd` folder's current version.
    public static func read(contentsOf url: URL) throws -> ManagedObjectModel {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw CoreDataError(.fileReadNoSuchFile, "\(url.path): no such compiled model file or folder",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        return isDirectory.boolValue ? try CompiledModelBundle(url: url).currentModel() : try readFile(url)
    }

    static func readFile(_ url: URL) throws -> ManagedObjectModel {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw CoreDataError(.fileReadNoSuchFile, "\(url.path): cannot read compiled model: \(error.localizedDescription)",
                                userInfo: [CoreDataError.filePathErrorKey: url.path, CoreDataError.underlyingErrorKey: error])
        }
        return try CompiledModelDecoder.decode(archive: data, source: url.path)
    }
}

extension ManagedObjectModel {
    /// Decodes the model Core Data caches in a SQLite store's
    /// `Z_MODELCACHE.Z_CONTENT` (raw deflate around a keyed archive).
    /// `source` names the store in errors.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(compiledModelCacheData: zContent, source: "Store.sqlite")
    /// ```
    public convenience init(compiledModelCacheData data: Data, source: String = "Z_MODELCACHE") throws {
        let read = try CompiledModelDecoder.decode(modelCache: data, source: source)
        self.init()
        adopt(read)
    }

    /// Decodes a `.mom` file's bytes.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(compiledModelData: Data(contentsOf: momURL), source: momURL.path)
    /// ```
    public convenience init(compiledModelData data: Data, source: String = "model archive") throws {
        let read = try CompiledModelDecoder.decode(archive: data, source: source)
        self.init()
        adopt(read)
    }

}
