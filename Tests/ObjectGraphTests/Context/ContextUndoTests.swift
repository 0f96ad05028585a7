import Foundation
import Testing
@testable import ObjectGraph

@Suite struct ContextUndoTests {
    @Test func undoManagerIsNilByDefaultAndUndoIsThenANoOp() throws {
        // MOC-UN-01, MOC-UN-02
        let (_, context) = try Company.stack()
        try context.performAndWait {
            #expect(context.undoManager == nil)
            let d = try Company.department(context, "Sales")
            context.undo()
            #expect(d.name == "Sales")
        }
    }

    @Test func undoAndRedoByEvent() throws {
        // MOC-UN-03, MOC-UN-04, MOC-UN-07, LIFE-14, LIFE-16, LIFE-17, CHG-13
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            context.undoManager = ContextUndoManager()
            d.name = "B"
            #expect(!context.undoManager!.canUndo) // registered only at processPendingChanges
            context.processPendingChanges()
            #expect(context.undoManager!.canUndo)
            d.name = "C"
            context.processPendingChanges()
            context.undo()
            #expect(d.name == "B")
            context.undo()
            #expect(d.name == "Sales")
            #expect(!context.hasChanges)
            #expect(d.snapshotEvents.contains(.undoUpdate))
            context.redo()
            #expect(d.name == "B")
            #expect(context.hasChanges)
        }
    }

    @Test func undoInsertAndDelete() throws {
        // MOC-UN-05, LIFE-03
        let (_, context) = try Company.stack()
        try context.performAndWait {
            context.undoManager = ContextUndoManager()
            let sales = try Company.department(context, "Sales")
            context.processPendingChanges()
            context.undo()
            #expect(!context.insertedObjects.contains(sales))
            context.redo()
            #expect(context.insertedObjects.contains(sales))
            #expect(sales.events.filter { $0 == "awakeFromInsert" }.count == 1)
            try context.save()
            #expect(!context.undoManager!.canUndo) // cleared by save (brief; MOC-UN-06 divergence)
            context.delete(sales)
            context.processPendingChanges()
            #expect(sales.isDeleted)
            context.undo()
            #expect(!sales.isDeleted)
            #expect(!context.deletedObjects.contains(sales))
            #expect(sales.snapshotEvents.contains(.undoDeletion))
        }
    }

    @Test func undoOfCascadeRestoresTheGraph() throws {
        // MOC-UN-05 with delete propagation
        let (_, context) = try Company.stack(model: DeleteRuleTests.model(employees: .cascade))
        try context.performAndWait {
            let sales = try Company.department(context, "Sales")
            let ada = try Company.employee(context, "Ada", "Lovelace", in: sales)
            try context.save()
            context.undoManager = ContextUndoManager()
            context.delete(sales)
            context.processPendingChanges()
            #expect(ada.isDeleted)
            context.undo()
            #expect(!ada.isDeleted && !sales.isDeleted)
            #expect(ada.department === sales)
            #expect(sales.employees == [ada])
            #expect(!context.hasChanges)
        }
    }

    @Test func groupingLevelsAndDisabledRegistration() throws {
        // MOC-UN-02 (grouping), levels, LIFE-23 (disable registration)
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            let undo = ContextUndoManager()
            context.undoManager = undo
            undo.beginUndoGrouping()
            d.name = "One"
            context.processPendingChanges()
            d.name = "Two"
            context.processPendingChanges()
            undo.endUndoGrouping()
            context.undo()
            #expect(d.name == "Sales")
            undo.disableUndoRegistration()
            d.name = "Untracked"
            context.processPendingChanges()
            undo.enableUndoRegistration()
            #expect(!undo.canUndo)
            undo.levelsOfUndo = 2
            for n in 1...4 { d.name = "n\(n)"; context.processPendingChanges() }
            context.undo(); context.undo(); context.undo()
            #expect(d.name == "n2")
        }
    }

    @Test func rollbackRestoresCommittedState() throws {
        // MOC-RB-01, MOC-RB-02, MOC-RB-03, MOC-MO-02
        let (_, context) = try Company.stack()
        try context.performAndWait {
            let y = try Company.department(context, "Yard")
            let z = try Company.department(context, "Zoo")
            try context.save()
            context.undoManager = ContextUndoManager()
            let x = try Company.department(context, "Xylo")
            let tempID = x.objectID
            context.delete(y)
            z.name = "Changed"
            context.processPendingChanges()
            context.rollback()
            #expect(!context.registeredObjects.contains(x))
            #expect(context.registeredObject(for: tempID) == nil)
            #expect(x.managedObjectContext == nil)
            #expect(!y.isDeleted)
            #expect(z.name == "Zoo")
            #expect(!context.hasChanges)
            #expect(!context.undoManager!.canUndo)
            #expect(z.snapshotEvents.contains(.rollback))
        }
    }

    @Test func resetForgetsEverything() throws {
        // MOC-RS-01, MOC-RS-02, MOC-UK-06
        let (_, context) = try Company.stack()
        let recorder = NotificationRecorder(context)
        try context.performAndWait {
            let d = try Company.department(context, "Sales")
            try context.save()
            _ = try Company.department(context, "Unsaved")
            context.reset()
            #expect(context.registeredObjects.isEmpty && context.insertedObjects.isEmpty && !context.hasChanges)
            #expect(d.managedObjectContext == nil)
            #expect(recorder.notes.last?.userInfo?[ManagedObjectContext.invalidatedAllObjectsKey] != nil)
            let again = try context.fetch(FetchRequest(entityName: "Department"))
            #expect(again.count == 1 && again[0] !== d)
        }
    }
}
