import Foundation

/// Where things live in a records directory (docs/EXTERNAL-RECORDS.md):
///
///     <directory>/<store UUID>/store-file           the store's URL, one line
///     <directory>/<store UUID>/model.mom            the store's model, compiled
///     <directory>/<store UUID>/changes.ndjson       the change feed (optional)
///     <directory>/<store UUID>/<Entity>/<pk>.<ext>  one record per object
///     <directory>/<store UUID>/<Entity>/<pk>.txt    its plain-text rendering (optional)
///
/// Temporary files are `.<name>.<unique>.tmp` in the directory of the file
/// they become, so a rename puts them in place and crawlers (which skip
/// hidden and `.tmp` files) never read one.
enum ExternalRecordsLayout {
    static let storeFileName = "store-file"
    static let modelFileName = "model.mom"
    static let changeFeedName = "changes.ndjson"
    static let plainTextExtension = "txt"

    static func storeFolder(_ directory: URL, _ storeIdentifier: String) -> URL {
        directory.appendingPathComponent(storeIdentifier, isDirectory: true)
    }

    static func entityFolder(_ storeFolder: URL, _ entityName: String) -> URL {
        storeFolder.appendingPathComponent(entityName, isDirectory: true)
    }

    /// A record file's name: the primary key, the number in the object URI's `p<pk>`.
    static func recordName(primaryKey: Int64, fileExtension: String) -> String {
        "\(primaryKey).\(fileExtension)"
    }

    /// The primary key a record or rendering file name carries, or nil for a
    /// name that is not `<positive integer>.<extension>` (hidden and
    /// temporary files included).
    static func primaryKey(inFileName name: String) -> (key: Int64, fileExtension: String)? {
        guard !name.hasPrefix("."), let dot = name.firstIndex(of: ".") else { return nil }
        let stem = name[..<dot]
        let ext = String(name[name.index(after: dot)...])
        guard !ext.isEmpty, !ext.contains("."), stem.allSatisfy(\.isASCII), let key = Int64(stem), key > 0, String(key) == stem else { return nil }
        return (key, ext)
    }

    /// True for the temporary files writers leave behind when they crash.
    static func isTemporaryName(_ name: String) -> Bool {
        name.hasPrefix(".") && name.hasSuffix(".tmp")
    }

    /// The object URI a record at `<storeUUID>/<Entity>/<pk>.<ext>` stands for.
    static func objectURI(storeIdentifier: String, entityName: String, primaryKey: Int64) -> URL? {
        let escaped = entityName.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? entityName
        return URL(string: "x-coredata://\(storeIdentifier)/\(escaped)/p\(primaryKey)")
    }

    /// The store folders under `directory` (those holding a `store-file`), sorted by name.
    static func storeFolders(in directory: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { name in
            !name.hasPrefix(".") && FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).appendingPathComponent(storeFileName).path)
        }.sorted()
    }

    /// The store URL a `store-file` holds; nil when it holds none (an in-memory store).
    static func storeURL(inStoreFile url: URL) throws -> URL? {
        let text = try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : URL(string: text)
    }
}
