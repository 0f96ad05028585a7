import Foundation

/// The results of a fetch request kept in sections for a list, and kept up
/// to date as the context changes: Core Data's `NSFetchedResultsController`
/// without its type parameter (see ``FetchedResultsController`` for the
/// typed one apps make).
///
/// The request needs at least one sort descriptor; with sections, the first
/// one must order the objects by section (FRC-01). With no delegate the
/// controller only holds what `performFetch()` found; with one it follows
/// the context's objects-did-change notifications (its own processed
/// changes, saves merged into it) and tells the delegate, on the context's
/// queue (FRC-03). `cacheName` is accepted and kept, but nothing is cached
/// on disk: sections are computed in memory at every fetch (FRC-06).
///
/// ```swift
/// let controller = AnyFetchedResultsController(fetchRequest: request, managedObjectContext: context,
///                                              sectionNameKeyPath: nil, cacheName: nil)
/// try controller.performFetch()
/// print(controller.sections?.first?.numberOfObjects ?? 0)
/// ```
open class AnyFetchedResultsController {
    public let fetchRequest: AnyFetchRequest
    public let managedObjectContext: ManagedObjectContext
    /// The key path whose value names an object's section; nil for one section.
    public let sectionNameKeyPath: String?
    /// Accepted for Core Data's API; no cache is written (FRC-06).
    public let cacheName: String?

    /// Setting a delegate turns change tracking on; nil turns it off (FRC-03).
    public weak var delegate: FetchedResultsControllerDelegate? {
        didSet { updateTracking() }
    }

    /// The objects in section then row order; nil before `performFetch()`.
    public private(set) var fetchedManagedObjects: [ManagedObject]?
    private var sectionList: [Section] = []
    private var entity: EntityDescription?
    private var observer: NSObjectProtocol?

    /// One section: its name and its objects in order.
    final class Section: FetchedResultsSectionInfo {
        let name: String
        var indexTitle: String?
        var members: [ManagedObject]
        init(name: String, indexTitle: String?, members: [ManagedObject]) {
            self.name = name
            self.indexTitle = indexTitle
            self.members = members
        }
        var numberOfObjects: Int { members.count }
        var objects: [Any]? { members }
    }

    public init(fetchRequest: AnyFetchRequest, managedObjectContext context: ManagedObjectContext,
                sectionNameKeyPath: String?, cacheName name: String?) {
        self.fetchRequest = fetchRequest
        self.managedObjectContext = context
        self.sectionNameKeyPath = sectionNameKeyPath
        self.cacheName = name
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
    }

    /// Core Data keeps caches under names; there are none here to delete.
    public class func deleteCache(withName name: String?) {}

    // MARK: - Fetching

    /// Fetches the objects and computes the sections. Call it on the
    /// context's queue.
    ///
    /// - Throws: 134060 (`NSCoreDataError`) for a request with no sort
    ///   descriptors, one whose results are not managed objects, objects out
    ///   of section order (the first sort descriptor does not group them by
    ///   `sectionNameKeyPath`), or objects of another class than a typed
    ///   controller's; the fetch's own errors.
    open func performFetch() throws {
        guard !fetchRequest.sortDescriptors.isEmpty else {
            throw CoreDataError(.coreData, "a fetched results controller needs a fetch request with at least one sort descriptor (entity \(fetchRequest.entityName ?? "nil"))")
        }
        guard fetchRequest.resultType == .managedObject else {
            throw CoreDataError(.coreData, "a fetched results controller needs managed object results, not \(fetchRequest.resultType)")
        }
        let model = managedObjectContext.persistentStoreCoordinator.managedObjectModel
        guard let entity = fetchRequest.entity ?? fetchRequest.entityName.flatMap({ model.entitiesByName[$0] }) else {
            throw CoreDataError(.coreData, "the fetch request names no entity of the model (\(fetchRequest.entityName ?? "nil"))")
        }
        // Sorted again in memory, stably, so the order the controller keeps
        // later (by the same comparisons) is the order it starts with.
        let objects = try FetchSortDescriptor.sort(try managedObjectContext.fetch(fetchRequest), using: fetchRequest.sortDescriptors)
        try check(objects)
        let sections = try makeSections(objects, strict: true)
        self.entity = entity
        fetchedManagedObjects = objects
        sectionList = sections
        updateTracking()
    }

    /// A typed controller's check of the fetched objects' class.
    func check(_ objects: [ManagedObject]) throws {}

    // MARK: - Reading

    /// The sections; nil before `performFetch()`.
    public var sections: [FetchedResultsSectionInfo]? {
        fetchedManagedObjects == nil ? nil : sectionList
    }

    /// The object at `indexPath` (`[section, row]`); traps outside the
    /// results, as Core Data raises a range exception.
    public func managedObject(at indexPath: IndexPath) -> ManagedObject {
        precondition(indexPath.count == 2 && sectionList.indices.contains(indexPath.section)
                     && sectionList[indexPath.section].members.indices.contains(indexPath.row),
                     "index path \(indexPath) is outside the fetched results (\(sectionList.map(\.members.count)) objects per section)")
        return sectionList[indexPath.section].members[indexPath.row]
    }

    /// Where `object` is in the results; nil when it is not among them.
    public func indexPath(forObject object: ManagedObject) -> IndexPath? {
        for (s, section) in sectionList.enumerated() {
            if let row = section.members.firstIndex(where: { $0 === object }) { return IndexPath(row: row, section: s) }
        }
        return nil
    }

