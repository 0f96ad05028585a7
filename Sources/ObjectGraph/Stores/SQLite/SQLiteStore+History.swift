import Foundation

// Persistent history in the SQLite store: switching it on, the bookkeeping
// of each save, reading and deleting history, global identifiers. The
// tables and triggers are `SQLiteHistorySchema`'s; docs/HISTORY.md has the
// whole design.
extension SQLiteStore {
    // MARK: - Switching on, checking, switching off

    /// Called by `load()` with the connection and schema in place: reads the
    /// file's history tables (if any) and, with `persistentHistoryTrackingKey`
    /// on, installs them. A damaged history or one of an unknown format fails
    /// the open when the option asks for history; without the option the
    /// store opens (its data stays readable) and history requests report the
    /// problem.
    func loadHistory(_ db: SQLiteConnection, schema: SQLiteSchema) throws {
        history = nil
        historyProblem = nil
        let wanted = boolOption(Self.persistentHistoryTrackingKey)
        let layout = SQLiteHistorySchema(schema)
        let hasTables = try !db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'OGH_META'").isEmpty
        if hasTables {
            do {
                try checkHistory(db, layout: layout)
                if wanted && !isReadOnly { try installTriggers(db, layout: layout, onlyMissing: true) }
                history = layout
                lastSeenDataVersion = try db.dataVersion()
                try keepStatementJournalInMemory(db)
            } catch let problem as CoreDataError {
                if wanted { throw problem }
                historyProblem = problem
            }
            return
        }
        guard wanted else { return }
        guard !isReadOnly else {
            throw CoreDataError(.persistentStoreOpen,
                                "persistent history is not on in the store at \(url?.path ?? "?"); open it writable once with \(Self.persistentHistoryTrackingKey) to switch it on",
                                userInfo: [CoreDataError.filePathErrorKey: url?.path ?? ""])
        }
        try db.transaction {
            for sql in layout.createTableStatements() { try db.prepareUncached(sql).run() }
            for sql in layout.assignExistingIdentifiersStatements() { try db.prepareUncached(sql).run() }
            try installTriggers(db, layout: layout, onlyMissing: false)
        }
        history = layout
        lastSeenDataVersion = try db.dataVersion()
        try keepStatementJournalInMemory(db)
    }

    /// With triggers on its tables, SQLite journals every row a statement
    /// writes (a statement journal); past 64 KiB it spills to a temporary
    /// file, making each row several system calls. Kept in memory unless the
    /// store's pragmas say otherwise.
    private func keepStatementJournalInMemory(_ db: SQLiteConnection) throws {
        guard !isReadOnly, (options[Self.pragmasOption] as? [String: String])?["temp_store"] == nil else { return }
        try db.execute("PRAGMA temp_store = MEMORY")
    }

