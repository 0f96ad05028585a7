import Foundation
import ObjectGraph
import StoreSync

/// The hub of a sync group in PostgreSQL, so the daemons of several hosts
/// share one group: the group's objects in tables derived from the model
/// (see `PostgreSQLHubSchema`), the hub's history, each store's cursor,
/// pending objects and conflicts. It answers and commits exactly as
/// `EmbeddedHub` does; concurrency between daemons is PostgreSQL's
/// (serialisable transactions, retried on serialisation failure), never a
/// lock of ours. A commit takes the next position by updating the one row
/// of `state`, whose row lock orders commits: a reader that has seen
/// position N has seen every commit up to N.
///
/// Stores are recorded as (host, store): two hosts may both have a store
/// "s1". `cursor(for:)`, `pending(for:)` and `conflicts(store:)` answer for
/// this host's stores; a change another host's pull wrote has the origin
/// "host/store", which never equals a local store's name.
///
/// ```swift
/// let hub = try PostgreSQLHub(model: model, conninfo: "host=db.example dbname=sync", group: "notes", host: "laptop")
/// let group = try SyncGroup(configuration: configuration, hub: hub)
/// ```
public final class PostgreSQLHub: SyncHub {
    /// A store of the group as the hub knows it (for `storesyncctl status`).
    public struct StoreRecord: Sendable, Equatable {
        public var host: String
        public var store: String
        public var pulledThrough: Int64
        public var base: Int64
        public var pushedThrough: Int64
        public var needsFullPush: Bool
        /// When a commit last wrote the store's cursor.
        public var lastSeen: Date
    }

    public let connection: PostgreSQLConnection
    public let group: String
    public let host: String
    let schema: PostgreSQLHubSchema

    /// The NOTIFY channel every commit notifies; the payload is "<host> <position>",
    /// so a daemon can tell its own commits from other hosts'.
    public var notificationChannel: String { schema.name }
    public var displayName: String { "the PostgreSQL hub of group \(group) (schema \(schema.name))" }

    /// Opens (creating the schema of) the hub of `group` in the database `conninfo` names.
    /// - Throws: 134060 for a group name that cannot name a schema, or a
    ///   model the hub cannot store; 134100 when the group's hub was made for
    ///   another model; `PostgreSQLError` when the server cannot be reached.
    public convenience init(model: ManagedObjectModel, conninfo: String, group: String, host: String) throws {
        try PostgreSQLHubSchema.validate(group: group)
        try self.init(model: model, connection: try PostgreSQLConnection(conninfo), group: group, host: host)
    }

    /// Opens the hub over an open connection (the hub uses it alone from then on).
    public init(model: ManagedObjectModel, connection: PostgreSQLConnection, group: String, host: String) throws {
        guard !host.isEmpty, !host.contains("/") else {
            throw CoreDataError(.coreData, "host name '\(host)' of the PostgreSQL hub of group \(group) must be non-empty and without '/'")
        }
        schema = try PostgreSQLHubSchema(model: model, group: group)
        self.connection = connection
        self.group = group
        self.host = host
        // Shortest exact float text whatever the server's default.
        try connection.execute("SET extra_float_digits = 3")
        try openSchema()
    }

