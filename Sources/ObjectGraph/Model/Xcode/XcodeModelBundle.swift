import Foundation

/// A versioned Xcode model: a `.xcdatamodeld` folder holding one
/// `.xcdatamodel` folder per version and a `.xccurrentversion` property list
/// naming the current one.
///
/// ```swift
/// let bundle = try XcodeModelBundle(url: URL(fileURLWithPath: "Store.xcdatamodeld"))
/// for name in bundle.versionNames { let model = try bundle.model(named: name) }
/// let current = try bundle.currentModel()
/// ```
public struct XcodeModelBundle: Sendable {
    public let url: URL
    /// Every version's folder name (`Name 2.xcdatamodel`), in version order:
    /// numbers compared as numbers, so `Name.xcdatamodel` comes before
    /// `Name 2.xcdatamodel` and `Name 2` before `Name 10`.
    public let versionNames: [String]
    /// The version `.xccurrentversion` names; with no such file, the only
    /// version, or the last in version order (the one migrations end at,
    /// see `StagedStoreMigration`).
    public let currentVersionName: String

    public init(url: URL) throws {
        self.url = url
        let items: [String]
        do {
            items = try FileManager.default.contentsOfDirectory(atPath: url.path)
        } catch {
            throw CoreDataError(.fileReadNoSuchFile, "\(url.path): cannot list model bundle: \(error.localizedDescription)",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        versionNames = ManagedObjectModel.versionOrder(items.filter { $0.hasSuffix(".xcdatamodel") })
        guard !versionNames.isEmpty else {
            throw CoreDataError(.fileReadCorruptFile, "\(url.path): model bundle holds no .xcdatamodel version",
                                userInfo: [CoreDataError.filePathErrorKey: url.path])
        }
        let marker = url.appendingPathComponent(".xccurrentversion")
        if let data = FileManager.default.contents(atPath: marker.path) {
            let plist = try? PropertyListSerialization.propertyList(from: data, options: [], format: nil)
            guard let name = (plist as? [String: Any])?["_XCCurrentVersionName"] as? String else {
                throw CoreDataError(.fileReadCorruptFile, "\(marker.path): not a property list with _XCCurrentVersionName",
                                    userInfo: [CoreDataError.filePathErrorKey: marker.path])
            }
            guard versionNames.contains(name) else {
                throw CoreDataError(.fileReadCorruptFile, "\(marker.path): current version '\(name)' is not in the bundle (versions: \(versionNames.joined(separator: ", ")))",
                                    userInfo: [CoreDataError.filePathErrorKey: marker.path])
            }
            currentVersionName = name
        } else {
            currentVersionName = versionNames[versionNames.count - 1]
        }
    }

    /// Reads one version by folder name.
    public func model(named name: String) throws -> ManagedObjectModel {
        try XcodeModelReader.read(contentsOf: url.appendingPathComponent(name).appendingPathComponent("contents"))
    }

    /// Reads the current version.
    public func currentModel() throws -> ManagedObjectModel { try model(named: currentVersionName) }
}