    private func checkHistory(_ db: SQLiteConnection, layout: SQLiteHistorySchema) throws {
        let place = url?.path ?? "?"
        func damaged(_ why: String) -> CoreDataError {
            CoreDataError(.persistentStoreOpen, "the persistent history in the store at \(place) is damaged: \(why)",
                          userInfo: [CoreDataError.filePathErrorKey: place])
        }
        do {
            let tables = Set(try db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'OGH\\_%' ESCAPE '\\'").compactMap { $0[0].stringValue })
            for needed in ["OGH_META", "OGH_STATE", "OGH_GLOBALID", "OGH_TRANSACTION", "OGH_CHANGE", "OGH_COLUMN", "OGH_JOIN"] where !tables.contains(needed) {
                throw damaged("table \(needed) is missing")
            }
            guard let format = try db.query("SELECT VALUE FROM OGH_META WHERE KEY = 'format'").first?.first else { throw damaged("OGH_META has no format row") }
            guard format.int64Value == SQLiteHistorySchema.formatVersion else {
                throw CoreDataError(.persistentStoreOpen,
                                    "the persistent history in the store at \(place) has format \(format), which this version does not read (it reads format \(SQLiteHistorySchema.formatVersion))",
                                    userInfo: [CoreDataError.filePathErrorKey: place])
            }
            var recorded: [String: [String]] = [:]
            for row in try db.query("SELECT TBL, NAME FROM OGH_COLUMN ORDER BY TBL, POSITION") {
                recorded[row[0].stringValue ?? "", default: []].append(row[1].stringValue ?? "")
            }
            for table in layout.tables where recorded[table.name] ?? [] != table.columns.map(\.name) {
                throw damaged("history was recorded for other columns of \(table.name) (\((recorded[table.name] ?? []).joined(separator: ", "))) than the model's (\(table.columns.map(\.name).joined(separator: ", "))); migrate the history or remove it with SQLiteStore.removePersistentHistory(fromStoreAt:)")
            }
            let joins = Dictionary(try db.query("SELECT ID, NAME FROM OGH_JOIN").map { ($0[0].int64Value ?? 0, $0[1].stringValue ?? "") }, uniquingKeysWith: { a, _ in a })
            for join in layout.joins where joins[Int64(join.id)] != join.name {
                throw damaged("join table \(join.name) is not numbered \(join.id) in OGH_JOIN")
            }
            let columns = Set(try db.query("SELECT name FROM pragma_table_info('OGH_CHANGE')").compactMap { $0[0].stringValue })
            for needed in ["ID", "TX", "TIMESTAMP", "KIND", "ENT", "PK", "GID", "MASK"] + layout.valueColumns where !columns.contains(needed) {
                throw damaged("OGH_CHANGE has no column \(needed)")
            }
        } catch let error as CoreDataError where error.code == .sqlite {
            throw damaged(error.message)
        }
    }

    /// Installs the layout's triggers. On a file that has them
    /// (`onlyMissing`), those missing are added and those whose SQL is not
    /// this version's (an older build wrote them; same records, other cost)
    /// are replaced, all in one transaction.
    private func installTriggers(_ db: SQLiteConnection, layout: SQLiteHistorySchema, onlyMissing: Bool) throws {
        var existing: [String: String] = [:]
        if onlyMissing {
            for row in try db.query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'") {
                if let name = row[0].stringValue { existing[name] = row[1].stringValue ?? "" }
            }
        }
        let stale = layout.triggers().filter { existing[$0.name] != $0.sql }
        guard !stale.isEmpty else { return }
        try db.transaction {
            for trigger in stale {
                if existing[trigger.name] != nil { try db.execute("DROP TRIGGER IF EXISTS \(trigger.name)") }
                try db.prepareUncached(trigger.sql).run()
            }
        }
    }

    /// Switches persistent history off for the store file at `url`: drops
    /// its triggers and history tables (every `OGH_` object) in one
    /// transaction, keeping all data and Core Data's own tables as they are.
    /// The file must not be open in a coordinator: a store that loaded its
    /// history would fail its next save.
    ///
    /// With `exclusively`, the file is locked with SQLite's exclusive locking
    /// mode before anything is dropped, which succeeds only when no other
    /// connection (reader or writer, in any process) has the file open; the
    /// lock is held until the history is gone, so no one can open it in
    /// between. Otherwise it fails with 134090 (`persistentStoreTimeout`) and
    /// changes nothing.
    ///
    /// ```swift
    /// try SQLiteStore.removePersistentHistory(fromStoreAt: url, exclusively: true)
    /// ```
    public static func removePersistentHistory(fromStoreAt url: URL, exclusively: Bool = false) throws {
        _ = try SQLiteMetadata.metadataForStore(at: url)
        // No waiting when exclusive: another connection holds its shared lock
        // for as long as it is open, so waiting would only delay the refusal.
        let db = try openWrappingErrors(path: url.path, mode: .readWrite, busyTimeout: exclusively ? 0 : defaultTimeout)
        defer { db.close() }
        if exclusively {
            do {
                _ = try db.query("PRAGMA locking_mode = EXCLUSIVE")
                try db.execute("BEGIN EXCLUSIVE")
                try db.execute("COMMIT")
            } catch let error as CoreDataError where error.sqliteResultCode == 5 || error.code == .persistentStoreTimeout {  // SQLITE_BUSY
                throw CoreDataError(.persistentStoreTimeout,
                                    "the store at \(url.path) is open in another connection or process; close it there first",
                                    userInfo: [CoreDataError.underlyingErrorKey: error, CoreDataError.filePathErrorKey: url.path])
            }
        }
        try db.transaction {
            let objects = try db.query("SELECT type, name FROM sqlite_master WHERE name LIKE 'OGH\\_%' ESCAPE '\\' AND type IN ('trigger', 'table') ORDER BY type = 'table'")
            for row in objects {
                guard let type = row[0].stringValue, let name = row[1].stringValue else { continue }
                try db.execute("DROP \(type == "trigger" ? "TRIGGER" : "TABLE") IF EXISTS \(name)")
            }
            try db.execute("DELETE FROM sqlite_sequence WHERE name LIKE 'OGH\\_%' ESCAPE '\\'")
        }
    }

