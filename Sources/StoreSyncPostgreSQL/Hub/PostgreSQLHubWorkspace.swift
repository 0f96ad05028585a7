import Foundation
import ObjectGraph
import StoreSync

/// One commit's working set: the rows and join rows a batch reads and
/// changes, loaded in batches, changed in memory exactly as the embedded
/// hub's context changes its objects (`GraphAccess.apply`, ObjectGraph's
/// inverse maintenance and delete rules), then written back with few
/// statements and diffed into the commit's history. Made afresh for every
/// attempt of a commit: nothing survives a rolled-back transaction.
final class PostgreSQLHubWorkspace {
    struct Row {
        var entity: EntityDescription
        /// Column name → value (attributes typed, to-ones `UUID`, positions `Int`); absent: NULL.
        var values: [String: Any]
    }

    struct Pair: Hashable {
        var a: UUID
        var b: UUID
    }

    struct Orders: Equatable {
        var a: Int?
        var b: Int?
    }

    final class JoinState {
        var current: [Pair: Orders] = [:]
        var original: [Pair: Orders] = [:]
        var loadedA: Set<UUID> = []
        var loadedB: Set<UUID> = []
        var byA: [UUID: Set<UUID>] = [:]
        var byB: [UUID: Set<UUID>] = [:]

        func set(_ pair: Pair, _ orders: Orders?) {
            if let orders {
                current[pair] = orders
                byA[pair.a, default: []].insert(pair.b)
                byB[pair.b, default: []].insert(pair.a)
            } else {
                current[pair] = nil
                byA[pair.a]?.remove(pair.b)
                byB[pair.b]?.remove(pair.a)
            }
        }
    }

    let schema: PostgreSQLHubSchema
    let connection: PostgreSQLConnection
    private(set) var rows: [UUID: Row] = [:]
    private(set) var original: [UUID: Row] = [:]
    private var absent: Set<UUID> = []
    private var touchOrder: [UUID] = []
    private var touched: Set<UUID> = []
    private var referencingLoaded: [String: Set<UUID>] = [:]
    private var joins: [String: JoinState] = [:]
    /// "table.column" → destination → the rows in memory whose to-one
    /// column names it: the members of a derived to-many without a scan.
    private var referencing: [String: [UUID: Set<UUID>]] = [:]
    /// "table.orderColumn" → owner → the highest position given out (a
    /// member appended to an ordered to-many goes after it; gaps are harmless).
    private var lastOrder: [String: [UUID: Int]] = [:]
    /// Objects this commit inserted that the hub did not have: no row
    /// refers to them (references to missing objects are never written),
    /// so their members are not looked for.
    private var fresh: Set<UUID> = []

    init(schema: PostgreSQLHubSchema, connection: PostgreSQLConnection) {
        self.schema = schema
        self.connection = connection
    }

    /// Replaces (or removes) a row in memory, keeping `referencing`.
    private func put(_ gid: UUID, _ row: Row?) {
        if let old = rows[gid], let table = schema.table(of: old.entity) {
            for (column, value) in old.values { if let target = value as? UUID { referencing[table.name + "." + column]?[target]?.remove(gid) } }
        }
        rows[gid] = row
        if let row, let table = schema.table(of: row.entity) {
            for (column, value) in row.values { if let target = value as? UUID { referencing[table.name + "." + column, default: [:]][target, default: []].insert(gid) } }
        }
    }

    /// Sets one column of a row in memory, keeping `referencing`.
    private func setValue(_ gid: UUID, _ column: String, _ value: Any?) {
        guard let entity = rows[gid]?.entity, let table = schema.table(of: entity) else { return }
        let key = table.name + "." + column
        // In place: a copy of the row's values per change was a large batch's cost.
        if let old = rows[gid]!.values[column] as? UUID { referencing[key]?[old]?.remove(gid) }
        if let value { rows[gid]!.values[column] = value } else { rows[gid]!.values.removeValue(forKey: column) }
        if let target = value as? UUID { referencing[key, default: [:]][target, default: []].insert(gid) }
    }

    private func touch(_ gid: UUID) {
        if touched.insert(gid).inserted { touchOrder.append(gid) }
    }

    // MARK: - Loading

