import Foundation

/// How a store's external records are written: where, in which format, with
/// which extension, and ObjectGraph's additions (a plain-text rendering
/// beside each record, an NDJSON change feed). Read from a store's options
/// (`init(storeOptions:)`) or built directly for an `ExternalRecordWriter`.
///
/// ```swift
/// let configuration = ExternalRecordsConfiguration(directory: URL(fileURLWithPath: "/srv/records"),
///                                                  format: .json, writesPlainText: true)
/// // or, from the options a store was added with:
/// let fromOptions = try ExternalRecordsConfiguration(storeOptions: [
///     PersistentStoreCoordinator.externalRecordsDirectoryOption: "/srv/records",
///     PersistentStoreCoordinator.externalRecordsFileFormatOption: "xml",
/// ])
/// ```
public struct ExternalRecordsConfiguration: Sendable, Equatable {
    /// The records directory; each store writes into `<directory>/<store UUID>/`.
    public var directory: URL
    public var format: ExternalRecordFormat
    /// The extension of record files, without the dot.
    public var fileExtension: String
    /// When an entity flags no property (neither `isStoredInExternalRecord`
    /// nor `isIndexedBySpotlight`), export every stored attribute; when
    /// false such an entity writes no records.
    public var exportsAllAttributesWhenNoneFlagged: Bool
    /// Also write `<pk>.txt` beside each record: a title line and one
    /// `name: value` line per exported property, for crawlers (Recoll,
    /// Tracker, omindex) that index plain text with no configuration.
    public var writesPlainText: Bool
    /// Also append one line per written or removed record to
    /// `<directory>/<store UUID>/changes.ndjson`, for loaders of search
    /// engines (Meilisearch, Typesense) that take NDJSON.
    public var writesChangeFeed: Bool

    public init(directory: URL, format: ExternalRecordFormat = .json, fileExtension: String? = nil,
                exportsAllAttributesWhenNoneFlagged: Bool = true, writesPlainText: Bool = false,
                writesChangeFeed: Bool = false) {
        self.directory = directory
        self.format = format
        self.fileExtension = fileExtension ?? format.defaultFileExtension
        self.exportsAllAttributesWhenNoneFlagged = exportsAllAttributesWhenNoneFlagged
        self.writesPlainText = writesPlainText
        self.writesChangeFeed = writesChangeFeed
    }

    /// The configuration a store's options ask for; nil when they carry no
    /// `NSExternalRecordsDirectoryOption` (the store writes no records: there
    /// is no default directory, PC-35d).
    ///
    /// Keys read: `externalRecordsDirectoryOption` (a file `URL` or a path
    /// `String`), `externalRecordsFileFormatOption` ("xml", "binary",
    /// "json"; default "json"), `externalRecordExtensionOption` (letters,
    /// digits, `_`, `-`; not "tmp"; default per format), and ObjectGraph's
    /// `externalRecordsPlainTextOption`, `externalRecordsChangeFeedOption`,
    /// `externalRecordsExportAllAttributesOption` (Bools).
    /// - Throws: 134080 (`persistentStoreOpen`) naming the option and the
    ///   value for a value of the wrong type or form.
    public init?(storeOptions options: [String: Any]) throws {
        typealias C = PersistentStoreCoordinator
        guard let raw = options[C.externalRecordsDirectoryOption] else { return nil }
        let directory: URL
        switch raw {
        case let url as URL:
            guard url.isFileURL, !url.path.isEmpty else { throw Self.invalid(C.externalRecordsDirectoryOption, "must be a file URL, got \(url.absoluteString)") }
            directory = url
        case let path as String:
            guard !path.isEmpty else { throw Self.invalid(C.externalRecordsDirectoryOption, "must not be an empty path") }
            directory = URL(fileURLWithPath: path)
        default:
            throw Self.invalid(C.externalRecordsDirectoryOption, "must be a file URL or a path string, got \(type(of: raw))")
        }
        var format = ExternalRecordFormat.json
        if let value = options[C.externalRecordsFileFormatOption] {
            guard let text = value as? String, let parsed = ExternalRecordFormat(rawValue: text) else {
                throw Self.invalid(C.externalRecordsFileFormatOption, "must be one of \(ExternalRecordFormat.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")), got \(value)")
            }
            format = parsed
        }
        var fileExtension: String?
        if let value = options[C.externalRecordExtensionOption] {
            guard var text = value as? String else { throw Self.invalid(C.externalRecordExtensionOption, "must be a string, got \(type(of: value))") }
            if text.hasPrefix(".") { text.removeFirst() }
            guard !text.isEmpty, text.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "_-".unicodeScalars.contains($0)) }) else {
                throw Self.invalid(C.externalRecordExtensionOption, "'\(value)' may only hold letters, digits, '_' and '-'")
            }
            // Temporary files end in .tmp, and crawlers skip that extension.
            guard text.lowercased() != "tmp" else { throw Self.invalid(C.externalRecordExtensionOption, "'tmp' is the extension of temporary files") }
            fileExtension = text
        }
        let plainText = try Self.flag(options, C.externalRecordsPlainTextOption) ?? false
        if plainText, (fileExtension ?? format.defaultFileExtension).lowercased() == "txt" {
            throw Self.invalid(C.externalRecordExtensionOption, "'txt' is the extension of the plain-text renderings, which \(C.externalRecordsPlainTextOption) turns on")
        }
        self.init(directory: directory, format: format, fileExtension: fileExtension,
                  exportsAllAttributesWhenNoneFlagged: try Self.flag(options, C.externalRecordsExportAllAttributesOption) ?? true,
                  writesPlainText: plainText,
                  writesChangeFeed: try Self.flag(options, C.externalRecordsChangeFeedOption) ?? false)
    }

    private static func flag(_ options: [String: Any], _ key: String) throws -> Bool? {
        switch options[key] {
        case nil: return nil
        case let b as Bool: return b
        case let n as NSNumber: return n.boolValue
        case let s as String where ["1", "yes", "true"].contains(s.lowercased()): return true
        case let s as String where ["0", "no", "false"].contains(s.lowercased()): return false
        case let other?: throw invalid(key, "must be a boolean, got \(other)")
        }
    }

    private static func invalid(_ key: String, _ reason: String) -> CoreDataError {
        CoreDataError(.persistentStoreOpen, "\(key): \(reason)")
    }
}