    /// True when the file records persistent history (whether or not this
    /// store was opened with the option: the triggers record every writer).
    public var isPersistentHistoryEnabled: Bool {
        lock.lock(); defer { lock.unlock() }
        return history != nil
    }

    // MARK: - Saves

    /// Starts the record of a save inside its transaction: the transaction
    /// row, the marker the triggers stamp changes with, and the global
    /// identifiers the caller chose for inserted objects. Returns the
    /// transaction number.
    func beginHistoryTransaction(_ request: StoreSaveRequest, db: SQLiteConnection) throws -> Int64? {
        guard let history else { return nil }
        try db.run("INSERT INTO OGH_TRANSACTION (TIMESTAMP, AUTHOR, CONTEXTNAME) VALUES (?, ?, ?)",
                   [.real(Date().timeIntervalSinceReferenceDate),
                    request.transactionAuthor.map(SQLiteValue.text) ?? .null, request.contextName.map(SQLiteValue.text) ?? .null])
        let tx = db.lastInsertRowID
        try db.run("UPDATE OGH_STATE SET CURRENTTX = ? WHERE ID = 1", [.integer(tx)])
        // The write lock is held: every change after this position is this save's.
        historySaveStart = try db.query("SELECT seq FROM sqlite_sequence WHERE name = 'OGH_CHANGE'").first?.first?.int64Value ?? 0
        if !request.globalIdentifiers.isEmpty {
            var tables: [ObjectIdentifier: Int] = [:]
            var rows: [AssignedIdentifier] = []
            rows.reserveCapacity(request.globalIdentifiers.count)
            for (id, gid) in request.globalIdentifiers {
                guard let pk = id.primaryKey else { continue }
                let key = ObjectIdentifier(id.entity)
                if tables[key] == nil { tables[key] = historyTable(for: id.entity, history)?.number ?? -1 }
                guard let table = tables[key], table >= 0 else { continue }
                rows.append(AssignedIdentifier(table: table, pk: pk, gid: gid))
            }
            // In key order: the rows land side by side in OGH_GLOBALID.
            rows.sort { ($0.table, $0.pk) < ($1.table, $1.pk) }
            try assignGlobalIdentifiers(rows, db: db)
        }
        return tx
    }

    /// An identifier a save assigned to one of the rows it inserts.
    private struct AssignedIdentifier {
        let table: Int
        let pk: Int64
        let gid: UUID
    }

    /// Identifiers assigned per statement: one statement per row kept a
    /// statement journal of the pages each row touched (issue 15).
    static let identifiersPerStatement = 64

