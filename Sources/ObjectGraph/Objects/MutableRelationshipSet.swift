import Foundation

/// A live view of one object's to-many relationship (TM-01): every change
/// goes through the object, with set-mutation notifications (TM-06, TM-08),
/// change tracking and inverse maintenance; the whole-collection setter is
/// never called (TM-04). Ordered relationships also change by index.
///
/// ```swift
/// let reports = try manager.mutableSetValue(forKey: "directReports")
/// try reports.insert(alice)
/// try reports.remove(bob)
/// ```
public final class MutableRelationshipSet {
    public let object: ManagedObject
    public let relationship: RelationshipDescription

    init(object: ManagedObject, relationship: RelationshipDescription) {
        self.object = object
        self.relationship = relationship
    }

    /// The current members, in order for an ordered relationship.
    public func allObjects() throws -> [ManagedObject] {
        try object.fireFaultIfNeeded()
        try object.loadToMany(relationship)
        return object.storage[relationship.name] as? [ManagedObject] ?? []
    }

    public var count: Int { (try? allObjects().count) ?? 0 }
    public func contains(_ member: ManagedObject) -> Bool {
        guard (try? allObjects()) != nil else { return false }
        return object.position(of: member, in: relationship) != nil
    }

    public func insert(_ member: ManagedObject) throws { try union([member]) }
    public func remove(_ member: ManagedObject) throws { try subtract([member]) }

    public func union(_ members: [ManagedObject]) throws {
        for m in members { try object.checkDestination(m, relationship) }
        try object.mutateToMany(relationship, adding: members, removing: [])
    }

    public func subtract(_ members: [ManagedObject]) throws {
        try object.mutateToMany(relationship, adding: [], removing: members)
    }

    /// Keeps only the members also in `members` (TM-09).
    public func intersect(_ members: [ManagedObject]) throws {
        let keep = Set(members)
        try object.mutateToMany(relationship, adding: [], removing: try allObjects().filter { !keep.contains($0) })
    }

    public func removeAll() throws { try subtract(try allObjects()) }

    // MARK: Ordered relationships

    /// Inserts at `index` of an ordered relationship.
    public func insert(_ member: ManagedObject, at index: Int) throws {
        try requireOrdered()
        try insert(member)
        var members = try allObjects()
        if let current = members.firstIndex(where: { $0 === member }) {
            members.remove(at: current)
            members.insert(member, at: min(index, members.count))
            object.willChangeValue(forKey: relationship.name)
            object.storage[relationship.name] = members
            object.didChangeValue(forKey: relationship.name)
        }
    }

    public func remove(at index: Int) throws {
        try requireOrdered()
        let members = try allObjects()
        guard members.indices.contains(index) else {
            throw CoreDataError(.managedObjectValidation, "Index \(index) is out of range for \(object.entity.name).\(relationship.name) (\(members.count) members)")
        }
        try remove(members[index])
    }

    private func requireOrdered() throws {
        guard relationship.isOrdered else {
            throw CoreDataError(.managedObjectValidation, "\(object.entity.name).\(relationship.name) is not ordered; index operations need an ordered relationship")
        }
    }
}
