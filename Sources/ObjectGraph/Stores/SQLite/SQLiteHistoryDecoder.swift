import Foundation

/// Turns `OGH_CHANGE` rows into `PersistentHistoryChange`s, one transaction
/// at a time: values decoded to their attribute types, foreign keys to
/// global identifiers, and relationship changes reported on both sides (a
/// foreign-key change also adds and removes members of the inverse to-many;
/// a join row changes both many-to-many sides). Row changes of one object
/// in one transaction are folded into one change (see
/// `PersistentHistoryChange`).
final class SQLiteHistoryDecoder {
    private let store: SQLiteStore
    private let schema: SQLiteSchema
    private let history: SQLiteHistorySchema
    private let db: SQLiteConnection

    /// Per entity number: each tracked column's index → what it holds for that entity.
    private enum ColumnMeaning {
        case attribute(AttributeDescription)
        case toOne(RelationshipDescription, referencedTable: Int?)
        /// A to-many without inverse, kept as the owner's key on this row.
        case hiddenOwner(RelationshipDescription, referencedTable: Int?)
        /// This row's position in the ordered to-many that is the inverse of
        /// the to-one whose foreign key is tracked column `keyColumn`.
        case position(RelationshipDescription, keyColumn: Int, referencedTable: Int?)
        case ignored
    }
    private struct EntityPlan {
        let entity: EntityDescription
        let tableNumber: Int
        let columns: [ColumnMeaning]
    }
    private var plans: [Int: EntityPlan] = [:]
    private var gidByKey: [String: UUID] = [:]

    private struct Entry {
        var changeID: Int64
        var type: PersistentHistoryChangeType
        var objectID: ManagedObjectID
        var entity: EntityDescription
        var updated: Set<String> = []
        var values: [String: PersistentHistoryValueChange] = [:]
        var tombstone: [String: Any]?
        /// True once a row change of the object itself was seen (member
        /// changes alone only name the relationship's destination entity).
        var hasRow = false
    }
    private var order: [UUID] = []
    private var entries: [UUID: Entry] = [:]

    init(store: SQLiteStore, schema: SQLiteSchema, history: SQLiteHistorySchema, db: SQLiteConnection) {
        self.store = store
        self.schema = schema
        self.history = history
        self.db = db
    }

    // MARK: - Rows

