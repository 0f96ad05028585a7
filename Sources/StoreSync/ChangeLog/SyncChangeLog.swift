import Foundation
import ObjectGraph

/// The change log of sync groups: every transaction of every store and hub,
/// read from the files themselves (no daemon needed), with author, time,
/// objects and old and new values.
///
/// Files are opened read-only through ObjectGraph as ordinary SQLite readers
/// (`SQLiteStore.liveReadOnlyOption`), so reading is safe while the daemon
/// and applications write, and their later commits are seen: call `next()`
/// again after it returned nil to follow the stores.
///
/// Entries come merged across sources in time order (ties in source order:
/// each group's hub, then its stores as configured). Each source is read in
/// pages of `pageSize` transactions, so memory does not grow with history.
/// `position` and each entry's `cursor` say where to resume; resuming gives
/// every later transaction of every source exactly once (`ChangeLogPosition`).
///
/// ```swift
/// var filter = ChangeLogFilter()
/// filter.authors = ["importer"]
/// let log = try SyncChangeLog(groups: [configuration], filter: filter, after: savedPosition)
/// while let entry = try log.next() {
///     for change in entry.changes { print(entry.source, entry.position, change.kind, change.entity, change.globalIdentifier) }
///     savedPosition = entry.cursor
/// }
/// for problem in log.takeProblems() { print("warning:", problem) }
/// ```
public final class SyncChangeLog {
    /// A source that could not be read, or a gap in its history; the reader
    /// goes on with the others and retries the source later.
    public struct Problem: Equatable, Sendable, CustomStringConvertible {
        public var source: ChangeLogSource
        public var message: String
        public var description: String { "\(source): \(message)" }
    }

    public let filter: ChangeLogFilter
    public let pageSize: Int
    /// Every source read, in tie-break order.
    public var sources: [ChangeLogSource] { readers.map(\.source) }
    /// Where the reader stands: every source's transactions up to these
    /// positions were returned or passed over by the filter.
    public private(set) var position: ChangeLogPosition

    private let readers: [SourceReader]
    private var groups: [String: GroupState] = [:]
    private var problems: [Problem] = []
    /// Sources read to their end since the merge last ran dry; they are
    /// looked at again only then, not before every entry.
    private var caughtUp = Set<Int>()
    private var entitySets: [String: Set<String>] = [:]

    /// The log of whole sync groups: each group's hub and stores.
    /// - Throws: `ChangeLogError.badFilter` for a store, entity or group the
    ///   filter names that none of `groups` has.
    public init(groups configurations: [SyncGroupConfiguration], filter: ChangeLogFilter = ChangeLogFilter(),
                after position: ChangeLogPosition = .start, pageSize: Int = 64) throws {
        self.filter = filter
        self.pageSize = max(1, pageSize)
        self.position = position
        var readers: [SourceReader] = []
        if let wanted = filter.groups, let unknown = wanted.subtracting(configurations.map(\.name)).sorted().first {
            throw ChangeLogError.badFilter("no sync group named '\(unknown)' (there are: \(configurations.map(\.name).joined(separator: ", ")))")
        }
        if let wanted = filter.stores {
            let known = Set(configurations.filter { filter.groups?.contains($0.name) ?? true }.flatMap { $0.stores.map(\.name) })
            if let unknown = wanted.subtracting(known).sorted().first {
                throw ChangeLogError.badFilter("no store named '\(unknown)' in \(Self.describe(configurations.map(\.name), filter.groups)) (stores: \(known.sorted().joined(separator: ", ")))")
            }
        }
        // A position from another set of groups (or a hand-made one naming a
        // source wrongly) would silently read that source from its start.
        let allKeys = configurations.flatMap { group in
            [ChangeLogSource(group: group.name, store: nil).key] + group.stores.map { ChangeLogSource(group: group.name, store: $0.name).key }
        }
        try Self.check(position, known: allKeys)
        for configuration in configurations where filter.groups?.contains(configuration.name) ?? true {
            let hubModel = EmbeddedHub.hubModel(configuration.model)
            let hubURL = configuration.stateDirectory.appendingPathComponent("hub.sqlite")
            groups[configuration.name] = GroupState(hubURL: hubURL, hubModel: hubModel)
            entitySets[configuration.name] = Self.entitySet(filter.entities, model: configuration.model)
            if filter.includesHub {
                readers.append(SourceReader(source: ChangeLogSource(group: configuration.name, store: nil), url: hubURL, model: hubModel,
                                            configurationName: nil, order: readers.count))
            }
            for store in configuration.stores where filter.stores?.contains(store.name) ?? true {
                readers.append(SourceReader(source: ChangeLogSource(group: configuration.name, store: store.name), url: store.url,
                                            model: configuration.model, configurationName: store.configurationName, order: readers.count))
            }
        }
        let known = entitySets.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        if let unknown = filter.entities?.subtracting(known).sorted().first {
            throw ChangeLogError.badFilter("no model of \(Self.describe(configurations.map(\.name), filter.groups)) has an entity named '\(unknown)'")
        }
        self.readers = readers
        for reader in readers { reader.fetchedThrough = position[reader.source] }
        try loadAllConflicts()
    }