    /// A section's index title: its name's first letter, capitalized
    /// (Core Data's default); subclasses override it (FRC-05).
    open func sectionIndexTitle(forSectionName sectionName: String) -> String? {
        sectionName.first.map { String($0).uppercased() }
    }

    /// The sections' index titles, each once, in section order.
    open var sectionIndexTitles: [String] {
        var seen = Set<String>()
        return sectionList.compactMap(\.indexTitle).filter { seen.insert($0).inserted }
    }

    /// The first section whose index title is `title` (`index` is its
    /// position in `sectionIndexTitles`, used when no section has it).
    open func section(forSectionIndexTitle title: String, at sectionIndex: Int) -> Int {
        sectionList.firstIndex { $0.indexTitle == title } ?? min(sectionIndex, max(sectionList.count - 1, 0))
    }

    // MARK: - Sections

    func sectionName(of object: ManagedObject) -> String {
        guard let sectionNameKeyPath else { return "" }
        guard let value = try? object.value(forKeyPath: sectionNameKeyPath) else { return "" }
        if let string = value as? String { return string }
        return String(describing: value)
    }

    /// Groups `objects` (already in order) into sections. With `strict`, a
    /// section name met again after another is an error: the sort does not
    /// group by section, which Core Data reports as out of order.
    func makeSections(_ objects: [ManagedObject], strict: Bool) throws -> [Section] {
        var sections: [Section] = []
        var seen: [String: Int] = [:]
        for (index, object) in objects.enumerated() {
            let name = sectionName(of: object)
            if let last = sections.last, last.name == name {
                last.members.append(object)
            } else if let earlier = seen[name] {
                if strict {
                    throw CoreDataError(.coreData, "the fetched object at index \(index) has an out of order section name '\(name)' (after '\(sections.last?.name ?? "")'); the first sort descriptor must sort by \(sectionNameKeyPath ?? "the section")")
                }
                sections[earlier].members.append(object)
            } else {
                seen[name] = sections.count
                sections.append(Section(name: name, indexTitle: indexTitle(forSectionName: name), members: [object]))
            }
        }
        return sections
    }

    func indexTitle(forSectionName name: String) -> String? {
        delegate?.controller(self, sectionIndexTitleForSectionName: name) ?? sectionIndexTitle(forSectionName: name)
    }

    // MARK: - Tracking

    private func updateTracking() {
        let tracking = delegate != nil && fetchedManagedObjects != nil
        if tracking == (observer != nil) { return }
        if let observer {
            NotificationCenter.default.removeObserver(observer)
            self.observer = nil
            return
        }
        observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification,
                                                          object: managedObjectContext, queue: nil) { [weak self] note in
            self?.contextDidChange(note.userInfo ?? [:])
        }
    }

    /// Whether `object` belongs in the results now.
    func matches(_ object: ManagedObject) -> Bool {
        guard let entity, !object.isDeleted, object.managedObjectContext === managedObjectContext else { return false }
        guard object.entity === entity || (fetchRequest.includesSubentities && object.entity.isKindOf(entity: entity)) else { return false }
        guard let predicate = fetchRequest.predicate else { return true }
        return (try? predicate.evaluate(with: object)) ?? false
    }

    private func contextDidChange(_ info: [AnyHashable: Any]) {
        guard let old = fetchedManagedObjects, delegate != nil else { return }
        func objects(_ key: String) -> [ManagedObject] { Array((info[key] as? Set<ManagedObject>) ?? []) }
        let changed = objects(ManagedObjectContext.updatedObjectsKey) + objects(ManagedObjectContext.refreshedObjectsKey)
        let candidates = objects(ManagedObjectContext.insertedObjectsKey) + changed
        let gone = Set((objects(ManagedObjectContext.deletedObjectsKey) + objects(ManagedObjectContext.invalidatedObjectsKey)).map(ObjectIdentifier.init))
        let invalidatedAll = info[ManagedObjectContext.invalidatedAllObjectsKey] != nil
        if gone.isEmpty && candidates.isEmpty && !invalidatedAll { return }

        var kept = invalidatedAll ? [] : old.filter { !gone.contains(ObjectIdentifier($0)) }
        let candidateIDs = Set(candidates.map(ObjectIdentifier.init))
        kept.removeAll { candidateIDs.contains(ObjectIdentifier($0)) && !matches($0) }
        var present = Set(kept.map(ObjectIdentifier.init))
        for object in candidates where !present.contains(ObjectIdentifier(object)) && matches(object) {
            kept.append(object)
            present.insert(ObjectIdentifier(object))
        }
        guard let sorted = try? FetchSortDescriptor.sort(kept, using: fetchRequest.sortDescriptors),
              (try? check(sorted)) != nil, let sections = try? makeSections(sorted, strict: false) else { return }
        let changes = FetchedResultsChanges(old: sectionList, new: sections, updated: Set(changed.map(ObjectIdentifier.init)))
        fetchedManagedObjects = sections.flatMap(\.members)
        let oldSections = sectionList
        sectionList = sections
        guard !changes.isEmpty, let delegate else { return }
        delegate.controllerWillChangeContent(self)
        for index in changes.deletedSections { delegate.controller(self, didChange: oldSections[index], atSectionIndex: index, for: .delete) }
        for index in changes.insertedSections { delegate.controller(self, didChange: sections[index], atSectionIndex: index, for: .insert) }
        for change in changes.objects {
            delegate.controller(self, didChange: change.object, at: change.indexPath, for: change.type, newIndexPath: change.newIndexPath)
        }
        delegate.controllerDidChangeContent(self)
    }
}