    /// Reads the rows of many objects (one statement per root table).
    func load<S: Sequence>(_ gids: S) throws where S.Element == UUID {
        var wanted = Set<UUID>()
        for gid in gids where rows[gid] == nil && original[gid] == nil && !absent.contains(gid) { wanted.insert(gid) }
        guard !wanted.isEmpty else { return }
        for table in schema.tables {
            for (gid, row) in try PostgreSQLHubWorkspace.readRows(table, schema: schema, connection: connection,
                                                                 where: "\"_gid\" = ANY($1::uuid[])", [PostgreSQLValueCodec.uuidArray(wanted)]) {
                put(gid, row)
                original[gid] = row
                wanted.remove(gid)
            }
        }
        absent.formUnion(wanted)
    }

    func row(_ gid: UUID) throws -> Row? {
        try load([gid])
        return rows[gid]
    }

    /// Reads the rows of `table` whose `column` names one of `owners` (the members of derived to-manys).
    func loadReferencing<S: Sequence>(_ table: PostgreSQLHubSchema.Table, column: String, owners: S) throws where S.Element == UUID {
        let key = table.name + "." + column
        // Filtered, not `subtracting`: that copies the (large) loaded set each call.
        let loaded = referencingLoaded[key] ?? []
        let wanted = Set(owners.lazy.filter { !loaded.contains($0) && !self.fresh.contains($0) })
        guard !wanted.isEmpty else { return }
        referencingLoaded[key, default: []].formUnion(wanted)
        for (gid, row) in try Self.readRows(table, schema: schema, connection: connection,
                                            where: "\(PostgreSQLHubSchema.quote(column)) = ANY($1::uuid[])", [PostgreSQLValueCodec.uuidArray(wanted)],
                                            skipping: { self.rows[$0] != nil || self.original[$0] != nil }) {
            put(gid, row)
            original[gid] = row
            absent.remove(gid)
        }
    }

    func joinState(_ join: PostgreSQLHubSchema.JoinTable) -> JoinState {
        if let state = joins[join.name] { return state }
        let state = JoinState()
        joins[join.name] = state
        return state
    }

    /// Reads the join rows of many objects on one side.
    func loadJoin<S: Sequence>(_ join: PostgreSQLHubSchema.JoinTable, sideA: Bool, _ gids: S) throws where S.Element == UUID {
        let state = joinState(join)
        let wanted = sideA ? Set(gids.lazy.filter { !state.loadedA.contains($0) && !self.fresh.contains($0) })
            : Set(gids.lazy.filter { !state.loadedB.contains($0) && !self.fresh.contains($0) })
        guard !wanted.isEmpty else { return }
        if sideA { state.loadedA.formUnion(wanted) } else { state.loadedB.formUnion(wanted) }
        let result = try connection.execute("SELECT a, b, a_order, b_order FROM \(schema.qualified(join.name)) WHERE \(sideA ? "a" : "b") = ANY($1::uuid[])",
                                            [PostgreSQLValueCodec.uuidArray(wanted)])
        for i in 0..<result.rowCount {
            guard let a = result.uuid(i, 0), let b = result.uuid(i, 1) else { continue }
            let pair = Pair(a: a, b: b)
            guard state.original[pair] == nil else { continue }
            let orders = Orders(a: result.int64(i, 2).map { Int($0) }, b: result.int64(i, 3).map { Int($0) })
            state.original[pair] = orders
            // A pair removed in memory before this side was read stays removed.
            if !removedPairs.contains(JoinPairKey(table: join.name, pair: pair)) { state.set(pair, orders) }
        }
    }

    private struct JoinPairKey: Hashable {
        var table: String
        var pair: Pair
    }
    private var removedPairs: Set<JoinPairKey> = []

