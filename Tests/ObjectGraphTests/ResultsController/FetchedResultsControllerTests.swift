import Foundation
import Testing
@testable import ObjectGraph

/// `FetchedResultsController` (FRC-01…06): sections from the first sort
/// key, no tracking without a delegate, and the change sequences a table
/// view applies for inserts, deletes, moves and updates across sections.
@Suite struct FetchedResultsControllerTests {
    /// Writes every delegate call as one line.
    final class Recorder: FetchedResultsControllerDelegate {
        var log: [String] = []
        func controllerWillChangeContent(_ controller: AnyFetchedResultsController) { log.append("will") }
        func controllerDidChangeContent(_ controller: AnyFetchedResultsController) { log.append("did") }
        func controller(_ controller: AnyFetchedResultsController, didChange sectionInfo: FetchedResultsSectionInfo,
                        atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {
            log.append("section \(type) \(sectionIndex) '\(sectionInfo.name)'")
        }
        func controller(_ controller: AnyFetchedResultsController, didChange anObject: Any, at indexPath: IndexPath?,
                        for type: FetchedResultsChangeType, newIndexPath: IndexPath?) {
            func path(_ p: IndexPath?) -> String { p.map { "\($0.section).\($0.row)" } ?? "-" }
            log.append("\(type) \((anObject as? DepartmentMO)?.name ?? "?") \(path(indexPath))→\(path(newIndexPath))")
        }
    }

    /// Departments by budget (sections) then name: 1000: Ops, Sales; 2000: Research.
    static func fixture(predicate: String? = nil) throws -> (ManagedObjectContext, FetchedResultsController<DepartmentMO>, Recorder) {
        let (_, context) = try Company.stack()
        let request = FetchRequest(entityName: "Department")
        request.sortDescriptors = [FetchSortDescriptor(key: "budget"), FetchSortDescriptor(key: "name")]
        if let predicate { request.predicate = try FetchPredicate(format: predicate) }
        let controller = FetchedResultsController<DepartmentMO>(fetchRequest: request, managedObjectContext: context,
                                                                sectionNameKeyPath: "budget", cacheName: "Departments")
        let recorder = Recorder()
        try context.performAndWait {
            _ = try Company.department(context, "Sales", budget: 1000)
            _ = try Company.department(context, "Ops", budget: 1000)
            _ = try Company.department(context, "Research", budget: 2000)
            try context.save()
            try controller.performFetch()
        }
        controller.delegate = recorder
        return (context, controller, recorder)
    }

    static func layout(_ controller: AnyFetchedResultsController) -> [String] {
        (controller.sections ?? []).map { section in
            "\(section.name): " + (section.objects ?? []).compactMap { ($0 as? DepartmentMO)?.name }.joined(separator: ", ")
        }
    }

    static func department(_ controller: FetchedResultsController<DepartmentMO>, _ name: String) -> DepartmentMO {
        controller.fetchedObjects!.first { $0.name == name }!
    }

    // FRC-01, FRC-02, FRC-05
    @Test func performFetchGroupsBySectionAndAnswersIndexPaths() throws {
        let (context, controller, _) = try Self.fixture()
        context.performAndWait {
            #expect(Self.layout(controller) == ["1000: Ops, Sales", "2000: Research"])
            #expect(controller.fetchedObjects?.map(\.name) == ["Ops", "Sales", "Research"])
            #expect(controller.sections?.map(\.numberOfObjects) == [2, 1])
            #expect(controller.object(at: IndexPath(row: 1, section: 0)).name == "Sales")
            let research = Self.department(controller, "Research")
            #expect(controller.indexPath(forObject: research) == IndexPath(row: 0, section: 1))
            #expect(controller.sectionIndexTitles == ["1", "2"])
            #expect(controller.section(forSectionIndexTitle: "2", at: 1) == 1)
            #expect(controller.cacheName == "Departments")
        }
    }