    /// Adds one row read by `readHistory` (columns: ID, TX, TIMESTAMP,
    /// AUTHOR, CONTEXTNAME, KIND, ENT, PK, GID, MASK, O1, N1, …).
    func add(row: SQLiteStatement, id: Int64) throws {
        guard let kind = SQLiteHistorySchema.Kind(rawValue: row.column(5).int64Value ?? -1) else {
            throw damaged("change \(id) has an unknown kind \(row.column(5))")
        }
        let ent = Int(row.column(6).int64Value ?? 0)
        let pk = row.column(7).int64Value ?? 0
        let gidText = row.column(8).stringValue
        func old(_ k: Int) -> SQLiteValue { row.column(10 + 2 * k) }
        func new(_ k: Int) -> SQLiteValue { row.column(11 + 2 * k) }
        switch kind {
        case .joinInsert, .joinDelete:
            guard let join = history.joins.first(where: { $0.id == ent }),
                  let relationship = schema.joinTables.first(where: { $0.name == join.name })?.relationship else {
                throw damaged("change \(id) names join table \(ent), which the model does not have")
            }
            guard let first = try globalIdentifier(gidText.map(SQLiteValue.text) ?? .integer(pk), table: join.firstTable),
                  let second = try globalIdentifier(new(1).isNull ? new(0) : new(1), table: join.secondTable) else { return }
            let added = kind == .joinInsert
            memberChange(of: first, entity: relationship.entity, pk: pk, relationship: relationship.name, member: second, added: added, id: id)
            if let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity {
                memberChange(of: second, entity: destination, pk: new(0).int64Value, relationship: inverse.name, member: first, added: added, id: id)
            }
        case .insert, .update, .delete:
            let plan = try self.plan(ent, change: id)
            guard let gidText, let gid = GlobalIdentifierText.uuid(gidText) else {
                throw damaged("change \(id) of \(plan.entity.name) \(pk) has no global identifier")
            }
            let objectID = ManagedObjectID(entity: plan.entity, storeIdentifier: store.identifier, primaryKey: pk)
            let mask = Array(row.column(9).stringValue ?? "")
            var values: [String: PersistentHistoryValueChange] = [:]
            var changedNames: Set<String> = []
            var tombstone: [String: Any] = [:]
            func changed(_ k: Int) -> Bool { kind != .update || (k < mask.count && mask[k] == "1") }
            for (k, meaning) in plan.columns.enumerated() {
                if case .position(_, let keyColumn, _) = meaning {
                    // A new owner or a new position: either reports the position.
                    if !changed(k) && !changed(keyColumn) { continue }
                } else if !changed(k) { continue }
                switch meaning {
                case .ignored: continue
                case .attribute(let attribute):
                    let before = kind == .insert ? nil : try decode(old(k), attribute, plan.entity)
                    let after = kind == .delete ? nil : try decode(new(k), attribute, plan.entity)
                    if kind == .delete { if let before { tombstone[attribute.name] = before }; continue }
                    values[attribute.name] = PersistentHistoryValueChange(oldValue: before, newValue: after)
                    changedNames.insert(attribute.name)
                case .toOne(let relationship, let table):
                    let before = kind == .insert ? nil : try globalIdentifier(old(k), table: table)
                    let after = kind == .delete ? nil : try globalIdentifier(new(k), table: table)
                    if kind == .delete { if let before { tombstone[relationship.name] = before } } else {
                        values[relationship.name] = PersistentHistoryValueChange(oldValue: before, newValue: after)
                        changedNames.insert(relationship.name)
                    }
                    // The inverse to-many of the old and new destination.
                    if let inverse = relationship.inverseRelationship, inverse.isToMany, let destination = relationship.destinationEntity {
                        if let before, before != after { memberChange(of: before, entity: destination, pk: nil, relationship: inverse.name, member: gid, added: false, id: id) }
                        if let after, before != after { memberChange(of: after, entity: destination, pk: nil, relationship: inverse.name, member: gid, added: true, id: id) }
                    }
                case .position(let relationship, let keyColumn, let table):
                    // The owner is the row's foreign key after the change, recorded with every update.
                    guard kind != .delete, let position = new(k).int64Value, let inverse = relationship.inverseRelationship,
                          let owner = try globalIdentifier(new(keyColumn), table: table) else { continue }
                    memberPosition(of: owner, entity: relationship.destinationEntity, relationship: inverse.name, member: gid,
                                   position: Int(position), id: id)
                case .hiddenOwner(let relationship, let table):
                    guard let owner = relationship.entity else { continue }
                    let before = kind == .insert ? nil : try globalIdentifier(old(k), table: table)
                    let after = kind == .delete ? nil : try globalIdentifier(new(k), table: table)
                    if let before, before != after { memberChange(of: before, entity: owner, pk: nil, relationship: relationship.name, member: gid, added: false, id: id) }
                    if let after, before != after { memberChange(of: after, entity: owner, pk: nil, relationship: relationship.name, member: gid, added: true, id: id) }
                }
            }
            rowChange(gid: gid, kind: kind, objectID: objectID, entity: plan.entity, values: values, changed: changedNames,
                      tombstone: tombstone, id: id)
        }
    }