    /// Writes assigned identifiers `identifiersPerStatement` at a time. A
    /// statement that meets a taken identifier writes nothing; its rows are
    /// then written one by one, which frees a dead row's identifier or names
    /// the one that is taken.
    private func assignGlobalIdentifiers(_ rows: [AssignedIdentifier], db: SQLiteConnection) throws {
        let perStatement = Self.identifiersPerStatement
        var start = 0
        if rows.count >= perStatement {
            let values = Array(repeating: "(?, ?, ?, 0)", count: perStatement).joined(separator: ", ")
            let statement = try db.prepare("INSERT INTO OGH_GLOBALID (TBL, PK, GID, DEAD) VALUES \(values) ON CONFLICT (TBL, PK) DO UPDATE SET GID = excluded.GID, DEAD = 0")
            while rows.count - start >= perStatement {
                let part = rows[start..<start + perStatement]
                start += perStatement
                statement.reset()
                var index: Int32 = 1
                for row in part {
                    try statement.bind(.integer(Int64(row.table)), at: index)
                    try statement.bind(.integer(row.pk), at: index + 1)
                    try statement.bind(.text(GlobalIdentifierText.string(row.gid)), at: index + 2)
                    index += 3
                }
                do {
                    try statement.runBound()
                } catch let error as CoreDataError where error.sqliteResultCode == 19 {  // SQLITE_CONSTRAINT: UNIQUE (GID)
                    for row in part { try assignGlobalIdentifier(row.gid, table: row.table, pk: row.pk, db: db) }
                }
            }
        }
        for row in rows[start...] { try assignGlobalIdentifier(row.gid, table: row.table, pk: row.pk, db: db) }
    }

    /// Ends the record of a save, still inside its transaction: clears the
    /// marker, and drops the transaction row when the save changed no row.
    /// It also keeps the global identifier of every row the save changed, so
    /// the did-save change set gets them without a query per object.
    func endHistoryTransaction(_ tx: Int64?, db: SQLiteConnection) throws {
        lastSaveHistoryToken = nil
        lastSaveGlobalIdentifiers = [:]
        guard let tx else { return }
        try db.run("UPDATE OGH_STATE SET CURRENTTX = NULL WHERE ID = 1")
        var last: Int64 = 0
        var identifiers: [SavedRowKey: UUID] = [:]
        try db.prepare("SELECT ID, ENT, PK, GID FROM OGH_CHANGE WHERE ID > ? AND KIND < 3").forEachRow([.integer(historySaveStart)]) { row in
            last = max(last, row.column(0).int64Value ?? 0)
            if let text = row.column(3).stringValue, let gid = GlobalIdentifierText.uuid(text) {
                identifiers[SavedRowKey(entity: Int(row.column(1).int64Value ?? 0), primaryKey: row.column(2).int64Value ?? 0)] = gid
            }
        }
        if last == 0, try db.query("SELECT 1 FROM OGH_CHANGE WHERE ID > ? LIMIT 1", [.integer(historySaveStart)]).isEmpty {
            try db.run("DELETE FROM OGH_TRANSACTION WHERE TX = ?", [.integer(tx)])
            return
        }
        if last == 0 { last = try db.query("SELECT max(ID) FROM OGH_CHANGE").first?.first?.int64Value ?? 0 }
        lastSaveHistoryToken = PersistentHistoryToken(storeIdentifier: identifier, position: last)
        lastSaveGlobalIdentifiers = identifiers
    }

    /// A row a save changed: its entity number and primary key.
    struct SavedRowKey: Hashable {
        let entity: Int
        let primaryKey: Int64
    }

