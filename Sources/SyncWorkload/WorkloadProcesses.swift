#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The package's binaries, found beside the running one (tests and
/// benchmarks are built into the same products directory).
public enum WorkloadBinaries {
    /// The products directory: where the running executable (a benchmark or
    /// the test bundle) lives.
    public static var productsDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// `name` beside the running executable; throws naming the build command when absent.
    public static func locate(_ name: String) throws -> URL {
        let url = productsDirectory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey:
                "\(url.path) is missing: build it (swift build --product \(name), with -c release for benchmarks)"])
        }
        return url
    }
}

/// A `storesync-writer write` process writing one store.
public final class WriterProcess {
    public let name: String
    public let storeName: String
    public let log: URL
    public let process = Process()
    private let errorFile: URL
    /// Created by the writer once SIGTERM is handled: a SIGTERM sent earlier
    /// would kill it by the default action (and say nothing about its saves).
    private let readyFile: URL

    /// Starts `storesync-writer write` (see its --help) on `store`.
    /// `arguments` adds options such as `--rate 100`, `--inserts 10`, `--saves N`, `--pause 0-20`.
    public init(name: String, storeName: String, store: URL, model: URL, log: URL, seed: UInt64, arguments: [String] = []) throws {
        self.name = name
        self.storeName = storeName
        self.log = log
        errorFile = log.deletingPathExtension().appendingPathExtension("stderr")
        readyFile = log.deletingLastPathComponent().appendingPathComponent(".\(name)-\(UUID().uuidString).ready")
        if !FileManager.default.fileExists(atPath: errorFile.path) { _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil) }
        process.executableURL = try WorkloadBinaries.locate("storesync-writer")
        process.arguments = ["write", "--model", model.path, "--store", store.path, "--store-name", storeName, "--name", name,
                             "--log", log.path, "--seed", "0x" + String(seed, radix: 16), "--ready-file", readyFile.path] + arguments
        let handle = try FileHandle(forWritingTo: errorFile)
        handle.seekToEndOfFile()
        process.standardError = handle
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }

    /// What the writer printed on stderr (its summary line, errors).
    public var messages: String { (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "" }

    /// Waits for the process to end (bounded); its exit status, nil on timeout (then killed).
    public func wait(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }

    /// Whether the writer handles SIGTERM yet (bounded wait).
    public func waitUntilReady(timeout: TimeInterval = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !FileManager.default.fileExists(atPath: readyFile.path) && process.isRunning && Date() < deadline { usleep(5_000) }
        return FileManager.default.fileExists(atPath: readyFile.path)
    }

    /// SIGTERM (once the writer handles it): the save in flight finishes
    /// and is logged, then exit 0.
    @discardableResult
    public func stop(timeout: TimeInterval = 30) -> Int32? {
        if process.isRunning {
            _ = waitUntilReady(timeout: timeout)
            kill(process.processIdentifier, SIGTERM)
        }
        return wait(timeout: timeout)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: readyFile)
    }
}
