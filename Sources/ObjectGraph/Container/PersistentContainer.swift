import Foundation

/// A model, a coordinator and its stores, and the contexts an app uses:
/// Core Data's `NSPersistentContainer`, with its names and defaults.
///
/// `init(name:)` finds the model `NAME` by file name in
/// `defaultModelSearchDirectories()` (Linux has no app bundle; see there),
/// `persistentStoreDescriptions` starts as one SQLite store at
/// `defaultDirectoryURL()/NAME.sqlite`, and stores are migrated
/// automatically (lightweight migration on by default).
///
/// ```swift
/// let container = PersistentContainer(name: "Notes")
/// container.loadPersistentStores { description, error in
///     if let error { fatalError("\(description): \(error)") }
/// }
/// container.viewContext.automaticallyMergesChangesFromParent = true
/// container.performBackgroundTask { context in
///     let note = try? context.insertNewObject(forEntityName: "Note")
///     try? note?.setValue("Hello", forKey: "title")
///     try? context.save()
/// }
/// ```
open class PersistentContainer {
    /// The container's name: the model's file name and the store's by default.
    public let name: String
    public let managedObjectModel: ManagedObjectModel
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// The stores `loadPersistentStores` adds, in order.
    open var persistentStoreDescriptions: [PersistentStoreDescription]
    /// Where the model was read from; nil when it was given in code. Also
    /// where automatic migration looks for the model's older versions.
    public private(set) var modelURL: URL?
    /// Why the model could not be found or used: `init(name:)` cannot throw
    /// (Core Data's does not), so the error is reported by every
    /// `loadPersistentStores` call instead, and the container has an empty model.
    private var setupError: CoreDataError?
    private let lock = NSLock()
    private var _viewContext: ManagedObjectContext?

    /// A container for the model named `name`, read from the first of
    /// `modelSearchDirectories` that holds `NAME.momd`, `NAME.mom` or
    /// `NAME.xcdatamodeld` (in that order within a directory).
    ///
    /// ```swift
    /// // A SwiftPM target's resources: .process("Notes.xcdatamodeld")
    /// let container = PersistentContainer(name: "Notes", modelSearchDirectories: [Bundle.module.resourceURL!])
    /// ```
    public convenience init(name: String, modelSearchDirectories: [URL]) {
        guard let url = Self.modelURL(named: name, in: modelSearchDirectories) else {
            let searched = modelSearchDirectories.map(\.path).joined(separator: ", ")
            self.init(name: name, managedObjectModel: ManagedObjectModel())
            setupError = CoreDataError(
                .fileReadNoSuchFile, "no model named '\(name)' (\(name).momd, \(name).mom, \(name).xcdatamodeld) in: \(searched)",
                userInfo: [CoreDataError.filePathErrorKey: modelSearchDirectories.first?.path ?? ""])
            return
        }
        do {
            self.init(name: name, managedObjectModel: try ManagedObjectModel(contentsOf: url))
        } catch {
            self.init(name: name, managedObjectModel: ManagedObjectModel())
            setupError = (error as? CoreDataError) ?? CoreDataError(
                .fileReadCorruptFile, "cannot read the model at \(url.path): \(error)",
                userInfo: [CoreDataError.filePathErrorKey: url.path, CoreDataError.underlyingErrorKey: error])
        }
        modelURL = url
    }

    /// A container for the model named `name`, searched for in
    /// `defaultModelSearchDirectories()` (Core Data: the main bundle).
    public convenience init(name: String) {
        self.init(name: name, modelSearchDirectories: Self.defaultModelSearchDirectories())
    }

    /// A container for a model built or read by the caller; the designated
    /// initializer, as Core Data's, so subclasses inherit the others.
    ///
    /// ```swift
    /// let container = PersistentContainer(name: "Notes", managedObjectModel: try ManagedObjectModel(contentsOf: modelURL))
    /// ```
    public init(name: String, managedObjectModel model: ManagedObjectModel) {
        self.name = name
        self.modelURL = model.sourceURL
        var problem: CoreDataError?
        var coordinator: PersistentStoreCoordinator
        do {
            coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        } catch {
            // An invalid model built in code: reported by loadPersistentStores, as above.
            problem = (error as? CoreDataError) ?? CoreDataError(.coreData, "the model '\(name)' cannot be used: \(error)")
            coordinator = try! PersistentStoreCoordinator(managedObjectModel: ManagedObjectModel())
        }
        self.managedObjectModel = coordinator.managedObjectModel
        self.persistentStoreCoordinator = coordinator
        self.setupError = problem
        // Through the class method, so a subclass's override moves the store (NPC-06).
        let url = Self.defaultDirectoryURL().appendingPathComponent("\(name).sqlite")
        self.persistentStoreDescriptions = [PersistentStoreDescription(url: url)]
    }

    // MARK: - Where things are

