import Foundation
import Testing
@testable import ObjectGraph

/// A SQLite store at `/dev/null` is an in-memory database, as Core Data
/// makes it (Apple's idiom for throw-away stores in tests and previews,
/// WWDC 2018 "Core Data Best Practices"); opening `/dev/null` itself failed
/// on `journal_mode=WAL` (SQLite error 10; issue 28 item 7).
@Suite struct SQLiteDevNullStoreTests {
    static let devNull = URL(fileURLWithPath: "/dev/null")

    @Test func aStoreAtDevNullWorksInMemory() throws {
        Company.registerClasses()
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: Self.devNull, options: [
            // What NSPersistentContainer's store descriptions set by default.
            PersistentStore.migratePersistentStoresAutomaticallyOption: true,
            PersistentStore.inferMappingModelAutomaticallyOption: true,
        ])
        #expect((store as? SQLiteStore)?.isInMemoryDatabase == true)
        let context = ManagedObjectContext(coordinator: coordinator)
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            _ = try Company.employee(context, "Ada", "Lovelace", in: sales)
            try context.save()
            let request = FetchRequest(entityName: "Employee")
            request.predicate = try FetchPredicate(format: "department.name == 'Sales'")
            #expect(try context.fetch(request).count == 1)
        }
        // Nothing was written to /dev/null, and it is still the device.
        let attributes = try FileManager.default.attributesOfItem(atPath: "/dev/null")
        #expect(attributes[.type] as? FileAttributeType == .typeCharacterSpecial)
    }

    @Test func eachDevNullStoreIsItsOwnDatabase() throws {
        Company.registerClasses()
        func stack() throws -> ManagedObjectContext {
            let coordinator = try PersistentStoreCoordinator(managedObjectModel: ReferenceModel.make())
            try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: Self.devNull)
            return ManagedObjectContext(coordinator: coordinator)
        }
        let first = try stack(), second = try stack()
        try first.performAndWait {
            _ = try Company.department(first, "Sales")
            try first.save()
        }
        #expect(try second.performAndWait { try second.count(for: FetchRequest(entityName: "Department")) } == 0)
        #expect(try first.performAndWait { try first.count(for: FetchRequest(entityName: "Department")) } == 1)
    }

    @Test func largeBinaryValuesStayInTheRow() throws {
        let model = ManagedObjectModel()
        let photo = EntityDescription(name: "DevNullPhoto")
        let bytes = AttributeDescription(name: "bytes", type: .binaryData)
        bytes.allowsExternalBinaryDataStorage = true
        photo.properties = [bytes]
        model.entities = [photo]
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: Self.devNull)
        let context = ManagedObjectContext(coordinator: coordinator)
        let big = Data(repeating: 7, count: SQLiteStore.externalBinaryDataThreshold * 2)
        try context.performAndWait {
            try context.insertNewObject(forEntityName: "DevNullPhoto").setValue(big, forKey: "bytes")
            try context.save()
            context.reset()
            #expect(try context.fetch(FetchRequest(entityName: "DevNullPhoto"))[0].value(forKey: "bytes") as? Data == big)
        }
    }
}
