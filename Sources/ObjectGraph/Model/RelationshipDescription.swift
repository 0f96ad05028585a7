import Foundation

/// A relationship from one entity to another (REL-*, RD-*).
///
/// A relationship is to-one when `maxCount == 1`, otherwise to-many; a
/// `maxCount` of 0 means "no limit" (CONST-VC-05, Apple's convention).
///
/// ```swift
/// let department = RelationshipDescription(name: "department", destination: dept, toMany: false)
/// let employees = RelationshipDescription(name: "employees", destination: employee, toMany: true)
/// department.inverseRelationship = employees
/// employees.inverseRelationship = department
/// employees.deleteRule = .deny
/// ```
public final class RelationshipDescription: PropertyDescription {
    /// The entity this relationship points to; part of the version hash.
    @exclusivity(unchecked) public var destinationEntity: EntityDescription? { willSet { ensureEditable("destinationEntity") } }
    /// The relationship that points back (REL-05); part of the version hash.
    @exclusivity(unchecked) public var inverseRelationship: RelationshipDescription? { willSet { ensureEditable("inverseRelationship") } }
    /// The fewest destinations a valid object has (REL-03); part of the version hash.
    @exclusivity(unchecked) public var minCount: Int = 0 { willSet { ensureEditable("minCount") } }
    /// The most destinations (0: unbounded). 1 makes the relationship to-one.
    @exclusivity(unchecked) public var maxCount: Int = 1 { willSet { ensureEditable("maxCount") } }
    /// What deleting the source does to the destinations; not in the version hash.
    @exclusivity(unchecked) public var deleteRule: DeleteRule = .nullify { willSet { ensureEditable("deleteRule") } }
    /// To-many relationships keep their order when true (stored positions).
    @exclusivity(unchecked) public var isOrdered: Bool = false { willSet { ensureEditable("isOrdered") } }

    /// Names kept while reading a model file, before entities are resolved.
    @exclusivity(unchecked) var destinationEntityName: String?
    @exclusivity(unchecked) var inverseRelationshipName: String?

    public init(name: String, destination: EntityDescription? = nil, toMany: Bool = false) {
        self.destinationEntity = destination
        self.maxCount = toMany ? 0 : 1
        super.init(name: name)
    }

    /// True when `maxCount` is anything but 1.
    public var isToMany: Bool { maxCount != 1 }

    public override func copy() -> PropertyDescription {
        let c = RelationshipDescription(name: name)
        copyCommonFields(to: c)
        c.destinationEntity = destinationEntity
        c.inverseRelationship = inverseRelationship
        c.minCount = minCount
        c.maxCount = maxCount
        c.deleteRule = deleteRule
        c.isOrdered = isOrdered
        c.destinationEntityName = destinationEntityName ?? destinationEntity?.name
        c.inverseRelationshipName = inverseRelationshipName ?? inverseRelationship?.name
        return c
    }

    override func differences(from other: PropertyDescription) -> [String] {
        var out = commonDifferences(from: other)
        guard let o = other as? RelationshipDescription else { return out }
        func check<T: Equatable>(_ label: String, _ a: T, _ b: T) {
            if a != b { out.append("\(label): \(String(describing: a)) vs \(String(describing: b))") }
        }
        check("destination", destinationEntity?.name, o.destinationEntity?.name)
        check("inverse", inverseRelationship?.name, o.inverseRelationship?.name)
        check("minCount", minCount, o.minCount)
        check("maxCount", maxCount, o.maxCount)
        check("deleteRule", deleteRule, o.deleteRule)
        check("ordered", isOrdered, o.isOrdered)
        return out
    }
}
