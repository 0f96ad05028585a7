import Foundation

/// The file format of external records (PC-35f, PC-35g): Core Data's two
/// property-list formats plus JSON, ObjectGraph's Linux addition and the
/// default, because Linux indexers and search engines load JSON and none
/// reads property lists (docs/EXTERNAL-RECORDS.md).
///
/// The raw values are the values of `NSExternalRecordsFileFormatOption`:
/// Core Data's `NSXMLExternalRecordType` ("xml") and
/// `NSBinaryExternalRecordType` ("binary"), and "json".
///
/// ```swift
/// let options: [String: Any] = [
///     PersistentStoreCoordinator.externalRecordsDirectoryOption: URL(fileURLWithPath: "/var/lib/app/records"),
///     PersistentStoreCoordinator.externalRecordsFileFormatOption: ExternalRecordFormat.xml.rawValue,
/// ]
/// ```
public enum ExternalRecordFormat: String, Sendable, CaseIterable {
    /// An XML property list (`NSXMLExternalRecordType`).
    case xml
    /// A binary property list (`NSBinaryExternalRecordType`).
    case binary
    /// One JSON object, keys sorted.
    case json

    /// The file extension used when `NSExternalRecordExtensionOption` gives none.
    public var defaultFileExtension: String {
        switch self {
        case .xml: return "xml"
        case .binary: return "plist"
        case .json: return "json"
        }
    }
}
