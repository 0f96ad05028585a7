import ArgumentParser
import Foundation
import StoreSyncConfig
import StoreSyncControl

/// The options every command that talks to storesyncd takes, and the one
/// way those commands reach it: the control socket's protocol
/// (docs/CONTROL.md), never the daemon's files.
struct DaemonOptions: ParsableArguments {
    @Option(help: "The control socket (default: --config's control_socket, else $RUNTIME_DIRECTORY/control.sock, else /run/storesyncd/control.sock).")
    var socket: String?

    @Option(help: "The daemon's configuration file, read for its control_socket.")
    var config: String?

    @Option(help: "Seconds to wait for the daemon's answer.")
    var timeout: Double = 10

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    /// Where the socket is, and how it was chosen (said when nothing is there).
    struct Location {
        var path: String
        var source: String
    }

    func location(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Location {
        try Self.location(socket: socket, config: config, environment: environment)
    }

    /// The socket `--socket` and `--config` name (for commands that take them
    /// beside other options, such as `log --follow`).
    static func location(socket: String?, config: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Location {
        if let socket { return Location(path: Self.absolute(socket), source: "--socket") }
        if let config {
            let file = Self.absolute(config)
            do {
                let configuration = try DaemonConfiguration.load(file: file, environment: environment)
                return Location(path: configuration.controlSocket.path, source: "control_socket of \(file)")
            } catch {
                Self.fail("cannot use --config: \(error)", SysExit.config)
            }
        }
        if let runtime = DaemonConfiguration.firstPath(environment["RUNTIME_DIRECTORY"]) {
            return Location(path: (runtime as NSString).appendingPathComponent("control.sock"), source: "$RUNTIME_DIRECTORY")
        }
        return Location(path: ControlProtocol.defaultSocketPath, source: "the default; --socket or --config to look elsewhere")
    }

    static func absolute(_ path: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        return expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    }

    /// Connects, or exits with the status and message for why not.
    func connect() -> ControlClient {
        let location: Location
        do { location = try self.location() } catch { Self.fail("\(error)", SysExit.config) }
        do {
            return try ControlClient(path: location.path, timeout: timeout)
        } catch let error as ControlClientError {
            if case .notRunning = error { Self.fail("\(error) (path from \(location.source))", DaemonExit.notRunning) }
            Self.fail(error)
        } catch {
            Self.fail("\(error)", SysExit.ioError)
        }
    }

    /// Sends one request and returns the reply, whatever its `"ok"`; exits
    /// on a transport failure (not running, timeout, not the daemon).
    func call(_ op: ControlProtocol.Op, _ fields: [String: JSONValue] = [:], client: ControlClient? = nil) -> JSONValue {
        let client = client ?? connect()
        var fields = fields
        fields["op"] = .string(op.rawValue)
        do {
            let reply = try client.request(fields)
            if reply["error"]?["code"]?.string == ControlErrorCode.forbidden.rawValue {
                Self.fail("storesyncd refused this user: \(reply["error"]?["message"]?.string ?? "forbidden")", SysExit.noPermission)
            }
            return reply
        } catch let error as ControlClientError {
            Self.fail(error)
        } catch {
            Self.fail("\(error)", SysExit.ioError)
        }
    }

    /// Like `call`, but a reply with `"ok": false` prints its error and exits 1.
    func require(_ op: ControlProtocol.Op, _ fields: [String: JSONValue] = [:]) -> JSONValue {
        let reply = call(op, fields)
        if reply["ok"]?.bool != true { Self.failReply(reply) }
        return reply
    }

    static func failReply(_ reply: JSONValue, prefix: String = "") -> Never {
        let message = reply["error"]?["message"]?.string ?? "the daemon answered without an error message"
        let code = reply["error"]?["code"]?.string ?? "unknown"
        fail("\(prefix)\(message) (\(code))", DaemonExit.notOK)
    }

    static func fail(_ error: ControlClientError) -> Never {
        switch error {
        case .notRunning: fail("\(error)", DaemonExit.notRunning)
        case .permissionDenied: fail("\(error)", SysExit.noPermission)
        case .timedOut: fail("\(error) (--timeout to wait longer)", SysExit.temporaryFailure)
        case .notTheDaemon: fail("\(error)", SysExit.protocolError)
        case .io: fail("\(error)", SysExit.ioError)
        }
    }

    /// Errors go to stderr, prefixed with the program's name, as other tools do.
    static func fail(_ message: String, _ code: ExitCode) -> Never {
        FileHandle.standardError.write(Data("storesyncctl: \(message)\n".utf8))
        Foundation.exit(code.rawValue)
    }
}
