import Foundation
import Testing
@testable import ObjectGraph

/// `fetchBatchSize` (FR-* in framework-classes-1 §9.3): `fetchBatched(_:)`
/// gives every match's ID first and materializes objects batch by batch,
/// with the same elements as `fetch(_:)`.
@Suite struct ContextBatchedFetchingTests {
    static func sqliteStack(_ url: URL) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        try Company.stack(type: PersistentStoreCoordinator.sqliteStoreType, url: url)
    }

    /// `count` departments D0000… with budget i, saved through the store
    /// itself (one transaction, no objects, nothing left in any cache).
    static func populate(_ url: URL, count: Int) throws {
        try populate(try sqliteStack(url).0, count: count)
    }

    static func populate(_ coordinator: PersistentStoreCoordinator, count: Int) throws {
        let store = coordinator.persistentStores[0]
        let entity = coordinator.managedObjectModel.entitiesByName["Department"]!
        var request = StoreSaveRequest()
        request.inserted = try store.newObjectIDs(for: entity, count: count).enumerated().map { i, id in
            StoreSnapshot(objectID: id, version: 1, values: ["name": name(i), "budget": Decimal(i)])
        }
        try store.save(request)
    }

    static func name(_ i: Int) -> String { "D" + String(repeating: "0", count: max(0, 6 - String(i).count)) + String(i) }

    @Test(arguments: [PersistentStoreCoordinator.sqliteStoreType, PersistentStoreCoordinator.inMemoryStoreType])
    func batchedResultsEqualAPlainFetchWithPendingChangesOverlaid(_ storeType: String) throws {
        // FR-* fetchBatchSize, MOC-FE-04…07 (pending insert, delete and edit
        // overlaid); SQLite answers pages exactly, the in-memory store a superset
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("batched.sqlite")
        let (coordinator, context) = try Company.stack(type: storeType, url: storeType == PersistentStoreCoordinator.sqliteStoreType ? url : nil)
        try Self.populate(coordinator, count: 60)
        try context.performAndWait {
            let all = try context.fetch(Company.request("Department", sortedBy: "name"), as: DepartmentMO.self)
            all[5].name = "Z-updated"          // moves to the end of the sort
            all[7].budget = 0                  // no longer matches budget >= 3
            context.delete(all[10])            // pending delete
            _ = try Company.department(context, "D-new", budget: 50)   // pending insert
            all[20].name = nil                 // nil sorts first
            let requests: [AnyFetchRequest] = [
                Company.request("Department", where: "budget >= 3", sortedBy: "name"),
                Company.request("Department", where: "budget >= 3 AND employees.@count == 0", sortedBy: "name"),   // evaluated on objects
                Company.request("Department"),
                { let r = Company.request("Department", where: "budget < 40", sortedBy: "name"); r.fetchOffset = 5; r.fetchLimit = 20; return r }(),
                { let r = FetchRequest(entityName: "Department"); r.sortDescriptors = [FetchSortDescriptor(key: "budget", ascending: false), FetchSortDescriptor(key: "name")]; return r }(),
            ]
            for request in requests {
                let plain = try context.fetch(request)
                request.fetchBatchSize = 7
                let batched = try context.fetchBatched(request)
                #expect(batched.count == plain.count)
                #expect(batched.objectIDs == plain.map(\.objectID), "\(request.predicate.map { "\($0)" } ?? "all")")
                #expect(batched.map { ObjectIdentifier($0) } == plain.map { ObjectIdentifier($0) })
                #expect(batched.batchSize == 7)
            }
            // Batch size 0: a loaded collection over fetch(_:).
            let unbatched = try context.fetchBatched(Company.request("Department", sortedBy: "name"))
            #expect(unbatched.map(\.objectID) == (try context.fetch(Company.request("Department", sortedBy: "name"))).map(\.objectID))
        }
    }

    @Test func onlyTheCurrentBatchIsMaterialized() throws {
        // FR-* fetchBatchSize: IDs first, one batch of objects at a time, values from the store
        let url = try TestPaths.temporaryDirectory().appendingPathComponent("lazy.sqlite")
        try Self.populate(url, count: 1_000)
        let (_, context) = try Self.sqliteStack(url)
        try context.performAndWait {
            let request = Company.request("Department", where: "budget >= 100", sortedBy: "name")
            request.fetchBatchSize = 100
            let results = try context.fetchBatched(request)
            #expect(results.count == 900)
            #expect(results.batchesLoaded == 0 && results.materializedCount == 0)
            #expect(context.registeredObjects.isEmpty)
            func nameAt(_ i: Int) -> String? { (results[i] as! DepartmentMO).name }
            #expect(nameAt(0) == Self.name(100))
            #expect(results.materializedCount == 100 && results.batchesLoaded == 1)
            #expect(context.registeredObjects.count == 100)
            #expect(context.registeredObjects.allSatisfy { !$0.isFault })
            #expect(nameAt(99) == Self.name(199) && results.batchesLoaded == 1)
            #expect(nameAt(250) == Self.name(350))
            #expect(results.batchesLoaded == 2 && results.materializedCount == 100)
            #expect(context.registeredObjects.count == 100)   // the first batch was released
            #expect(results.map { ($0 as! DepartmentMO).budget } == (100..<1000).map { Decimal($0) })
        }
    }

    @Test func walkingOneHundredThousandObjectsKeepsMemoryBounded() async throws {
        // FR-* fetchBatchSize: 100,000 rows, batch size 500, resident memory
        // growth under 64 MB. The store is written by one child process and
        // walked in another, so neither the insert nor tests running in
        // parallel in this process count towards the measurement.
        let path = try TestPaths.temporaryDirectory().appendingPathComponent("big.sqlite").path
        await #expect(processExitsWith: .success) { [path = path as String] in
            try ContextBatchedFetchingTests.populate(URL(fileURLWithPath: path), count: 100_000)
        }
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            try ContextBatchedFetchingTests.walk(path: path, count: 100_000, batchSize: 500)
        }
        // The child checks what is materialized; the memory verdict is made
        // here so a failure shows the numbers.
        let report = String(decoding: try #require(result).standardErrorContent, as: UTF8.self)
        let line = try #require(report.split(separator: "\n").first { $0.hasPrefix("batched walk") })
        let growth = try #require(line.split(separator: " ").first { $0.hasPrefix("growthKB=") }.flatMap { Int($0.dropFirst(9)) })
        #expect(growth < 64 * 1024, "\(line)")
        print(line)
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// Kibibytes of a `/proc/self/status` line (VmRSS, VmHWM).
    static func status(_ key: String) -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix(key + ":") {
            return Int(line.split(separator: " ").dropFirst().first { Int($0) != nil } ?? "") ?? -1
        }
        return -1
    }

    /// Runs in a child process: walks every object once, dropping each,
    /// checking at each batch start that one batch is materialized, and
    /// reports the memory numbers on standard error.
    static func walk(path: String, count: Int, batchSize: Int) throws {
        let started = Date()
        let (_, context) = try sqliteStack(URL(fileURLWithPath: path))
        // Resetting the high-water mark (clear_refs 5) makes VmHWM the peak of
        // the walk alone; where that is refused, sampled VmRSS stands in.
        let resetPeak = (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
        let baseline = status("VmRSS")
        var sampledPeak = baseline
        try context.performAndWait {
            let request = Company.request("Department", sortedBy: "name")
            request.fetchBatchSize = batchSize
            let results = try context.fetchBatched(request)
            guard results.count == count else { throw Failure(description: "\(results.count) results, expected \(count)") }
            sampledPeak = max(sampledPeak, status("VmRSS"))
            for i in results.indices {
                let name = (results[i] as! DepartmentMO).name
                guard name == Self.name(i) else { throw Failure(description: "element \(i) is \(name ?? "nil")") }
                if i % batchSize == batchSize - 1 {
                    let registered = context.registeredObjects.count
                    guard results.materializedCount == batchSize, registered <= batchSize else {
                        throw Failure(description: "at \(i): \(results.materializedCount) materialized, \(registered) registered")
                    }
                    sampledPeak = max(sampledPeak, status("VmRSS"))
                }
            }
            guard results.batchesLoaded == (count + batchSize - 1) / batchSize else {
                throw Failure(description: "\(results.batchesLoaded) batches loaded")
            }
        }
        let peak = resetPeak ? max(status("VmHWM"), sampledPeak) : sampledPeak
        FileHandle.standardError.write(Data("batched walk of \(count) objects, batch \(batchSize): baseline VmRSS \(baseline) kB, peak \(peak) kB (VmHWM reset: \(resetPeak)) growthKB=\(peak - baseline) \(String(format: "%.1f", Date().timeIntervalSince(started))) s\n".utf8))
    }
}