    /// The log of one store file without a group (no hub, so no conflicts).
    /// `name` (default: the file's name without extension) is its key in
    /// positions.
    /// - Throws: the store's error when the file cannot be opened with
    ///   `model` (260 no file, 134010 not a store, 134100 another model), and
    ///   134080 when it records no history: a file given alone must be readable.
    public convenience init(storeAt url: URL, model: ManagedObjectModel, name: String? = nil, configurationName: String? = nil,
                            filter: ChangeLogFilter = ChangeLogFilter(), after position: ChangeLogPosition = .start,
                            pageSize: Int = 64) throws {
        try self.init(lone: SourceReader(source: ChangeLogSource(group: nil, store: name ?? url.deletingPathExtension().lastPathComponent),
                                         url: url, model: model, configurationName: configurationName, order: 0),
                      filter: filter, after: position, pageSize: pageSize)
    }

    private init(lone reader: SourceReader, filter: ChangeLogFilter, after position: ChangeLogPosition, pageSize: Int) throws {
        if filter.onlyConflicts { throw ChangeLogError.badFilter("conflicts are recorded by a sync group's hub; a lone store file has none (give its group)") }
        if filter.groups != nil { throw ChangeLogError.badFilter("a lone store file belongs to no group") }
        try Self.check(position, known: [reader.source.key])
        self.filter = filter
        self.pageSize = max(1, pageSize)
        self.position = position
        self.readers = [reader]
        entitySets[""] = Self.entitySet(filter.entities, model: reader.model)
        if let unknown = filter.entities?.subtracting(entitySets[""] ?? []).sorted().first {
            throw ChangeLogError.badFilter("the model has no entity named '\(unknown)' (it has \(reader.model.entities.map(\.name).sorted().joined(separator: ", ")))")
        }
        reader.fetchedThrough = position[reader.source]
        let file = try ReadOnlyStoreFile(url: reader.url, model: reader.model, configurationName: reader.configurationName)
        guard file.recordsHistory else {
            file.close()
            throw CoreDataError(.persistentStoreOpen, "\(reader.url.path) records no history: the store is not attached (storesyncctl attach)",
                                userInfo: [CoreDataError.filePathErrorKey: reader.url.path])
        }
        reader.file = file
    }

    private static func check(_ position: ChangeLogPosition, known: [String]) throws {
        if let unknown = Set(position.positions.keys).subtracting(known).sorted().first {
            throw ChangeLogError.badPosition(position.description, "it names source '\(unknown)', which is not read here (sources: \(known.joined(separator: ", ")); a hub's key is its group's name)")
        }
    }

    private static func describe(_ all: [String], _ wanted: Set<String>?) -> String {
        let names = wanted.map { Array($0).sorted() } ?? all
        return names.count == 1 ? "group \(names[0])" : "groups \(names.joined(separator: ", "))"
    }

    /// Entity names with their sub-entities; names the model lacks are left out.
    private static func entitySet(_ names: Set<String>?, model: ManagedObjectModel) -> Set<String> {
        guard let names else { return [] }
        var out = Set<String>()
        func add(_ entity: EntityDescription) {
            out.insert(entity.name)
            for sub in entity.subentities { add(sub) }
        }
        for name in names { if let entity = model.entitiesByName[name] { add(entity) } }
        return out
    }

