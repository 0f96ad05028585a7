import Dispatch
import Foundation
import Logging
import StoreSyncPostgreSQL

/// How a daemon learns that another host committed to a group's shared
/// PostgreSQL hub: `LISTEN` on the hub's notification channel over a
/// connection of its own, its socket watched by the loop (`uv_poll_t`).
///
/// The loop thread only reads what the socket has (`notifications()`, which
/// never blocks); connecting, which may wait for the network, runs on the
/// listener's own queue. A notification asks the group for a `.hub` job
/// (`onChange`, coalesced by the runner like every job). This daemon's own
/// commits are ignored (the round that made them already pushed them to
/// this host's stores): PostgreSQLHub's payload "<host> <position>" names
/// this host.
///
/// A broken connection (the server restarted, the network dropped) stops
/// the poll and reconnects with a back-off on a loop timer (0.5 s doubling
/// up to `maximumBackoff`); each new connection asks for a `.hub` job, since
/// commits made while it was not listening sent no notification it saw.
///
/// ```swift
/// let listener = try HubListener(loop: loop, group: "notes", channel: hub.notificationChannel, hostName: "web1",
///                                conninfo: { try settings.conninfo() }, logger: logger) { runner.schedule(.hub) }
/// listener.start()
/// ```
// @unchecked Sendable: its mutable state is the loop thread's (assertOnLoop checks); the queue gets only copies and connections handed over.
final class HubListener: @unchecked Sendable {
    enum State: String {
        case connecting, listening, reconnecting, closed
    }

    let group: String
    let channel: String
    let hostName: String
    private let loop: EventLoop
    /// Called on the listener's queue.
    private let conninfo: @Sendable () throws -> String
    private let onChange: () -> Void
    private var logger: Logger
    private let queue: DispatchQueue
    private let retryTimer: LoopTimer
    static let minimumBackoff: TimeInterval = 0.5
    let maximumBackoff: TimeInterval

    // Loop thread only (a connection is handed over from the queue by `post`).
    private(set) var state = State.connecting
    private(set) var lastError: String?
    /// Notifications received from other hosts, and this host's own (ignored).
    private(set) var received = 0
    private(set) var ignored = 0
    private var connection: PostgreSQLConnection?
    private var poll: SocketPoll?
    private var backoff = HubListener.minimumBackoff
    /// Bumped by `close()`: a connection that arrives after it is closed unused.
    private var generation = 0
    /// The current outage was logged (one warning per episode).
    private var outageLogged = false

    init(loop: EventLoop, group: String, channel: String, hostName: String, maximumBackoff: TimeInterval = 30,
         conninfo: @escaping @Sendable () throws -> String, logger: Logger, onChange: @escaping () -> Void) throws {
        self.loop = loop
        self.group = group
        self.channel = channel
        self.hostName = hostName
        self.maximumBackoff = max(HubListener.minimumBackoff, maximumBackoff)
        self.conninfo = conninfo
        self.onChange = onChange
        var logger = logger
        logger[metadataKey: "group"] = "\(group)"
        self.logger = logger
        queue = DispatchQueue(label: "storesyncd.hub-listener.\(group)")
        retryTimer = try LoopTimer(loop)
    }

    /// Connects (off the loop) and starts listening.
    func start() {
        loop.assertOnLoop()
        guard state != .closed else { return }
        connect()
    }

    private func connect() {
        loop.assertOnLoop()
        state = .connecting
        let generation = generation, channel = channel, conninfo = conninfo
        queue.async { [loop] in
            let result = Result { () -> PostgreSQLConnection in
                let connection = try PostgreSQLConnection(try conninfo())
                do { try connection.listen(channel) } catch {
                    connection.close()
                    throw error
                }
                return connection
            }
            loop.post { [weak self] in
                guard let self, self.generation == generation, self.state != .closed else {
                    if case .success(let connection) = result { connection.close() }
                    return
                }
                self.connected(result)
            }
        }
    }

    private func connected(_ result: Result<PostgreSQLConnection, Error>) {
        loop.assertOnLoop()
        switch result {
        case .success(let connection):
            do {
                poll = try SocketPoll(loop, socket: connection.socket) { [weak self] status in self?.readable(status) }
            } catch {
                connection.close()
                return failed("\(error)")
            }
            self.connection = connection
            state = .listening
            backoff = Self.minimumBackoff
            lastError = nil
            if outageLogged {
                outageLogged = false
                logger.notice("hub notifications restored", metadata: ["channel": "\(channel)"])
            } else {
                logger.info("listening for hub notifications", metadata: ["channel": "\(channel)", "server": "\(connection.serverDescription)"])
            }
            // Commits made before LISTEN took effect notified nobody here.
            onChange()
        case .failure(let error):
            failed("\(error)")
        }
    }

    /// The socket has something: notifications, or the end of the connection.
    private func readable(_ status: Int32) {
        loop.assertOnLoop()
        guard let connection else { return }
        do {
            if status < 0 { throw LoopError(call: "uv_poll", status: status) }
            let notifications = try connection.notifications()
            var changed = false
            for notification in notifications where notification.channel == channel {
                if isOwn(notification.payload) {
                    ignored += 1
                } else {
                    received += 1
                    changed = true
                }
            }
            if changed { onChange() }
            if !connection.isConnected { throw ListenerError.connectionLost }
        } catch {
            failed("\(error)")
        }
    }

    /// "<host> <position>" from this host: its own round's commit.
    func isOwn(_ payload: String) -> Bool {
        let fields = payload.split(separator: " ", maxSplits: 1)
        return fields.count == 2 && fields[0] == hostName
    }

    enum ListenerError: Error, CustomStringConvertible {
        case connectionLost
        var description: String { "the notification connection was lost" }
    }

    /// Drops the connection (the poll first: the socket is libpq's) and
    /// tries again after the back-off.
    private func failed(_ reason: String) {
        loop.assertOnLoop()
        poll?.stop()
        poll?.close()
        poll = nil
        if let connection {
            self.connection = nil
            queue.async(handingOver: connection) { $0.close() }
        }
        lastError = reason
        if !outageLogged {
            outageLogged = true
            logger.warning("hub notifications unavailable; retrying (the fallback poll goes on)",
                           metadata: ["channel": "\(channel)", "error": "\(reason)", "retry_s": "\(backoff)"])
        }
        guard state != .closed else { return }
        state = .reconnecting
        retryTimer.start(after: backoff) { [weak self] in self?.connect() }
        backoff = min(backoff * 2, maximumBackoff)
    }

    /// Stops listening and closes the connection (on the listener's queue).
    func close() {
        loop.assertOnLoop()
        guard state != .closed else { return }
        state = .closed
        generation += 1
        poll?.stop()
        poll?.close()
        poll = nil
        retryTimer.close()
        if let connection {
            self.connection = nil
            queue.async(handingOver: connection) { $0.close() }
        }
    }
}
