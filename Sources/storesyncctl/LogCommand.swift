import ArgumentParser
import Foundation
import ObjectGraph
import StoreSync

/// `storesyncctl log`: the change log of sync groups, read from the store
/// and hub files themselves (the daemon need not run), read-only and safe
/// while the daemon and applications write (`SyncChangeLog`).
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show the change log: every transaction of a group's stores and hub, with author, time, objects and values.",
        discussion: """
            Transactions come in time order across the hub and the stores, each with its \
            source and position, time, author (storesync for the sync engine, which names \
            what it did: a pull from a store into the hub, a push of a hub position into a \
            store, a resolution), context name, and every object it changed: entity, global \
            ID, insert/update/delete, and properties with old and new values (relationships \
            as the related objects' global IDs). Hub transactions show the conflicts they \
            recorded or resolved; the engine's other bookkeeping is hidden (--bookkeeping).

            Filters combine (all must hold); a repeated option matches any of its values. \
            --entity, --object and --conflicts also narrow each transaction to the changes \
            they select. --since/--until take times as journalctl does: "2026-11-25 10:00:00", \
            "10:00", today, yesterday, now, -10min, -2h, -1d, "3 days ago", @EPOCH.

            Resuming: every JSON line has a "cursor"; --show-cursor prints it after the \
            last transaction. --after CURSOR shows exactly the transactions after it, none \
            twice and none missed, even when new ones were committed in between. A cursor \
            is SOURCE:POSITION per source, comma-separated (the hub's source is the group's \
            name, a store's GROUP/STORE); a source it does not name starts from its \
            beginning. The format is in docs/CHANGELOG-FORMAT.md.

            --follow waits for new transactions and prints each within a second of its \
            commit, until interrupted. It reads the history there is from the files, then \
            takes new transactions from storesyncd's change-log stream (the control socket's \
            log op) from exactly where the files left off; when the daemon is not running \
            (or stops) it says so on stderr and polls the files instead.

            Without a configuration, --store PATH --model PATH reads one store file.

            Exit statuses: 0 success (sources that cannot be read are warned about on \
            stderr); 64 bad usage, an unknown group, store, entity or a bad cursor or time; \
            65 a model or store that cannot be read; 66 a missing configuration, model or \
            store file; 78 a configuration file that cannot be used.

            Examples:
              storesyncctl log --group notes --since -1h
              storesyncctl log --store phone --entity Note --author importer
              storesyncctl log --object 0190F1A2-7B3C-7D4E-8F90-123456789ABC
              storesyncctl log --conflicts --since yesterday
              storesyncctl log --json --after 'notes:120,notes/app:45' --follow
              storesyncctl log --store /var/lib/app/App.sqlite --model App.xcdatamodeld
            """
    )

    @Option(help: "The daemon's configuration file. Default: $CONFIGURATION_DIRECTORY/storesyncd.toml, else /etc/storesyncd/storesyncd.toml.")
    var config: String?

    @Option(name: .customLong("group"), help: "Only this group (repeatable). Default: every group.")
    var groups: [String] = []

    @Option(name: .customLong("store"), help: "Only this store of a group, by name or path (repeatable; the hub is left out unless --hub). With --model: the path of a store file to read without a configuration.")
    var stores: [String] = []

    @Flag(help: "Only the hub's transactions (with --store: the hub's and those stores').")
    var hub = false

    @Option(help: "With --store PATH: the store's model (.xcdatamodeld, .xcdatamodel, .momd or .mom).")
    var model: String?

    @Option(name: .customLong("entity"), help: "Only changes to objects of this entity or its sub-entities (repeatable).")
    var entities: [String] = []

    @Option(name: .customLong("object"), help: "Only changes to this object, by global ID (repeatable).")
    var objects: [String] = []

    @Option(name: .customLong("author"), help: "Only transactions by this author (repeatable); '' selects foreign writers (no author), storesync the sync engine.")
    var authors: [String] = []

    // Unconditional: "-10min" is a value here, not an option (as journalctl reads it).
    @Option(parsing: .unconditional, help: "Only transactions committed at or after this time.")
    var since: String?

    @Option(parsing: .unconditional, help: "Only transactions committed at or before this time.")
    var until: String?

    @Flag(help: "Only transactions involved in a conflict the hub recorded (waiting or resolved), narrowed to the conflicting objects.")
    var conflicts = false

    @Flag(help: "Also show the engine's bookkeeping in the hub (cursors, pending pushes, conflict rows).")
    var bookkeeping = false

    @Option(help: "Show only transactions after this cursor (from --show-cursor or a JSON line's \"cursor\").")
    var after: String?

    @Flag(help: "Print one JSON object per transaction per line (docs/CHANGELOG-FORMAT.md).")
    var json = false

    @Flag(name: [.customShort("f"), .long], help: "Keep running and print new transactions as they are committed.")
    var follow = false

    @Flag(help: "After the last transaction (in --follow, whenever it is caught up), print '-- cursor: CURSOR'.")
    var showCursor = false

    @Option(help: "With --follow: storesyncd's control socket (default: the configuration's control_socket).")
    var socket: String?

    @Option(help: "With --follow: seconds to wait for storesyncd to open the stream.")
    var timeout: Double = 10

    func validate() throws {
        if model != nil {
            guard stores.count == 1 else { throw ValidationError("--model reads one store file: give exactly one --store PATH") }
            if !groups.isEmpty { throw ValidationError("--group needs the configuration; --store PATH --model PATH reads one file without it") }
            if hub { throw ValidationError("--hub needs a group; --store PATH --model PATH reads one store file") }
            if conflicts { throw ValidationError("--conflicts needs a group (its hub records conflicts); --store PATH --model PATH reads one store file") }
            if config != nil { throw ValidationError("--config and --model exclude each other: --store PATH --model PATH reads one file without a configuration") }
        }
        for object in objects where UUID(uuidString: object) == nil {
            throw ValidationError("--object \(object): not a global ID (a UUID such as 0190F1A2-7B3C-7D4E-8F90-123456789ABC)")
        }
    }

    /// The log as the options describe it.
    func makeLog(now: Date = Date(), resuming cursor: ChangeLogPosition? = nil) throws -> SyncChangeLog {
        var filter = ChangeLogFilter()
        do {
            filter.since = try since.map { try JournalTime.parse($0, now: now) }
            filter.until = try until.map { try JournalTime.parse($0, now: now) }
        } catch let failure as JournalTime.Failure {
            throw CommandFailure(message: "--since/--until: \(failure)", exitCode: SysExit.usage)
        }
        filter.entities = entities.isEmpty ? nil : Set(entities)
        filter.objects = objects.isEmpty ? nil : Set(objects.compactMap(UUID.init(uuidString:)))
        filter.authors = authors.isEmpty ? nil : Set(authors)
        filter.onlyConflicts = conflicts
        filter.includesBookkeeping = bookkeeping
        let position: ChangeLogPosition
        do {
            position = try cursor ?? after.map { try ChangeLogPosition(parsing: $0) } ?? .start
        } catch {
            throw CommandFailure(message: "--after: \(error)", exitCode: SysExit.usage)
        }

        if let model {
            let url = try GroupLookup.checkStoreFile(stores[0])
            do {
                return try SyncChangeLog(storeAt: url, model: try GroupLookup.model(model), filter: filter, after: position)
            } catch let error as ChangeLogError {
                throw CommandFailure(message: "\(error)", exitCode: SysExit.usage)
            }
        }
        let configuration = try GroupLookup.configuration(config)
        if !stores.isEmpty {
            // A store may be named by its path too, as the configuration gives it.
            let byPath = Dictionary(configuration.groups.flatMap { $0.stores.map { ($0.path.standardizedFileURL.path, $0.name) } },
                                    uniquingKeysWith: { first, _ in first })
            filter.stores = Set(stores.map { byPath[URL(fileURLWithPath: $0).standardizedFileURL.path] ?? $0 })
            filter.includesHub = hub
        } else if hub {
            filter.stores = []
        }
        do {
            return try SyncChangeLog(groups: try GroupLookup.groups(groups, in: configuration), filter: filter, after: position)
        } catch let error as ChangeLogError {
            throw CommandFailure(message: "\(error) in \(configuration.file)", exitCode: SysExit.usage)
        }
    }

    func run() throws {
        var log: SyncChangeLog
        do {
            log = try makeLog()
        } catch {
            return try CommandOutcome.failure(error).perform()
        }
        if follow {
            // Following ends by a signal. A parent may have spawned us with
            // them blocked (Foundation's Process passes its thread's mask on),
            // which would make `kill` and Ctrl-C do nothing.
            var signals = sigset_t()
            sigemptyset(&signals)
            for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
            pthread_sigmask(SIG_UNBLOCK, &signals, nil)
        }
        let printer = LogPrinter(json: json, colour: LogPrinter.wantsColour())
        // In --follow the cursor is shown once caught up, history or not.
        var printedSinceCursor = true
        var triedDaemon = false
        while true {
            do {
                while let entry = try log.next() {
                    // Unbuffered, so a reader of a pipe sees each entry at once.
                    FileHandle.standardOutput.write(Data(try printer.text(entry).utf8))
                    printedSinceCursor = true
                }
            } catch {
                warn(log)
                return try CommandOutcome.failure(error).perform()
            }
            warn(log)
            if showCursor && (printedSinceCursor || !follow) {
                FileHandle.standardOutput.write(Data("-- cursor: \(log.position)\n".utf8))
                printedSinceCursor = false
            }
            guard follow else { return }
            if !triedDaemon, model == nil {
                // Once: a daemon that went away is not looked for again.
                triedDaemon = true
                let stream = LogStreamFollower(command: self, printer: printer, log: log)
                let cursor = stream.follow(printedSinceCursor: &printedSinceCursor)
                if cursor != log.position {
                    do {
                        log.close()
                        log = try makeLog(resuming: cursor)
                    } catch {
                        return try CommandOutcome.failure(error).perform()
                    }
                }
                continue
            }
            // Polling the files (one small query per source); 200 ms keeps
            // a commit within a second.
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    private func warn(_ log: SyncChangeLog) {
        for problem in log.takeProblems() {
            FileHandle.standardError.write(Data("storesyncctl: warning: \(problem)\n".utf8))
        }
    }

    /// Everything a run without --follow prints, for tests.
    func execute(now: Date = Date()) -> CommandOutcome {
        do {
            let log = try makeLog(now: now)
            defer { log.close() }
            let printer = LogPrinter(json: json, colour: false)
            var outcome = CommandOutcome()
            while let entry = try log.next() { outcome.standardOutput += try printer.text(entry) }
            if showCursor { outcome.standardOutput += "-- cursor: \(log.position)\n" }
            for problem in log.takeProblems() { outcome.standardError += "storesyncctl: warning: \(problem)\n" }
            return outcome
        } catch {
            return CommandOutcome.failure(error)
        }
    }
}

/// How `log` prints an entry: git-log-like text for people, or one JSON line.
struct LogPrinter {
    var json: Bool
    var colour: Bool

    /// Colour only on a terminal, and never with `NO_COLOR` set (no-color.org).
    static func wantsColour() -> Bool {
        isatty(STDOUT_FILENO) != 0 && ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true
    }

    static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS xxx"
        return formatter
    }()

    private func paint(_ text: String, _ code: String) -> String {
        colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }

    func text(_ entry: ChangeLogEntry) throws -> String {
        if json { return try entry.jsonLine() + "\n" }
        var out = paint("transaction \(entry.source) \(entry.position)", "33") + "\n"
        out += "Date:     \(Self.timeFormatter.string(from: entry.timestamp))\n"
        switch (entry.author, entry.engineWrite) {
        case (_, let write?): out += "Author:   storesync (\(write))\n"
        case (let author?, nil): out += "Author:   \(author)\n"
        case (nil, nil): out += "Author:   (foreign writer: no author)\n"
        }
        if let context = entry.contextName { out += "Context:  \(context)\n" }
        for event in entry.conflictEvents {
            switch event {
            case let .recorded(id, store, object, entity, kind):
                out += paint("Conflict: \(id) recorded: \(store)'s change to \(entity) \(object.uuidString) (\(kind))", "31") + "\n"
            case let .resolved(id, taking):
                out += "Conflict: \(id) resolved, taking \(taking == "hub" ? "the hub's object" : "the store's object")\n"
            }
        }
        if !entry.conflicts.isEmpty { out += "Involved: conflict \(entry.conflicts.map(String.init).joined(separator: ", "))\n" }
        out += "\n"
        for change in entry.changes {
            let kindColour = change.kind == .insert ? "32" : change.kind == .delete ? "31" : "36"
            out += "    " + paint(change.kind.rawValue, kindColour) + " \(change.entity) \(change.globalIdentifier.uuidString)\n"
            for property in change.properties {
                if let line = Self.line(property, change.kind) { out += "        \(property.name): \(line)\n" }
            }
        }
        if entry.changes.isEmpty && entry.conflictEvents.isEmpty { out += "    (no object changed)\n" }
        return out + "\n"
    }

    /// A property's part: `old → new` for updates, the value for inserts
    /// and deletes (nil values and empty to-manys left out), `+ID -ID` for
    /// to-manys; nil when there is nothing to say.
    static func line(_ property: ChangeLogPropertyChange, _ kind: ChangeLogChange.Kind) -> String? {
        if property.isToMany {
            let parts = property.added.map { "+" + $0.uuidString } + property.removed.map { "-" + $0.uuidString }
                + property.positions.sorted { $0.value < $1.value }.map { "\($0.key.uuidString)@\($0.value)" }
            return parts.isEmpty ? nil : parts.joined(separator: " ")
        }
        switch kind {
        case .update: return "\(property.old?.text ?? "nil") → \(property.new?.text ?? "nil")"
        case .insert: return property.new.flatMap { $0 == .null ? nil : $0.text }
        case .delete: return property.old.flatMap { $0 == .null ? nil : $0.text }
        }
    }
}