    deinit { close() }

    /// Closes every file; `next()` reopens them.
    public func close() {
        for reader in readers { reader.close() }
        for state in groups.values { state.hub?.close(); state.hub = nil }
    }

    /// Problems met since the last call (each reported once until it changes).
    public func takeProblems() -> [Problem] {
        defer { problems = [] }
        return problems
    }

    /// Moves every source to its newest position now, so `next()` gives
    /// only transactions committed from here on (a follower that wants no
    /// history: the daemon's `log` stream without `after`). A source that
    /// cannot be opened yet stays where it was.
    ///
    /// ```swift
    /// let log = try SyncChangeLog(groups: [configuration])
    /// try log.skipToEnd()
    /// // ... later: only what was committed since
    /// while let entry = try log.next() { print(entry.position) }
    /// ```
    public func skipToEnd() throws {
        for reader in readers {
            guard let file = open(reader) else { continue }
            let current = try file.currentPosition()
            reader.fill([])
            reader.fetchedThrough = max(reader.fetchedThrough, current)
            position[reader.source] = reader.fetchedThrough
        }
        caughtUp = []
    }

    // MARK: - Reading

    /// The next transaction the filter keeps, in time order across sources;
    /// nil when every source has been read to its end. Call again later to
    /// get transactions committed since (following).
    public func next() throws -> ChangeLogEntry? {
        while true {
            for reader in readers where !reader.hasBuffered && !caughtUp.contains(reader.order) {
                try refill(reader)
                if !reader.hasBuffered { caughtUp.insert(reader.order) }
            }
            guard let reader = readers.filter(\.hasBuffered).min(by: { a, b in
                (a.peek!.timestamp, a.order) < (b.peek!.timestamp, b.order)
            }) else {
                // Dry: look once more at every source, then report the end.
                guard !caughtUp.isEmpty else { return nil }
                let waiting = caughtUp
                caughtUp = []
                var found = false
                for reader in readers where waiting.contains(reader.order) {
                    try refill(reader)
                    if reader.hasBuffered { found = true } else { caughtUp.insert(reader.order) }
                }
                if !found { return nil }
                continue
            }
            let transaction = reader.pop()
            position[reader.source] = transaction.token.position
            if let entry = try entry(transaction, from: reader) { return entry }
        }
    }

    /// Reads the next page of a source whose buffer is empty, if it has
    /// transactions after what was read. A file that cannot be opened, or has
    /// no history, is reported and tried again after a pause.
    private func refill(_ reader: SourceReader) throws {
        guard let file = open(reader) else { return }
        let current: Int64
        let page: [PersistentHistoryTransaction]
        do {
            current = try file.currentPosition()
            if current < reader.fetchedThrough {
                report(reader, "position \(reader.fetchedThrough) is past the newest of \(file.url.path) (\(current)): the file was replaced or its history switched off and on; waiting for it to pass")
                return
            }
            guard current > reader.fetchedThrough else { return }
            page = try fetchPage(reader, file)
        } catch let error as CoreDataError where error.code != .persistentHistoryTokenExpired {
            report(reader, "reading \(file.url.path) failed: \(error.message)")
            reader.close()
            return
        }
        reader.fill(page)
        // An empty page: nothing after what was read up to `current` (a start
        // at `since` found no change that late), so do not ask again for it.
        reader.fetchedThrough = max(reader.fetchedThrough, page.last?.token.position ?? current)
        reader.lastProblem = nil
    }

    private func fetchPage(_ reader: SourceReader, _ file: ReadOnlyStoreFile) throws -> [PersistentHistoryTransaction] {
        func run(_ request: PersistentHistoryChangeRequest) throws -> [PersistentHistoryTransaction] {
            request.fetchLimit = pageSize
            request.affectedStores = [file.store]
            return try file.coordinator.execute(request).transactions
        }
        // From the start, by date: it works after a purge (a token before the
        // oldest kept change is refused), and skips to `since`.
        guard reader.fetchedThrough > 0 else { return try run(.fetchHistory(after: filter.since ?? .distantPast)) }
        do {
            return try run(.fetchHistory(after: file.token(reader.fetchedThrough)))
        } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired {
            report(reader, "history after position \(reader.fetchedThrough) was purged (\(error.message)); transactions up to the oldest kept are missing from the log")
            return try run(.fetchHistory(after: Date.distantPast))
        }
    }

