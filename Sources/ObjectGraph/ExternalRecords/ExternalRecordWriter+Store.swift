import Foundation

// How a store added with NSExternalRecordsDirectoryOption keeps its records
// in step: the coordinator calls these under its lock, after a save has
// committed. A records failure never fails the save: the error is kept
// (`lastError`, `PersistentStore.externalRecordsDidFailNotification`) and
// the objects whose records were missed are written at the next save, or
// by a rebuild, so the directory catches up once it is writable again.
extension ExternalRecordWriter {
    /// Called when the store has opened: makes the store folder and, when
    /// the folder is new, exports every object the store already holds.
    func storeDidOpen(_ store: PersistentStore) {
        let existed = FileManager.default.fileExists(atPath: storeFolder.appendingPathComponent(ExternalRecordsLayout.storeFileName).path)
        do {
            try prepareStoreFolder()
            if !existed { try rebuild(from: store) }
        } catch {
            noteFailure(error, missed: [], rebuild: !existed, store: store)
        }
    }

    /// Writes the records of what `request` committed to `store`: catches
    /// up on objects missed before, then writes the inserted objects and the
    /// updated ones whose exported values changed, and removes the records
    /// of deleted objects. Never throws.
    func recordCommittedSave(_ request: StoreSaveRequest, in store: PersistentStore) {
        let (rebuildNeeded, waiting) = withStateLock { (needsRebuildFlag, pendingIDs) }
        var touched = Set<ManagedObjectID>()
        for snapshot in request.inserted { touched.insert(snapshot.objectID) }
        for (snapshot, _) in request.updated { touched.insert(snapshot.objectID) }
        for (id, _) in request.deleted { touched.insert(id) }
        for change in request.toManyChanges { touched.insert(change.objectID) }

        if rebuildNeeded {
            // A rebuild reads the committed rows: it covers this save too.
            do { try rebuild(from: store) } catch { noteFailure(error, missed: touched, rebuild: true, store: store) }
            return
        }
        let earlier = waiting.subtracting(touched)
        if !earlier.isEmpty {
            let result = catchUp(Array(earlier), in: store)
            withStateLock { pendingIDs.subtract(result.finished) }
            if let error = result.error {
                noteFailure(error, missed: touched, rebuild: false, store: store)
                return
            }
        }

        let result: BatchResult
        do {
            var toMany: [ManagedObjectID: [String: [ManagedObjectID]]] = [:]
            for change in request.toManyChanges { toMany[change.objectID, default: [:]][change.relationship.name] = change.destinations }
            var rows: [StoreSnapshot] = request.inserted
            rows.reserveCapacity(request.inserted.count + request.updated.count)
            for (snapshot, _) in request.updated {
                let id = snapshot.objectID
                // Only objects whose exported values changed need a new record
                // (and those whose record a failure left behind).
                if request.changedValuesAreComplete && !waiting.contains(id) {
                    let names = plan(for: id.entity).names
                    let changed = (request.changedValues[id]?.keys.contains { names.contains($0) } ?? false)
                        || (toMany[id]?.keys.contains { names.contains($0) } ?? false)
                    if !changed { continue }
                }
                rows.append(snapshot)
            }
            // To-many changes of objects not otherwise saved (a membership
            // changed from the other side of a many-to-many).
            let listed = Set(rows.map(\.objectID))
            var extra: [ManagedObjectID] = []
            let deleted = Set(request.deleted.map(\.objectID))
            for (id, relationships) in toMany where !listed.contains(id) && !deleted.contains(id) {
                if relationships.keys.contains(where: plan(for: id.entity).names.contains) { extra.append(id) }
            }
            if !extra.isEmpty { rows += try store.snapshots(for: extra).values }
            let deletes = request.deleted.map(\.objectID)
            let gids = store.recordsPersistentHistory ? try store.globalIdentifiers(for: rows.map(\.objectID) + deletes) : [:]
            let sources = try self.sources(for: rows, in: store, toMany: toMany, globalIdentifiers: gids)
            result = writeBatch(sources, deletes: deletes, deleteIDs: gids)
        } catch {
            noteFailure(error, missed: touched, rebuild: false, store: store)
            return
        }
        if let error = result.error {
            noteFailure(error, missed: touched.subtracting(result.finished), rebuild: false, store: store)
        } else {
            withStateLock { if pendingIDs.isEmpty && !needsRebuildFlag { lastErrorValue = nil } }
        }
    }

    /// Writes or removes the records of objects missed earlier, from what
    /// the store holds now.
    private func catchUp(_ ids: [ManagedObjectID], in store: PersistentStore) -> BatchResult {
        do {
            let rows = try store.snapshots(for: ids)
            let gone = ids.filter { rows[$0] == nil }
            let gids = store.recordsPersistentHistory ? try store.globalIdentifiers(for: ids) : [:]
            let sources = try self.sources(for: Array(rows.values), in: store, toMany: [:], globalIdentifiers: gids)
            return writeBatch(sources, deletes: gone, deleteIDs: gids)
        } catch {
            var result = BatchResult()
            result.error = error
            return result
        }
    }

