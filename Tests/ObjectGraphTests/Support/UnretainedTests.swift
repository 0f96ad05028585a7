import Foundation
import Testing
@testable import ObjectGraph

/// Back-references that neither retain nor weakly reference their target
/// (`Unretained`): a referrer that outlives its target must read nil, as it
/// did with weak references (OBJ-16 for objects and their context).
@Suite struct UnretainedTests {
    @Test func anObjectOutlivingItsContextHasNoContext() throws {
        // OBJ-16: the context is gone, so the object is registered nowhere.
        weak var freedContext: ManagedObjectContext?
        var kept: ManagedObject?
        var fault: ManagedObject?
        try {
            let (_, context) = try Company.stack()
            freedContext = context
            try context.performAndWait {
                let dept = try Company.department(context, "Sales")
                try context.save()
                kept = try context.insertNewObject(forEntityName: "Employee")
                fault = context.object(with: dept.objectID)
                context.refresh(fault!, mergeChanges: false)
                #expect(kept!.managedObjectContext === context && fault!.isFault)
            }
        }()
        #expect(freedContext == nil, "the test must free the context to check anything")
        #expect(kept?.managedObjectContext == nil)
        #expect(kept?.isInserted == false && kept?.hasChanges == false)
        // A fault of a freed context cannot be loaded: Core Data's 133000, not a crash.
        #expect(throws: CoreDataError.self) { try fault?.value(forKey: "name") }
    }

    @Test func modelDescriptionsOutlivingTheirOwnersReadNil() {
        // ED-05, ED-13: the model owns entities, entities own properties and
        // sub-entities; what is kept after its owner goes reads nil.
        var property: AttributeDescription?
        var child: EntityDescription?
        var entity: EntityDescription?
        var index: FetchIndexDescription?
        do {
            let model = ManagedObjectModel()
            let parent = EntityDescription(name: "Parent")
            let sub = EntityDescription(name: "Child")
            let name = AttributeDescription(name: "name", type: .string)
            parent.properties = [name]
            parent.subentities = [sub]
            let byName = FetchIndexDescription(name: "byName", elements: [FetchIndexElementDescription(propertyName: "name")])
            parent.indexes = [byName]
            model.entities = [parent, sub]
            #expect(name.entity === parent && sub.superentity === parent && parent.managedObjectModel === model && byName.entity === parent)
            property = name
            child = sub
            entity = parent
            index = byName
        }
        // The model is gone: entities still held read no model.
        #expect(entity?.managedObjectModel == nil && child?.managedObjectModel == nil)
        #expect(property?.entity === entity && child?.superentity === entity)
        entity = nil
        // The parent entity is gone too: its property, index and sub-entity forget it.
        #expect(property?.entity == nil)
        #expect(index?.entity == nil)
        #expect(child?.superentity == nil)
    }

    @Test func replacedPropertiesAndIndexesForgetTheirEntity() {
        let entity = EntityDescription(name: "Thing")
        let a = AttributeDescription(name: "a", type: .string)
        let b = AttributeDescription(name: "b", type: .string)
        entity.properties = [a, b]
        entity.indexes = [FetchIndexDescription(name: "byA", elements: [FetchIndexElementDescription(propertyName: "a")])]
        let dropped = entity.indexes[0]
        entity.properties = [b]
        entity.indexes = []
        #expect(a.entity == nil && b.entity === entity)
        #expect(dropped.entity == nil)
    }

    @Test func refersToComparesIdentityWithoutRetaining() {
        final class Target {}
        let one = Target(), other = Target()
        var reference = Unretained<Target>()
        #expect(!reference.isSet && reference.target == nil && reference.withTarget { _ in 1 } == nil)
        reference.target = one
        #expect(reference.isSet && reference.refers(to: one) && !reference.refers(to: other))
        #expect(reference.withTarget { $0 === one } == true)
        reference.target = nil
        #expect(!reference.refers(to: one))
    }
}