    private func open(_ reader: SourceReader) -> ReadOnlyStoreFile? {
        if let file = reader.file { return file }
        guard Date() >= reader.nextOpenAttempt else { return nil }
        do {
            let file = try ReadOnlyStoreFile(url: reader.url, model: reader.model, configurationName: reader.configurationName)
            guard file.recordsHistory else {
                file.close()
                reader.nextOpenAttempt = Date().addingTimeInterval(SourceReader.retryInterval)
                report(reader, "\(reader.url.path) records no history: \(reader.source.isHub ? "the hub is damaged" : "the store is not attached (storesyncctl attach, or let the daemon open it)")")
                return nil
            }
            reader.file = file
            return file
        } catch {
            reader.nextOpenAttempt = Date().addingTimeInterval(SourceReader.retryInterval)
            let message = (error as? CoreDataError)?.message ?? "\(error)"
            report(reader, message)
            return nil
        }
    }

    private func report(_ reader: SourceReader, _ message: String) {
        guard reader.lastProblem != message else { return }
        reader.lastProblem = message
        problems.append(Problem(source: reader.source, message: message))
    }

    // MARK: - Entries

    /// The entry for a transaction, or nil when the filter drops it.
    private func entry(_ transaction: PersistentHistoryTransaction, from reader: SourceReader) throws -> ChangeLogEntry? {
        if let authors = filter.authors, !authors.contains(transaction.author ?? "") { return nil }
        if let since = filter.since, transaction.timestamp < since { return nil }
        if let until = filter.until, transaction.timestamp > until { return nil }

        let source = reader.source
        let group = source.group.flatMap { groups[$0] }
        var changes: [ChangeLogChange] = []
        var events: [ChangeLogConflictEvent] = []
        var bookkeepingOnly = !transaction.changes.isEmpty
        for change in transaction.changes {
            if source.isHub, EmbeddedHub.bookkeeping.contains(change.entity.name) {
                if change.entity.name == EmbeddedHub.conflictEntity, let group, let event = try conflictEvent(change, group) { events.append(event) }
                if filter.includesBookkeeping { changes.append(Self.change(change)) }
                continue
            }
            bookkeepingOnly = false
            changes.append(Self.change(change))
        }
        if source.isHub && bookkeepingOnly && events.isEmpty && !filter.includesBookkeeping { return nil }

        // Conflicts: the ones it records or resolves, and the ones whose
        // object it changed within the conflict's span (ChangeLogFilter.onlyConflicts).
        var involved = Set(events.map(\.id))
        var conflictObjects = Set<UUID>()
        for event in events {
            if let conflict = group?.conflicts.first(where: { $0.id == event.id }) { conflictObjects.insert(conflict.object) }
        }
        if let group, !group.conflictsByObject.isEmpty {
            // A push of the base (or older) only brought the store where the
            // conflicting change started from.
            let pushed = transaction.author == SyncGroup.author ? transaction.contextName.flatMap(SyncGroup.pushedPosition) : nil
            for change in changes {
                for conflict in group.conflictsByObject[change.globalIdentifier] ?? [] {
                    let spans = source.isHub ? transaction.token.position > conflict.basePosition
                        : source.store == conflict.store && transaction.timestamp >= conflict.baseTime
                            && (pushed ?? .max) > conflict.basePosition
                    if spans {
                        involved.insert(conflict.id)
                        conflictObjects.insert(conflict.object)
                    }
                }
            }
        }
        if filter.onlyConflicts && involved.isEmpty { return nil }

        if filter.narrowsChanges {
            let entities = entitySets[source.group ?? ""] ?? []
            changes = changes.filter { change in
                (filter.entities == nil || entities.contains(change.entity))
                    && (filter.objects?.contains(change.globalIdentifier) ?? true)
                    && (!filter.onlyConflicts || conflictObjects.contains(change.globalIdentifier))
            }
            if let objects = filter.objects {
                events = events.filter { event in
                    guard let conflict = group?.conflicts.first(where: { $0.id == event.id }) else { return false }
                    return objects.contains(conflict.object)
                }
            } else if filter.entities != nil {
                events = events.filter { event in
                    guard let conflict = group?.conflicts.first(where: { $0.id == event.id }) else { return false }
                    return entities.contains(conflict.entity)
                }
            }
            if changes.isEmpty && events.isEmpty { return nil }
        }

        return ChangeLogEntry(source: source, position: transaction.token.position, cursor: position, timestamp: transaction.timestamp,
                              author: transaction.author, contextName: transaction.contextName,
                              transactionNumber: transaction.transactionNumber,
                              engineWrite: transaction.author == SyncGroup.author
                                  ? ChangeLogEngineWrite(contextName: transaction.contextName, isHub: source.isHub) : nil,
                              changes: changes, conflictEvents: events, conflicts: involved.sorted())
    }