    // FRC-01: no sort descriptors, or a first sort key that does not group
    // the sections, is refused with an error naming the problem.
    @Test func aRequestThatCannotMakeSectionsIsRefused() throws {
        let (_, context) = try Company.stack()
        try context.performAndWait {
            _ = try Company.department(context, "Alpha", budget: 1000)
            _ = try Company.department(context, "Beta", budget: 2000)
            _ = try Company.department(context, "Gamma", budget: 1000)
            try context.save()
            let unsorted = FetchRequest(entityName: "Department")
            let none = FetchedResultsController<DepartmentMO>(fetchRequest: unsorted, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
            let error = #expect(throws: CoreDataError.self) { try none.performFetch() }
            #expect(error?.code == .coreData && error?.message.contains("sort descriptor") == true)
            #expect(none.fetchedObjects == nil && none.sections == nil)
            let byName = FetchRequest(entityName: "Department")
            byName.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let outOfOrder = FetchedResultsController<DepartmentMO>(fetchRequest: byName, managedObjectContext: context, sectionNameKeyPath: "budget", cacheName: nil)
            let order = #expect(throws: CoreDataError.self) { try outOfOrder.performFetch() }
            #expect(order?.message.contains("out of order section name '1000'") == true)
        }
    }

    /// A typed controller refuses objects of another class.
    @Test func aTypedControllerRefusesAnotherClass() throws {
        let (_, context) = try Company.stack()
        try context.performAndWait {
            _ = try Company.department(context, "Alpha")
            let request = FetchRequest(entityName: "Department")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let wrong = FetchedResultsController<EmployeeMO>(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
            let error = #expect(throws: CoreDataError.self) { try wrong.performFetch() }
            #expect(error?.message.contains("FetchedResultsController<EmployeeMO> fetched a DepartmentMO") == true)
        }
    }

    // FRC-03: with no delegate the results stay as fetched.
    @Test func withoutADelegateNothingIsTracked() throws {
        let (context, controller, _) = try Self.fixture()
        controller.delegate = nil
        try context.performAndWait {
            _ = try Company.department(context, "Support", budget: 3000)
            context.processPendingChanges()
            #expect(Self.layout(controller) == ["1000: Ops, Sales", "2000: Research"])
        }
    }

    // FRC-04: an insert into a section and one that makes a new section.
    @Test func insertsIntoASectionAndANewSection() throws {
        let (context, controller, recorder) = try Self.fixture()
        try context.performAndWait {
            _ = try Company.department(context, "Legal", budget: 1000)
            _ = try Company.department(context, "Support", budget: 1500)
            context.processPendingChanges()
            #expect(Self.layout(controller) == ["1000: Legal, Ops, Sales", "1500: Support", "2000: Research"])
        }
        #expect(recorder.log == ["will", "section insert 1 '1500'", "insert Legal -→0.0", "insert Support -→1.0", "did"])
    }

    // FRC-04: deleting a section's last object deletes the section; the
    // delete's index path is the one before the batch.
    @Test func deletingASectionsLastObjectDeletesTheSection() throws {
        let (context, controller, recorder) = try Self.fixture()
        context.performAndWait {
            context.delete(Self.department(controller, "Research"))
            context.delete(Self.department(controller, "Ops"))
            context.processPendingChanges()
            #expect(Self.layout(controller) == ["1000: Sales"])
        }
        #expect(recorder.log == ["will", "section delete 1 '2000'", "delete Ops 0.0→-", "delete Research 1.0→-", "did"])
    }

    // FRC-04: a change that keeps the index path is an update; one that
    // changes the order or the section is a move, old path to new.
    @Test func updatesAndMovesAcrossSections() throws {
        let (context, controller, recorder) = try Self.fixture()
        context.performAndWait {
            Self.department(controller, "Ops").budget = 1000          // the same value: no change at all
            Self.department(controller, "Sales").name = "Sales EMEA"  // still second in 1000
            context.processPendingChanges()
        }
        #expect(recorder.log == ["will", "update Sales EMEA 0.1→0.1", "did"])
        recorder.log = []
        context.performAndWait {
            Self.department(controller, "Ops").name = "Zeta"          // after Sales EMEA: a move within 1000
            Self.department(controller, "Research").budget = 1000     // into 1000; section 2000 goes
            context.processPendingChanges()
            #expect(Self.layout(controller) == ["1000: Research, Sales EMEA, Zeta"])
        }
        #expect(recorder.log == ["will", "section delete 1 '2000'", "move Research 1.0→0.0", "move Zeta 0.0→0.2", "did"])
    }

    // FRC-04: a change that makes an object match the predicate inserts it,
    // one that makes it stop matching deletes it.
    @Test func thePredicateDecidesMembershipAfterAnUpdate() throws {
        let (context, controller, recorder) = try Self.fixture(predicate: "name BEGINSWITH 'S' OR name BEGINSWITH 'R'")
        context.performAndWait {
            #expect(Self.layout(controller) == ["1000: Sales", "2000: Research"])
            let ops = try! context.fetch(FetchRequest(entityName: "Department")).first { ($0 as? DepartmentMO)?.name == "Ops" } as! DepartmentMO
            ops.name = "Shipping"
            Self.department(controller, "Research").name = "Lab"
            context.processPendingChanges()
            #expect(Self.layout(controller) == ["1000: Sales, Shipping"])
        }
        #expect(recorder.log == ["will", "section delete 1 '2000'", "delete Lab 1.0→-", "insert Shipping -→0.1", "did"])
    }

    // FRC-03: another context's save merged into the controller's context
    // (automatic merging) reaches the delegate as one batch.
    @Test func aMergedSaveIsTracked() async throws {
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Store.sqlite")
        let (coordinator, writer) = try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
        try writer.performAndWait {
            _ = try Company.department(writer, "Sales", budget: 1000)
            try writer.save()
        }
        let viewer = ManagedObjectContext(coordinator: coordinator)
        viewer.automaticallyMergesChangesFromParent = true
        let request = FetchRequest(entityName: "Department")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        let controller = FetchedResultsController<DepartmentMO>(fetchRequest: request, managedObjectContext: viewer, sectionNameKeyPath: nil, cacheName: nil)
        try viewer.performAndWait { try controller.performFetch() }
        final class Waiter: FetchedResultsControllerDelegate, @unchecked Sendable {
            var continuation: CheckedContinuation<[String], Never>?
            func controllerDidChangeContent(_ controller: AnyFetchedResultsController) {
                continuation?.resume(returning: (controller.fetchedManagedObjects ?? []).compactMap { ($0 as? DepartmentMO)?.name })
                continuation = nil
            }
        }
        let waiter = Waiter()
        controller.delegate = waiter
        let names: [String] = await withCheckedContinuation { continuation in
            viewer.performAndWait { waiter.continuation = continuation }
            try? writer.performAndWait {
                _ = try Company.department(writer, "Research", budget: 2000)
                try writer.save()
            }
        }
        #expect(names == ["Research", "Sales"])
    }
}
