import Foundation

/// How an entity mapping produces destination instances (EM-12):
/// Core Data's `NSEntityMappingType`, numbered as Apple numbers it.
///
/// ```swift
/// let mapping = EntityMapping(sourceEntityName: "Note", destinationEntityName: "Note", type: .copy)
/// mapping.mappingType.rawValue   // 4
/// ```
public enum EntityMappingType: UInt, CaseIterable, Sendable, CustomStringConvertible {
    /// `NSUndefinedEntityMappingType`: the policy creates destination instances itself (EM-12a).
    case undefined = 0x00
    /// `NSCustomEntityMappingType`: a custom policy does the work (EM-12b).
    case custom = 0x01
    /// `NSAddEntityMappingType`: the entity is new in the destination; no source instances (EM-12c).
    case add = 0x02
    /// `NSRemoveEntityMappingType`: the entity is gone; its instances are not carried over (EM-12d).
    case remove = 0x03
    /// `NSCopyEntityMappingType`: instances are migrated unchanged (EM-12e).
    case copy = 0x04
    /// `NSTransformEntityMappingType`: instances are mapped through property mappings (EM-12f).
    case transform = 0x05

    /// The lower-case name used in mapping files (`"transform"`).
    public var description: String {
        switch self {
        case .undefined: return "undefined"
        case .custom: return "custom"
        case .add: return "add"
        case .remove: return "remove"
        case .copy: return "copy"
        case .transform: return "transform"
        }
    }

    /// Parses `description`, and Xcode's `mappingtypename` spellings (`"Transform"`).
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
        self = match
    }
}
