import Foundation
import Testing
@testable import ObjectGraph

/// A typed property whose model attribute holds nil. Core Data's scalar
/// accessors give 0 and false for nil (KVC-06, KVC-07: a scalar is a boxed
/// value, and nil none), and
/// Foundation's bridging gives an empty string, data or collection; here a
/// `@Managed` property of such a type reads the same instead of trapping
/// (issue 28 item 3: "holds nil, which a property of type Bool cannot
/// represent"). A trap is never the answer to what a store holds.
@Suite struct ManagedScalarNilReadTests {
    final class Status: ManagedObject {
        @Managed var favouritesCount: Int64
        @Managed var repliesCount: Int16
        @Managed var isSensitive: Bool
        @Managed var ratio: Double
        @Managed var price: Decimal
        @Managed var text: String
        @Managed var payload: Data
    }

    static func model() -> ManagedObjectModel {
        let status = EntityDescription(name: "NilReadStatus")
        status.managedObjectClassName = "ManagedScalarNilReadTests.Status"
        func required(_ name: String, _ type: AttributeType) -> AttributeDescription {
            let attribute = AttributeDescription(name: name, type: type)
            attribute.isOptional = false
            return attribute
        }
        let identifier = AttributeDescription(name: "identifier", type: .string)
        status.properties = [identifier, required("favouritesCount", .integer64), required("repliesCount", .integer16),
                             required("isSensitive", .boolean), required("ratio", .double), required("price", .decimal),
                             required("text", .string), required("payload", .binaryData)]
        let model = ManagedObjectModel()
        model.entities = [status]
        ManagedObjectClassRegistry.shared.register(Status.self, forClassName: "ManagedScalarNilReadTests.Status")
        return model
    }

    func expectEmpty(_ status: Status) {
        #expect(status.favouritesCount == 0)
        #expect(status.repliesCount == 0)
        #expect(status.isSensitive == false)
        #expect(status.ratio == 0)
        #expect(status.price == 0)
        #expect(status.text == "")
        #expect(status.payload == Data())
    }

    @Test func aNewObjectsUnsetScalarsReadAsZero() throws {
        let coordinator = try TestStores.coordinator(Self.model(), type: PersistentStoreCoordinator.inMemoryStoreType)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let status = try context.insertNewObject(forEntityName: "NilReadStatus") as! Status
            expectEmpty(status)
            // KVC still tells nil apart (KVC-01), and validation still refuses it (PROP-02, 1570).
            #expect(try status.value(forKey: "isSensitive") == nil)
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.detailedErrors.allSatisfy { $0.code == .validationMissingMandatoryProperty } == true)
        }
    }

    @Test(arguments: TestStores.sqliteAndInMemory)
    func aStoredRowHoldingNilReadsAsZero(_ type: String) throws {
        // A row another program wrote with no values for required attributes.
        let coordinator = try TestStores.coordinator(Self.model(), type: type)
        let store = coordinator.persistentStores[0]
        let entity = coordinator.managedObjectModel.entitiesByName["NilReadStatus"]!
        let id = try coordinator.newObjectIDs(in: store, for: entity, count: 1)[0]
        var request = StoreSaveRequest()
        request.inserted = [StoreSnapshot(objectID: id, version: 1, values: ["identifier": "s1"])]
        _ = try coordinator.save(request, to: store)

        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let fetched = try context.fetch(FetchRequest(entityName: "NilReadStatus"))
            let status = try #require(fetched.first as? Status)
            expectEmpty(status)
            // Reading does not change it: nothing to save.
            #expect(!context.hasChanges)
        }
    }
}
