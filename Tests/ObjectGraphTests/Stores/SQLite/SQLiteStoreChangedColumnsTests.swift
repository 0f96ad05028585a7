import CSQLite
import Foundation
import Testing
@testable import ObjectGraph

/// A context's save updates only the columns that changed, as Core Data's
/// UPDATE statements do (`StoreSaveRequest.changedValuesAreComplete`).
/// Triggers `AFTER UPDATE OF <column>` fire only for columns an UPDATE sets,
/// which makes the written columns visible from outside the store. The
/// reference does not state which columns Core Data's UPDATE sets; what it
/// does state (a save moves `Z_OPT`, sqlite-layout.md) is checked below.
@Suite struct SQLiteStoreChangedColumnsTests {
    /// Runs statements on the store file through SQLite's C API.
    static func execute(_ path: String, _ sql: String) throws {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK,
              sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw RawSQLite.Failure(message: String(cString: sqlite3_errmsg(db)))
        }
    }

    /// A log table and one trigger per column of `table`.
    static func logUpdates(of columns: [String], in table: String, at path: String) throws {
        var sql = "CREATE TABLE TESTLOG (COL TEXT);"
        for column in columns {
            sql += "CREATE TRIGGER LOG_\(column) AFTER UPDATE OF \(column) ON \(table) BEGIN INSERT INTO TESTLOG VALUES ('\(column)'); END;"
        }
        try execute(path, sql)
    }

    static func loggedColumns(_ path: String) throws -> [String] {
        try RawSQLite.query(path, "SELECT COL FROM TESTLOG ORDER BY rowid").compactMap { $0.first?.text }
    }

    @Test func anUpdateWritesOnlyTheChangedColumns() throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("columns.sqlite")
        let (_, context) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales, salary: 100)
            try context.save()
            try Self.logUpdates(of: ["ZFIRSTNAME", "ZLASTNAME", "ZSALARY", "ZDEPARTMENT", "ZMANAGER", "ZEMPLOYEEID"], in: "ZEMPLOYEE", at: url.path)

            ada.salary = 120
            try context.save()
            #expect(try Self.loggedColumns(url.path) == ["ZSALARY"])

            ada.lastName = "King"
            ada.firstName = "Augusta"
            try context.save()
            // One UPDATE fires its triggers in no set order.
            #expect(try Set(Self.loggedColumns(url.path).dropFirst()) == ["ZFIRSTNAME", "ZLASTNAME"])
            #expect(try Self.loggedColumns(url.path).count == 3)

            // A to-one writes its foreign key only when it changes.
            let research = try Company.department(context, "Research")
            ada.department = research
            try context.save()
            #expect(try Self.loggedColumns(url.path).last == "ZDEPARTMENT")
            let row = try RawSQLite.query(url.path, "SELECT ZFIRSTNAME, ZLASTNAME, ZDEPARTMENT, Z_OPT FROM ZEMPLOYEE")
            #expect(row.first?[0].text == "Augusta" && row.first?[1].text == "King")
            #expect(row.first?[2].int == research.objectID.primaryKey)
            #expect(row.first?[3].int == 4, "every save moves Z_OPT, whatever it writes")
        }
    }

    @Test func aDestinationDeletedInTheSameSaveIsWrittenAsNil() throws {
        // With No Action nothing clears the to-one in memory; the saved row of
        // an updated owner stores nil for the deleted destination (as whole-row
        // writes did), and the change set says so.
        let pet = EntityDescription(name: "Pet")
        let owner = EntityDescription(name: "Owner")
        let petRel = RelationshipDescription(name: "pet", destination: pet, toMany: false)
        petRel.deleteRule = .noAction
        pet.properties = [AttributeDescription(name: "name", type: .string)]
        owner.properties = [AttributeDescription(name: "name", type: .string), petRel]
        let model = ManagedObjectModel()
        model.entities = [owner, pet]
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("pets.sqlite")
        let (_, context) = try Company.stack(model: model, type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try context.performAndWait {
            let rex = try context.insertNewObject(forEntityName: "Pet")
            try rex.setValue("Rex", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Owner")
            try ann.setValue("Ann", forKey: "name")
            try ann.setValue(rex, forKey: "pet")
            try context.save()
            #expect(try RawSQLite.query(url.path, "SELECT ZPET FROM ZOWNER").first?.first?.int == rex.objectID.primaryKey)

            final class Received: @unchecked Sendable { var changeSet: ContextChangeSet? }
            let received = Received()
            let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil) {
                received.changeSet = $0.userInfo?[ManagedObjectContext.changeSetKey] as? ContextChangeSet
            }
            defer { NotificationCenter.default.removeObserver(token) }
            context.delete(rex)
            try ann.setValue("Anne", forKey: "name")
            try context.save()
            let row = try RawSQLite.query(url.path, "SELECT ZNAME, ZPET FROM ZOWNER").first
            #expect(row?[0].text == "Anne" && row?[1] == .null)
            let change = try #require(received.changeSet?.updated.first { $0.objectID == ann.objectID })
            #expect(change.changes["pet"]?.newValue == nil && change.changes["pet"]?.oldValue as? ManagedObjectID == rex.objectID)
        }
    }
}
