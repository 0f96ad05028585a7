import Foundation

/// `entity()` and `fetchRequest()` on a managed object class (the second
/// in an extension of `FetchRequestResult`, where `Self` may type its
/// result): the entity
/// is looked for in the models coordinators have been made with, newest
/// first, since a class has no model of its own (Core Data looks in the
/// models its stacks loaded).
///
/// ```swift
/// let request = Note.fetchRequest()          // FetchRequest<Note>
/// let entity = Note.entity()                 // the Note entity of the model in use
/// ```
extension ManagedObject {
    /// The entity whose objects are made as this class: among the models in
    /// use, the newest one's entity whose registered class is exactly this
    /// one; failing that, the entity named like the class.
    ///
    /// Traps when no model in use has one, as Core Data's `entity()` leaves
    /// nothing to work with: make a coordinator (or container) for the model
    /// and register the class first.
    public class func entity() -> EntityDescription {
        guard let entity = ModelsInUse.shared.entity(for: self) else {
            preconditionFailure("\(self).entity(): no model in use has an entity for class \(self); register the class (ManagedObjectClassRegistry) and make a coordinator for its model first")
        }
        return entity
    }
}

extension ManagedObject {
    /// Makes an object of this class's entity in `context`'s model and
    /// inserts it: Core Data's `init(context:)`, the usual way to create
    /// objects in Swift.
    ///
    /// ```swift
    /// let note = Note(context: context)
    /// note.title = "Hello"
    /// ```
    ///
    /// Traps when the context's model has no entity for the class (Core
    /// Data raises): register the class for its entity first.
    public convenience init(context: ManagedObjectContext) {
        let model = context.persistentStoreCoordinator.managedObjectModel
        guard let entity = ModelsInUse.entity(for: Self.self, in: model) else {
            preconditionFailure("\(Self.self)(context:): the context's model has no entity for class \(Self.self); register the class (ManagedObjectClassRegistry) for its entity")
        }
        self.init(entity: entity, insertInto: context)
    }
}

extension EntityDescription {
    /// The entity named `name` in `context`'s model (Core Data's
    /// `NSEntityDescription.entity(forEntityName:in:)`); nil when there is none.
    ///
    /// ```swift
    /// let entity = EntityDescription.entity(forEntityName: "Note", in: context)
    /// ```
    public static func entity(forEntityName name: String, in context: ManagedObjectContext) -> EntityDescription? {
        context.persistentStoreCoordinator.managedObjectModel.entitiesByName[name]
    }

    /// A new object of the entity named `name`, inserted into `context`
    /// (Core Data's `NSEntityDescription.insertNewObject(forEntityName:into:)`).
    /// Traps for an unknown or abstract entity, as Core Data raises; the
    /// throwing `context.insertNewObject(forEntityName:)` reports it instead.
    public static func insertNewObject(forEntityName name: String, into context: ManagedObjectContext) -> ManagedObject {
        do { return try context.insertNewObject(forEntityName: name) } catch {
            preconditionFailure("EntityDescription.insertNewObject(forEntityName: \"\(name)\", into:): \(error)")
        }
    }
}

extension FetchRequestResult where Self: ManagedObject {
    /// A request for `entity()` typed by this class, as Xcode's generated
    /// `fetchRequest()` is (`NSFetchRequest<Note>`).
    ///
    /// ```swift
    /// let notes: [Note] = try context.fetch(Note.fetchRequest())
    /// ```
    public static func fetchRequest() -> FetchRequest<Self> {
        let request = FetchRequest<Self>(entityName: entity().name)
        request.entity = entity()
        return request
    }
}

/// The models coordinators were made with, held weakly, newest last: what
/// `ManagedObject.entity()` searches.
final class ModelsInUse: @unchecked Sendable {
    static let shared = ModelsInUse()
    private let lock = NSLock()
    private var models: [Weak] = []

    private struct Weak { weak var model: ManagedObjectModel? }

    func add(_ model: ManagedObjectModel) {
        lock.lock(); defer { lock.unlock() }
        models.removeAll { $0.model == nil || $0.model === model }
        models.append(Weak(model: model))
    }

    func entity(for type: ManagedObject.Type) -> EntityDescription? {
        lock.lock()
        let live = Array(models.compactMap(\.model).reversed())
        lock.unlock()
        return Self.entity(for: type, among: live)
    }

    /// The entity of `model` made as `type`: by registered class, then by name.
    static func entity(for type: ManagedObject.Type, in model: ManagedObjectModel) -> EntityDescription? {
        entity(for: type, among: [model])
    }

    private static func entity(for type: ManagedObject.Type, among models: [ManagedObjectModel]) -> EntityDescription? {
        let registry = ManagedObjectClassRegistry.shared
        for model in models {
            if let entity = model.entities.first(where: { registry.objectClass(for: $0) == type }) { return entity }
        }
        let name = String(describing: type)
        for model in models {
            if let entity = model.entitiesByName[name] { return entity }
        }
        return nil
    }
}
