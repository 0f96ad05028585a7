import Foundation

/// The control protocol's constants (docs/CONTROL.md): one JSON object per
/// line each way, over a Unix stream socket.
public enum ControlProtocol {
    /// The protocol version this build speaks; requests carry it as `"v"`.
    /// A change that breaks an existing client gets a new number; fields
    /// added to replies do not (clients ignore what they do not know).
    public static let version: Int64 = 1
    /// Every version this build answers.
    public static let supportedVersions: [Int64] = [1]
    /// The longest request line the daemon reads (64 KiB, the newline not
    /// counted). A longer one gets a `too-large` reply and the connection is
    /// closed: the daemon cannot know where the next request would start.
    public static let maximumRequestBytes = 64 * 1024
    /// The daemon's default socket when neither a flag, a config nor
    /// `$RUNTIME_DIRECTORY` names one (systemd's `RuntimeDirectory=storesyncd`).
    public static let defaultSocketPath = "/run/storesyncd/control.sock"

    /// Every operation; the wire name is the raw value.
    public enum Op: String, CaseIterable, Sendable {
        case status, pause, resume, sync, reload, metrics, events, cancel, log
        case conflictsList = "conflicts.list"
        case conflictsShow = "conflicts.show"
        case conflictsResolve = "conflicts.resolve"
        case exportRebuild = "export.rebuild"
    }
}

/// The `"code"` of an error reply. Stable: scripts match on them.
public enum ControlErrorCode: String, CaseIterable, Sendable {
    /// The line is not JSON, or not a JSON object.
    case badJSON = "bad-json"
    /// A required field is missing or has the wrong type (the message names it).
    case badRequest = "bad-request"
    /// `"v"` names a version this daemon does not speak (`"supported"` lists them).
    case unsupportedVersion = "unsupported-version"
    /// `"op"` is not an operation of this version.
    case unknownOp = "unknown-op"
    /// The request line is longer than 64 KiB; the connection is closed.
    case tooLarge = "too-large"
    /// The peer's uid is neither root nor the daemon's; the connection is closed.
    case forbidden
    /// No such group, store, conflict or subscription.
    case notFound = "not-found"
    /// A bare conflict number while several groups are configured: name the group.
    case ambiguous
    /// The new configuration was refused; the running one is kept (the message says why).
    case reloadRefused = "reload-refused"
    /// The daemon is starting, reloading or stopping and cannot do this now.
    case unavailable
    /// The work was dropped before it ran (the daemon stopped or reloaded meanwhile).
    case cancelled
    /// The engine reported an error (the message carries it).
    case failed
    /// The operation exists but this daemon cannot do it (no op answers it today;
    /// kept so clients that matched on it still parse).
    case unsupported
    /// The group exists but has no such feature configured (`export.rebuild`
    /// for a group without `[group.export]`).
    case notConfigured = "not-configured"
    /// Too many connections are open; try again.
    case busy
    /// A subscriber read too slowly and its stream was ended.
    case slowConsumer = "slow-consumer"
}

/// One error reply's content.
public struct ControlError: Error, Equatable, CustomStringConvertible, Sendable {
    public var code: String
    public var message: String

    public init(_ code: ControlErrorCode, _ message: String) {
        self.code = code.rawValue
        self.message = message
    }

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) (\(code))" }

    /// `{"code": ..., "message": ...}`
    public var json: JSONValue { ["code": .string(code), "message": .string(message)] }
}

/// The version of StoreSync the daemon reports in `status` (and storesyncctl
/// beside it). There is no release process yet: this is the development line.
public enum StoreSyncVersion {
    public static let current = "0.1.0-dev"
}