    private func rowChange(gid: UUID, kind: SQLiteHistorySchema.Kind, objectID: ManagedObjectID, entity: EntityDescription,
                           values: [String: PersistentHistoryValueChange], changed: Set<String>, tombstone: [String: Any], id: Int64) {
        guard var entry = entries[gid] else {
            let type: PersistentHistoryChangeType = kind == .insert ? .insert : kind == .update ? .update : .delete
            order.append(gid)
            entries[gid] = Entry(changeID: id, type: type, objectID: objectID, entity: entity,
                                 updated: type == .update ? changed : [], values: type == .delete ? [:] : values,
                                 tombstone: type == .delete ? tombstone : nil, hasRow: true)
            return
        }
        entry.changeID = id
        entry.objectID = objectID
        entry.entity = entity
        entry.hasRow = true
        switch kind {
        case .insert:
            // Member changes seen first belong to the insert.
            entry.type = .insert
            entry.updated = []
            entry.values.merge(values) { members, row in
                var merged = row
                merged.addedMembers = members.addedMembers
                return merged
            }
        case .update:
            for (name, change) in values {
                if var existing = entry.values[name] {
                    existing.newValue = change.newValue
                    entry.values[name] = existing
                } else {
                    entry.values[name] = change
                }
            }
            if entry.type == .update { entry.updated.formUnion(changed) }
        case .delete:
            if entry.type == .insert {
                // Made and removed in one transaction: nothing to report.
                entries[gid] = nil
                order.removeAll { $0 == gid }
                return
            }
            entry.type = .delete
            entry.updated = []
            entry.values = [:]
            entry.tombstone = tombstone
        default: break
        }
        entries[gid] = entry
    }

    private func memberChange(of owner: UUID, entity: EntityDescription?, pk: Int64?, relationship: String, member: UUID, added: Bool, id: Int64) {
        var entry: Entry
        if let existing = entries[owner] {
            entry = existing
            if entry.type == .delete { return }
        } else {
            guard let entity else { return }
            let key = pk ?? primaryKey(of: owner) ?? 0
            entry = Entry(changeID: id, type: .update, objectID: ManagedObjectID(entity: entity, storeIdentifier: store.identifier, primaryKey: key),
                          entity: entity)
            order.append(owner)
        }
        var change = entry.values[relationship] ?? PersistentHistoryValueChange()
        if added {
            if let i = change.removedMembers.firstIndex(of: member) { change.removedMembers.remove(at: i) } else { change.addedMembers.append(member) }
        } else {
            if let i = change.addedMembers.firstIndex(of: member) { change.addedMembers.remove(at: i) } else { change.removedMembers.append(member) }
        }
        entry.values[relationship] = change
        if entry.type == .update { entry.updated.insert(relationship) }
        entry.changeID = max(entry.changeID, id)
        entries[owner] = entry
    }

    private func memberPosition(of owner: UUID, entity: EntityDescription?, relationship: String, member: UUID, position: Int, id: Int64) {
        if entries[owner] == nil {
            guard let entity else { return }
            entries[owner] = Entry(changeID: id, type: .update,
                                   objectID: ManagedObjectID(entity: entity, storeIdentifier: store.identifier, primaryKey: primaryKey(of: owner) ?? 0),
                                   entity: entity)
            order.append(owner)
        }
        guard var entry = entries[owner], entry.type != .delete else { return }
        var change = entry.values[relationship] ?? PersistentHistoryValueChange()
        change.memberPositions[member] = position
        entry.values[relationship] = change
        if entry.type == .update { entry.updated.insert(relationship) }
        entry.changeID = max(entry.changeID, id)
        entries[owner] = entry
    }

    /// The changes of the transaction read so far, in the order their
    /// objects first changed; starts the next transaction.
    func finishTransaction() -> [PersistentHistoryChange] {
        defer { order = []; entries = [:] }
        return order.compactMap { gid in
            guard let e = entries[gid] else { return nil }
            var values = e.values
            // Member lists that cancelled out are no change.
            for (name, change) in values where change.oldValue == nil && change.newValue == nil
                && change.addedMembers.isEmpty && change.removedMembers.isEmpty && change.memberPositions.isEmpty && isToMany(name, e.entity) {
                values[name] = nil
            }
            var updated = e.updated
            if e.type == .update { updated = updated.filter { values[$0] != nil } }
            if e.type == .update && updated.isEmpty { return nil }
            return PersistentHistoryChange(changeID: e.changeID, changeType: e.type, changedObjectID: e.objectID, globalIdentifier: gid,
                                           entity: e.entity, updatedProperties: updated, values: values, tombstone: e.tombstone)
        }
    }

    private func isToMany(_ name: String, _ entity: EntityDescription) -> Bool {
        (entity.propertiesByName[name] as? RelationshipDescription)?.isToMany ?? false
    }