    /// Where models are looked for by name, in order, since Linux has no
    /// application bundle: the executable's directory, its `Resources`
    /// folder, every SwiftPM resource bundle beside it (`*.resources`, where
    /// `Bundle.module` points on Linux), then the current directory.
    public class func defaultModelSearchDirectories() -> [URL] {
        var directories: [URL] = []
        let executable = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments.first ?? ".")
        let folder = executable.resolvingSymlinksInPath().deletingLastPathComponent()
        directories.append(folder)
        directories.append(folder.appendingPathComponent("Resources"))
        let bundles = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
        directories += bundles.filter { $0.pathExtension == "resources" }.sorted { $0.path < $1.path }
        directories.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        return directories
    }

    /// The first `NAME.momd`, `NAME.mom` or `NAME.xcdatamodeld` in `directories`.
    public class func modelURL(named name: String, in directories: [URL]) -> URL? {
        for directory in directories {
            for suffix in ["momd", "mom", "xcdatamodeld"] {
                let url = directory.appendingPathComponent("\(name).\(suffix)")
                if FileManager.default.fileExists(atPath: url.path) { return url }
            }
        }
        return nil
    }

    /// Where the default store goes (Core Data: the app's Application
    /// Support folder). On Linux, the app's XDG data directory:
    /// `$XDG_DATA_HOME/<executable name>`, or `~/.local/share/<executable
    /// name>` when the variable is unset or not absolute (the XDG Base
    /// Directory rule). Subclasses override it to move the stores of every
    /// container of the class, as with Core Data (NPC-06).
    ///
    /// ```swift
    /// final class AppContainer: PersistentContainer {
    ///     override class func defaultDirectoryURL() -> URL { URL(fileURLWithPath: "/var/lib/notes") }
    /// }
    /// ```
    open class func defaultDirectoryURL() -> URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = URL(fileURLWithPath: xdg, isDirectory: true)
        } else {
            let home = environment["HOME"] ?? NSHomeDirectory()
            base = URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".local/share", isDirectory: true)
        }
        let app = Bundle.main.executableURL?.lastPathComponent ?? ProcessInfo.processInfo.processName
        return base.appendingPathComponent(app, isDirectory: true)
    }

    // MARK: - Stores

    /// Adds a store for each of `persistentStoreDescriptions`, calling
    /// `block` once per description with nil or the error that kept it out.
    /// Synchronous descriptions are added before this returns, asynchronous
    /// ones on a background queue (`shouldAddStoreAsynchronously`). The
    /// store's folder is created first. Adding a description whose store is
    /// already added reports nothing new (the store stays).
    open func loadPersistentStores(completionHandler block: @escaping (PersistentStoreDescription, Error?) -> Void) {
        for description in persistentStoreDescriptions {
            if description.shouldAddStoreAsynchronously {
                DispatchQueue.global().async { [self] in block(description, addStore(for: description)) }
            } else {
                block(description, addStore(for: description))
            }
        }
    }

    private func addStore(for description: PersistentStoreDescription) -> Error? {
        if let setupError { return setupError }
        do {
            if let url = description.url {
                if persistentStoreCoordinator.persistentStore(for: url) != nil { return nil }
                if description.type != PersistentStoreCoordinator.inMemoryStoreType {
                    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                }
            }
            var options = description.effectiveOptions
            // Older versions of a model bundle are found beside the current one.
            if let modelURL, options[PersistentStore.migrationSearchURLsOption] == nil {
                options[PersistentStore.migrationSearchURLsOption] = [modelURL]
            }
            try persistentStoreCoordinator.addPersistentStore(ofType: description.type, configurationName: description.configuration,
                                                              at: description.url, options: options)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Contexts

    /// The main-queue context for the user interface, made at first use and
    /// kept. Use it on the main queue (or in its `perform`).
    open var viewContext: ManagedObjectContext {
        lock.lock(); defer { lock.unlock() }
        if let _viewContext { return _viewContext }
        let context = ManagedObjectContext(coordinator: persistentStoreCoordinator, concurrencyType: .mainQueue)
        context.name = "viewContext"
        _viewContext = context
        return context
    }

    /// A new private-queue context on the coordinator; each call makes one.
    ///
    /// ```swift
    /// let importer = container.newBackgroundContext()
    /// importer.perform { /* insert, save */ }
    /// ```
    open func newBackgroundContext() -> ManagedObjectContext {
        ManagedObjectContext(coordinator: persistentStoreCoordinator, concurrencyType: .privateQueue)
    }

    /// Runs `block` on a new private-queue context's queue, asynchronously.
    open func performBackgroundTask(_ block: @escaping (ManagedObjectContext) -> Void) {
        let context = newBackgroundContext()
        context.perform { block(context) }
    }

    /// Runs `block` on a new private-queue context's queue and returns its
    /// result (Core Data's async `performBackgroundTask`).
    ///
    /// ```swift
    /// let count = try await container.performBackgroundTask { context in
    ///     try context.count(for: FetchRequest(entityName: "Note"))
    /// }
    /// ```
    public func performBackgroundTask<T>(_ block: @escaping (ManagedObjectContext) throws -> T) async rethrows -> T {
        let context = newBackgroundContext()
        return try await context.perform { try block(context) }
    }
}
