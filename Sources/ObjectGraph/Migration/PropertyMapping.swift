import Foundation

/// How one destination property gets its value during a migration (PM-01…03):
/// Core Data's `NSPropertyMapping`. The value expression is written in the
/// predicate language's expression syntax (docs/PREDICATES.md) and may use
/// the migration variables `$source`, `$destination`, `$manager`,
/// `$entityMapping`, `$propertyMapping` and `$entityPolicy` (MP-10).
///
/// ```swift
/// let fullName = try PropertyMapping(name: "fullName",
///                                    valueExpressionFormat: "FUNCTION($entityPolicy, 'join:with:', $source.first, $source.last)")
/// let copied = try PropertyMapping(name: "title", valueExpressionFormat: "$source.heading")
/// ```
public final class PropertyMapping: CustomStringConvertible {
    /// The destination property this mapping fills (PM-01).
    public var name: String
    /// Computes the value; nil leaves the destination property at its default (PM-02).
    public var valueExpression: FetchExpression?
    /// Free-form data for a custom policy (PM-03).
    public var userInfo: [String: Any]

    /// A mapping with an already-built expression.
    public init(name: String, valueExpression: FetchExpression? = nil, userInfo: [String: Any] = [:]) {
        self.name = name
        self.valueExpression = valueExpression
        self.userInfo = userInfo
    }

    /// A mapping whose expression is parsed from `valueExpressionFormat`.
    /// - Throws: `CoreDataError` 134110 (`NSMigrationError`) when the text does
    ///   not parse, with the column and a caret diagram in the message and the
    ///   `PredicateSyntaxError` under `NSUnderlyingErrorKey`.
    public convenience init(name: String, valueExpressionFormat: String, userInfo: [String: Any] = [:]) throws {
        self.init(name: name, valueExpression: try Self.parse(valueExpressionFormat, property: name, entityMapping: nil), userInfo: userInfo)
    }

    /// `$source.<key>`: a plain copy of one source property, the expression
    /// inferred mappings use.
    public static func sourceKeyExpression(_ key: String) -> FetchExpression {
        .member(.variable(MigrationManager.sourceObjectKey), [key])
    }

    /// `FUNCTION($manager, "destinationInstancesForSourceRelationshipNamed:sourceInstances:", "<name>", $source.<name>)`:
    /// the destination instances of the objects a source relationship holds,
    /// the expression inferred mappings use for relationships.
    public static func relationshipLookupExpression(_ sourceRelationshipName: String) -> FetchExpression {
        .function(MigrationManager.destinationInstancesForSourceRelationshipSelector,
                  [.variable(MigrationManager.managerKey), .constant(.string(sourceRelationshipName)), sourceKeyExpression(sourceRelationshipName)])
    }

    /// The source key of a `$source.<key>` expression, else nil.
    var copiedSourceKey: String? {
        guard case let .member(.variable(variable), path)? = valueExpression?.normalized,
              variable == MigrationManager.sourceObjectKey, path.count == 1 else { return nil }
        return path[0]
    }

    /// The source relationship of a `relationshipLookupExpression`, else nil.
    var lookedUpSourceRelationship: String? {
        guard case let .function(selector, args)? = valueExpression, selector == MigrationManager.destinationInstancesForSourceRelationshipSelector,
              args.count == 3, case .variable(MigrationManager.managerKey) = args[0],
              case let .constant(.string(name)) = args[1],
              case let .member(.variable(MigrationManager.sourceObjectKey), path) = args[2].normalized, path == [name] else { return nil }
        return name
    }

    static func parse(_ format: String, property: String, entityMapping: String?) throws -> FetchExpression {
        do {
            return try FetchExpression(format: format)
        } catch let error as PredicateSyntaxError {
            let place = entityMapping.map { "\($0)." } ?? ""
            throw CoreDataError(.migration,
                                "the value expression of \(place)\(property) does not parse at column \(error.column): \(error.reason)\n\(error.caretDiagram)",
                                userInfo: [CoreDataError.underlyingErrorKey: error, CoreDataError.propertyNameErrorKey: property,
                                           CoreDataError.expressionPositionErrorKey: error.position])
        }
    }

    public var description: String {
        "PropertyMapping(\(name) = \(valueExpression?.expressionFormat ?? "nil"))"
    }
}
