import Foundation
import Testing
@testable import ObjectGraph

@Suite struct PersistentStoreRelocationTests {
    @Test func setURLMovesTheNextSave() throws {
        // PS-08, PC-12, PC-14
        let dir = try TestPaths.temporaryDirectory()
        let first = dir.appendingPathComponent("first.xml"), second = dir.appendingPathComponent("second.xml")
        let (coordinator, context) = try Company.stack(type: "XML", url: first)
        try context.performAndWait { _ = try Company.department(context, "Sales"); try context.save() }
        let store = coordinator.persistentStores[0]
        try coordinator.setURL(second, for: store)
        #expect(coordinator.url(for: store) == second)
        #expect(!FileManager.default.fileExists(atPath: second.path))
        try context.performAndWait { _ = try Company.department(context, "Research"); try context.save() }
        #expect(FileManager.default.fileExists(atPath: second.path))
        let (_, reopened) = try Company.stack(type: "XML", url: second)
        #expect(try reopened.performAndWait { try reopened.count(for: FetchRequest(entityName: "Department")) } == 2)
    }
}
