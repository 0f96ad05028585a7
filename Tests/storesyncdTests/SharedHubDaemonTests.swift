#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ObjectGraph
import StoreSync
import StoreSyncConfig
import StoreSyncControl
import StoreSyncPostgreSQL
import SyncWorkload
import XCTest
import PostgreSQLTestSupport

/// Issue 19: a sync group's hub in PostgreSQL, shared by the daemons of two
/// hosts simulated on one machine (each with its own configuration, state
/// and runtime directories and `host_name`, a and b), each syncing two local
/// stores. Each test makes a group of its own (a unique name, so a schema of
/// its own) and drops it at the end.
///
/// They need the test server: skipped unless `STORESYNC_TEST_POSTGRESQL` is
/// set (`scripts/postgres start` prints it), failing when
/// `STORESYNC_REQUIRE_POSTGRESQL=1` (CI) and it is not. The server-outage
/// test runs a private cluster of its own through `scripts/postgres`.
final class SharedHubDaemonTests: XCTestCase {
    /// A save on host a's store reaches host b's stores through LISTEN/NOTIFY,
    /// well before the fallback poll (60 s) or the safety timer (60 s) could
    /// bring it; and back. `storesyncctl status` shows the hub, its server,
    /// this host's name and every host's stores.
    func testTwoHostsConvergeThroughNotificationsWellBeforeThePoll() throws {
        try XCTSkipUnless(TestPostgreSQL.isAvailable, "no test PostgreSQL server: run `scripts/postgres start` and export the variable it prints")
        let conninfo = try TestPostgreSQL.requireConninfo()
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let directory = try Daemon.temporaryDirectory()
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: directory) } }
        let uri = Self.hubURI(conninfo)
        let a = try Host(name: "a", in: directory, group: group, hub: uri, stores: ["a1", "a2"], policies: ["store-trump", "object-trump"],
                         pollInterval: "60s")
        let b = try Host(name: "b", in: directory, group: group, hub: uri, stores: ["b1", "b2"], policies: ["overwrite", "store-trump"],
                         pollInterval: "60s")
        try a.start()
        try b.start()
        for host in [a, b] {
            XCTAssertTrue(host.waitReady(timeout: 60), "host \(host.name) not ready\n\(host.log)")
            XCTAssertTrue(host.waitListening(timeout: 30), "host \(host.name) not listening\n\(host.log)")
            XCTAssertTrue(host.tail!.wait(timeout: 30) { $0.contains("msg=round ") && $0.contains("trigger=start") }, host.log)
        }

        var start = Date()
        try Self.saveRecord(at: a.url("a1"), name: "from-a1", a: 1)
        var arrived = try Daemon.wait(timeout: 30) {
            try [a.url("a2"), b.url("b1"), b.url("b2")].allSatisfy { try Self.records($0)["from-a1"] == 1 }
        }
        var elapsed = Date().timeIntervalSince(start)
        keep = !arrived
        XCTAssertTrue(arrived, "a1's save did not reach every store (kept in \(directory.path))\n\(a.log)\n\(b.log)")
        XCTAssertLessThan(elapsed, 15, "a1's save took \(elapsed) s to reach host b: not by notification (poll and safety timer are 60 s)")
        XCTAssertTrue(b.log.contains("trigger=hub"), "host b ran no round for a notification\n\(b.log)")
        print("a1 → b1, b2: \(String(format: "%.3f", elapsed)) s")

        start = Date()
        try Self.saveRecord(at: b.url("b2"), name: "from-b2", a: 2)
        arrived = try Daemon.wait(timeout: 30) {
            try [a.url("a1"), a.url("a2"), b.url("b1")].allSatisfy { try Self.records($0)["from-b2"] == 2 }
        }
        elapsed = Date().timeIntervalSince(start)
        XCTAssertTrue(arrived, "b2's save did not reach every store\n\(a.log)\n\(b.log)")
        XCTAssertLessThan(elapsed, 15, "b2's save took \(elapsed) s to reach host a")
        print("b2 → a1, a2: \(String(format: "%.3f", elapsed)) s")

        // Status: in sync, the hub reachable, every host's stores known to it.
        var reply: JSONValue?
        let inSync = try Daemon.wait(timeout: 30) {
            let status = try a.status()
            reply = status.reply
            return status.exit == 0
        }
        XCTAssertTrue(inSync, "host a's status never in sync: \(reply?.text ?? "-")")
        let hub = try XCTUnwrap(reply?["groups"]?.array?.first?["hub"])
        XCTAssertEqual(hub["kind"]?.string, "postgresql")
        XCTAssertEqual(hub["reachable"]?.bool, true)
        XCTAssertEqual(hub["host_name"]?.string, "a")
        XCTAssertEqual(hub["server"]?.string, PostgreSQLHubSettings(uri: uri).serverDescription)
        XCTAssertEqual(hub["notifications"]?["state"]?.string, "listening")
        // a1's save was host a's own commit: its notification was not a job.
        XCTAssertGreaterThan(hub["notifications"]?["ignored_own"]?.int ?? 0, 0, hub.text)
        let known = (hub["known_stores"]?.array ?? []).map { "\($0["host"]?.string ?? "?")/\($0["store"]?.string ?? "?")" }.sorted()
        XCTAssertEqual(known, ["a/a1", "a/a2", "b/b1", "b/b2"], hub.text)
        XCTAssertEqual(hub["known_stores"]?.array?.filter { $0["this_host"]?.bool == true }.count, 2)
        let bStatus = try b.status()
        XCTAssertGreaterThan(bStatus.reply?["groups"]?.array?.first?["hub"]?["notifications"]?["received"]?.int ?? 0, 0, bStatus.reply?.text ?? "-")
        let human = try Daemon.ctl(["status", "--socket", a.socket], environment: ["NO_COLOR": "1"])
        XCTAssertEqual(human.status, 0, human.stdout + human.stderr)
        for text in ["HUB", "reachable", "listening", "LAST SEEN", "a (this)", "b2"] {
            XCTAssertTrue(human.stdout.contains(text), "'\(text)' missing from:\n\(human.stdout)")
        }

        // No busy polling: idle, with LISTEN on its socket and the poll at
        // 60 s, a daemon uses next to no CPU.
        for host in [a, b] {
            let before = try XCTUnwrap(Self.cpuSeconds(host.daemon!.process.processIdentifier))
            Thread.sleep(forTimeInterval: 3)
            let used = try XCTUnwrap(Self.cpuSeconds(host.daemon!.process.processIdentifier)) - before
            XCTAssertLessThan(used, 0.3, "host \(host.name)'s idle daemon used \(used) s of CPU in 3 s")
            print("host \(host.name) idle: \(String(format: "%.3f", used)) s CPU in 3 s")
        }

        // A reload closes the listener with the groups and opens it again.
        let reload = try Daemon.ctl(["reload", "--wait", "--socket", b.socket])
        XCTAssertEqual(reload.status, 0, reload.stdout + reload.stderr)
        XCTAssertTrue(b.tail!.wait(timeout: 30) { $0.components(separatedBy: "listening for hub notifications").count == 3 }, b.log)
        start = Date()
        try Self.saveRecord(at: a.url("a2"), name: "after-reload", a: 3)
        arrived = try Daemon.wait(timeout: 30) { try Self.records(b.url("b1"))["after-reload"] == 3 }
        elapsed = Date().timeIntervalSince(start)
        XCTAssertTrue(arrived, "a2's save did not reach b1 after b's reload\n\(b.log)")
        XCTAssertLessThan(elapsed, 15, "a2's save took \(elapsed) s to reach b1 after b's reload")

        // The change-log stream reads the embedded hub's file: refused, saying so.
        let log = try ControlClient(path: a.socket, timeout: 10).request(["op": "log", "group": .string(group)])
        XCTAssertEqual(log["ok"]?.bool, false, log.text)
        XCTAssertEqual(log["error"]?["code"]?.string, "unsupported", log.text)
        XCTAssertTrue(log["error"]?["message"]?.string?.contains("keeps its hub in PostgreSQL") == true, log.text)

        XCTAssertEqual(a.stop(), 0, a.log)
        XCTAssertEqual(b.stop(), 0, b.log)
    }

    /// Issue 19's acceptance: writers on both hosts' stores (random
    /// policies), one daemon (a or b, chosen by the seed) SIGKILLed and
    /// restarted at random points, some during start-up; once the writers
    /// stop, every store and the hub agree with the writers' logs: 0 lost,
    /// duplicated, extra, stale, echoed, repeated.
    ///
    /// `STORESYNC_SHARED_HUB_SEED` (hex) and `STORESYNC_SHARED_HUB_KILLS`
    /// (default 12) change the run; `scripts/shared-hub-chaos N [SEED]` runs a longer one.
    func testDaemonsKilledAndRestartedWhileWritersSaveOnBothHostsLoseNothing() throws {
        try XCTSkipUnless(TestPostgreSQL.isAvailable, "no test PostgreSQL server: run `scripts/postgres start` and export the variable it prints")
        let conninfo = try TestPostgreSQL.requireConninfo()
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["STORESYNC_SHARED_HUB_SEED"].flatMap { UInt64($0.hasPrefix("0x") ? String($0.dropFirst(2)) : $0, radix: 16) } ?? 0xC0FF_EE19
        let kills = environment["STORESYNC_SHARED_HUB_KILLS"].flatMap(Int.init) ?? 12
        let label = "shared-hub chaos seed 0x\(String(seed, radix: 16)) (rerun: scripts/shared-hub-chaos \(kills) \(String(seed, radix: 16)))"
        var rng = WorkloadRandom(seed: seed)
        let group = TestPostgreSQL.uniqueGroupName()
        defer { try? TestPostgreSQL.dropSchema("storesync_" + group) }
        let directory = try Daemon.temporaryDirectory()
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: directory) } }
        let all = ["store-trump", "object-trump", "overwrite", "rollback", "error"]
        let policies = (0..<4).map { _ in all[Int.random(in: 0..<all.count, using: &rng)] }
        print("\(label): \(kills) kills, policies \(policies), directory \(directory.path)")
        let uri = Self.hubURI(conninfo)
        let a = try Host(name: "a", in: directory, group: group, hub: uri, stores: ["a1", "a2"], policies: Array(policies[0..<2]), pollInterval: "5s")
        let b = try Host(name: "b", in: directory, group: group, hub: uri, stores: ["b1", "b2"], policies: Array(policies[2..<4]), pollInterval: "5s")
        let hosts = [a, b]
        for host in hosts { try host.start() }
        for host in hosts { XCTAssertTrue(host.waitReady(timeout: 60), "\(label): host \(host.name) not ready\n\(host.log)") }

        let stores = hosts.flatMap { host in host.stores.map { ($0.name, $0.url) } }
        let logs = stores.map { directory.appendingPathComponent("w-\($0.0).log") }
        let writers = try stores.enumerated().map { index, store in
            try WriterProcess(name: "w-\(store.0)", storeName: store.0, store: store.1, model: a.model, log: logs[index],
                              seed: rng.next(), arguments: ["--pause", "5-60"])
        }
        var beforeReady = 0, midRound = 0
        for kill in 1...kills {
            let host = hosts[Int.random(in: 0..<2, using: &rng)]
            if Int.random(in: 0..<4, using: &rng) == 0 {
                // During start-up: opening the hub and the stores, the first
                // round (a local server opens in well under 300 ms).
                usleep(useconds_t(Int.random(in: 0...120, using: &rng) * 1000))
            } else {
                XCTAssertTrue(host.waitReady(timeout: 60), "\(label): host \(host.name) not ready before kill \(kill)\n\(host.log)")
                usleep(useconds_t(Int.random(in: 0...1500, using: &rng) * 1000))
            }
            if !host.log.contains("msg=ready") { beforeReady += 1 }
            XCTAssertTrue(host.daemon?.process.isRunning == true, "\(label): host \(host.name)'s daemon exited before kill \(kill)\n\(host.log)")
            if (host.tail?.roundsInFlight ?? 0) > 0 { midRound += 1 }
            host.kill()
            try host.start()
        }
        for host in hosts { XCTAssertTrue(host.waitReady(timeout: 60), "\(label): host \(host.name) not ready after the kills\n\(host.log)") }
        for writer in writers { XCTAssertEqual(writer.stop(), 0, "\(label): writer \(writer.name): \(writer.messages)") }

        let model = try ManagedObjectModel(contentsOf: a.model)
        var last: WorkloadCheck.Report?
        let converged = Daemon.wait(timeout: 120) {
            last = try? WorkloadCheck.run(model: model, stores: stores, hub: nil, logs: logs, includeHistory: false)
            return last?.isClean == true
        }
        keep = !converged
        XCTAssertTrue(converged, "\(label): the stores did not converge (kept in \(directory.path)): \(last?.summary ?? "-")\n\(last?.json ?? "")\n\(a.log.suffix(4000))\n\(b.log.suffix(4000))")
        for host in hosts { XCTAssertEqual(host.stop(), 0, "\(label): SIGTERM on host \(host.name)\n\(host.log)") }

        let hub = try PostgreSQLHub(model: model, conninfo: conninfo, group: group, host: "checker")
        defer { try? hub.close() }
        let report = try WorkloadCheck.run(model: model, stores: stores, hub: hub, logs: logs)
        print("\(label): \(kills) SIGKILLs (\(beforeReady) before ready, \(midRound) during a round): \(report.summary)")
        XCTAssertGreaterThan(midRound, 0, "\(label): no kill landed during a round")
        if !report.isClean { keep = true }
        XCTAssertTrue(report.isClean, "\(label): \(report.summary)\n\(report.json)\nkept in \(directory.path)")
        XCTAssertTrue(report.hubChecked)
        XCTAssertGreaterThan(report.saves, 40, "\(label): the writers saved too little to prove anything: \(report.summary)")
    }

    /// Issue 19: "a hub that cannot be reached stops nothing local". A
    /// private cluster, stopped while both daemons run and writers save on
    /// both hosts: `storesyncctl status` shows the hub unreachable and exits
    /// 1 while the stores stay writable; started again, both hosts converge
    /// with nothing lost. Both hosts reach it over TCP as the password role
    /// (`storesync`, scram-sha-256), the password in `hub_password_file`.
    func testServerStoppedMidRunStopsNothingLocalAndBothHostsCatchUp() throws {
        try XCTSkipUnless(TestPostgreSQL.isAvailable, "no test PostgreSQL server: run `scripts/postgres start` and export the variable it prints")
        let cluster = try Cluster()
        defer { cluster.remove() }
        let group = TestPostgreSQL.uniqueGroupName()
        let directory = try Daemon.temporaryDirectory()
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: directory) } }
        let passwordFile = directory.appendingPathComponent("hub.pw")
        try Data("\(Cluster.password)\n".utf8).write(to: passwordFile)
        let a = try Host(name: "a", in: directory, group: group, hub: cluster.tcpURI, stores: ["a1", "a2"], policies: ["store-trump", "overwrite"],
                         pollInterval: "2s", passwordFile: passwordFile)
        let b = try Host(name: "b", in: directory, group: group, hub: cluster.tcpURI, stores: ["b1", "b2"], policies: ["object-trump", "rollback"],
                         pollInterval: "2s", passwordFile: passwordFile)
        let hosts = [a, b]
        for host in hosts { try host.start() }
        for host in hosts {
            XCTAssertTrue(host.waitReady(timeout: 60), "host \(host.name) not ready\n\(host.log)")
            XCTAssertTrue(host.waitListening(timeout: 30), "host \(host.name) not listening\n\(host.log)")
        }
        let stores = hosts.flatMap { host in host.stores.map { ($0.name, $0.url) } }
        let logs = stores.map { directory.appendingPathComponent("w-\($0.0).log") }
        var rng = WorkloadRandom(seed: 0x0D0_57A6E)
        let writers = try stores.enumerated().map { index, store in
            try WriterProcess(name: "w-\(store.0)", storeName: store.0, store: store.1, model: a.model, log: logs[index],
                              seed: rng.next(), arguments: ["--pause", "40-100"])
        }
        let saves = { try logs.reduce(0) { $0 + (FileManager.default.fileExists(atPath: $1.path) ? try WriterLogFile.read($1).count : 0) } }
        XCTAssertTrue(try Daemon.wait(timeout: 30) { try saves() >= 20 }, "the writers do not save")
        Thread.sleep(forTimeInterval: 1)

        let began = Date()
        func phase(_ name: String) { print("server outage: \(name) at \(String(format: "%.1f", Date().timeIntervalSince(began))) s, \((try? saves()) ?? -1) saves") }
        try cluster.stop()
        phase("server stopped")
        for host in hosts {
            var reply: JSONValue?
            let unreachable = try Daemon.wait(timeout: 30) {
                let status = try host.status()
                reply = status.reply
                return status.exit == 1 && status.reply?["groups"]?.array?.first?["hub"]?["reachable"]?.bool == false
            }
            XCTAssertTrue(unreachable, "host \(host.name)'s status never showed the hub unreachable: \(reply?.text ?? "-")\n\(host.log)")
            XCTAssertNotNil(reply?["groups"]?.array?.first?["hub"]?["error"]?.string, reply?.text ?? "-")
            XCTAssertNotNil(reply?["groups"]?.array?.first?["hub"]?["unreachable_since"]?.string, reply?.text ?? "-")
        }
        let human = try Daemon.ctl(["status", "--socket", a.socket], environment: ["NO_COLOR": "1"])
        XCTAssertEqual(human.status, 1, human.stdout)
        XCTAssertTrue(human.stdout.contains("unreachable"), human.stdout)
        XCTAssertTrue(human.stdout.contains("the stores go on and catch up when it returns"), human.stdout)
        // The stores stay writable: the writers go on saving.
        let during = try saves()
        XCTAssertTrue(try Daemon.wait(timeout: 30) { try saves() >= during + 20 }, "the writers stopped saving while the hub was down")
        // A while longer down, every host saving: more to catch up.
        Thread.sleep(forTimeInterval: 2)
        for writer in writers { XCTAssertTrue(writer.process.isRunning, "writer \(writer.name) ended: \(writer.messages)") }
        for host in hosts { XCTAssertTrue(host.daemon?.process.isRunning == true, "host \(host.name)'s daemon exited\n\(host.log)") }

        phase("status showed it, writers went on")
        try cluster.start()
        phase("server started")
        for host in hosts {
            XCTAssertTrue(host.tail!.wait(timeout: 60) { $0.contains("hub reachable again") }, "host \(host.name) did not reach the hub again\n\(host.log)")
        }
        phase("both hosts reached it again")
        Thread.sleep(forTimeInterval: 1)
        for writer in writers { XCTAssertEqual(writer.stop(), 0, "writer \(writer.name): \(writer.messages)") }
        phase("writers stopped")

        let model = try ManagedObjectModel(contentsOf: a.model)
        var last: WorkloadCheck.Report?
        let converged = Daemon.wait(timeout: 120) {
            last = try? WorkloadCheck.run(model: model, stores: stores, hub: nil, logs: logs, includeHistory: false)
            return last?.isClean == true
        }
        keep = !converged
        phase("converged")
        XCTAssertTrue(converged, "the stores did not converge after the outage (kept in \(directory.path)): \(last?.summary ?? "-")\n\(last?.json ?? "")\n\(a.log.suffix(4000))\n\(b.log.suffix(4000))")
        for host in hosts {
            var reply: JSONValue?
            XCTAssertTrue(try Daemon.wait(timeout: 30) {
                let status = try host.status()
                reply = status.reply
                return status.exit == 0
            }, "host \(host.name) never in sync again: \(reply?.text ?? "-")")
            XCTAssertEqual(reply?["groups"]?.array?.first?["hub"]?["reachable"]?.bool, true)
            // The notification connection came back too (reconnected with its back-off).
            XCTAssertEqual(reply?["groups"]?.array?.first?["hub"]?["notifications"]?["state"]?.string, "listening", reply?.text ?? "-")
            XCTAssertTrue(host.log.contains("hub notifications restored"), host.log)
        }
        for host in hosts { XCTAssertEqual(host.stop(), 0, "SIGTERM on host \(host.name)\n\(host.log)") }
        let hub = try PostgreSQLHub(model: model, conninfo: cluster.conninfo, group: group, host: "checker")
        defer { try? hub.close() }
        let report = try WorkloadCheck.run(model: model, stores: stores, hub: hub, logs: logs)
        print("server outage: \(report.summary)")
        if !report.isClean { keep = true }
        XCTAssertTrue(report.isClean, "\(report.summary)\n\(report.json)\nkept in \(directory.path)")
    }

    /// Issue 19: a hub that cannot be reached at start-up stops nothing: the
    /// daemon gets ready (stores watched, control socket up), status says the
    /// hub is unreachable (exit 1), an application saves meanwhile; once the
    /// server is up the fallback poll opens the hub and the save reaches the
    /// other store.
    func testHubUnreachableAtStartDaemonStartsAnywayAndSyncsOnceItIsUp() throws {
        try XCTSkipUnless(TestPostgreSQL.isAvailable, "no test PostgreSQL server: run `scripts/postgres start` and export the variable it prints")
        let cluster = try Cluster(started: false)
        defer { cluster.remove() }
        let directory = try Daemon.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let host = try Host(name: "a", in: directory, group: TestPostgreSQL.uniqueGroupName(), hub: cluster.uri, stores: ["a1", "a2"],
                            policies: ["store-trump", "overwrite"], pollInterval: "1s")
        try host.start()
        XCTAssertTrue(host.waitReady(timeout: 60), "not ready without its hub\n\(host.log)")
        XCTAssertTrue(host.log.contains("hub unreachable; the stores are synced once it can be opened"), host.log)
        let down = try host.status()
        XCTAssertEqual(down.exit, 1, down.reply?.text ?? "-")
        let hub = down.reply?["groups"]?.array?.first?["hub"]
        XCTAssertEqual(hub?["reachable"]?.bool, false, down.reply?.text ?? "-")
        XCTAssertEqual(hub?["notifications"]?["state"]?.string, "not-started", down.reply?.text ?? "-")
        try Self.saveRecord(at: host.url("a1"), name: "saved-while-down", a: 7)

        try cluster.start()
        let arrived = try Daemon.wait(timeout: 60) { try Self.records(host.url("a2"))["saved-while-down"] == 7 }
        XCTAssertTrue(arrived, "the save made while the hub was down did not reach a2\n\(host.log)")
        XCTAssertTrue(host.log.contains("msg=\"group open\""), host.log)
        var reply: JSONValue?
        XCTAssertTrue(try Daemon.wait(timeout: 30) {
            let status = try host.status()
            reply = status.reply
            return status.exit == 0 && status.reply?["groups"]?.array?.first?["hub"]?["notifications"]?["state"]?.string == "listening"
        }, "never in sync and listening: \(reply?.text ?? "-")")
        XCTAssertEqual(host.stop(), 0, host.log)
    }

    // MARK: - Support

    /// One simulated host: a directory of its own (configuration, state,
    /// runtime, its stores, the model) and its daemon.
    final class Host {
        let name: String
        let directory: URL
        let config: URL
        let model: URL
        let stores: [(name: String, url: URL)]
        private(set) var daemon: Daemon.Running?
        private(set) var tail: LogTail?
        private var runs = 0
        var socket: String { directory.appendingPathComponent("run/control.sock").path }
        var log: String { daemon?.log ?? "" }

        init(name: String, in parent: URL, group: String, hub: String, stores names: [String], policies: [String], pollInterval: String,
             passwordFile: URL? = nil) throws {
            self.name = name
            directory = parent.appendingPathComponent("host-\(name)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            model = directory.appendingPathComponent(WorkloadModel.modelFileName)
            try XcodeModelWriter.write(WorkloadModel.model(), to: model)
            stores = names.map { ($0, parent.appendingPathComponent("host-\(name)").appendingPathComponent("\($0).sqlite")) }
            for store in stores {
                let coordinator = try PersistentStoreCoordinator(managedObjectModel: WorkloadModel.model())
                let added = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: store.url,
                                                               options: [PersistentStore.persistentHistoryTrackingKey: true])
                try coordinator.remove(added)
            }
            var text = """
            state_directory = "state"
            runtime_directory = "run"
            log_level = "debug"
            log_format = "logfmt"
            debounce = "20ms"
            rescan_interval = "60s"
            host_name = "\(name)"

            [[group]]
            name = "\(group)"
            model = "\(WorkloadModel.modelFileName)"
            hub = "\(hub)"
            hub_poll_interval = "\(pollInterval)"
            \(passwordFile.map { "hub_password_file = \"\($0.path)\"" } ?? "")

            """
            for (store, policy) in zip(names, policies) {
                text += "\n[[group.store]]\nname = \"\(store)\"\npath = \"\(store).sqlite\"\npolicy = \"\(policy)\"\n"
            }
            config = directory.appendingPathComponent("storesyncd.toml")
            try Data(text.utf8).write(to: config)
        }

        func url(_ store: String) -> URL { stores.first { $0.name == store }!.url }

        func start() throws {
            runs += 1
            let file = directory.appendingPathComponent("daemon-\(runs).log")
            daemon = try Daemon.Running(["--config", config.path], logFile: file)
            tail = LogTail(file)
        }

        func waitReady(timeout: TimeInterval) -> Bool { tail?.wait(timeout: timeout) { $0.contains("msg=ready") } ?? false }

        func waitListening(timeout: TimeInterval) -> Bool {
            tail?.wait(timeout: timeout) { $0.contains("listening for hub notifications") || $0.contains("hub notifications restored") } ?? false
        }

        /// SIGTERM; the exit status (nil: it did not exit within 30 s).
        func stop() -> Int32? {
            guard let daemon else { return nil }
            daemon.signal(SIGTERM)
            return daemon.waitForExit(timeout: 30)
        }

        func kill() {
            guard let daemon else { return }
            daemon.signal(SIGKILL)
            daemon.process.waitUntilExit()
        }

        /// `storesyncctl status --json` against this host's daemon.
        func status() throws -> (exit: Int32, reply: JSONValue?) {
            let result = try Daemon.ctl(["status", "--json", "--socket", socket])
            return (result.status, try? JSONValue.line(result.stdout))
        }
    }

    /// A private PostgreSQL cluster (`scripts/postgres --dir D --port P`)
    /// a test may stop and start; removed at the end.
    final class Cluster {
        let directory: URL
        let port: Int
        var uri: String { "postgresql://postgres@/postgres?host=\(directory.path)&port=\(port)" }
        /// The password role over TCP (scripts/postgres makes it, with CREATE on database postgres).
        var tcpURI: String { "postgresql://storesync@127.0.0.1:\(port)/postgres" }
        static let password = "storesync-test"
        var conninfo: String { "host=\(directory.path) port=\(port) user=postgres dbname=postgres" }
        private var running = false

        init(started: Bool = true) throws {
            // Short: the server's socket is <dir>/.s.PGSQL.<port>, under 108 bytes.
            directory = URL(fileURLWithPath: "/tmp/storesync-pg-\(UUID().uuidString.prefix(8).lowercased())")
            port = try Self.freePort()
            if started { try start() }
        }

        func start() throws {
            let result = try Self.script(["start", "--dir", directory.path, "--port", "\(port)"])
            guard result.status == 0 else {
                throw NSError(domain: "Cluster", code: Int(result.status), userInfo: [NSLocalizedDescriptionKey: "scripts/postgres start: \(result.stderr)"])
            }
            running = true
        }

        func stop() throws {
            let result = try Self.script(["stop", "--dir", directory.path])
            guard result.status == 0 else {
                throw NSError(domain: "Cluster", code: Int(result.status), userInfo: [NSLocalizedDescriptionKey: "scripts/postgres stop: \(result.stderr)"])
            }
            running = false
        }

        func remove() {
            if running { _ = try? Self.script(["stop", "--dir", directory.path]) }
            try? FileManager.default.removeItem(at: directory)
        }

        /// Runs scripts/postgres with its output in files, through
        /// posix_spawn: Foundation's `Process` learns that a child ended when
        /// a socket it hands the child closes, and the server the script
        /// starts inherits that socket (and would hold pipes open too), so
        /// `waitUntilExit` would wait for the server.
        static func script(_ arguments: [String]) throws -> Daemon.Result {
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("storesync-pg-script-\(UUID().uuidString).out")
            let err = out.deletingPathExtension().appendingPathExtension("err")
            defer {
                try? FileManager.default.removeItem(at: out)
                try? FileManager.default.removeItem(at: err)
            }
            let path = Daemon.repositoryRoot.appendingPathComponent("scripts/postgres").path
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, out.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, err.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
            defer { for argument in argv { free(argument) } }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
            guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            // WEXITSTATUS, or 128 + the signal.
            let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            return Daemon.Result(status: exit, stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                                 stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
        }

        /// A TCP port nobody listens on now (the kernel's pick for port 0).
        static func freePort() throws -> Int {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw POSIXError(.EMFILE) }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
            }
            guard bound else { throw POSIXError(.EADDRINUSE) }
            return Int(UInt16(bigEndian: address.sin_port))
        }
    }

    /// The hub URI for a configuration from the test server's conninfo
    /// (`host=D port=P user=U dbname=N`, or already a URI): `hub` takes URIs only.
    static func hubURI(_ conninfo: String) -> String {
        if conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://") { return conninfo }
        var fields: [String: String] = [:]
        for pair in conninfo.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { fields[String(kv[0])] = String(kv[1]).trimmingCharacters(in: CharacterSet(charactersIn: "'")) }
        }
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/")
        let user = fields.removeValue(forKey: "user").map { $0 + "@" } ?? ""
        let database = fields.removeValue(forKey: "dbname") ?? ""
        let query = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.value)" }
        return "postgresql://\(user)/\(database)" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }

    /// User and system CPU time a process has used (/proc/PID/stat).
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // After "(comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// name → `a` of every Record in a store, read fresh.
    static func records(_ url: URL) throws -> [String: Int64] {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: WorkloadModel.model())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url, options: [:])
        defer { try? coordinator.remove(store) }
        let context = ManagedObjectContext(coordinator: coordinator)
        return try context.performAndWait {
            var out: [String: Int64] = [:]
            for record in try context.fetch(FetchRequest(entityName: "Record")) {
                out[(try record.value(forKey: "name") as? String) ?? ""] = (try record.value(forKey: "a") as? Int64) ?? -1
            }
            return out
        }
    }

    /// Inserts a Record as an application would.
    static func saveRecord(at url: URL, name: String, a: Int64) throws {
        let coordinator = try PersistentStoreCoordinator(managedObjectModel: WorkloadModel.model())
        let store = try coordinator.addPersistentStore(ofType: PersistentStoreCoordinator.sqliteStoreType, at: url,
                                                       options: [PersistentStore.persistentHistoryTrackingKey: true])
        defer { try? coordinator.remove(store) }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.transactionAuthor = "test-app"
        try context.performAndWait {
            let record = try context.insertNewObject(forEntityName: "Record")
            try record.setValue(name, forKey: "name")
            try record.setValue(a, forKey: "a")
            try context.save()
        }
    }
}