    private func assignGlobalIdentifier(_ gid: UUID, table: Int, pk: Int64, db: SQLiteConnection) throws {
        let text = GlobalIdentifierText.string(gid)
        let values: [SQLiteValue] = [.integer(Int64(table)), .integer(pk), .text(text)]
        let upsert = "INSERT INTO OGH_GLOBALID (TBL, PK, GID, DEAD) VALUES (?, ?, ?, 0) ON CONFLICT (TBL, PK) DO UPDATE SET GID = excluded.GID, DEAD = 0"
        func taken(_ error: CoreDataError) -> CoreDataError {
            CoreDataError(.persistentStoreSave, "global identifier \(text) already names another object in the store at \(url?.path ?? "?")",
                          userInfo: [CoreDataError.underlyingErrorKey: error])
        }
        // One statement in the usual case; a failing one undoes only itself.
        do {
            try db.run(upsert, values)
        } catch let error as CoreDataError where error.sqliteResultCode == 19 {  // SQLITE_CONSTRAINT: UNIQUE (GID)
            // A dead row may hold the identifier (the object was deleted here and
            // comes back from another store): it gives it up. A live one keeps it.
            try db.run("DELETE FROM OGH_GLOBALID WHERE GID = ? AND DEAD = 1 AND NOT (TBL = ? AND PK = ?)", [.text(text), .integer(Int64(table)), .integer(pk)])
            guard db.changes > 0 else { throw taken(error) }
            do {
                try db.run(upsert, values)
            } catch let again as CoreDataError where again.sqliteResultCode == 19 {
                throw taken(again)
            }
        }
    }

    private func historyTable(for entity: EntityDescription, _ history: SQLiteHistorySchema) -> SQLiteHistorySchema.TrackedTable? {
        guard let mapping = schema?.entity(named: entity.name) else { return nil }
        return history.tables.first { $0.name == mapping.tableName }
    }

    // MARK: - Global identifiers

    /// The global identifiers of objects of this store (deleted ones
    /// included, as long as their history row is kept); objects without one
    /// are left out.
    func historyGlobalIdentifiers(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: UUID] {
        lock.lock(); defer { lock.unlock() }
        guard let history, !ids.isEmpty else { return [:] }
        let (db, schema) = try openConnection()
        let statement = try db.prepare("SELECT GID FROM OGH_GLOBALID WHERE TBL = ? AND PK = ?")
        var out: [ManagedObjectID: UUID] = [:]
        for id in ids {
            guard let pk = id.primaryKey else { continue }
            // Rows the last save changed are known without a query.
            if !lastSaveGlobalIdentifiers.isEmpty, let number = schema.entity(named: id.entity.name)?.number,
               let known = lastSaveGlobalIdentifiers[SavedRowKey(entity: number, primaryKey: pk)] {
                out[id] = known
                continue
            }
            guard let table = historyTable(for: id.entity, history) else { continue }
            try statement.forEachRow([.integer(Int64(table.number)), .integer(pk)]) { row in
                if let text = row.column(0).stringValue, let gid = GlobalIdentifierText.uuid(text) { out[id] = gid }
            }
        }
        return out
    }

    /// The ID of the live object this store holds under `globalIdentifier`, if any.
    func historyObjectID(forGlobalIdentifier globalIdentifier: UUID) throws -> ManagedObjectID? {
        lock.lock(); defer { lock.unlock() }
        guard let history else { return nil }
        let (db, schema) = try openConnection()
        guard let row = try db.query("SELECT TBL, PK FROM OGH_GLOBALID WHERE GID = ? AND DEAD = 0", [.text(GlobalIdentifierText.string(globalIdentifier))]).first,
              let number = row[0].int64Value, let pk = row[1].int64Value,
              let table = history.tables.first(where: { $0.number == Int(number) }) else { return nil }
        // The row's own entity (a sub-entity shares its root's table).
        guard let ent = try db.query("SELECT Z_ENT FROM \(table.name) WHERE Z_PK = ?", [.integer(pk)]).first?.first?.int64Value,
              let mapping = schema.entity(numbered: Int(ent)) else { return nil }
        return ManagedObjectID(entity: mapping.entity, storeIdentifier: identifier, primaryKey: pk)
    }

