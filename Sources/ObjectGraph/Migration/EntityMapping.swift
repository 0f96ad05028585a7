import Foundation

/// How the instances of one entity move from a source model to a destination
/// model (EM-01…12): Core Data's `NSEntityMapping`. Mappings hold entity
/// **names** and version hashes, never entity descriptions; the migration
/// manager resolves them (MG-05).
///
/// ```swift
/// let people = EntityMapping(sourceEntityName: "Person", destinationEntityName: "Person", type: .transform)
/// people.attributeMappings = [try PropertyMapping(name: "name", valueExpressionFormat: "$source.fullName")]
/// people.entityMigrationPolicyClassName = "SplitNamePolicy"   // registered with EntityMigrationPolicy.register
/// ```
public final class EntityMapping: CustomStringConvertible {
    private var storedName: String?
    /// Tells mappings apart within a mapping model; defaults to
    /// `"<source>-><destination>"` (EM-06).
    public var name: String {
        get { storedName ?? "\(sourceEntityName ?? "")->\(destinationEntityName ?? "")" }
        set { storedName = newValue }
    }
    public var mappingType: EntityMappingType
    /// EM-01, EM-02.
    public var sourceEntityName: String?
    public var destinationEntityName: String?
    /// When set, must equal the entity's version hash in the model the
    /// mapping is used with, or the migration fails before writing (EM-03, EM-04).
    public var sourceEntityVersionHash: Data?
    public var destinationEntityVersionHash: Data?
    /// The source instances to map: an expression giving a collection (EM-05).
    /// Nil means every instance of the source entity, sub-entities excluded
    /// (they have their own mappings), as Core Data's default
    /// `FETCH(FUNCTION($manager, "fetchRequestForSourceEntityNamed:predicateString:", …), $manager.sourceContext, NO)` does.
    public var sourceExpression: FetchExpression?
    /// Processed in array order (EM-09, EM-10).
    public var attributeMappings: [PropertyMapping]
    public var relationshipMappings: [PropertyMapping]
    /// The registered name of the policy's class; nil means the base
    /// `EntityMigrationPolicy` (EM-08). Required for `.custom` (EM-07).
    public var entityMigrationPolicyClassName: String?
    /// Free-form data for the policy (EM-11).
    public var userInfo: [String: Any]

    public init(name: String? = nil, sourceEntityName: String?, destinationEntityName: String?, type: EntityMappingType,
                attributeMappings: [PropertyMapping] = [], relationshipMappings: [PropertyMapping] = [],
                entityMigrationPolicyClassName: String? = nil, userInfo: [String: Any] = [:]) {
        storedName = name
        self.sourceEntityName = sourceEntityName
        self.destinationEntityName = destinationEntityName
        self.mappingType = type
        self.attributeMappings = attributeMappings
        self.relationshipMappings = relationshipMappings
        self.entityMigrationPolicyClassName = entityMigrationPolicyClassName
        self.userInfo = userInfo
    }

    /// Attribute and relationship mappings, attributes first.
    var propertyMappings: [PropertyMapping] { attributeMappings + relationshipMappings }

    public var description: String {
        "EntityMapping(\(name): \(mappingType) \(sourceEntityName ?? "-") -> \(destinationEntityName ?? "-"))"
    }
}
