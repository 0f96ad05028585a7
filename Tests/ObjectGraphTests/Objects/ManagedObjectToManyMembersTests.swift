import Foundation
import Testing
@testable import ObjectGraph

/// Large to-manys keep a member index (`ManagedObject+ToManyMembers.swift`).
/// Whatever path changes a relationship (the mutable set, the to-one
/// inverse, the whole-collection setter, undo-free rollback), membership and
/// inverses must stay exactly what a plain set of members says (TM-01,
/// TM-02, REL-05).
@Suite struct ManagedObjectToManyMembersTests {
    static func context() throws -> ManagedObjectContext {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ContextFaultGroupTests.model())
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType, at: nil)
        return ManagedObjectContext(coordinator: coordinator)
    }

    static func members(_ group: ManagedObject) throws -> [ManagedObject] {
        try group.mutableSetValue(forKey: "items").allObjects()
    }

    @Test func randomAddsAndRemovesThroughEveryPathMatchASetOfMembers() throws {
        let context = try Self.context()
        try context.performAndWait {
            let group = try context.insertNewObject(forEntityName: "Group")
            let other = try context.insertNewObject(forEntityName: "Group")
            let items = try (0..<600).map { i in
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue("i\(i)", forKey: "name")
                return item
            }
            var expected = Set<ObjectIdentifier>()
            var random = SplitMix64(seed: 42)   // deterministic: the test must not depend on the run
            for step in 0..<4_000 {
                let item = items[Int.random(in: 0..<items.count, using: &random)]
                let set = try group.mutableSetValue(forKey: "items")
                switch Int.random(in: 0..<6, using: &random) {
                case 0: try set.insert(item); expected.insert(ObjectIdentifier(item))
                case 1: try set.remove(item); expected.remove(ObjectIdentifier(item))
                case 2: try item.setValue(group, forKey: "group"); expected.insert(ObjectIdentifier(item))
                case 3: try item.setValue(other, forKey: "group"); expected.remove(ObjectIdentifier(item))
                case 4: try item.setValue(nil, forKey: "group"); expected.remove(ObjectIdentifier(item))
                default:
                    // Several at once, some already members, some not.
                    let batch = (0..<5).map { _ in items[Int.random(in: 0..<items.count, using: &random)] }
                    if Bool.random(using: &random) {
                        try set.union(batch); batch.forEach { expected.insert(ObjectIdentifier($0)) }
                    } else {
                        try set.subtract(batch); batch.forEach { expected.remove(ObjectIdentifier($0)) }
                    }
                }
                if step % 500 == 499 {
                    // The whole-collection setter in between: a write the index did not make.
                    let kept = try Self.members(group).filter { _ in Bool.random(using: &random) }
                    try group.setValue(Set(kept), forKey: "items")
                    expected = Set(kept.map(ObjectIdentifier.init))
                }
                #expect(set.count == expected.count, "step \(step)")
                if step % 97 == 0 {
                    let now = try Self.members(group)
                    #expect(Set(now.map(ObjectIdentifier.init)) == expected, "step \(step)")
                    #expect(now.count == expected.count, "no member twice at step \(step)")
                    for candidate in items.prefix(50) {
                        #expect(set.contains(candidate) == expected.contains(ObjectIdentifier(candidate)))
                        let owner = try candidate.value(forKey: "group") as? ManagedObject
                        #expect((owner === group) == expected.contains(ObjectIdentifier(candidate)), "inverse of \(step)")
                    }
                }
            }
            try context.save()
            #expect(try (group.value(forKey: "items") as? Set<ManagedObject>)?.count == expected.count)
        }
    }

    @Test func removingFromAnOrderedToManyKeepsTheOrder() throws {
        // ORD: an ordered relationship's members keep their order when some go
        let item = EntityDescription(name: "Entry")
        let list = EntityDescription(name: "List")
        let entries = RelationshipDescription(name: "entries", destination: item, toMany: true)
        entries.isOrdered = true
        let owner = RelationshipDescription(name: "list", destination: list)
        entries.inverseRelationship = owner
        owner.inverseRelationship = entries
        list.properties = [entries]
        item.properties = [AttributeDescription(name: "n", type: .integer64), owner]
        let model = ManagedObjectModel()
        model.entities = [list, item]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.inMemoryStoreType, at: nil)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let l = try context.insertNewObject(forEntityName: "List")
            let set = try l.mutableSetValue(forKey: "entries")
            var made: [ManagedObject] = []
            for n in 0..<100 {
                let e = try context.insertNewObject(forEntityName: "Entry")
                try e.setValue(Int64(n), forKey: "n")
                try set.insert(e)
                made.append(e)
            }
            try set.subtract(made.enumerated().filter { $0.offset % 3 == 0 }.map(\.element))
            try made[50].setValue(nil, forKey: "list")
            let order = try set.allObjects().map { try $0.value(forKey: "n") as! Int64 }
            #expect(order == (0..<100).filter { $0 % 3 != 0 && $0 != 50 }.map(Int64.init))
        }
    }
}