    /// Rows of `table` matching a condition, decoded.
    static func readRows(_ table: PostgreSQLHubSchema.Table, schema: PostgreSQLHubSchema, connection: PostgreSQLConnection,
                         where condition: String, _ parameters: [(any PostgreSQLParameter)?],
                         skipping known: (UUID) -> Bool = { _ in false }) throws -> [(UUID, Row)] {
        let columns = ["\"_gid\"", "\"_entity\""] + table.columns.map { PostgreSQLHubSchema.quote($0.name) }
        let result = try connection.execute("SELECT \(columns.joined(separator: ", ")) FROM \(schema.qualified(table.name)) WHERE \(condition)", parameters)
        var out: [(UUID, Row)] = []
        out.reserveCapacity(result.rowCount)
        for i in 0..<result.rowCount {
            // A row already in memory is not decoded again.
            guard let gid = result.uuid(i, 0), !known(gid), let entityName = result.string(i, 1) else { continue }
            guard let entity = schema.model.entitiesByName[entityName] else {
                throw CoreDataError(.coreData, "object \(gid) in \(table.name) is of entity \(entityName), which the model does not have")
            }
            var values: [String: Any] = [:]
            for (k, column) in table.columns.enumerated() {
                guard let text = result.string(i, k + 2) else { continue }
                switch column.kind {
                case .attribute(let attribute):
                    values[column.name] = try PostgreSQLValueCodec.value(text, for: attribute, entity: entity.name)
                case .toOne:
                    guard let target = UUID(uuidString: text) else { throw CoreDataError(.coreData, "\(table.name).\(column.name) of \(gid) holds '\(text)', not a uuid") }
                    values[column.name] = target
                case .order:
                    values[column.name] = Int(text) ?? 0
                }
            }
            out.append((gid, Row(entity: entity, values: values)))
        }
        return out
    }

    // MARK: - Reading memberships

    /// The members of an owner's to-many, in order when ordered.
    func members(of owner: UUID, _ rel: RelationshipDescription) throws -> [UUID] {
        guard let storage = schema.toMany(rel) else { return [] }
        switch storage {
        case .derived(let table, let column, let orderColumn):
            try loadReferencing(table, column: column, owners: [owner])
            var found: [(Int, String, UUID)] = []
            for gid in referencing[table.name + "." + column]?[owner] ?? [] {
                guard let row = rows[gid] else { continue }
                found.append((orderColumn.flatMap { row.values[$0] as? Int } ?? Int.max, gid.uuidString, gid))
            }
            return found.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
        case .join(let join, let ownerIsA):
            try loadJoin(join, sideA: ownerIsA, [owner])
            let state = joinState(join)
            let others = (ownerIsA ? state.byA[owner] : state.byB[owner]) ?? []
            var found: [(Int, String, UUID)] = []
            for other in others {
                let pair = ownerIsA ? Pair(a: owner, b: other) : Pair(a: other, b: owner)
                let orders = state.current[pair]
                found.append(((ownerIsA ? orders?.a : orders?.b) ?? Int.max, other.uuidString, other))
            }
            return found.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
        }
    }

    // MARK: - Changing

    /// A new object with its attributes' default values (as `insertNewObject` makes it).
    func insert(_ gid: UUID, entityName: String) throws {
        guard try row(gid) == nil else { return }
        guard let entity = schema.model.entitiesByName[entityName] else {
            throw CoreDataError(.coreData, "the hub cannot insert \(gid): entity \(entityName) is not in the group's model")
        }
        var values: [String: Any] = [:]
        for case let attribute as AttributeDescription in entity.properties where !attribute.isTransient {
            if let value = try PostgreSQLValueCodec.normalized(attribute.defaultValue, for: attribute, entity: entity.name) { values[attribute.name] = value }
        }
        put(gid, Row(entity: entity, values: values))
        if original[gid] == nil { fresh.insert(gid) }
        absent.remove(gid)
        touch(gid)
    }

    /// Applies values as `GraphAccess.apply(_:to:)` does: a destination or
    /// member the hub does not hold is left out (the embedded hub's context
    /// cannot point at an object it does not have).
    func apply(_ values: [String: SyncValue], to gid: UUID) throws {
        guard let row = try row(gid) else { return }
        let entity = row.entity
        for (name, value) in values {
            guard let property = entity.propertiesByName[name], !property.isTransient else { continue }
            let rel = property as? RelationshipDescription
            switch value {
            case .attribute(let v):
                guard let attribute = property as? AttributeDescription else { continue }
                let new = try PostgreSQLValueCodec.normalized(v, for: attribute, entity: entity.name)
                setValue(gid, name, new)
                touch(gid)
            case .toOne(let target):
                guard let rel, !rel.isToMany else { continue }
                let existing = try target.flatMap { try self.row($0) != nil ? $0 : nil }
                try setToOne(gid, rel, existing)
            case .members(let gids):
                guard let rel, rel.isToMany else { continue }
                try load(gids)
                try setMembers(gid, rel, gids.filter { rows[$0] != nil })
            case .memberChange(let added, let removed, let positions):
                guard let rel, rel.isToMany else { continue }
                let keptByInverse = rel.inverseRelationship.map { !$0.isToMany } ?? false
                if !keptByInverse {
                    try load(added + removed)
                    for member in added where rows[member] != nil { try addMember(gid, rel, member) }
                    for member in removed where rows[member] != nil { try removeMember(gid, rel, member) }
                }
                if rel.isOrdered && !positions.isEmpty { try reorder(gid, rel, positions) }
            }
        }
    }