    /// The IDs of the live objects this store holds under `globalIdentifiers`
    /// (those it has): a query per few hundred identifiers, not per object.
    func historyObjectIDs(forGlobalIdentifiers globalIdentifiers: [UUID]) throws -> [UUID: ManagedObjectID] {
        lock.lock(); defer { lock.unlock() }
        guard let history, !globalIdentifiers.isEmpty else { return [:] }
        let (db, schema) = try openConnection()
        var byText: [String: UUID] = [:]
        byText.reserveCapacity(globalIdentifiers.count)
        for gid in globalIdentifiers { byText[GlobalIdentifierText.string(gid)] = gid }
        let texts = Array(byText.keys)
        var out: [UUID: ManagedObjectID] = [:]
        out.reserveCapacity(texts.count)
        let chunk = 500
        var start = 0
        while start < texts.count {
            let part = texts[start..<min(start + chunk, texts.count)]
            start += chunk
            var keys: [Int: [(pk: Int64, gid: UUID)]] = [:]
            let marks = Array(repeating: "?", count: part.count).joined(separator: ", ")
            // Only the full-size texts are worth keeping prepared; the last, shorter part is run once.
            func prepared(_ sql: String, _ count: Int) throws -> SQLiteStatement { count == chunk ? try db.prepare(sql) : try db.prepareUncached(sql) }
            try prepared("SELECT GID, TBL, PK FROM OGH_GLOBALID WHERE DEAD = 0 AND GID IN (\(marks))", part.count).forEachRow(part.map(SQLiteValue.text)) { row in
                guard let text = row.column(0).stringValue, let gid = byText[text],
                      let table = row.column(1).int64Value, let pk = row.column(2).int64Value else { return }
                keys[Int(table), default: []].append((pk, gid))
            }
            // Each row's own entity (a sub-entity shares its root's table).
            for (number, rows) in keys {
                guard let table = history.tables.first(where: { $0.number == number }) else { continue }
                let gidByKey = Dictionary(rows.map { ($0.pk, $0.gid) }, uniquingKeysWith: { a, _ in a })
                let keyMarks = Array(repeating: "?", count: rows.count).joined(separator: ", ")
                try prepared("SELECT Z_PK, Z_ENT FROM \(table.name) WHERE Z_PK IN (\(keyMarks))", rows.count).forEachRow(rows.map { .integer($0.pk) }) { row in
                    guard let pk = row.column(0).int64Value, let ent = row.column(1).int64Value, let gid = gidByKey[pk],
                          let mapping = schema.entity(numbered: Int(ent)) else { return }
                    out[gid] = ManagedObjectID(entity: mapping.entity, storeIdentifier: identifier, primaryKey: pk)
                }
            }
        }
        return out
    }

    // MARK: - Reading history

    /// The position of the newest recorded change (nil without history).
    func historyCurrentToken() throws -> PersistentHistoryToken? {
        lock.lock(); defer { lock.unlock() }
        guard history != nil else { return nil }
        let (db, _) = try openConnection()
        let position = try db.query("SELECT seq FROM sqlite_sequence WHERE name = 'OGH_CHANGE'").first?.first?.int64Value ?? 0
        return PersistentHistoryToken(storeIdentifier: identifier, position: position)
    }

    /// The newest token when another connection committed history since
    /// the last call (the first call only records where things stand).
    func noticeRemoteCommit() throws -> PersistentHistoryToken? {
        lock.lock(); defer { lock.unlock() }
        guard history != nil else { return nil }
        let (db, _) = try openConnection()
        let version = try db.dataVersion()
        defer { lastSeenDataVersion = version }
        guard let seen = lastSeenDataVersion, seen != version else { return nil }
        let token = try historyCurrentToken()
        defer { lastSeenRemoteToken = token }
        // data_version also moves for commits that recorded nothing new.
        return token != lastSeenRemoteToken ? token : nil
    }

    private func requireHistory() throws -> SQLiteHistorySchema {
        if let history { return history }
        if let historyProblem { throw historyProblem }
        throw CoreDataError(.persistentStoreOperation, "persistent history is not on in the store at \(url?.path ?? "?") (open it with \(Self.persistentHistoryTrackingKey))",
                            userInfo: [CoreDataError.filePathErrorKey: url?.path ?? ""])
    }

