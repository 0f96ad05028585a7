import Foundation
import ObjectGraph

extension SyncGroup {
    /// Reads the hub's changes after the runs' common position page by page
    /// (or the whole hub for first pushes) and writes each run its part.
    func writePages(_ runs: [PushRun]) throws {
        let writing = runs.filter(\.writing)
        guard let lead = writing.first else { return }
        func write(_ page: [UUID], changes: [HubChange]?, first: Bool) throws {
            let current = writing.filter(\.writing)
            var parts: [[UUID]] = []
            var union = Set<UUID>()
            for run in current {
                var gids = changes.map { $0.filter { $0.origin != run.member.name }.map(\.globalIdentifier) } ?? page
                if first { gids += run.pending }
                let objects = Array(Set(gids).subtracting(run.held))
                parts.append(objects)
                union.formUnion(objects)
            }
            guard !union.isEmpty else { return }
            let states = try hubStates(Array(union))
            for (run, objects) in zip(current, parts) {
                do { try writePage(run, objects, states) } catch { run.failure = error }
            }
        }
        if !lead.full {
            var from = lead.pushed
            var first = true
            while true {
                let page: (changes: [HubChange], through: Int64)
                do {
                    // One store alone skips its own pulls unread; several read them and each leaves out its own.
                    page = try hub.changes(after: from, excludingOrigin: writing.count == 1 ? lead.member.name : nil, changeLimit: chunkChanges)
                } catch let error as CoreDataError where error.code == .persistentHistoryTokenExpired && first {
                    // Purged past the stores' position: the whole hub instead.
                    for run in writing { run.full = true }
                    break
                } catch {
                    throw HubReadFailure(underlying: error)
                }
                try write([], changes: page.changes, first: first)
                first = false
                if page.through == from || page.through >= lead.hubPosition { break }
                from = page.through
            }
        }
        if lead.full {
            // The stores' first push, or their position was purged: the whole hub.
            let all: [UUID]
            do { all = try hub.allObjects() } catch { throw HubReadFailure(underlying: error) }
            var start = 0
            repeat {
                try write(Array(all[start..<min(start + chunkChanges, all.count)]), changes: nil, first: start == 0)
                start += chunkChanges
            } while start < all.count
            // Written whole, the hub's objects alone would leave in the store
            // those the hub deleted since the store last received anything (a
            // first push the hub did not get to record, and so made again, or
            // a position the hub's history no longer reaches): the store's
            // received position then moves past their deletes for good. The
            // push runs only when the hub has every change of the store, so
            // what the store holds and the hub does not is what the hub
            // deleted (a held object waits for its conflict).
            let kept = Set(all)
            for run in writing where run.writing {
                do {
                    let member = run.member
                    let roots = configuration.model.entities.filter { $0.superentity == nil }
                    let gone = try member.context.performAndWait { try member.access.globalIdentifiersOfAllObjects(of: roots) }
                        .filter { !kept.contains($0) && !run.held.contains($0) }
                    var start = 0
                    while start < gone.count {
                        try writePage(run, Array(gone[start..<min(start + chunkChanges, gone.count)]), [:])
                        start += chunkChanges
                    }
                } catch {
                    run.failure = error
                }
            }
        }
    }

    /// One save of a push: the hub states (or deletions) of `objects`.
    /// With `postponing`, an object whose to-one destination is neither in
    /// the store nor written by this save waits for the end of the push
    /// (`finishPush`), where it is written once after its destination:
    /// written now, it would be written again once the destination came, two
    /// engine writes for one hub change (`ReferenceOrder`).
    func writePage(_ run: PushRun, _ objects: [UUID], _ states: [UUID: ObjectState], postponing: Bool = true) throws {
        guard !objects.isEmpty else { return }
        let member = run.member
        run.wroteObjects = true
        statistics.largestPushSave = max(statistics.largestPushSave, objects.count)
        try member.context.performAndWait {
            defer { member.access.reset() }
            member.context.name = "push:\(run.hubPosition)"
            try member.access.load(objects + objects.compactMap { states[$0] }.flatMap { ObjectState.references($0.values) })
            var objects = objects, states = states
            // What these two add can be deletes and memberships in turn (a
            // record deleted with its folder, which the hub deleted too, and
            // the folder's other records): until nothing more is added.
            // What each delete or membership changes besides itself (by identifier).
            var changedAlongside: [UUID: Set<UUID>] = [:]
            var from = 0
            while from < objects.count {
                let end = objects.count
                changedAlongside.merge(try writeRelatedObjectsOfDeletes(member, &objects, &states, from: from, excluded: run.held)) { $0.union($1) }
                changedAlongside.merge(try writeMembersMovedByMemberships(member, &objects, &states, from: from, until: end, excluded: run.held)) { $0.union($1) }
                from = end
            }
            // In identifier-text order; each text made once, not per comparison.
            var ordered = objects.map { ($0.uuidString, $0) }.sorted { $0.0 < $1.0 }.map(\.1)
            if postponing {
                var waiting = try forwardReferences(ordered, states, member.access)
                if !waiting.isEmpty {
                    // A delete whose related object waits waits with it: deleted
                    // now, its delete rule would change that object here, before
                    // the object's own write at the end. Likewise an owner whose
                    // membership moves a waiting member (out of the folder now,
                    // into its hub destination at the end: two writes).
                    // A chain of these (a record, its folder, the folder's records) waits whole.
                    var grew = true
                    while grew {
                        grew = false
                        for (changer, changed) in changedAlongside where waiting[changer] == nil && !changed.isDisjoint(with: waiting.keys) {
                            waiting[changer] = []
                            grew = true
                        }
                    }
                    run.postponed.merge(waiting) { $1 }
                    run.again += ordered.filter { waiting[$0] != nil }
                    ordered.removeAll { waiting[$0] != nil }
                }
            }
            for gid in ordered where states[gid] == nil {
                if let object = try member.access.object(gid) { member.context.delete(object) }
            }
            try deleteMembersTheHubNoLongerHas(member, ordered, Set(objects).union(run.held), states)
            for gid in ordered {
                guard let state = states[gid] else { continue }
                if try member.access.object(gid) == nil { _ = try member.access.insert(state.entityName, gid: gid) }
            }
            for gid in ordered {
                guard let state = states[gid], let object = try member.access.object(gid) else { continue }
                member.access.clearMissedReference()
                try member.access.apply(state.values, to: object)
                if member.access.missedReference { run.again.append(gid) }
            }
            try member.context.save()
        }
    }

