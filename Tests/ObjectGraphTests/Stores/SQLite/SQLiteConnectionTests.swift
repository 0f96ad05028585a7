import Foundation
import Testing
@testable import ObjectGraph

/// The C API wrapper: typed binding, statement cache, transactions,
/// data_version, and errors wrapped as CONST-ED-01 says.
@Suite struct SQLiteConnectionTests {
    private func scratch() throws -> String {
        try TestPaths.temporaryDirectory().appendingPathComponent("t.sqlite").path
    }

    @Test func bindsAndReadsEveryStorageClass() throws {
        let db = try SQLiteConnection(path: try scratch(), mode: .readWriteCreate)
        try db.execute("CREATE TABLE t (a, b, c, d, e)")
        let blob = Data([0, 1, 2, 255])
        try db.run("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [.null, .integer(Int64.max), .real(0.25), .text("héllo"), .blob(blob)])
        try db.run("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [.blob(Data()), .integer(-1), .real(-0.5), .text(""), .null])
        let rows = try db.query("SELECT a, b, c, d, e, typeof(a) FROM t ORDER BY rowid")
        #expect(rows[0] == [.null, .integer(Int64.max), .real(0.25), .text("héllo"), .blob(blob), .text("null")])
        // An empty blob stays a blob, not NULL.
        #expect(rows[1] == [.blob(Data()), .integer(-1), .real(-0.5), .text(""), .null, .text("blob")])
    }

    @Test func textWithNULCharactersIsBoundAndReturnedWhole() throws {
        // Text goes to SQLite by byte count: a NUL inside a Swift string does not end it.
        let db = try SQLiteConnection(path: try scratch(), mode: .readWriteCreate)
        try db.execute("CREATE TABLE t (s TEXT)")
        let text = "a\u{0}b\u{0}ç"
        try db.run("INSERT INTO t VALUES (?)", [.text(text)])
        #expect(try db.query("SELECT s, length(CAST(s AS BLOB)), typeof(s) FROM t") == [[.text(text), .integer(6), .text("text")]])
        #expect(try db.query("SELECT count(*) FROM t WHERE s = ?", [.text(text)]) == [[.integer(1)]])
        #expect(try db.query("SELECT count(*) FROM t WHERE s = ?", [.text("a")]) == [[.integer(0)]])
        try db.createFunction("og_twice", argumentCount: 1) { args in .text((args[0].stringValue ?? "") + (args[0].stringValue ?? "")) }
        #expect(try db.query("SELECT og_twice(s) FROM t") == [[.text(text + text)]])
    }

    @Test func journalModeIsWALAndStatementsAreCached() throws {
        let db = try SQLiteConnection(path: try scratch(), mode: .readWriteCreate)
        #expect(try db.query("PRAGMA journal_mode").first?.first == .text("wal"))
        let a = try db.prepare("SELECT 1")
        let b = try db.prepare("SELECT 1")
        #expect(a === b)
        #expect(try db.prepare("SELECT 2") !== a)
    }

    @Test func transactionRollsBackWhenBodyThrows() throws {
        let db = try SQLiteConnection(path: try scratch(), mode: .readWriteCreate)
        try db.execute("CREATE TABLE t (x INTEGER)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try db.query("SELECT count(*) FROM t").first?.first == .integer(0))
        try db.transaction { try db.run("INSERT INTO t VALUES (2)") }
        #expect(try db.query("SELECT x FROM t") == [[.integer(2)]])
        #expect(!db.isInTransaction)
    }

    @Test func dataVersionMovesWhenAnotherConnectionCommits() throws {
        let path = try scratch()
        let a = try SQLiteConnection(path: path, mode: .readWriteCreate)
        let b = try SQLiteConnection(path: path, mode: .readWrite)
        try a.execute("CREATE TABLE t (x)")
        let before = try a.dataVersion()
        #expect(try a.dataVersion() == before)
        try b.run("INSERT INTO t VALUES (1)")
        #expect(try a.dataVersion() != before)
    }

    /// CONST-ED-01: a SQL error is 134180 wrapping NSSQLiteErrorDomain code 1 (SQLITE_ERROR).
    @Test func sqlErrorsCarryTheSQLiteResultCode() throws {
        let db = try SQLiteConnection(path: try scratch(), mode: .readWriteCreate)
        do {
            try db.run("SELECT * FROM no_such_table")
            Issue.record("expected an error")
        } catch let error as CoreDataError {
            #expect(error.code == .sqlite)
            let underlying = try #require(error.userInfo[CoreDataError.underlyingErrorKey] as? NSError)
            #expect(underlying.domain == "NSSQLiteErrorDomain")
            #expect(underlying.code == 1)
            #expect(error.sqliteResultCode == 1)
        }
    }

    /// PC-34 / CONST-ED-01: a lock held past the busy timeout is 134090 wrapping SQLITE_BUSY (5).
    @Test func busyTimeoutGivesTimeoutErrorWithSQLiteBusy() throws {
        let path = try scratch()
        let holder = try SQLiteConnection(path: path, mode: .readWriteCreate)
        try holder.execute("CREATE TABLE t (x)")
        let waiter = try SQLiteConnection(path: path, mode: .readWrite, busyTimeout: 0.2)
        try holder.execute("BEGIN IMMEDIATE")
        defer { try? holder.execute("ROLLBACK") }
        let start = Date()
        do {
            try waiter.transaction { try waiter.run("INSERT INTO t VALUES (1)") }
            Issue.record("expected SQLITE_BUSY")
        } catch let error as CoreDataError {
            #expect(error.code == .persistentStoreTimeout)
            #expect(error.sqliteResultCode == 5)
            #expect(Date().timeIntervalSince(start) >= 0.15)
        }
    }

    @Test func readOnlyConnectionRefusesWrites() throws {
        let path = try scratch()
        let writer = try SQLiteConnection(path: path, mode: .readWriteCreate)
        try writer.execute("CREATE TABLE t (x)")
        writer.close()
        let reader = try SQLiteConnection(path: path, mode: .readOnly)
        #expect(throws: CoreDataError.self) { try reader.run("INSERT INTO t VALUES (1)") }
        do { try reader.run("INSERT INTO t VALUES (1)") } catch let error as CoreDataError {
            #expect(error.sqliteResultCode == 8)  // SQLITE_READONLY
        }
    }
}

/// Swift functions and collations callable from SQL (used to give SQL the
/// predicate language's string semantics).
@Suite struct SQLiteConnectionFunctionTests {
    @Test func swiftFunctionIsCallableFromSQL() throws {
        let db = try SQLiteConnection(path: try TestPaths.temporaryDirectory().appendingPathComponent("f.sqlite").path, mode: .readWriteCreate)
        try db.createFunction("og_reverse", argumentCount: 1) { args in
            guard let s = args[0].stringValue else { return .null }
            return .text(String(s.reversed()))
        }
        #expect(try db.query("SELECT og_reverse('abc'), og_reverse(NULL)") == [[.text("cba"), .null]])
        struct Refused: Error {}
        try db.createFunction("og_fail", argumentCount: 0) { _ in throw Refused() }
        #expect(throws: CoreDataError.self) { try db.query("SELECT og_fail()") }
    }

    @Test func swiftCollationUsesCanonicalEquivalence() throws {
        let db = try SQLiteConnection(path: try TestPaths.temporaryDirectory().appendingPathComponent("c.sqlite").path, mode: .readWriteCreate)
        try db.createCollation("OGSTRING") { a, b in a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending) }
        let decomposed = "e\u{301}"
        let composed = "\u{e9}"
        #expect(try db.query("SELECT ? = ?", [.text(decomposed), .text(composed)]) == [[.integer(0)]])
        #expect(try db.query("SELECT ? = ? COLLATE OGSTRING", [.text(decomposed), .text(composed)]) == [[.integer(1)]])
    }

    @Test func bytewiseASCIICollationSortsAsSwiftDoes() throws {
        // The ASCII shortcut (bytes, no Strings) must order exactly as the
        // Swift comparison it stands for, and leave non-ASCII text to it.
        let db = try SQLiteConnection(path: try TestPaths.temporaryDirectory().appendingPathComponent("a.sqlite").path, mode: .readWriteCreate)
        let calls = Counter()
        try db.createCollation("FASTSTRING", bytewiseWhenASCII: true) { a, b in
            calls.value += 1
            return a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending)
        }
        let texts = ["", "a", "A", "ab", "abc", "b", "Z", "z", "~", " ", "a b", "ab ", "item10", "item2", "item1",
                     "Zo\u{eb}", "Zoe\u{308}", "Zoe", "\u{e9}", "e\u{301}", "f", "\u{1F600}", "e\u{301}z", "ez"]
        try db.execute("CREATE TABLE T (V TEXT)")
        for text in texts { try db.run("INSERT INTO T VALUES (?)", [.text(text)]) }
        let sorted = try db.query("SELECT V FROM T ORDER BY V COLLATE FASTSTRING, rowid").map { row -> String in
            guard case .text(let text) = row[0] else { return "?" }
            return text
        }
        // Swift's order; canonically equal texts keep insertion order, as rowid does.
        let expected = texts.enumerated().sorted { l, r in l.element == r.element ? l.offset < r.offset : l.element < r.element }.map(\.element)
        #expect(sorted == expected)
        #expect(calls.value > 0, "non-ASCII pairs still reach the Swift comparison")
        let asciiOnly = calls.value
        try db.execute("DELETE FROM T")
        for text in ["b", "a", "c", "ab"] { try db.run("INSERT INTO T VALUES (?)", [.text(text)]) }
        _ = try db.query("SELECT V FROM T ORDER BY V COLLATE FASTSTRING")
        #expect(calls.value == asciiOnly, "ASCII pairs never reach it")
    }

    private final class Counter: @unchecked Sendable { var value = 0 }
}
