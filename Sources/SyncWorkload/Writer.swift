#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph

/// A writer process's work: saves into one store through ObjectGraph, as an
/// application would, and logs each committed save (`WriterLogFile`).
///
/// A writer only touches objects it created (named `<name>-r<n>` for
/// records, `<name>-f<n>` for folders), so the final state of every object
/// is known from the logs whatever the sync engine does, and a change the
/// engine writes into this store to one of them is an echo.
public final class WorkloadWriter {
    public enum Mode: Sendable {
        /// 1–4 random operations per save: insert, update, relationship
        /// edit, delete of records and folders.
        case mixed
        /// `count` new records per save (benchmarks).
        case inserts(count: Int)
    }

    public let name: String
    public let storeName: String
    public let context: ManagedObjectContext
    private let log: WriterLogFile
    private let syncLog: Bool
    public private(set) var state: WriterState
    private let entities: (record: EntityDescription, folder: EntityDescription?)
    private let aType: AttributeType
    public private(set) var failedSaves = 0
    public private(set) var lastError: String?

    /// Opens the store (with history on) and replays the log, so a writer
    /// started again goes on where the last one stopped.
    public init(name: String, storeName: String, store url: URL, model: ManagedObjectModel, log logURL: URL, syncLog: Bool = true) throws {
        guard let record = model.entitiesByName["Record"], let nameAttribute = record.attributesByName["name"], nameAttribute.attributeType == .string,
              let a = record.attributesByName["a"], [.integer16, .integer32, .integer64].contains(a.attributeType) else {
            throw CoreDataError(.coreData, "a workload writer needs an entity Record with a string name and an integer a")
        }
        var folder: EntityDescription?
        if let relationship = record.relationshipsByName["folder"], !relationship.isToMany, let destination = relationship.destinationEntity,
           destination.attributesByName["name"]?.attributeType == .string {
            folder = destination
        }
        entities = (record, folder)
        aType = a.attributeType
        self.name = name
        self.storeName = storeName
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                           options: [PersistentStore.persistentHistoryTrackingKey: true])
        context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = "writer-\(name)"
        state = WriterState(replaying: try WriterLogFile.read(logURL).filter { $0.writer == name })
        log = try WriterLogFile(url: logURL)
        self.syncLog = syncLog
    }

    private func integer(_ value: Int64) -> Any {
        switch aType {
        case .integer16: return Int16(truncatingIfNeeded: value)
        case .integer32: return Int32(truncatingIfNeeded: value)
        default: return value
        }
    }

    private func bound(_ value: Int64) -> Int64 { aType == .integer16 ? value % 30_000 : aType == .integer32 ? value % 2_000_000_000 : value }

    /// Makes one save; returns it (as logged) or nil when the save failed
    /// (rolled back, not logged, counted in `failedSaves`).
    @discardableResult
    public func step(_ mode: Mode, _ rng: inout WorkloadRandom) -> WriterSave? {
        context.performAndWait {
            context.reset()
            var inserted: [(WriterOp, ManagedObject)] = []
            var ops: [WriterOp] = []
            do {
                switch mode {
                case .inserts(let count):
                    for _ in 0..<count { inserted.append(try insertRecord(a: Int64(state.saves + 1), folder: nil)) }
                case .mixed:
                    ops = try mixed(&rng, inserted: &inserted)
                }
                guard !inserted.isEmpty || !ops.isEmpty else { return nil }
                try context.save()
            } catch {
                failedSaves += 1
                lastError = "\(error)"
                context.rollback()
                context.reset()
                // Names handed out for this save are not reused: harmless gaps.
                return nil
            }
            let committed = monotonicNanoseconds()
            // The identifiers the store's triggers gave the new rows.
            let gids = (try? context.persistentStoreCoordinator.globalIdentifiers(for: inserted.map { $0.1.objectID })) ?? [:]
            let all = inserted.map { op, object in
                var op = op
                op.gid = gids[object.objectID]
                return op
            } + ops
            let save = WriterSave(writer: name, store: storeName, save: state.saves + 1, committedNanoseconds: committed, ops: all)
            state.apply(save)
            do { try log.append(save, sync: syncLog) } catch {
                // A change committed and not logged would count as extra: stop.
                fatalError("writer \(name): cannot append to its log: \(error)")
            }
            return save
        }
    }

    private func nextName(_ kind: String) -> String {
        state.counter += 1
        return "\(name)-\(kind)\(state.counter)"
    }

    private func insertRecord(a: Int64, folder: ManagedObject?, folderName: String? = nil) throws -> (WriterOp, ManagedObject) {
        let object = try context.insertNewObject(forEntityName: entities.record.name)
        let name = nextName("r")
        try object.setValue(name, forKey: "name")
        try object.setValue(integer(bound(a)), forKey: "a")
        if let folder { try object.setValue(folder, forKey: "folder") }
        return (WriterOp(kind: .insert, entity: "Record", name: name, a: bound(a), folder: folderName), object)
    }

    private func object(_ named: String) throws -> ManagedObject {
        guard let gid = state.objects[named]?.gid, let object = try context.existingObject(withGlobalIdentifier: gid) else {
            throw CoreDataError(.managedObjectContextReferentialIntegrity, "writer \(name): its object \(named) is not in the store")
        }
        return object
    }

    /// 1–4 operations on distinct objects of this writer.
    private func mixed(_ rng: inout WorkloadRandom, inserted: inout [(WriterOp, ManagedObject)]) throws -> [WriterOp] {
        var ops: [WriterOp] = []
        var touched = Set<String>()
        var newFolders: [String: ManagedObject] = [:]
        // Folders records were put in by this save: not deleted in it.
        var referenced = Set<String>()
        let live = state.live
        var records = live.filter { $0.entity == "Record" }.map(\.name).sorted()
        var folders = live.filter { $0.entity == "Folder" }.map(\.name).sorted()
        func pick(_ names: [String]) -> String? {
            let free = names.filter { !touched.contains($0) }
            return free.isEmpty ? nil : free[Int.random(in: 0..<free.count, using: &rng)]
        }
        func folderObject(_ folderName: String) throws -> ManagedObject {
            if let made = newFolders[folderName] { return made }
            return try object(folderName)
        }
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let roll = Int.random(in: 0..<100, using: &rng)
            let hasFolders = entities.folder != nil
            if roll < 35 || records.isEmpty {
                var folderName: String?
                if hasFolders, Bool.random(using: &rng) { folderName = folders.isEmpty ? nil : folders[Int.random(in: 0..<folders.count, using: &rng)] }
                let made = try insertRecord(a: Int64.random(in: 0...999, using: &rng), folder: try folderName.map(folderObject), folderName: folderName)
                if let folderName { referenced.insert(folderName) }
                inserted.append(made)
                touched.insert(made.0.name)
                records.append(made.0.name)
            } else if roll < 60 {
                guard let target = pick(records) else { continue }
                let record = try object(target)
                let a = bound((state.objects[target]?.a ?? 0) + Int64.random(in: 1...5, using: &rng))
                try record.setValue(integer(a), forKey: "a")
                touched.insert(target)
                ops.append(WriterOp(kind: .update, entity: "Record", name: target, a: a, folder: state.objects[target]?.folder))
            } else if roll < 72 && hasFolders {
                guard let target = pick(records) else { continue }
                let current = state.objects[target]?.folder
                let choices = folders.filter { $0 != current }
                let destination: String? = current != nil && (choices.isEmpty || Bool.random(using: &rng)) ? nil
                    : choices.isEmpty ? nil : choices[Int.random(in: 0..<choices.count, using: &rng)]
                guard destination != current else { continue }
                let record = try object(target)
                try record.setValue(try destination.map(folderObject), forKey: "folder")
                touched.insert(target)
                if let destination { referenced.insert(destination) }
                ops.append(WriterOp(kind: .update, entity: "Record", name: target, a: state.objects[target]?.a, folder: destination))
            } else if roll < 80 && hasFolders {
                let folder = try context.insertNewObject(forEntityName: entities.folder!.name)
                let folderName = nextName("f")
                try folder.setValue(folderName, forKey: "name")
                newFolders[folderName] = folder
                inserted.append((WriterOp(kind: .insert, entity: "Folder", name: folderName), folder))
                touched.insert(folderName)
                folders.append(folderName)
            } else if roll < 93 {
                guard let target = pick(records) else { continue }
                context.delete(try object(target))
                touched.insert(target)
                records.removeAll { $0 == target }
                ops.append(WriterOp(kind: .delete, entity: "Record", name: target))
            } else if hasFolders {
                // A folder goes with its records moved out first, each an
                // update of its own; only when none of them is touched yet.
                guard let target = pick(folders.filter { newFolders[$0] == nil && !referenced.contains($0) }) else { continue }
                let members = records.filter { state.objects[$0]?.folder == target }
                guard members.allSatisfy({ !touched.contains($0) }) else { continue }
                for member in members {
                    try object(member).setValue(nil, forKey: "folder")
                    touched.insert(member)
                    ops.append(WriterOp(kind: .update, entity: "Record", name: member, a: state.objects[member]?.a, folder: nil))
                }
                context.delete(try object(target))
                touched.insert(target)
                folders.removeAll { $0 == target }
                ops.append(WriterOp(kind: .delete, entity: "Folder", name: target))
            }
        }
        return ops
    }
}

