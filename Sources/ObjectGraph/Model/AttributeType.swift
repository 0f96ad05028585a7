import Foundation

/// The type of an attribute, numbered exactly as Core Data's `NSAttributeType`
/// (AT-00…AT-12), because the numbers feed version hashes and model files.
///
/// ```swift
/// let salary = AttributeDescription(name: "salary", type: .decimal)
/// ```
public enum AttributeType: UInt, CaseIterable, Sendable {
    case undefined = 0
    case integer16 = 100
    case integer32 = 200
    case integer64 = 300
    case decimal = 400
    case double = 500
    case float = 600
    case string = 700
    case boolean = 800
    case date = 900
    case binaryData = 1000
    case uuid = 1100
    case uri = 1200
    case transformable = 1800
    case objectID = 2000

    /// The name Xcode writes in a model file's `attributeType` attribute.
    public var xcodeName: String {
        switch self {
        case .undefined: return "Undefined"
        case .integer16: return "Integer 16"
        case .integer32: return "Integer 32"
        case .integer64: return "Integer 64"
        case .decimal: return "Decimal"
        case .double: return "Double"
        case .float: return "Float"
        case .string: return "String"
        case .boolean: return "Boolean"
        case .date: return "Date"
        case .binaryData: return "Binary"
        case .uuid: return "UUID"
        case .uri: return "URI"
        case .transformable: return "Transformable"
        case .objectID: return "ObjectID"
        }
    }

    /// Parses Xcode's spelling of a type; nil for an unknown name.
    public init?(xcodeName: String) {
        guard let match = AttributeType.allCases.first(where: { $0.xcodeName == xcodeName }) else { return nil }
        self = match
    }

    /// The Objective-C class Core Data reports as `attributeValueClassName` (AD-05).
    public var valueClassName: String? {
        switch self {
        case .integer16, .integer32, .integer64, .double, .float, .boolean: return "NSNumber"
        case .decimal: return "NSDecimalNumber"
        case .string: return "NSString"
        case .date: return "NSDate"
        case .binaryData: return "NSData"
        case .uuid: return "NSUUID"
        case .uri: return "NSURL"
        case .objectID: return "NSManagedObjectID"
        case .undefined, .transformable: return nil
        }
    }

    /// True for the integer, decimal and floating-point types.
    public var isNumeric: Bool {
        switch self {
        case .integer16, .integer32, .integer64, .decimal, .double, .float: return true
        default: return false
        }
    }

    /// The range an integer type can hold (AT-01…AT-03), nil for other types.
    public var integerRange: ClosedRange<Int64>? {
        switch self {
        case .integer16: return Int64(Int16.min)...Int64(Int16.max)
        case .integer32: return Int64(Int32.min)...Int64(Int32.max)
        case .integer64: return Int64.min...Int64.max
        default: return nil
        }
    }
}