    /// A history change as the log shows it (values by type, relationships
    /// by global identifier).
    static func change(_ change: PersistentHistoryChange) -> ChangeLogChange {
        let entity = change.entity
        var properties: [ChangeLogPropertyChange] = []
        func isToMany(_ name: String) -> Bool { (entity.propertiesByName[name] as? RelationshipDescription)?.isToMany ?? false }
        func value(_ name: String, _ raw: Any?) -> StoredValue {
            entity.propertiesByName[name] is RelationshipDescription ? StoredValue(destination: raw as? UUID) : StoredValue(attributeValue: raw)
        }
        for (name, part) in change.values {
            if isToMany(name) {
                properties.append(ChangeLogPropertyChange(name: name, added: part.addedMembers, removed: part.removedMembers,
                                                          positions: part.memberPositions, isToMany: true))
                continue
            }
            switch change.changeType {
            case .insert: properties.append(ChangeLogPropertyChange(name: name, new: value(name, part.newValue)))
            case .update: properties.append(ChangeLogPropertyChange(name: name, old: value(name, part.oldValue), new: value(name, part.newValue)))
            case .delete: break   // the tombstone has the last values
            }
        }
        if change.changeType == .delete {
            for (name, last) in change.tombstone ?? [:] where !isToMany(name) {
                properties.append(ChangeLogPropertyChange(name: name, old: value(name, last)))
            }
        }
        properties.sort { $0.name < $1.name }
        let kind: ChangeLogChange.Kind = change.changeType == .insert ? .insert : change.changeType == .update ? .update : .delete
        return ChangeLogChange(kind: kind, entity: entity.name, globalIdentifier: change.globalIdentifier, properties: properties)
    }

    // MARK: - Conflicts

    /// A conflict as the log needs it: what it is about, and where its span starts.
    struct ConflictSpan {
        var id: Int64
        var row: UUID?
        var store: String
        var object: UUID
        var entity: String
        var basePosition: Int64
        /// When the hub committed `basePosition` (the store's change came after).
        var baseTime: Date
    }

    final class GroupState {
        let hubURL: URL
        let hubModel: ManagedObjectModel
        var hub: ReadOnlyStoreFile?
        var conflicts: [ConflictSpan] = [] {
            didSet { conflictsByObject = Dictionary(grouping: conflicts, by: \.object) }
        }
        /// The same, by object: what each change of a transaction is looked up in.
        private(set) var conflictsByObject: [UUID: [ConflictSpan]] = [:]
        init(hubURL: URL, hubModel: ManagedObjectModel) {
            self.hubURL = hubURL
            self.hubModel = hubModel
        }
    }

    private func loadAllConflicts() throws {
        for state in groups.values { try loadConflicts(state) }
    }

