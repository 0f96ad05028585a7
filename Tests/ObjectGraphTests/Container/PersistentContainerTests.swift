import Foundation
import Testing
@testable import ObjectGraph

/// `PersistentContainer`, Core Data's `NSPersistentContainer` (NPC-01…06):
/// the model found by name, the default store, the contexts it hands out and
/// how `loadPersistentStores` reports each store.
@Suite struct PersistentContainerTests {
    /// The Company model, as an app ships it, in a folder of its own.
    static func modelFolder() throws -> URL {
        let folder = try TestPaths.temporaryDirectory()
        try FileManager.default.copyItem(at: TestPaths.companyModel, to: folder.appendingPathComponent("Company.xcdatamodeld"))
        return folder
    }

    /// A container for the Company model whose store is a new file.
    static func container(storeName: String = "Company.sqlite") throws -> PersistentContainer {
        let container = PersistentContainer(name: "Company", modelSearchDirectories: [try modelFolder()])
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: try TestPaths.temporaryDirectory().appendingPathComponent(storeName))]
        return container
    }

    /// Loads the stores and returns what the handler was called with.
    static func load(_ container: PersistentContainer) -> [(PersistentStoreDescription, Error?)] {
        var calls: [(PersistentStoreDescription, Error?)] = []
        container.loadPersistentStores { calls.append(($0, $1)) }
        return calls
    }

    // NPC-01, NPC-06, PSD-01
    @Test func theModelIsFoundByNameAndTheStoreIsNamedAfterIt() throws {
        let folder = try Self.modelFolder()
        // The first folder holding the model wins; an empty one is passed over.
        let empty = try TestPaths.temporaryDirectory()
        let container = PersistentContainer(name: "Company", modelSearchDirectories: [empty, folder])
        #expect(container.name == "Company")
        #expect(container.modelURL?.standardizedFileURL == folder.appendingPathComponent("Company.xcdatamodeld").standardizedFileURL)
        #expect(Set(container.managedObjectModel.entitiesByName.keys) == ["Department", "Employee"])
        #expect(container.persistentStoreCoordinator.managedObjectModel === container.managedObjectModel)
        let description = try #require(container.persistentStoreDescriptions.first)
        #expect(container.persistentStoreDescriptions.count == 1)
        #expect(description.url == PersistentContainer.defaultDirectoryURL().appendingPathComponent("Company.sqlite"))
        #expect(description.type == PersistentStoreCoordinator.sqliteStoreType)
        #expect(!description.shouldAddStoreAsynchronously)
        #expect(description.shouldMigrateStoreAutomatically && description.shouldInferMappingModelAutomatically)
        #expect(description.configuration == nil && !description.isReadOnly && description.timeout == 240)
    }

    /// NPC-06: the default folder is the app's XDG data directory.
    @Test func theDefaultDirectoryIsTheAppsXDGDataDirectory() {
        let environment = ProcessInfo.processInfo.environment
        let url = PersistentContainer.defaultDirectoryURL()
        #expect(url.lastPathComponent == Bundle.main.executableURL?.lastPathComponent)
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            #expect(url.deletingLastPathComponent().standardizedFileURL == URL(fileURLWithPath: xdg).standardizedFileURL)
        } else {
            #expect(url.deletingLastPathComponent().path.hasSuffix("/.local/share"))
        }
    }

    final class RelocatedContainer: PersistentContainer {
        static let folder = try! TestPaths.temporaryDirectory().appendingPathComponent("nested/data")
        override class func defaultDirectoryURL() -> URL { folder }
    }

    /// NPC-06, NPC-05: a subclass's `defaultDirectoryURL()` moves the store;
    /// loading creates the folder and calls the handler once, with no error.
    @Test func aSubclassMovesTheDefaultStore() throws {
        let container = RelocatedContainer(name: "Company", modelSearchDirectories: [try Self.modelFolder()])
        let url = RelocatedContainer.folder.appendingPathComponent("Company.sqlite")
        #expect(container.persistentStoreDescriptions.first?.url == url)
        let calls = Self.load(container)
        #expect(calls.count == 1 && calls.first?.1 == nil)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(container.persistentStoreCoordinator.persistentStore(for: url) != nil)
    }

    /// NPC-05: a model that cannot be found is reported to the handler (the
    /// initializer cannot throw, as Core Data's does not), naming the model
    /// and every folder searched.
    @Test func aMissingModelIsReportedByLoad() throws {
        let empty = try TestPaths.temporaryDirectory()
        let container = PersistentContainer(name: "Absent", modelSearchDirectories: [empty])
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: empty.appendingPathComponent("Absent.sqlite"))]
        let calls = Self.load(container)
        #expect(calls.count == 1)
        let error = try #require(calls.first?.1 as? CoreDataError)
        #expect(error.code == .fileReadNoSuchFile)
        #expect(error.message.contains("no model named 'Absent'") && error.message.contains(empty.path))
        #expect(container.persistentStoreCoordinator.persistentStores.isEmpty)
    }

    /// NPC-05: one handler call per description, each with its own result;
    /// the good store is added though another failed. Loading again adds
    /// nothing twice.
    @Test func eachDescriptionIsReportedOnce() throws {
        let container = try Self.container()
        let good = try #require(container.persistentStoreDescriptions.first)
        let bad = PersistentStoreDescription(url: try TestPaths.temporaryDirectory().appendingPathComponent("x.store"))
        bad.type = "NoSuchStoreType"
        container.persistentStoreDescriptions.append(bad)
        let calls = Self.load(container)
        #expect(calls.map { $0.0 === good } == [true, false])
        #expect(calls[0].1 == nil)
        #expect((calls[1].1 as? CoreDataError)?.code == .persistentStoreInvalidType)
        #expect(container.persistentStoreCoordinator.persistentStores.count == 1)
        let again = Self.load(container)
        #expect(again.count == 2 && again[0].1 == nil)
        #expect(container.persistentStoreCoordinator.persistentStores.count == 1)
    }

    // NPC-02, NPC-03
    @Test func theViewContextIsOneMainQueueContextAndBackgroundContextsAreNew() throws {
        let container = try Self.container()
        #expect(Self.load(container).allSatisfy { $0.1 == nil })
        let view = container.viewContext
        #expect(view === container.viewContext)
        #expect(view.concurrencyType == .mainQueue)
        #expect(view.persistentStoreCoordinator === container.persistentStoreCoordinator)
        let first = container.newBackgroundContext(), second = container.newBackgroundContext()
        #expect(first !== second && first !== view)
        #expect(first.concurrencyType == .privateQueue && second.concurrencyType == .privateQueue)
        #expect(first.persistentStoreCoordinator === container.persistentStoreCoordinator)
    }

    // NPC-04: the block runs on a new private context's queue; what it saves
    // is in the store for the view context.
    @Test func performBackgroundTaskRunsOnANewPrivateContext() async throws {
        let container = try Self.container()
        #expect(Self.load(container).allSatisfy { $0.1 == nil })
        let savedOnQueue: Bool = await withCheckedContinuation { continuation in
            container.performBackgroundTask { context in
                let department = try? context.insertNewObject(forEntityName: "Department")
                try? department?.setValue("Sales", forKey: "name")
                let saved = (try? context.save()) != nil
                continuation.resume(returning: saved && context.isOnQueue && context.concurrencyType == .privateQueue && context !== container.viewContext)
            }
        }
        #expect(savedOnQueue)
        // The async variant returns the block's value, and its error.
        let count = try await container.performBackgroundTask { context in
            try context.count(for: FetchRequest(entityName: "Department"))
        }
        #expect(count == 1)
        // rethrows, as Core Data's: a block that cannot throw needs no `try`.
        let zero = await container.performBackgroundTask { _ in 0 }
        #expect(zero == 0)
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await container.performBackgroundTask { _ -> Int in throw Refused() }
        }
        let view = container.viewContext
        #expect(try view.performAndWait { try view.count(for: FetchRequest(entityName: "Department")) } == 1)
    }

    /// PSD-02: options, pragmas, configuration and the read-only flag reach the store.
    @Test func aDescriptionsSettingsReachTheStore() throws {
        let container = PersistentContainer(name: "Reference", managedObjectModel: ReferenceModel.make())
        #expect(container.modelURL == nil)
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("Directory.sqlite")
        let description = PersistentStoreDescription(url: url)
        description.configuration = "Directory"
        description.setValue("FULL", forPragmaNamed: "synchronous")
        description.setOption(true as NSNumber, forKey: PersistentStore.persistentHistoryTrackingKey)
        description.timeout = 5
        #expect(description.sqlitePragmas as? [String: String] == ["synchronous": "FULL"])
        container.persistentStoreDescriptions = [description]
        #expect(Self.load(container).allSatisfy { $0.1 == nil })
        let store = try #require(container.persistentStoreCoordinator.persistentStore(for: url))
        #expect(store.configurationName == "Directory")
        #expect((store.options[SQLiteStoreOptions.pragmasKey] as? [String: String]) == ["synchronous": "FULL"])
        #expect((store.options[PersistentStore.persistentHistoryTrackingKey] as? Bool) == true)
        #expect((store.options[PersistentStore.timeoutOption] as? TimeInterval) == 5)
        // The migration flags are written when the store is added.
        #expect((store.options[PersistentStore.migratePersistentStoresAutomaticallyOption] as? Bool) == true)
        #expect(!store.isReadOnly)

        // Read-only: the same file added again by another container refuses saves.
        let reader = PersistentContainer(name: "Reference", managedObjectModel: ReferenceModel.make())
        let readOnly = PersistentStoreDescription(url: url)
        readOnly.configuration = "Directory"
        readOnly.isReadOnly = true
        reader.persistentStoreDescriptions = [readOnly]
        #expect(Self.load(reader).allSatisfy { $0.1 == nil })
        #expect(reader.persistentStoreCoordinator.persistentStores.first?.isReadOnly == true)
    }

    /// PSD-03: an asynchronous description is added after load returns, and
    /// the handler is called from the background once it is.
    @Test func anAsynchronousDescriptionIsAddedInTheBackground() async throws {
        let container = try Self.container()
        let description = try #require(container.persistentStoreDescriptions.first)
        description.shouldAddStoreAsynchronously = true
        let (error, added): (Error?, Bool) = await withCheckedContinuation { continuation in
            container.loadPersistentStores { _, error in
                continuation.resume(returning: (error, container.persistentStoreCoordinator.persistentStores.count == 1))
            }
        }
        #expect(error == nil && added)
    }

    /// PSD-04: a store of the model's older version is migrated when the
    /// container adds it, with no option set by the app.
    @Test func anOlderStoreIsMigratedByDefault() throws {
        let url = try SmallModel.store(SmallModel.make())
        let container = PersistentContainer(name: "Small", managedObjectModel: AutomaticMigrationTests.v2())
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: url)]
        #expect(Self.load(container).allSatisfy { $0.1 == nil })
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            #expect(people.count == 30)
            #expect(try people.first?.value(forKey: "email") == nil)
        }
        // Turned off, the same kind of store is refused (134100).
        let older = try SmallModel.store(SmallModel.make())
        let strict = PersistentContainer(name: "Small", managedObjectModel: AutomaticMigrationTests.v2())
        let description = PersistentStoreDescription(url: older)
        description.shouldMigrateStoreAutomatically = false
        strict.persistentStoreDescriptions = [description]
        #expect((Self.load(strict).first?.1 as? CoreDataError)?.code == .persistentStoreIncompatibleVersionHash)
    }
}
