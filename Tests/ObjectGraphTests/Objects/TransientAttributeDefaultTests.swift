import Foundation
import Testing
@testable import ObjectGraph

/// A transient attribute's default value (ATTR-06, AD-09) applies to an
/// object loaded from a store as it does to a new one: the row holds no
/// transient value (PROP-03), so a fetched or refreshed object starts at
/// the default (issue 28 item 3: a transient Boolean with a default was nil
/// on every fetched object).
@Suite struct TransientAttributeDefaultTests {
    static func model() -> ManagedObjectModel {
        let status = EntityDescription(name: "TransientDefaultStatus")
        let text = AttributeDescription(name: "text", type: .string)
        let toggled = AttributeDescription(name: "isSensitiveToggled", type: .boolean)
        toggled.isTransient = true
        toggled.defaultValue = false
        let reveals = AttributeDescription(name: "revealCount", type: .integer16)
        reveals.isTransient = true
        reveals.defaultValue = Int16(3)
        let scratch = AttributeDescription(name: "scratch", type: .string)
        scratch.isTransient = true
        status.properties = [text, toggled, reveals, scratch]
        let model = ManagedObjectModel()
        model.entities = [status]
        return model
    }

    func expectDefaults(_ status: ManagedObject) throws {
        #expect(try status.value(forKey: "isSensitiveToggled") as? Bool == false)
        #expect(try status.value(forKey: "revealCount") as? Int16 == 3)
        #expect(try status.value(forKey: "scratch") == nil)
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func fetchedObjectsStartAtTransientDefaults(_ type: String) throws {
        let coordinator = try TestStores.coordinator(Self.model(), type: type)
        let writer = ManagedObjectContext(coordinator: coordinator)
        try writer.performAndWait {
            let status = try writer.insertNewObject(forEntityName: "TransientDefaultStatus")
            try expectDefaults(status)          // on insert, as before
            try status.setValue("hello", forKey: "text")
            try status.setValue(true, forKey: "isSensitiveToggled")
            try status.setValue(Int16(9), forKey: "revealCount")
            try writer.save()
        }
        let reader = ManagedObjectContext(coordinator: coordinator)
        try reader.performAndWait {
            let request = FetchRequest(entityName: "TransientDefaultStatus")
            let fetched = try reader.fetch(request)[0]
            try expectDefaults(fetched)
            #expect(!fetched.hasChanges)
            // A fault fired later, and an object refreshed into a fault, start there too.
            let id = fetched.objectID
            reader.refresh(fetched, mergeChanges: false)
            #expect(fetched.isFault)
            try expectDefaults(fetched)
            let third = ManagedObjectContext(coordinator: coordinator)
            try third.performAndWait {
                let fault = third.object(with: id)
                #expect(fault.isFault)
                try expectDefaults(fault)
                #expect(try fault.value(forKey: "text") as? String == "hello")
            }
        }
    }
}