    /// Sets a to-one and keeps its inverse as ObjectGraph's context does.
    func setToOne(_ gid: UUID, _ rel: RelationshipDescription, _ target: UUID?) throws {
        guard rows[gid] != nil else { return }
        let old = rows[gid]!.values[rel.name] as? UUID
        guard old != target else { return }
        touch(gid)
        setValue(gid, rel.name, target)
        guard let inverse = rel.inverseRelationship else { return }
        if inverse.isToMany {
            // The to-many is this column; an ordered one puts the object last.
            if inverse.isOrdered {
                let orderColumn = "_order_" + rel.name
                var next: Int?
                if let target, let table = schema.table(of: rows[gid]!.entity) {
                    try loadReferencing(table, column: rel.name, owners: [target])
                    let key = table.name + "." + orderColumn
                    var last = lastOrder[key]?[target] ?? -1
                    if lastOrder[key]?[target] == nil {
                        for member in referencing[table.name + "." + rel.name]?[target] ?? [] where member != gid {
                            if let order = rows[member]?.values[orderColumn] as? Int { last = max(last, order) }
                        }
                    }
                    next = last + 1
                    lastOrder[key, default: [:]][target] = last + 1
                }
                setValue(gid, orderColumn, next)
            }
        } else {
            // One-to-one: the old partner lets go, the new one's old partner too.
            if let old, let partner = try row(old), (partner.values[inverse.name] as? UUID) == gid {
                setValue(old, inverse.name, nil)
                touch(old)
            }
            if let target, try row(target) != nil {
                if let previous = rows[target]!.values[inverse.name] as? UUID, previous != gid, let other = try row(previous),
                   (other.values[rel.name] as? UUID) == target {
                    setValue(previous, rel.name, nil)
                    touch(previous)
                }
                setValue(target, inverse.name, gid)
                touch(target)
            }
        }
    }

    /// A complete membership (members the hub holds), in order when ordered.
    func setMembers(_ owner: UUID, _ rel: RelationshipDescription, _ gids: [UUID]) throws {
        let current = try members(of: owner, rel)
        let wanted = Set(gids)
        for member in current where !wanted.contains(member) { try removeMember(owner, rel, member) }
        let have = Set(current)
        for member in gids where !have.contains(member) { try addMember(owner, rel, member) }
        if rel.isOrdered {
            var positions: [UUID: Int] = [:]
            for (i, gid) in gids.enumerated() { positions[gid] = i }
            try reorder(owner, rel, positions)
        }
    }

    func addMember(_ owner: UUID, _ rel: RelationshipDescription, _ member: UUID) throws {
        guard let storage = schema.toMany(rel) else { return }
        switch storage {
        case .derived:
            guard let inverse = rel.inverseRelationship else { return }
            try setToOne(member, inverse, owner)
        case .join(let join, let ownerIsA):
            let pair = ownerIsA ? Pair(a: owner, b: member) : Pair(a: member, b: owner)
            try loadJoin(join, sideA: true, [pair.a])
            try loadJoin(join, sideA: false, [pair.b])
            let state = joinState(join)
            guard state.current[pair] == nil else { return }
            var orders = Orders()
            if join.first.isOrdered { orders.a = ((state.byA[pair.a] ?? []).compactMap { state.current[Pair(a: pair.a, b: $0)]?.a }.max() ?? -1) + 1 }
            if join.second?.isOrdered ?? false { orders.b = ((state.byB[pair.b] ?? []).compactMap { state.current[Pair(a: $0, b: pair.b)]?.b }.max() ?? -1) + 1 }
            removedPairs.remove(JoinPairKey(table: join.name, pair: pair))
            state.set(pair, orders)
        }
    }