    /// Rewrites the store folder from the store's rows (see `rebuild(from:)`
    /// taking a context). The caller holds the coordinator's lock.
    @discardableResult
    func rebuild(from store: PersistentStore) throws -> Int {
        try prepareStoreFolder()
        var live: [String: Set<Int64>] = [:]
        var written = 0
        for entity in store.entities where !entity.isAbstract {
            let request = FetchRequest(entityName: entity.name)
            request.entity = entity
            request.includesSubentities = false
            let rows = try store.fetchSnapshots(request).snapshots.filter { $0.objectID.entity.name == entity.name }
            guard !plan(for: entity).properties.isEmpty, !rows.isEmpty else { continue }
            // Pages bound the memory of the records being built.
            var start = 0
            while start < rows.count {
                let page = Array(rows[start..<min(rows.count, start + 5000)])
                start += page.count
                let gids = store.recordsPersistentHistory ? try store.globalIdentifiers(for: page.map(\.objectID)) : [:]
                let sources = try self.sources(for: page, in: store, toMany: [:], globalIdentifiers: gids)
                written += try write(sources, deletes: [], deleteIDs: [:]).written
                live[entity.name, default: []].formUnion(page.compactMap(\.objectID.primaryKey))
            }
        }
        // Records whose objects are gone, stale renderings and temporary files.
        var stale: [ManagedObjectID] = []
        let fileManager = FileManager.default
        for folder in (try? fileManager.contentsOfDirectory(atPath: storeFolder.path)) ?? [] {
            guard let entity = model.entitiesByName[folder] else { continue }
            let entityFolder = ExternalRecordsLayout.entityFolder(storeFolder, folder)
            for name in (try? fileManager.contentsOfDirectory(atPath: entityFolder.path)) ?? [] {
                if ExternalRecordsLayout.isTemporaryName(name) {
                    unlink(entityFolder.appendingPathComponent(name).path)
                    continue
                }
                guard let (key, ext) = ExternalRecordsLayout.primaryKey(inFileName: name) else { continue }
                let isLive = live[folder]?.contains(key) ?? false
                if ext == configuration.fileExtension, !isLive {
                    stale.append(ManagedObjectID(entity: entity, storeIdentifier: storeIdentifier, primaryKey: key))
                } else if ext == ExternalRecordsLayout.plainTextExtension, !configuration.writesPlainText || !isLive {
                    unlink(entityFolder.appendingPathComponent(name).path)
                }
            }
        }
        if !stale.isEmpty { try write([], deletes: stale, deleteIDs: [:]) }
        withStateLock {
            pendingIDs.removeAll()
            needsRebuildFlag = false
            lastErrorValue = nil
        }
        return written
    }

    /// The records' inputs for stored rows: attributes and to-ones from the
    /// snapshot, to-manys from `toMany` or else the store.
    private func sources(for rows: [StoreSnapshot], in store: PersistentStore, toMany: [ManagedObjectID: [String: [ManagedObjectID]]],
                         globalIdentifiers: [ManagedObjectID: UUID]) throws -> [ExternalRecordContent.Source] {
        var out: [ExternalRecordContent.Source] = []
        out.reserveCapacity(rows.count)
        // To-many members the save did not carry, asked of the store per
        // relationship for all rows at once.
        var fetched: [String: [ManagedObjectID: [ManagedObjectID]]] = [:]
        var byEntity: [String: [ManagedObjectID]] = [:]
        for row in rows { byEntity[row.objectID.entity.name, default: []].append(row.objectID) }
        for (name, ids) in byEntity {
            guard let entity = ids.first?.entity else { continue }
            for relationship in plan(for: entity).relationships where relationship.isToMany {
                let missing = ids.filter { toMany[$0]?[relationship.name] == nil }
                guard !missing.isEmpty else { continue }
                let members = try store.relatedObjectIDs(for: relationship, ofAll: missing)
                for (owner, list) in members { fetched["\(name).\(relationship.name)", default: [:]][owner] = list }
            }
        }
        for row in rows {
            let id = row.objectID
            let plan = plan(for: id.entity)
            guard !plan.properties.isEmpty else { continue }
            var values: [String: Any] = [:]
            for property in plan.properties {
                if let relationship = property as? RelationshipDescription, relationship.isToMany {
                    let members = toMany[id]?[property.name] ?? fetched["\(id.entity.name).\(property.name)"]?[id] ?? []
                    values[property.name] = Self.relationshipValue(members, relationship)
                } else if let value = row[property.name] {
                    values[property.name] = value
                }
            }
            out.append(ExternalRecordContent.Source(objectID: id, globalIdentifier: globalIdentifiers[id], values: values))
        }
        return out
    }

    /// Keeps a failure: the error, the objects to write later (or a full
    /// rebuild when too many wait), and tells observers.
    private func noteFailure(_ error: Error, missed: Set<ManagedObjectID>, rebuild: Bool, store: PersistentStore) {
        withStateLock {
            lastErrorValue = error
            if rebuild { needsRebuildFlag = true }
            if !needsRebuildFlag {
                pendingIDs.formUnion(missed)
                if pendingIDs.count > Self.pendingLimit {
                    pendingIDs.removeAll()
                    needsRebuildFlag = true
                }
            }
        }
        NotificationCenter.default.post(name: PersistentStore.externalRecordsDidFailNotification, object: store,
                                        userInfo: [NSUnderlyingErrorKey: error])
    }
}