    private func position(of token: PersistentHistoryToken) throws -> Int64 {
        guard token.storeIdentifier == identifier else {
            throw CoreDataError(.persistentStoreOperation,
                                "the history token \(token) belongs to store \(token.storeIdentifier), not to the store at \(url?.path ?? "?") (\(identifier))",
                                userInfo: [CoreDataError.filePathErrorKey: url?.path ?? ""])
        }
        return token.position
    }

    func historyExecute(_ request: PersistentHistoryChangeRequest) throws -> PersistentHistoryResult {
        lock.lock(); defer { lock.unlock() }
        let history = try requireHistory()
        let (db, schema) = try openConnection()
        switch request.operation {
        case .fetchAfterToken(let token):
            let after = try token.map(position(of:)) ?? 0
            let purged = try db.query("SELECT VALUE FROM OGH_META WHERE KEY = 'purgedThrough'").first?.first?.int64Value ?? 0
            if after < purged {
                throw CoreDataError(.persistentHistoryTokenExpired,
                                    "the history after position \(after) of the store at \(url?.path ?? "?") was deleted (through position \(purged))",
                                    userInfo: [CoreDataError.filePathErrorKey: url?.path ?? ""])
            }
            return .transactions(try readHistory(db, schema: schema, history: history, where: "c.ID > ?", [.integer(after)], request: request))
        case .fetchAfterDate(let date):
            let first = try db.query("""
                SELECT min(c.ID) FROM OGH_CHANGE c LEFT JOIN OGH_TRANSACTION t ON t.TX = c.TX \
                WHERE coalesce(t.TIMESTAMP, c.TIMESTAMP) >= ?
                """, [.real(date.timeIntervalSinceReferenceDate)]).first?.first?.int64Value
            guard let first else { return .transactions([]) }
            return .transactions(try readHistory(db, schema: schema, history: history, where: "c.ID >= ?", [.integer(first)], request: request))
        case .deleteThroughToken(let token):
            var through = try position(of: token)
            if let floor = request.committedBefore {
                // Commit order and time agree (up to clocks of different writers):
                // the newest change both through the token and older than the floor.
                through = try db.query("""
                    SELECT max(c.ID) FROM OGH_CHANGE c LEFT JOIN OGH_TRANSACTION t ON t.TX = c.TX \
                    WHERE c.ID <= ? AND coalesce(t.TIMESTAMP, c.TIMESTAMP) < ?
                    """, [.integer(through), .real(floor.timeIntervalSinceReferenceDate)]).first?.first?.int64Value ?? 0
                if through == 0 { return .deleted(0) }
            }
            return .deleted(try deleteHistory(through: through, db: db))
        case .deleteBeforeDate(let date):
            let last = try db.query("""
                SELECT max(c.ID) FROM OGH_CHANGE c LEFT JOIN OGH_TRANSACTION t ON t.TX = c.TX \
                WHERE coalesce(t.TIMESTAMP, c.TIMESTAMP) < ?
                """, [.real(date.timeIntervalSinceReferenceDate)]).first?.first?.int64Value
            guard let last else { return .deleted(0) }
            return .deleted(try deleteHistory(through: last, db: db))
        }
    }

    private func deleteHistory(through position: Int64, db: SQLiteConnection) throws -> Int {
        try ensureWritable("delete persistent history")
        return try db.transaction {
            try db.run("DELETE FROM OGH_CHANGE WHERE ID <= ?", [.integer(position)])
            let deleted = db.changes
            // Transactions are numbered in commit order like changes: those
            // before the first remaining change's are gone (no index on TX).
            if let first = try db.query("SELECT TX FROM OGH_CHANGE WHERE TX IS NOT NULL ORDER BY ID LIMIT 1").first?.first?.int64Value {
                try db.run("DELETE FROM OGH_TRANSACTION WHERE TX < ?", [.integer(first)])
            } else {
                try db.run("DELETE FROM OGH_TRANSACTION")
            }
            try db.run("UPDATE OGH_META SET VALUE = max(VALUE, ?) WHERE KEY = 'purgedThrough'", [.integer(position)])
            return deleted
        }
    }

