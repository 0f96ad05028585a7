import Foundation

/// A named index over some of an entity's properties: Core Data's
/// `NSFetchIndexDescription`, which Xcode writes as `<fetchIndex>` elements.
/// Stores use it to speed up fetches; it is not part of the version hash.
///
/// ```swift
/// let byName = FetchIndexDescription(name: "byNameIndex",
///                                    elements: [FetchIndexElementDescription(propertyName: "name")])
/// employee.indexes = [byName]
/// ```
public final class FetchIndexDescription: CustomStringConvertible {
    public var name: String { willSet { ensureEditable("name") } }
    public var elements: [FetchIndexElementDescription] { willSet { ensureEditable("elements") } }
    /// The entity the index belongs to; set when it is added to one.
    public internal(set) var entity: EntityDescription? {
        get { entityReference.target }
        set { entityReference.target = newValue }
    }
    var entityReference = Unretained<EntityDescription>()
    /// Where the index was declared in a model file, for error messages.
    var sourceLine: Int?

    public init(name: String, elements: [FetchIndexElementDescription]) {
        self.name = name
        self.elements = elements
    }

    public func copy() -> FetchIndexDescription {
        let c = FetchIndexDescription(name: name, elements: elements)
        c.sourceLine = sourceLine
        return c
    }

    func ensureEditable(_ field: String) {
        EntityLayout.modelWillChange()
        guard let model = entity?.managedObjectModel, !model.isEditable else { return }
        // Trap kept (issue 28 audit): editing a model in use, which Core Data raises on (X-01).
        fatalError("ObjectGraph: cannot set \(field) of fetch index '\(name)': its managed object model is in use by a persistent store coordinator; copy() the model to edit it (X-01)")
    }

    public var description: String {
        "FetchIndexDescription(\(name): \(elements.map(\.description).joined(separator: ", ")))"
    }
}

/// One property of a fetch index, with its collation and order.
public struct FetchIndexElementDescription: Equatable, CustomStringConvertible, Sendable {
    /// How values are ordered in the index (Core Data's numbers).
    public enum CollationType: UInt, Sendable {
        case binary = 0
        case rTree = 1

        /// Xcode's spelling in a model file's `type` attribute.
        public var xcodeName: String { self == .binary ? "Binary" : "RTree" }

        public init?(xcodeName: String) {
            switch xcodeName {
            case "Binary": self = .binary
            case "RTree": self = .rTree
            default: return nil
            }
        }
    }

    public var propertyName: String
    public var collationType: CollationType
    public var isAscending: Bool

    public init(propertyName: String, collationType: CollationType = .binary, isAscending: Bool = true) {
        self.propertyName = propertyName
        self.collationType = collationType
        self.isAscending = isAscending
    }

    public var description: String {
        "\(propertyName) \(collationType.xcodeName) \(isAscending ? "ascending" : "descending")"
    }
}
