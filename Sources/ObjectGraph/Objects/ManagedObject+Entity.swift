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
        let live = models.compactMap(\.model).reversed()
        lock.unlock()
        let registry = ManagedObjectClassRegistry.shared
        for model in live {
            if let entity = model.entities.first(where: { registry.objectClass(for: $0) == type }) { return entity }
        }
        let name = String(describing: type)
        for model in live {
            if let entity = model.entitiesByName[name] { return entity }
        }
        return nil
    }
}