    /// Reads change rows in order and groups them into transactions: rows
    /// of one ObjectGraph save share a transaction number; consecutive rows
    /// without one (foreign writers) form one transaction.
    private func readHistory(_ db: SQLiteConnection, schema: SQLiteSchema, history: SQLiteHistorySchema,
                             where condition: String, _ values: [SQLiteValue], request: PersistentHistoryChangeRequest) throws -> [PersistentHistoryTransaction] {
        let decoder = SQLiteHistoryDecoder(store: self, schema: schema, history: history, db: db)
        let withChanges = request.resultType == .transactionsAndChanges
        // Without changes only the grouping columns are read: no value is decoded.
        let columns = withChanges ? ", c.KIND, c.ENT, c.PK, c.GID, c.MASK, " + history.valueColumns.map { "c.\($0)" }.joined(separator: ", ") : ""
        let sql = """
            SELECT c.ID, c.TX, coalesce(t.TIMESTAMP, c.TIMESTAMP), t.AUTHOR, t.CONTEXTNAME\(columns) \
            FROM OGH_CHANGE c LEFT JOIN OGH_TRANSACTION t ON t.TX = c.TX WHERE \(condition) ORDER BY c.ID
            """
        var transactions: [PersistentHistoryTransaction] = []
        var currentTX: Int64?? = .none   // .none: no transaction open yet
        var open: (timestamp: Date, author: String?, contextName: String?, last: Int64, accepted: Bool)?
        /// Thrown out of the row loop once `fetchLimit` transactions are complete.
        struct Enough: Error {}
        func close() throws {
            guard let open, let tx = currentTX else { return }
            guard open.accepted else { return }
            var transaction = PersistentHistoryTransaction(token: PersistentHistoryToken(storeIdentifier: identifier, position: open.last),
                                                           transactionNumber: tx, timestamp: open.timestamp, author: open.author,
                                                           contextName: open.contextName, changes: withChanges ? decoder.finishTransaction() : [])
            if let names = request.entityNames, withChanges {
                transaction.changes = transaction.changes.filter { names.contains($0.entity.name) }
                if transaction.changes.isEmpty { return }
            }
            transactions.append(transaction)
        }
        var rowsRead = 0
        // Cached: a reader paging through history runs the same few texts again and again.
        let statement = try db.prepare(sql)
        do {
            try statement.forEachRow(values) { row in
                if request.cutsTransactions && request.changeLimit > 0 && rowsRead >= request.changeLimit {
                    // Cut here, inside a transaction or at its end: the part read so far comes as one.
                    try close()
                    throw Enough()
                }
                let id = row.column(0).int64Value ?? 0
                let tx = row.column(1).int64Value
                if currentTX == nil || currentTX! != tx {
                    try close()
                    if request.fetchLimit > 0 && transactions.count >= request.fetchLimit { throw Enough() }
                    if request.changeLimit > 0 && rowsRead >= request.changeLimit { throw Enough() }
                    currentTX = .some(tx)
                    let opened = (timestamp: Date(timeIntervalSinceReferenceDate: row.column(2).doubleValue ?? 0), author: row.column(3).stringValue,
                                  contextName: row.column(4).stringValue)
                    // The author and predicate filters only need the transaction's
                    // own fields: a transaction they reject is never decoded.
                    let probe = PersistentHistoryTransaction(token: PersistentHistoryToken(storeIdentifier: identifier, position: id),
                                                             transactionNumber: tx, timestamp: opened.timestamp, author: opened.author,
                                                             contextName: opened.contextName, changes: [])
                    open = (opened.timestamp, opened.author, opened.contextName, id, try request.accepts(probe))
                }
                open?.last = id
                rowsRead += 1
                if withChanges && open?.accepted == true { try decoder.add(row: row, id: id) }
            }
        } catch is Enough {
            return transactions
        }
        try close()
        return transactions
    }
}