    /// The objects of a page with a to-one destination that is neither in
    /// the store nor written by the page (nor itself waiting), with their
    /// destinations.
    func forwardReferences(_ objects: [UUID], _ states: [UUID: ObjectState], _ access: GraphAccess) throws -> [UUID: [UUID]] {
        let written = Set(objects.filter { states[$0] != nil })
        var waiting: [UUID: [UUID]] = [:]
        var changed = true
        while changed {
            changed = false
            for gid in objects where waiting[gid] == nil {
                guard let state = states[gid] else { continue }
                let destinations = ReferenceOrder.toOneDestinations(state.values)
                for destination in destinations where written.contains(destination) ? waiting[destination] != nil : try access.object(destination) == nil {
                    waiting[gid] = destinations
                    changed = true
                    break
                }
            }
        }
        return waiting
    }

    /// Objects this page deletes have delete rules: deleting them would
    /// change the store's objects related to them (a nulled to-one, a
    /// membership dropped), an engine write of those that the hub's history
    /// may bring only in a later page, where the object is written again:
    /// two writes for its one hub change. Those related objects (not held)
    /// are written in this page instead, with their hub state (which the
    /// later page then writes again unchanged: no row changes), or deleted
    /// here when the hub deleted them too. The push comes to that anyway:
    /// it runs only when the hub has every change of the store, so the hub's
    /// states are what the store must end with.
    /// Returns the related objects of each object the page deletes (by identifier).
    @discardableResult
    func writeRelatedObjectsOfDeletes(_ member: Member, _ objects: inout [UUID], _ states: inout [UUID: ObjectState],
                                      from: Int = 0, excluded: Set<UUID>) throws -> [UUID: Set<UUID>] {
        var deleted: [(UUID, ManagedObject)] = []
        for gid in objects[from...] where states[gid] == nil {
            if let object = try member.access.object(gid) { deleted.append((gid, object)) }
        }
        guard !deleted.isEmpty else { return [:] }
        let inPage = Set(objects)
        var related: [UUID] = []
        var byDeleted: [UUID: Set<UUID>] = [:]
        for ((gid, _), objects) in zip(deleted, try member.access.relatedObjectsByObject(of: deleted.map(\.1))) {
            for object in objects where !object.isDeleted {
                guard let id = try member.access.globalIdentifier(of: object), !excluded.contains(id) else { continue }
                byDeleted[gid, default: []].insert(id)
                if !inPage.contains(id) { related.append(id) }
            }
        }
        guard !related.isEmpty else { return byDeleted }
        let hubStates = try hubStates(Array(Set(related)))
        for id in Set(related) {
            objects.append(id)
            states[id] = hubStates[id]
        }
        try member.access.load(hubStates.values.flatMap { ObjectState.references($0.values) })
        return byDeleted
    }