    /// Creates the schema, or checks the one there, under a transaction-scoped
    /// advisory lock so two daemons starting together do not both create it.
    private func openSchema() throws {
        let schema = self.schema
        try connection.transaction(.readCommitted) {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [schema.name])
            let exists = try connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema.name]).rowCount > 0
            guard exists else {
                try connection.executeScript(schema.creationScript())
                return
            }
            let meta = try connection.execute("SELECT key, value FROM \(schema.qualified("meta"))")
            var values: [String: String] = [:]
            for i in 0..<meta.rowCount { if let key = meta.string(i, 0) { values[key] = meta.string(i, 1) } }
            let version = values["schema_version"].flatMap { Int($0) } ?? 0
            guard version == PostgreSQLHubSchema.version else {
                // Version 1 is the first; a later one is a newer daemon's.
                throw CoreDataError(.persistentStoreIncompatibleSchema,
                                    "the PostgreSQL hub of group \(group) at \(connection.serverDescription) has schema version \(version); this daemon knows version \(PostgreSQLHubSchema.version)")
            }
            guard values["model"] == schema.fingerprint else {
                throw CoreDataError(.persistentStoreIncompatibleVersionHash,
                                    "the PostgreSQL hub of group \(group) at \(connection.serverDescription) was made for another model (entity version hashes differ)")
            }
        }
    }

    // MARK: - Transactions

    /// Runs body in one SERIALIZABLE transaction, retried from the start on
    /// serialisation failure; inside an open one, just runs it.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try writing { try connection.transaction(.serializable, body) }
    }

    /// Set when the connection broke: the next operation opens a new session first.
    private var needsReconnect = false

    private func reconnectIfNeeded() throws {
        guard needsReconnect || !connection.isConnected else { return }
        try connection.reconnect()
        try connection.execute("SET extra_float_digits = 3")
        needsReconnect = false
    }

    /// A write (or a transaction the engine opened) on a broken connection
    /// fails; it is not tried again, since it may have committed before the
    /// connection broke and its decisions were made against what it read.
    /// The next operation reconnects.
    private func writing<T>(_ body: () throws -> T) throws -> T {
        try inSession(readAgain: false, body)
    }

    /// A read outside a transaction on a broken connection (the server
    /// restarted, a failover) reconnects and is read again once.
    private func retryingRead<T>(_ body: () throws -> T) throws -> T {
        try inSession(readAgain: true, body)
    }

    /// Runs body on a live session (inside an open transaction, as it is); a
    /// broken connection is marked for reconnecting, and body runs again on
    /// a new session when `readAgain`.
    private func inSession<T>(readAgain: Bool, _ body: () throws -> T) throws -> T {
        if connection.isInTransaction { return try body() }
        try reconnectIfNeeded()
        do {
            return try body()
        } catch let error as PostgreSQLError where error.isConnectionFailure {
            needsReconnect = true
            guard readAgain else { throw error }
            try reconnectIfNeeded()
            return try body()
        }
    }

    /// Runs body against one snapshot of the hub (REPEATABLE READ), so every
    /// read in it sees the hub at one position; inside an open transaction,
    /// just runs it. A commit inside it that meets a concurrent one fails
    /// with a serialisation failure, and body runs again.
    public func snapshot<T>(_ body: () throws -> T) throws -> T {
        if connection.isInTransaction { return try body() }
        return try writing { try connection.transaction(.repeatableRead, body) }
    }

    /// A read of several statements sees one snapshot (and is read again
    /// after a reconnect: it writes nothing).
    private func reading<T>(_ body: () throws -> T) throws -> T {
        if connection.isInTransaction { return try body() }
        return try retryingRead { try connection.transaction(.repeatableRead, body) }
    }

    // MARK: - Reading

    public func currentPosition() throws -> Int64 {
        try retryingRead { try connection.execute("SELECT position FROM \(schema.qualified("state"))").int64(0, 0) ?? 0 }
    }

    public func state(of object: UUID) throws -> ObjectState? {
        try states(of: [object])[object]
    }

    public func states(of objects: [UUID]) throws -> [UUID: ObjectState] {
        guard !objects.isEmpty else { return [:] }
        return try reading {
            let workspace = PostgreSQLHubWorkspace(schema: schema, connection: connection)
            try workspace.load(objects)
            // Members of every to-many of the objects found, one statement per relationship and side.
            try preloadMemberships(workspace, objects)
            var out: [UUID: ObjectState] = [:]
            for gid in objects {
                guard let row = workspace.rows[gid] else { continue }
                var values: [String: SyncValue] = [:]
                for property in row.entity.properties where !property.isTransient {
                    switch property {
                    case let attribute as AttributeDescription:
                        values[attribute.name] = .attribute(row.values[attribute.name])
                    case let rel as RelationshipDescription where rel.isToMany:
                        var members = try workspace.members(of: gid, rel)
                        if !rel.isOrdered { members.sort { $0.uuidString < $1.uuidString } }
                        values[rel.name] = .members(members)
                    case let rel as RelationshipDescription:
                        values[rel.name] = .toOne(row.values[rel.name] as? UUID)
                    default: continue
                    }
                }
                out[gid] = ObjectState(entityName: row.entity.name, values: values)
            }
            return out
        }
    }

    public func allObjects() throws -> [UUID] {
        try reading {
            var out: [UUID] = []
            for table in schema.tables {
                let result = try connection.execute("SELECT \"_gid\" FROM \(schema.qualified(table.name)) ORDER BY \"_version\", \"_gid\"")
                for i in 0..<result.rowCount { if let gid = result.uuid(i, 0) { out.append(gid) } }
            }
            return out
        }
    }

    public func changes(after position: Int64, excludingOrigin: String?, changeLimit: Int) throws -> (changes: [HubChange], through: Int64) {
        try reading {
            let purged = try connection.execute("SELECT value FROM \(schema.qualified("meta")) WHERE key = 'purged_through'").int64(0, 0) ?? 0
            if position < purged {
                throw CoreDataError(.persistentHistoryTokenExpired,
                                    "the history of the PostgreSQL hub of group \(group) after position \(position) was deleted (through position \(purged))")
            }
            // Whole transactions while fewer than `changeLimit` changes were read (the first always).
            let limit = changeLimit > 0 ? " LIMIT \(changeLimit)" : ""
            let scan = try connection.execute("""
                SELECT position, origin_host, origin_store, change_count FROM \(schema.qualified("transactions")) \
                WHERE position > $1 ORDER BY position\(limit)
                """, [position])
            var through = position
            var read = 0
            var skipped: [Int64] = []
            for i in 0..<scan.rowCount {
                if changeLimit > 0 && i > 0 && read >= changeLimit { break }
                guard let txPosition = scan.int64(i, 0) else { continue }
                let excluded = excludingOrigin != nil && scan.string(i, 1) == host && scan.string(i, 2) == excludingOrigin
                if excluded { skipped.append(txPosition) }
                read += Int(scan.int64(i, 3) ?? 0)
                through = txPosition
            }
            guard through > position else { return ([], position) }
            let rows = try connection.execute("""
                SELECT c.position, c.gid, c.entity, c.kind, c.changed, t.origin_host, t.origin_store \
                FROM \(schema.qualified("changes")) c JOIN \(schema.qualified("transactions")) t ON t.position = c.position \
                WHERE c.position > $1 AND c.position <= $2 AND c.position <> ALL($3::bigint[]) ORDER BY c.position, c.seq
                """, [position, through, PostgreSQLValueCodec.int64Array(skipped)])
            var out: [HubChange] = []
            out.reserveCapacity(rows.rowCount)
            for i in 0..<rows.rowCount {
                out.append(try hubChange(rows, i))
            }
            return (out, through)
        }
    }

    private func hubChange(_ rows: PostgreSQLResult, _ i: Int) throws -> HubChange {
        guard let position = rows.int64(i, 0), let gid = rows.uuid(i, 1), let entityName = rows.string(i, 2), let kind = rows.string(i, 3) else {
            throw CoreDataError(.coreData, "a change row of the PostgreSQL hub of group \(group) is incomplete")
        }
        guard let entity = schema.model.entitiesByName[entityName] else {
            throw CoreDataError(.coreData, "a change at position \(position) of the PostgreSQL hub of group \(group) names entity \(entityName), which the model does not have")
        }
        var changed: [String: Any?] = [:]
        if kind == "i" {
            for property in entity.properties where !property.isTransient {
                if property is AttributeDescription || ((property as? RelationshipDescription).map { !$0.isToMany } ?? false) {
                    changed.updateValue(nil, forKey: property.name)
                }
            }
        } else {
            let json = try JSONSerialization.jsonObject(with: Data((rows.string(i, 4) ?? "{}").utf8)) as? [String: Any] ?? [:]
            for (name, stored) in json {
                let text = stored as? String
                switch entity.propertiesByName[name] {
                case let attribute as AttributeDescription:
                    changed.updateValue(try PostgreSQLValueCodec.value(text, for: attribute, entity: entityName), forKey: name)
                case is RelationshipDescription:
                    changed.updateValue(text.flatMap(UUID.init(uuidString:)), forKey: name)
                default: continue
                }
            }
        }
        let origin = rows.string(i, 6).map { store in rows.string(i, 5) == host ? store : "\(rows.string(i, 5) ?? "?")/\(store)" }
        return HubChange(position: position, origin: origin, globalIdentifier: gid, entityName: entityName,
                         isInsert: kind == "i", isDelete: kind == "d", changedProperties: changed)
    }

    public func cursor(for store: String) throws -> SyncCursor? {
        let result = try retryingRead { try connection.execute("""
            SELECT pulled_through, base, pushed_through, needs_full_push FROM \(schema.qualified("cursors")) WHERE host = $1 AND store = $2
            """, [host, store]) }
        guard result.rowCount > 0 else { return nil }
        return SyncCursor(store: store, pulledThrough: result.int64(0, 0) ?? 0, base: result.int64(0, 1) ?? 0,
                          pushedThrough: result.int64(0, 2) ?? 0, needsFullPush: result.bool(0, 3) ?? false)
    }

    public func pending(for store: String) throws -> Set<UUID> {
        let result = try retryingRead { try connection.execute("SELECT gid FROM \(schema.qualified("pending")) WHERE host = $1 AND store = $2", [host, store]) }
        return Set((0..<result.rowCount).compactMap { result.uuid($0, 0) })
    }

    public func conflicts(store: String?, includingResolved: Bool) throws -> [SyncConflict] {
        var sql = """
            SELECT number, store, gid, entity, kind, base_position, hub_position, base, incoming, hub, created_seconds \
            FROM \(schema.qualified("conflicts")) WHERE host = $1
            """
        var parameters: [(any PostgreSQLParameter)?] = [host]
        if let store { sql += " AND store = $2"; parameters.append(store) }
        if !includingResolved { sql += " AND resolution IS NULL" }
        let result = try retryingRead { try connection.execute(sql + " ORDER BY number", parameters) }
        func values(_ row: Int, _ column: Int) throws -> [String: String] {
            try JSONSerialization.jsonObject(with: Data((result.string(row, column) ?? "{}").utf8)) as? [String: String] ?? [:]
        }
        return try (0..<result.rowCount).map { i in
            SyncConflict(id: result.int64(i, 0) ?? 0, store: result.string(i, 1) ?? "", globalIdentifier: result.uuid(i, 2) ?? UUID(),
                         entityName: result.string(i, 3) ?? "", kind: SyncConflict.Kind(rawValue: result.string(i, 4) ?? "") ?? .update,
                         basePosition: result.int64(i, 5) ?? 0, hubPosition: result.int64(i, 6) ?? 0,
                         base: try values(i, 7), incoming: try values(i, 8), hub: try values(i, 9),
                         created: Date(timeIntervalSinceReferenceDate: result.double(i, 10) ?? 0))
        }
    }

    /// Every store of the group the hub knows, of every host.
    public func knownStores() throws -> [StoreRecord] {
        let result = try retryingRead { try connection.execute("""
            SELECT host, store, pulled_through, base, pushed_through, needs_full_push, extract(epoch FROM last_seen)::double precision \
            FROM \(schema.qualified("cursors")) ORDER BY host, store
            """) }
        return (0..<result.rowCount).map { i in
            StoreRecord(host: result.string(i, 0) ?? "", store: result.string(i, 1) ?? "", pulledThrough: result.int64(i, 2) ?? 0,
                        base: result.int64(i, 3) ?? 0, pushedThrough: result.int64(i, 4) ?? 0, needsFullPush: result.bool(i, 5) ?? false,
                        lastSeen: Date(timeIntervalSince1970: result.double(i, 6) ?? 0))
        }
    }

    // MARK: - Writing

    /// Commits a batch in one transaction (the engine's, when it opened one):
    /// objects as the embedded hub applies them, the history of what changed,
    /// cursors, conflicts and pending objects; then NOTIFY with this host and the new position.
    @discardableResult
    public func commit(_ batch: HubBatch) throws -> Int64 {
        guard !batch.isEmpty else { return try currentPosition() }
        return try transaction { try commitInTransaction(batch) }
    }

    private func commitInTransaction(_ batch: HubBatch) throws -> Int64 {
        // First: the row lock on `state` orders commits by position.
        guard let position = try connection.execute("UPDATE \(schema.qualified("state")) SET position = position + 1 RETURNING position").int64(0, 0) else {
            throw CoreDataError(.coreData, "the PostgreSQL hub of group \(group) has no position row")
        }
        let workspace = PostgreSQLHubWorkspace(schema: schema, connection: connection)
        // Everything the batch names, read together.
        var named: [UUID] = batch.inserts.map(\.0) + batch.updates.map(\.0) + batch.deletes
        for (_, state) in batch.inserts { named += ObjectState.references(state.values) }
        for (_, values) in batch.updates { named += ObjectState.references(values) }
        try workspace.load(named)
        // The destinations of deleted objects' to-ones (their delete rules reach them).
        try workspace.load(batch.deletes.compactMap { workspace.rows[$0] }.flatMap { $0.values.values.compactMap { $0 as? UUID } })
        try preloadMemberships(workspace, named.filter { workspace.rows[$0] != nil })
        for (gid, state) in batch.inserts { try workspace.insert(gid, entityName: state.entityName) }
        for (gid, state) in batch.inserts { try workspace.apply(state.values, to: gid) }
        for (gid, values) in batch.updates { try workspace.apply(values, to: gid) }
        for gid in batch.deletes { try workspace.delete(gid) }
        let changes = try workspace.write(position: position)
        try writeHistory(changes, position: position, origin: batch.origin)
        try writeBookkeeping(batch)
        try connection.execute("SELECT pg_notify($1, $2)", [notificationChannel, "\(host) \(position)"])
        return position
    }

    /// Reads, one statement per relationship, the members of the objects'
    /// to-manys (what deletes, memberships and orders need).
    private func preloadMemberships(_ workspace: PostgreSQLHubWorkspace, _ gids: [UUID]) throws {
        guard !gids.isEmpty else { return }
        var owners: [String: (PostgreSQLHubSchema.ToMany, Set<UUID>)] = [:]
        for gid in gids {
            guard let row = workspace.rows[gid] else { continue }
            for case let rel as RelationshipDescription in row.entity.properties where rel.isToMany && !rel.isTransient {
                guard let storage = schema.toMany(rel) else { continue }
                owners[PostgreSQLHubSchema.key(rel), default: (storage, [])].1.insert(gid)
            }
        }
        for (storage, set) in owners.values {
            switch storage {
            case .derived(let table, let column, _): try workspace.loadReferencing(table, column: column, owners: set)
            case .join(let join, let ownerIsA): try workspace.loadJoin(join, sideA: ownerIsA, set)
            }
        }
    }

    private func writeHistory(_ changes: [PostgreSQLHubWorkspace.Change], position: Int64, origin: String?) throws {
        try connection.execute("""
            INSERT INTO \(schema.qualified("transactions")) (position, origin_host, origin_store, change_count) VALUES ($1, $2, $3, $4)
            """, [position, origin == nil ? nil : host, origin, changes.count])
        var start = 0
        while start < changes.count {
            let part = changes[start..<min(start + 5_000, changes.count)]
            var sql = "INSERT INTO \(schema.qualified("changes")) (position, seq, gid, entity, kind, changed) VALUES "
            var parameters: [(any PostgreSQLParameter)?] = []
            for (i, change) in part.enumerated() {
                sql += (i == 0 ? "" : ",") + "($\(6 * i + 1)::bigint,$\(6 * i + 2)::integer,$\(6 * i + 3)::uuid,$\(6 * i + 4),$\(6 * i + 5)::\"char\",$\(6 * i + 6)::json)"
                var json: [String: Any] = [:]
                for (name, text) in change.changed { json[name] = text.map { $0 as Any } ?? NSNull() }
                let data = try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
                parameters += [position, start + i, change.gid, change.entity, String(change.kind), String(decoding: data, as: UTF8.self)]
            }
            try connection.execute(sql, parameters)
            start += part.count
        }
    }

    private func writeBookkeeping(_ batch: HubBatch) throws {
        for cursor in batch.cursors {
            try connection.execute("""
                INSERT INTO \(schema.qualified("cursors")) (host, store, pulled_through, base, pushed_through, needs_full_push, last_seen) \
                VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (host, store) DO UPDATE SET pulled_through = EXCLUDED.pulled_through, \
                base = EXCLUDED.base, pushed_through = EXCLUDED.pushed_through, needs_full_push = EXCLUDED.needs_full_push, last_seen = now()
                """, [host, cursor.store, cursor.pulledThrough, cursor.base, cursor.pushedThrough, cursor.needsFullPush])
        }
        for conflict in batch.newConflicts {
            func json(_ values: [String: String]) throws -> String {
                String(decoding: try JSONSerialization.data(withJSONObject: values, options: [.sortedKeys]), as: UTF8.self)
            }
            try connection.execute("""
                INSERT INTO \(schema.qualified("conflicts")) (host, store, gid, entity, kind, base_position, hub_position, base, incoming, hub, \
                created, created_seconds) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, to_timestamp($11::double precision + 978307200), $11::double precision)
                """, [host, conflict.store, conflict.globalIdentifier, conflict.entityName, conflict.kind.rawValue, conflict.basePosition,
                      conflict.hubPosition, try json(conflict.base), try json(conflict.incoming), try json(conflict.hub),
                      conflict.created.timeIntervalSinceReferenceDate])
        }
        for (number, resolution) in batch.resolvedConflicts {
            try connection.execute("UPDATE \(schema.qualified("conflicts")) SET resolution = $1 WHERE number = $2", [resolution.rawValue, number])
        }
        if !batch.pendingAdded.isEmpty {
            try connection.execute("""
                INSERT INTO \(schema.qualified("pending")) (host, store, gid) SELECT $1, * FROM unnest($2::text[], $3::uuid[]) ON CONFLICT DO NOTHING
                """, [host, Self.textArray(batch.pendingAdded.map(\.store)), PostgreSQLValueCodec.uuidArray(batch.pendingAdded.map(\.object))])
        }
        if !batch.pendingRemoved.isEmpty {
            try connection.execute("""
                DELETE FROM \(schema.qualified("pending")) WHERE host = $1 AND (store, gid) IN (SELECT * FROM unnest($2::text[], $3::uuid[]))
                """, [host, Self.textArray(batch.pendingRemoved.map(\.store)), PostgreSQLValueCodec.uuidArray(batch.pendingRemoved.map(\.object))])
        }
    }

    /// A PostgreSQL text[] literal (each element quoted).
    static func textArray(_ values: [String]) -> String {
        "{" + values.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }.joined(separator: ",") + "}"
    }

    /// Deletes history through a position (only what was committed before
    /// `committedBefore` when given), never past the oldest base or pushed
    /// position of any host's store: the engine only knows its own host's.
    public func purgeHistory(through position: Int64, committedBefore: Date?) throws {
        guard position > 0 else { return }
        try transaction {
            let floor = try connection.execute("SELECT min(least(base, pushed_through)) FROM \(schema.qualified("cursors"))").int64(0, 0)
            var through = min(position, floor ?? position)
            if let committedBefore {
                guard let newest = try connection.execute("""
                    SELECT max(position) FROM \(schema.qualified("transactions")) WHERE position <= $1 AND committed < to_timestamp($2::double precision)
                    """, [through, committedBefore.timeIntervalSince1970]).int64(0, 0) else { return }
                through = newest
            }
            guard through > 0 else { return }
            try connection.execute("DELETE FROM \(schema.qualified("changes")) WHERE position <= $1", [through])
            try connection.execute("DELETE FROM \(schema.qualified("transactions")) WHERE position <= $1", [through])
            try connection.execute("""
                UPDATE \(schema.qualified("meta")) SET value = greatest(value::bigint, $1::bigint)::text WHERE key = 'purged_through'
                """, [through])
        }
    }

    public func close() throws {
        connection.close()
    }
}
