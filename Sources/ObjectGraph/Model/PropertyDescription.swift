import Foundation

/// The part of an entity's schema shared by attributes, relationships and
/// fetched properties (PROP-01): a name, flags, validation and versioning.
///
/// Descriptions are editable until their model is used by a coordinator; after
/// that every setter traps (X-01), as Core Data raises. Copy the model to edit it.
///
/// ```swift
/// let name = AttributeDescription(name: "name", type: .string)
/// name.isOptional = false
/// name.userInfo["column"] = "display"
/// ```
public class PropertyDescription: CustomStringConvertible {
    /// The property's name, unique within its entity and its ancestors.
    @exclusivity(unchecked) public var name: String { willSet { ensureEditable("name") } }
    /// The entity that declares this property; set when it is added to one.
    /// Unretained, as Core Data's; the entity clears it (see `Unretained`).
    public internal(set) var entity: EntityDescription? {
        get { entityReference.target }
        set { entityReference.target = newValue }
    }
    @exclusivity(unchecked) var entityReference = Unretained<EntityDescription>()
    /// A nil value fails validation at save when this is false (PROP-02).
    @exclusivity(unchecked) public var isOptional: Bool = true { willSet { ensureEditable("isOptional") } }
    /// Transient properties are modelled and tracked but never stored (PROP-03).
    @exclusivity(unchecked) public var isTransient: Bool = false { willSet { ensureEditable("isTransient") } }
    /// Read-only properties cannot be set through key-value coding.
    @exclusivity(unchecked) public var isReadOnly: Bool = false { willSet { ensureEditable("isReadOnly") } }
    /// Stores may index this property for faster fetches.
    @exclusivity(unchecked) public var isIndexed: Bool = false { willSet { ensureEditable("isIndexed") } }
    /// Spotlight indexes this property's value (PD-11; Xcode's
    /// `spotlightIndexingEnabled="YES"`). Default false. An external record
    /// holds the property and lists it under `indexed` for indexers
    /// (docs/EXTERNAL-RECORDS.md); transient properties are never exported
    /// (PD-12a). Not part of the version hash, as in Core Data.
    ///
    /// ```swift
    /// title.isIndexedBySpotlight = true
    /// ```
    @exclusivity(unchecked) public var isIndexedBySpotlight: Bool = false { willSet { ensureEditable("isIndexedBySpotlight") } }
    /// The value is written to the object's external record (PD-12; Xcode's
    /// `storedInTruthFile="YES"`). Default false. Only these (and
    /// Spotlight-indexed) properties can come back from
    /// `PersistentStoreCoordinator.importStore(…)`. Transient properties are
    /// never exported (PD-12a). Not part of the version hash, as in Core Data.
    @exclusivity(unchecked) public var isStoredInExternalRecord: Bool = false { willSet { ensureEditable("isStoredInExternalRecord") } }
    /// Application data; not part of the version hash.
    @exclusivity(unchecked) public var userInfo: [String: String] = [:] { willSet { ensureEditable("userInfo") } }
    /// Validation predicates (format strings, `SELF` is the value) and the
    /// warning reported when each fails; not part of the version hash.
    @exclusivity(unchecked) public private(set) var validationPredicates: [String] = []
    @exclusivity(unchecked) public private(set) var validationWarnings: [String] = []
    /// Matches this property across model versions; defaults to its name.
    public var renamingIdentifier: String? {
        get { storedRenamingIdentifier ?? name }
        set { ensureEditable("renamingIdentifier"); storedRenamingIdentifier = newValue }
    }
    /// Free-form text mixed into the version hash to force a new version.
    @exclusivity(unchecked) public var versionHashModifier: String? { willSet { ensureEditable("versionHashModifier") } }

    @exclusivity(unchecked) var storedRenamingIdentifier: String?
    /// Where the property was declared in a model file, for error messages.
    @exclusivity(unchecked) var sourceLine: Int?

    init(name: String) {
        self.name = name
    }

    /// Sets the validation predicates with a warning for each (Core Data's
    /// `setValidationPredicates:withValidationWarnings:`).
    public func setValidationPredicates(_ predicates: [String], withValidationWarnings warnings: [String]) {
        ensureEditable("validationPredicates")
        validationPredicates = predicates
        validationWarnings = warnings
    }

    /// The persistence-relevant identity of the property (see `VersionHasher`).
    public var versionHash: Data { VersionHasher.hash(of: self) }

    /// A distinct, editable copy that belongs to no entity.
    // Trap kept (issue 28 audit): unreachable, the class is not open and each subclass here overrides it.
    public func copy() -> PropertyDescription { fatalError("subclass responsibility: \(type(of: self)).copy()") }

    func copyCommonFields(to other: PropertyDescription) {
        other.isOptional = isOptional
        other.isTransient = isTransient
        other.isReadOnly = isReadOnly
        other.isIndexed = isIndexed
        other.isIndexedBySpotlight = isIndexedBySpotlight
        other.isStoredInExternalRecord = isStoredInExternalRecord
        other.userInfo = userInfo
        other.validationPredicates = validationPredicates
        other.validationWarnings = validationWarnings
        other.storedRenamingIdentifier = storedRenamingIdentifier
        other.versionHashModifier = versionHashModifier
        other.sourceLine = sourceLine
    }

    /// Differences in the fields every property has, named for a diff report.
    func commonDifferences(from other: PropertyDescription) -> [String] {
        var out: [String] = []
        func check<T: Equatable>(_ label: String, _ a: T, _ b: T) {
            if a != b { out.append("\(label): \(a) vs \(b)") }
        }
        check("kind", String(describing: type(of: self)), String(describing: type(of: other)))
        check("optional", isOptional, other.isOptional)
        check("transient", isTransient, other.isTransient)
        check("readOnly", isReadOnly, other.isReadOnly)
        check("indexed", isIndexed, other.isIndexed)
        check("indexedBySpotlight", isIndexedBySpotlight, other.isIndexedBySpotlight)
        check("storedInExternalRecord", isStoredInExternalRecord, other.isStoredInExternalRecord)
        check("userInfo", userInfo, other.userInfo)
        check("validationPredicates", validationPredicates, other.validationPredicates)
        check("validationWarnings", validationWarnings, other.validationWarnings)
        check("renamingIdentifier", storedRenamingIdentifier, other.storedRenamingIdentifier)
        check("versionHashModifier", versionHashModifier, other.versionHashModifier)
        return out
    }

    /// Differences from another property of the same name; overridden per kind.
    func differences(from other: PropertyDescription) -> [String] { commonDifferences(from: other) }

    /// Traps when the owning model is in use (X-01, MOM-00d).
    func ensureEditable(_ field: String) {
        EntityLayout.modelWillChange()
        guard let model = entity?.managedObjectModel, !model.isEditable else { return }
        let owner = entity.map { "\($0.name)." } ?? ""
        // Trap kept (issue 28 audit): editing a model in use, which Core Data raises on (X-01).
        fatalError("ObjectGraph: cannot set \(field) of property '\(owner)\(name)': its managed object model is in use by a persistent store coordinator; copy() the model to edit it (X-01)")
    }

    public var description: String {
        "\(type(of: self))(\(entity.map { "\($0.name)." } ?? "")\(name))"
    }
}