    /// A membership written whole (`.members`) of a to-many kept by its
    /// members' to-ones moves members in or out: their rows change in this
    /// save. Their own states may come in a later page of the push, a second
    /// write of them for one hub change. So the members it moves (present in
    /// the store, not held) are written in this save with their hub state
    /// (deleted, when the hub no longer has them); the later page then
    /// writes them unchanged.
    /// Returns the members each owner's memberships move (by identifier), those in the page included.
    @discardableResult
    func writeMembersMovedByMemberships(_ member: Member, _ objects: inout [UUID], _ states: inout [UUID: ObjectState],
                                        from: Int = 0, until: Int? = nil, excluded: Set<UUID>) throws -> [UUID: Set<UUID>] {
        let inPage = Set(objects)
        var moved = Set<UUID>()
        var byOwner: [UUID: Set<UUID>] = [:]
        for gid in objects[from..<(until ?? objects.count)] {
            guard let state = states[gid], let entity = configuration.model.entitiesByName[state.entityName] else { continue }
            // An owner the page inserts has no members in the store yet.
            let owner = try member.access.object(gid)
            for (name, value) in state.values {
                guard case .members(let listed) = value, let rel = entity.propertiesByName[name] as? RelationshipDescription,
                      rel.isToMany, rel.inverseRelationship.map({ !$0.isToMany }) == true else { continue }
                let current = try owner?.value(forKey: name)
                let members = ((current as? [ManagedObject]) ?? (current as? Set<ManagedObject>).map(Array.init) ?? []).filter { !$0.isDeleted }
                try member.access.learnGlobalIdentifiers(of: members)
                let now = Set(try members.compactMap(member.access.globalIdentifier(of:)))
                for id in now.symmetricDifference(listed) where !excluded.contains(id) {
                    byOwner[gid, default: []].insert(id)
                    if !inPage.contains(id), try member.access.object(id) != nil { moved.insert(id) }
                }
            }
        }
        guard !moved.isEmpty else { return byOwner }
        let hubStates = try hubStates(Array(moved))
        for id in moved {
            objects.append(id)
            states[id] = hubStates[id]
        }
        try member.access.load(hubStates.values.flatMap { ObjectState.references($0.values) })
        return byOwner
    }

    /// A membership written whole (`.members`) leaves out the members the
    /// hub no longer has. When such a member's delete comes in a later page
    /// of the same push (the states written are the hub's as it is now, the
    /// pages are its history in order), writing the membership first would
    /// unlink it (its to-one nulled, or its own membership changed): an
    /// engine write of it that the hub never made, then the delete. Those
    /// members are deleted here instead, in this page's save, which is what
    /// the push comes to anyway (the store has no unpulled change: the push
    /// runs only then, under the store's write lock).
    func deleteMembersTheHubNoLongerHas(_ member: Member, _ ordered: [UUID], _ excluded: Set<UUID>,
                                                _ states: [UUID: ObjectState]) throws {
        // The memberships written whole, with the store's current members of each.
        var written: [(kept: Set<UUID>, members: [ManagedObject])] = []
        for gid in ordered {
            guard let state = states[gid], let object = try member.access.object(gid) else { continue }
            for (name, value) in state.values {
                guard case .members(let kept) = value,
                      let rel = object.entity.propertiesByName[name] as? RelationshipDescription, rel.isToMany else { continue }
                let current = try object.value(forKey: name)
                let members = ((current as? [ManagedObject]) ?? (current as? Set<ManagedObject>).map(Array.init) ?? []).filter { !$0.isDeleted }
                if !members.isEmpty { written.append((Set(kept), members)) }
            }
        }
        guard !written.isEmpty else { return }
        // One identifier query for every member, not one per member (a push's hot path).
        try member.access.learnGlobalIdentifiers(of: written.flatMap(\.members))
        var candidates: [UUID: ManagedObject] = [:]
        for (kept, members) in written {
            for object in members {
                // A member in this page is written by its own state; a held one
                // (a conflict waiting) is not the push's to delete.
                guard let id = try member.access.globalIdentifier(of: object), !kept.contains(id), !excluded.contains(id) else { continue }
                candidates[id] = object
            }
        }
        guard !candidates.isEmpty else { return }
        let present = try hubStates(Array(candidates.keys))
        for (id, object) in candidates where present[id] == nil && !object.isDeleted { member.context.delete(object) }
    }

    /// Ends a push inside its store transaction: objects that missed a
    /// reference written again, then the received position (and a mark when
    /// no row changed) in the store's metadata.
    func finishPush(_ run: PushRun) throws {
        let member = run.member
        var seen = Set<UUID>()
        let missed = ReferenceOrder.destinationsFirst(run.again.filter { seen.insert($0).inserted }, dependencies: run.postponed)
        run.again = []
        run.postponed = [:]
        var start = 0
        while start < missed.count {
            let page = Array(missed[start..<min(start + chunkChanges, missed.count)])
            try writePage(run, page, try hubStates(page), postponing: false)
            start += chunkChanges
        }
        let after = try member.coordinator.currentPersistentHistoryToken(fromStores: [member.store])?.position ?? 0
        member.receivedPosition = run.hubPosition
        if after == run.before {
            // Nothing changed in the store, so no push transaction marks the
            // base in its history: keep a mark in its metadata instead.
            try recordPushMark(member, storePosition: run.before, hubPosition: run.hubPosition)
        } else {
            try run.store.save(StoreSaveRequest())
        }
        run.reached = after
    }
}