/// Set by SIGTERM/SIGINT in a writer process: finish the save in flight, log it, exit 0.
nonisolated(unsafe) public var workloadStopRequested: sig_atomic_t = 0

public enum WorkloadSignals {
    public static func install() {
        signal(SIGTERM) { _ in workloadStopRequested = 1 }
        signal(SIGINT) { _ in workloadStopRequested = 1 }
        // A process inherits its parent's blocked signals (a test runner's
        // worker thread may block them): SIGTERM would wait forever.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        sigprocmask(SIG_UNBLOCK, &set, nil)
    }
}

extension WorkloadWriter {
    /// How a writer process paces its saves.
    public struct Pace: Sendable {
        /// Saves per second on a fixed schedule (a late save does not move the next one).
        public var rate: Double?
        /// Otherwise a random pause between saves, in milliseconds.
        public var pause: ClosedRange<Int>

        public init(rate: Double? = nil, pause: ClosedRange<Int> = 0...0) {
            self.rate = rate
            self.pause = pause
        }
    }

    /// Saves until `saves` more have committed or SIGTERM/SIGINT (after
    /// `WorkloadSignals.install()`); returns the number committed.
    @discardableResult
    public func run(_ mode: Mode, seed: UInt64, saves limit: Int?, pace: Pace) -> Int {
        var rng = WorkloadRandom(seed: seed)
        let start = monotonicNanoseconds()
        var committed = 0
        var attempts = 0
        var consecutiveFailures = 0
        while workloadStopRequested == 0, limit.map({ committed < $0 }) ?? true {
            attempts += 1
            if step(mode, &rng) != nil {
                committed += 1
                consecutiveFailures = 0
            } else {
                consecutiveFailures += 1
            }
            var wait: UInt64 = 0
            if let rate = pace.rate {
                let due = start + UInt64(Double(attempts) / rate * 1e9)
                let now = monotonicNanoseconds()
                wait = due > now ? due - now : 0
            } else if pace.pause.upperBound > 0 {
                wait = UInt64(Int.random(in: pace.pause, using: &rng)) * 1_000_000
            }
            // A store that keeps refusing (missing, locked) is retried gently.
            if consecutiveFailures > 0 { wait = max(wait, UInt64(min(consecutiveFailures, 20)) * 5_000_000) }
            if wait > 0 {
                var request = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                // SIGTERM interrupts the sleep (EINTR); the loop then stops.
                _ = nanosleep(&request, nil)
            }
        }
        return committed
    }
}