    /// Reads the hub's conflict rows (a group whose hub does not exist yet has none).
    private func loadConflicts(_ state: GroupState) throws {
        guard FileManager.default.fileExists(atPath: state.hubURL.path) else { return }
        let hub: ReadOnlyStoreFile
        do {
            hub = try state.hub ?? ReadOnlyStoreFile(url: state.hubURL, model: state.hubModel)
        } catch {
            // The hub's own source reports why it cannot be read.
            return
        }
        state.hub = hub
        var spans: [ConflictSpan] = []
        try hub.context.performAndWait {
            defer { hub.context.reset() }
            let request = FetchRequest(entityName: EmbeddedHub.conflictEntity)
            request.sortDescriptors = [FetchSortDescriptor(key: "number", ascending: true)]
            let rows = try hub.context.fetch(request)
            let rowIDs = try hub.coordinator.globalIdentifiers(for: rows.map(\.objectID))
            for row in rows {
                guard let id = try row.value(forKey: "number") as? Int64,
                      let object = (try row.value(forKey: "object") as? String).flatMap(UUID.init(uuidString:)) else { continue }
                let base = (try row.value(forKey: "basePosition") as? Int64) ?? 0
                spans.append(ConflictSpan(id: id, row: rowIDs[row.objectID], store: (try row.value(forKey: "store") as? String) ?? "",
                                          object: object, entity: (try row.value(forKey: "entityName") as? String) ?? "",
                                          basePosition: base, baseTime: try baseTime(base, hub)))
            }
        }
        state.conflicts = spans
    }

    /// The commit time of the hub transaction holding `position`; the distant
    /// past when it is 0 or its history was purged.
    private func baseTime(_ position: Int64, _ hub: ReadOnlyStoreFile) throws -> Date {
        guard position > 0 else { return .distantPast }
        let request = PersistentHistoryChangeRequest.fetchHistory(after: hub.token(position - 1))
        request.fetchLimit = 1
        request.affectedStores = [hub.store]
        do {
            return try hub.coordinator.execute(request).transactions.first?.timestamp ?? .distantPast
        } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired {
            return .distantPast
        }
    }

    /// The event a change to a `StoreSyncConflict` row stands for.
    private func conflictEvent(_ change: PersistentHistoryChange, _ group: GroupState) throws -> ChangeLogConflictEvent? {
        func new(_ key: String) -> Any? { change.values[key]?.newValue ?? nil }
        switch change.changeType {
        case .insert:
            guard let id = new("number") as? Int64, let object = (new("object") as? String).flatMap(UUID.init(uuidString:)) else { return nil }
            if !group.conflicts.contains(where: { $0.id == id }) { try loadConflicts(group) }
            return .recorded(id: id, store: new("store") as? String ?? "", object: object, entity: new("entityName") as? String ?? "",
                             kind: new("kind") as? String ?? "")
        case .update:
            guard change.updatedProperties.contains("resolution"), let taking = new("resolution") as? String else { return nil }
            if !group.conflicts.contains(where: { $0.row == change.globalIdentifier }) { try loadConflicts(group) }
            guard let conflict = group.conflicts.first(where: { $0.row == change.globalIdentifier }) else { return nil }
            return .resolved(id: conflict.id, taking: taking)
        case .delete:
            return nil
        }
    }
}

/// One source as the reader holds it: its file (opened on first use), a
/// page of transactions not returned yet, and how far it has fetched.
final class SourceReader {
    static let retryInterval: TimeInterval = 2

    let source: ChangeLogSource
    let url: URL
    let model: ManagedObjectModel
    let configurationName: String?
    let order: Int
    var file: ReadOnlyStoreFile?
    /// The next page is fetched after this position.
    var fetchedThrough: Int64 = 0
    var nextOpenAttempt = Date.distantPast
    var lastProblem: String?
    private var buffer: [PersistentHistoryTransaction] = []
    private var head = 0

    init(source: ChangeLogSource, url: URL, model: ManagedObjectModel, configurationName: String?, order: Int) {
        self.source = source
        self.url = url
        self.model = model
        self.configurationName = configurationName
        self.order = order
    }

    var hasBuffered: Bool { head < buffer.count }
    var peek: PersistentHistoryTransaction? { hasBuffered ? buffer[head] : nil }

    func pop() -> PersistentHistoryTransaction {
        defer { head += 1 }
        return buffer[head]
    }

    func fill(_ page: [PersistentHistoryTransaction]) {
        buffer = page
        head = 0
    }

    func close() {
        file?.close()
        file = nil
    }
}