    // MARK: - Values

    private func decode(_ stored: SQLiteValue, _ attribute: AttributeDescription, _ entity: EntityDescription) throws -> Any? {
        var value = stored
        if SQLiteStore.mayStoreExternally(attribute) {
            // The file of an old external value is removed once its save
            // commits: such a value reads as nil (docs/HISTORY.md).
            value = (try? store.unframedExternalBinary(stored, attribute: attribute, entity: entity)) ?? .null
        }
        return try SQLiteValueCodec.decode(value, for: attribute)
    }

    /// A recorded foreign-key value as the destination's global identifier:
    /// recorded as one when the trigger could look it up, otherwise as the
    /// key, looked up now (identifiers of deleted rows are kept).
    private func globalIdentifier(_ stored: SQLiteValue, table: Int?) throws -> UUID? {
        switch stored {
        case .null: return nil
        case .text(let text): return GlobalIdentifierText.uuid(text)
        case .integer(let pk):
            guard let table else { return nil }
            let key = "\(table)/\(pk)"
            if let known = gidByKey[key] { return known }
            let found = try db.query("SELECT GID FROM OGH_GLOBALID WHERE TBL = ? AND PK = ?", [.integer(Int64(table)), .integer(pk)])
                .first?.first?.stringValue.flatMap(GlobalIdentifierText.uuid)
            gidByKey[key] = found
            return found
        default: return nil
        }
    }

    private func primaryKey(of gid: UUID) -> Int64? {
        try? db.query("SELECT PK FROM OGH_GLOBALID WHERE GID = ?", [.text(GlobalIdentifierText.string(gid))]).first?.first?.int64Value
    }

    private func plan(_ ent: Int, change id: Int64) throws -> EntityPlan {
        if let known = plans[ent] { return known }
        guard let mapping = schema.entity(numbered: ent),
              let table = history.tables.first(where: { $0.name == mapping.tableName }) else {
            throw damaged("change \(id) names entity number \(ent), which the model does not have")
        }
        var propertyByColumn: [String: PropertyDescription] = [:]
        for property in mapping.entity.properties where !property.isTransient {
            if let column = mapping.columnsByProperty[property.name] { propertyByColumn[column] = property }
        }
        let hidden = Dictionary(schema.hiddenOwnerColumns.compactMap { key, place -> (String, RelationshipDescription)? in
            guard place.table == mapping.tableName, let dot = key.firstIndex(of: "."),
                  let owner = schema.entity(named: String(key[..<dot]))?.entity,
                  let rel = owner.relationshipsByName[String(key[key.index(after: dot)...])] else { return nil }
            return (place.column, rel)
        }, uniquingKeysWith: { a, _ in a })
        let tableColumns = schema.table(named: mapping.tableName)?.columns ?? []
        let columns: [ColumnMeaning] = table.columns.map { column in
            if let rel = hidden[column.name] { return .hiddenOwner(rel, referencedTable: column.referencedTable) }
            if case .foreignOrder(let rel)? = tableColumns.first(where: { $0.name == column.name })?.role,
               rel.entity.map({ mapping.entity.isKindOf(entity: $0) }) ?? false,
               let keyName = mapping.columnsByProperty[rel.name], let keyColumn = table.columns.firstIndex(where: { $0.name == keyName }) {
                return .position(rel, keyColumn: keyColumn, referencedTable: table.columns[keyColumn].referencedTable)
            }
            switch propertyByColumn[column.name] {
            case let attribute as AttributeDescription: return .attribute(attribute)
            case let rel as RelationshipDescription: return .toOne(rel, referencedTable: column.referencedTable)
            default: return .ignored
            }
        }
        let plan = EntityPlan(entity: mapping.entity, tableNumber: table.number, columns: columns)
        plans[ent] = plan
        return plan
    }

    private func damaged(_ why: String) -> CoreDataError {
        CoreDataError(.persistentStoreOperation, "the persistent history in the store at \(store.url?.path ?? "?") is damaged: \(why)",
                      userInfo: [CoreDataError.filePathErrorKey: store.url?.path ?? ""])
    }
}
