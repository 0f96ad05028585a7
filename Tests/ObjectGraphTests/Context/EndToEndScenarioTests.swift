import Foundation
import Testing
@testable import ObjectGraph

/// framework-classes-2a.md §E scenarios not covered elsewhere.
@Suite struct EndToEndScenarioTests {
    @Test func threeInvalidObjectsGiveOneErrorWithThreeDetails() throws {
        // E2E-12
        let model = ReferenceModel.make()
        model.entitiesByName["Department"]!.attributesByName["name"]!.maxLength = 10
        let (_, context) = try Company.stack(model: model)
        try context.performAndWait {
            let denied = try Company.department(context, "Denied")
            _ = try Company.employee(context, "Ada", "Lovelace", in: denied)
            try context.save()
            let missing = try context.insertNewObject(forEntityName: "Department")           // 1570: no name
            let long = try Company.department(context, "A name far too long")                // 1660
            context.delete(denied)                                                           // 1600
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .validationMultipleErrors)
            let details = error?.detailedErrors ?? []
            #expect(Set(details.map(\.code.rawValue)) == [1570, 1660, 1600])
            for detail in details {
                #expect(detail.userInfo[CoreDataError.validationObjectErrorKey] is ManagedObject)
                #expect(detail.userInfo[CoreDataError.validationKeyErrorKey] is String)
            }
            let long1660 = details.first { $0.code == .validationStringTooLong }
            #expect(long1660?.userInfo[CoreDataError.validationObjectErrorKey] as? ManagedObject === long)
            #expect(long1660?.userInfo[CoreDataError.validationValueErrorKey] as? String == "A name far too long")
            #expect(details.first { $0.code == .validationMissingMandatoryProperty }?.userInfo[CoreDataError.validationValueErrorKey] == nil)
            _ = missing
        }
    }

    @Test func temporaryToPermanentIDLifeCycle() throws {
        // E2E-06, MOID-02, MOID-03, MOID-04 (b), MOID-05 (a)(c), MOC-MO-10
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("ids.bin")
        let (coordinator, context) = try Company.stack(type: "Binary", url: url)
        let recorder = NotificationRecorder(context)
        let (uri, tempURI) = try context.performAndWait { () throws -> (URL, URL) in
            let o = try Company.department(context, "Sales")
            let temp = o.objectID
            #expect(temp.isTemporaryID && temp.persistentStore == nil)
            #expect(temp.uriRepresentation.absoluteString.hasPrefix("x-coredata:///Department/t"))
            try context.obtainPermanentIDs(for: [o])
            let early = o.objectID
            #expect(!early.isTemporaryID && o.isInserted && early.persistentStore === coordinator.persistentStores[0])
            try context.save()
            #expect(o.objectID == early)
            let inserted = recorder.last(ManagedObjectContext.didSaveNotification)?.userInfo?[ManagedObjectContext.insertedObjectsKey] as? Set<ManagedObject>
            #expect(inserted == [o])
            return (o.objectID.uriRepresentation, temp.uriRepresentation)
        }
        let (fresh, other) = try Company.stack(type: "Binary", url: url)
        try other.performAndWait {
            let id = try #require(fresh.managedObjectID(forURIRepresentation: uri))
            #expect(try other.existingObject(with: id).value(forKey: "name") as? String == "Sales")
            #expect(fresh.managedObjectID(forURIRepresentation: tempURI) == nil)
        }
    }
}