    func removeMember(_ owner: UUID, _ rel: RelationshipDescription, _ member: UUID) throws {
        guard let storage = schema.toMany(rel) else { return }
        switch storage {
        case .derived:
            guard let inverse = rel.inverseRelationship, let row = try row(member), (row.values[inverse.name] as? UUID) == owner else { return }
            try setToOne(member, inverse, nil)
        case .join(let join, let ownerIsA):
            let pair = ownerIsA ? Pair(a: owner, b: member) : Pair(a: member, b: owner)
            try loadJoin(join, sideA: ownerIsA, [owner])
            removedPairs.insert(JoinPairKey(table: join.name, pair: pair))
            joinState(join).set(pair, nil)
        }
    }

    /// Sorts an ordered to-many by the positions given for some members
    /// (the others keep their relative order after them), as GraphAccess does.
    func reorder(_ owner: UUID, _ rel: RelationshipDescription, _ positions: [UUID: Int]) throws {
        let current = try members(of: owner, rel)
        let sorted = current.enumerated().map { (positions[$0.element] ?? Int.max, $0.offset, $0.element) }
            .sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
        guard let storage = schema.toMany(rel) else { return }
        for (i, member) in sorted.enumerated() {
            switch storage {
            case .derived(let table, _, let orderColumn):
                guard let orderColumn, rows[member] != nil else { continue }
                if (rows[member]!.values[orderColumn] as? Int) != i { setValue(member, orderColumn, i); touch(member) }
                lastOrder[table.name + "." + orderColumn, default: [:]][owner] = max(lastOrder[table.name + "." + orderColumn]?[owner] ?? -1, i)
            case .join(let join, let ownerIsA):
                let pair = ownerIsA ? Pair(a: owner, b: member) : Pair(a: member, b: owner)
                let state = joinState(join)
                guard var orders = state.current[pair] else { continue }
                if ownerIsA { orders.a = i } else { orders.b = i }
                state.set(pair, orders)
            }
        }
    }

    /// Deletes an object and applies its relationships' delete rules
    /// (nullify, cascade, deny; no action leaves the others alone), as
    /// ObjectGraph's context does when the embedded hub deletes it.
    func delete(_ gid: UUID) throws {
        var queue = [gid]
        var doomed = Set<UUID>()
        while let next = queue.first {
            queue.removeFirst()
            guard !doomed.contains(next), let row = try row(next) else { continue }
            doomed.insert(next)
            for case let rel as RelationshipDescription in row.entity.properties where !rel.isTransient {
                let destinations: [UUID]
                if rel.isToMany {
                    destinations = try members(of: next, rel)
                } else {
                    destinations = (row.values[rel.name] as? UUID).flatMap { try? self.row($0) != nil ? $0 : nil }.map { [$0] } ?? []
                }
                switch rel.deleteRule {
                case .deny:
                    if let blocking = destinations.first(where: { !doomed.contains($0) }) {
                        throw CoreDataError(.validationRelationshipDeniedDelete,
                                            "the hub cannot delete \(row.entity.name) \(next): its \(rel.name) (deny) still holds \(blocking)",
                                            userInfo: [CoreDataError.validationKeyErrorKey: rel.name])
                    }
                case .cascade:
                    queue += destinations.filter { !doomed.contains($0) }
                    try nullifyInverse(of: next, rel, destinations)
                case .nullify:
                    try nullifyInverse(of: next, rel, destinations)
                case .noAction:
                    continue
                }
            }
            // Its join rows go with it, whatever the rule (only the tables its entity is in: no statement for the others).
            for join in schema.joinTables {
                for sideA in [true, false] {
                    let sideEntity = sideA ? join.first.entity : (join.second?.entity ?? join.first.destinationEntity)
                    guard let sideEntity, row.entity.isKindOf(entity: sideEntity) else { continue }
                    try loadJoin(join, sideA: sideA, [next])
                    let state = joinState(join)
                    for other in (sideA ? state.byA[next] : state.byB[next]) ?? [] {
                        let pair = sideA ? Pair(a: next, b: other) : Pair(a: other, b: next)
                        removedPairs.insert(JoinPairKey(table: join.name, pair: pair))
                        state.set(pair, nil)
                    }
                }
            }
            put(next, nil)
            touch(next)
        }
    }

    /// The destinations of a deleted object's relationship forget it.
    private func nullifyInverse(of gid: UUID, _ rel: RelationshipDescription, _ destinations: [UUID]) throws {
        guard let inverse = rel.inverseRelationship else { return }
        for destination in destinations where rows[destination] != nil {
            if !inverse.isToMany {
                if (rows[destination]!.values[inverse.name] as? UUID) == gid {
                    setValue(destination, inverse.name, nil)
                    if inverse.inverseRelationship?.isOrdered ?? false { setValue(destination, "_order_" + inverse.name, nil) }
                    touch(destination)
                }
            } else if case .join? = schema.toMany(inverse) {
                try removeMember(destination, inverse, gid)
            }
            // A derived inverse to-many needs nothing: it is this row's column, gone with it.
        }
    }

    // MARK: - Writing

    /// A history entry of the commit.
    struct Change {
        var gid: UUID
        var entity: String
        var kind: Character   // "i", "u", "d"
        /// Attribute and to-one names → old value text (nil: NULL); an insert's are implied.
        var changed: [String: String?]
    }

    /// Writes every changed row and join row (its `_version` = `position`)
    /// and returns the history of what changed, in the order objects were first touched.
    func write(position: Int64) throws -> [Change] {
        var changes: [Change] = []
        // Owners whose to-many changed (a member's to-one, position or join
        // row): each gets an update with no changed attribute, as a store's
        // history reports it; checked once all are known.
        var flagged: [UUID] = []
        var flaggedSet = Set<UUID>()
        func flag(_ gid: UUID?) {
            guard let gid else { return }
            if flaggedSet.insert(gid).inserted { flagged.append(gid) }
        }
        var upserts: [String: [(UUID, Row)]] = [:]
        var deletes: [String: [UUID]] = [:]
        var recorded = Set<UUID>()
        for gid in touchOrder {
            let before = original[gid]
            let after = rows[gid]
            switch (before, after) {
            case (nil, nil):
                continue
            case (nil, let row?):
                guard let table = schema.table(of: row.entity) else { continue }
                upserts[table.name, default: []].append((gid, row))
                changes.append(Change(gid: gid, entity: row.entity.name, kind: "i", changed: [:]))
                recorded.insert(gid)
                for column in table.columns { if case .toOne(let rel) = column.kind, rel.inverseRelationship?.isToMany ?? false { flag(row.values[column.name] as? UUID) } }
            case (let row?, nil):
                guard let table = schema.table(of: row.entity) else { continue }
                deletes[table.name, default: []].append(gid)
                var tombstone: [String: String?] = [:]
                for column in table.columns {
                    guard let value = row.values[column.name] else { continue }
                    switch column.kind {
                    case .attribute(let attribute):
                        guard row.entity.propertiesByName[column.name] != nil else { continue }
                        tombstone[column.name] = try PostgreSQLValueCodec.text(value, for: attribute, entity: row.entity.name)
                    case .toOne(let rel):
                        guard let target = value as? UUID else { continue }
                        tombstone[column.name] = target.uuidString
                        if rel.inverseRelationship?.isToMany ?? false { flag(target) }
                    case .order: continue
                    }
                }
                changes.append(Change(gid: gid, entity: row.entity.name, kind: "d", changed: tombstone))
                recorded.insert(gid)
            case (let old?, let new?):
                guard let table = schema.table(of: new.entity) else { continue }
                var changed: [String: String?] = [:]
                var rowChanged = false
                for column in table.columns {
                    // Equal values (dictionaries by content, as the embedded hub's
                    // `sameAttribute` compares them) are no change.
                    if ObjectState.sameAttribute(old.values[column.name], new.values[column.name]) { continue }
                    let was = try text(old.values[column.name], column, old.entity)
                    let now = try text(new.values[column.name], column, new.entity)
                    guard was != now else { continue }
                    rowChanged = true
                    switch column.kind {
                    case .attribute: changed[column.name] = .some(was)
                    case .toOne(let rel):
                        changed[column.name] = .some(was)
                        if rel.inverseRelationship?.isToMany ?? false {
                            flag(old.values[column.name] as? UUID)
                            flag(new.values[column.name] as? UUID)
                        }
                    case .order(let toMany):
                        // A new position is a change of the owner's ordered to-many.
                        if let toOne = toMany.inverseRelationship { flag(new.values[toOne.name] as? UUID) }
                    }
                }
                if rowChanged || old.entity !== new.entity { upserts[table.name, default: []].append((gid, new)) }
                if !changed.isEmpty {
                    changes.append(Change(gid: gid, entity: new.entity.name, kind: "u", changed: changed))
                    recorded.insert(gid)
                }
            }
        }
        // Join rows: removed, added, moved.
        for join in schema.joinTables {
            guard let state = joins[join.name] else { continue }
            var gone: [Pair] = []
            var put: [(Pair, Orders)] = []
            for pair in state.original.keys where state.current[pair] == nil {
                gone.append(pair)
                flag(pair.a)
                if join.second != nil { flag(pair.b) }
            }
            for (pair, orders) in state.current where state.original[pair] != orders {
                put.append((pair, orders))
                let before = state.original[pair]
                if before == nil || before?.a != orders.a { flag(pair.a) }
                if join.second != nil && (before == nil || before?.b != orders.b) { flag(pair.b) }
            }
            if !gone.isEmpty {
                try connection.execute("DELETE FROM \(schema.qualified(join.name)) WHERE (a, b) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))",
                                       [PostgreSQLValueCodec.uuidArray(gone.map(\.a)), PostgreSQLValueCodec.uuidArray(gone.map(\.b))])
            }
            var start = 0
            while start < put.count {
                let part = put[start..<min(start + 10_000, put.count)]
                var sql = "INSERT INTO \(schema.qualified(join.name)) (a, b, a_order, b_order) VALUES "
                var parameters: [(any PostgreSQLParameter)?] = []
                for (i, entry) in part.enumerated() {
                    sql += (i == 0 ? "" : ",") + "($\(4 * i + 1),$\(4 * i + 2),$\(4 * i + 3)::integer,$\(4 * i + 4)::integer)"
                    parameters += [entry.0.a, entry.0.b, entry.1.a, entry.1.b]
                }
                sql += " ON CONFLICT (a, b) DO UPDATE SET a_order = EXCLUDED.a_order, b_order = EXCLUDED.b_order"
                try connection.execute(sql, parameters)
                start += part.count
            }
        }
        try load(flagged)
        for gid in flagged where !recorded.contains(gid) && original[gid] != nil {
            guard let row = rows[gid] else { continue }
            changes.append(Change(gid: gid, entity: row.entity.name, kind: "u", changed: [:]))
        }
        for table in schema.tables {
            if let gone = deletes[table.name] {
                try connection.execute("DELETE FROM \(schema.qualified(table.name)) WHERE \"_gid\" = ANY($1::uuid[])", [PostgreSQLValueCodec.uuidArray(gone)])
            }
            if let put = upserts[table.name] { try upsert(put, into: table, position: position) }
        }
        return changes
    }

    private func text(_ value: Any?, _ column: PostgreSQLHubSchema.Column, _ entity: EntityDescription) throws -> String? {
        guard let value else { return nil }
        switch column.kind {
        case .attribute(let attribute): return try PostgreSQLValueCodec.text(value, for: attribute, entity: entity.name)
        case .toOne: return (value as? UUID)?.uuidString.lowercased()
        case .order: return (value as? Int).map(String.init)
        }
    }

    private func upsert(_ put: [(UUID, Row)], into table: PostgreSQLHubSchema.Table, position: Int64) throws {
        let names = ["_gid", "_entity", "_version"] + table.columns.map(\.name)
        let perRow = names.count
        let rowsPerStatement = max(1, 30_000 / perRow)
        var start = 0
        while start < put.count {
            let part = put[start..<min(start + rowsPerStatement, put.count)]
            var sql = "INSERT INTO \(schema.qualified(table.name)) (\(names.map(PostgreSQLHubSchema.quote).joined(separator: ", "))) VALUES "
            var parameters: [(any PostgreSQLParameter)?] = []
            parameters.reserveCapacity(part.count * perRow)
            for (i, (gid, row)) in part.enumerated() {
                sql += (i == 0 ? "(" : ",(") + (1...perRow).map { "$\(i * perRow + $0)" }.joined(separator: ",") + ")"
                parameters.append(gid)
                parameters.append(row.entity.name)
                parameters.append(position)
                for column in table.columns { parameters.append(try text(row.values[column.name], column, row.entity)) }
            }
            sql += " ON CONFLICT (\"_gid\") DO UPDATE SET " + names.dropFirst().map { "\(PostgreSQLHubSchema.quote($0)) = EXCLUDED.\(PostgreSQLHubSchema.quote($0))" }.joined(separator: ", ")
            try connection.execute(sql, parameters)
            start += part.count
        }
    }
}
