#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import StoreSyncControl

/// The control socket (docs/CONTROL.md): accepts connections on the loop,
/// refuses peers that are neither root nor the daemon's user, parses each
/// request line and hands it to the `ControlService`, and publishes daemon
/// events to subscribers. Everything here runs on the loop thread; the
/// service moves blocking work to the groups' queues.
final class ControlServer {
    /// Connections beyond this are answered `busy` and closed: each holds
    /// a descriptor and buffers, and a client that opens them in a loop must
    /// not exhaust the daemon.
    static let maximumConnections = 64

    /// After `close()`, connections still writing get this long before they
    /// are cut: a client that stopped reading must not keep the daemon from exiting.
    static let closeGrace: TimeInterval = 1

    let path: String
    private let loop: EventLoop
    private let listener: ControlListener
    private var connections: [ObjectIdentifier: ControlConnection] = [:]
    private let service: ControlService
    private let metrics: DaemonMetrics?
    private var logger: Logger

    /// Binds the socket (see `ControlListener.claim`); throws when another
    /// daemon serves it or the path cannot be used.
    init(loop: EventLoop, path: String, service: ControlService, metrics: DaemonMetrics?, logger: Logger) throws {
        self.path = path
        self.loop = loop
        self.service = service
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "socket"] = "\(path)"
        self.logger = logger
        var accept: ((ControlConnection) -> Void)?
        listener = try ControlListener(loop, path: path) { accept?($0) }
        do {
            let claim = try listener.listen()
            if claim == .staleReplaced { logger.notice("replaced a stale control socket (no daemon was accepting on it)") }
        } catch {
            listener.close()
            throw error
        }
        accept = { [weak self] in self?.accepted($0) }
        logger.info("control socket listening", metadata: ["mode": "0660"])
    }

    private func accepted(_ connection: ControlConnection) {
        let peer = connection.fileDescriptor.flatMap(PeerCredentials.of(socket:))
        connection.peer = peer
        guard let peer, peer.isAllowed() else {
            // The reply says why, so an operator is not left guessing at a
            // closed connection; nothing of the request is read.
            let who = peer.map { "uid \($0.uid)" } ?? "a peer whose credentials the kernel would not give"
            logger.warning("control connection refused", metadata: ["peer": "\(peer.map(\.description) ?? "unknown")"])
            metrics?.recordRequest(op: "connect", outcome: ControlErrorCode.forbidden.rawValue)
            connection.sendAndClose(ControlReply.error(.null, ControlError(.forbidden,
                "\(who) may not use this socket: only root and uid \(geteuid()) (the daemon's user) may")))
            return
        }
        guard connections.count < Self.maximumConnections else {
            logger.warning("control connection refused: too many open", metadata: ["open": "\(connections.count)"])
            metrics?.recordRequest(op: "connect", outcome: ControlErrorCode.busy.rawValue)
            connection.sendAndClose(ControlReply.error(.null, ControlError(.busy,
                "\(connections.count) control connections are open (the limit is \(Self.maximumConnections)); try again")))
            return
        }
        connections[ObjectIdentifier(connection)] = connection
        connection.onClose = { [weak self] in self?.connections[ObjectIdentifier($0)] = nil }
        connection.onLine = { [weak self] connection, line, done in
            guard let self else { return done() }
            handle(line, on: connection, done: done)
        }
        logger.debug("control connection", metadata: ["connection": "\(connection.serial)", "peer": "\(peer)"])
        connection.startReading()
    }

    private func handle(_ line: Data, on connection: ControlConnection, done: @escaping () -> Void) {
        switch ControlRequest.parse(line) {
        case .failure(let failure):
            metrics?.recordRequest(op: "invalid", outcome: failure.error.code)
            logger.notice("control request refused", metadata: ["connection": "\(connection.serial)", "code": "\(failure.error.code)",
                                                                 "error": "\(failure.error.message)"])
            var extra: [String: JSONValue] = [:]
            if failure.error.code == ControlErrorCode.unsupportedVersion.rawValue {
                extra["supported"] = .array(ControlProtocol.supportedVersions.map(JSONValue.int))
            }
            connection.send(ControlReply.error(failure.id, failure.error, extra))
            done()
        case .success(let request):
            logger.debug("control request", metadata: ["connection": "\(connection.serial)", "op": "\(request.op.rawValue)"])
            service.handle(request, on: connection) { [weak self] reply in
                let outcome = reply["ok"]?.bool == true ? "ok" : reply["error"]?["code"]?.string ?? "error"
                self?.metrics?.recordRequest(op: request.op.rawValue, outcome: outcome)
                connection.send(reply)
                done()
            }
        }
    }

    /// Whether any connection subscribed to `event` of `group`: what a
    /// publisher asks before building an event nobody reads.
    func wants(_ event: String, group: String?) -> Bool {
        connections.values.contains { $0.subscriptions.contains { $0.wants(event, group: group) } }
    }

    /// Sends a daemon event (`round`, `state`, `reload`, `stopping`) to
    /// every subscription that wants it.
    func publish(_ event: String, group: String?, _ fields: [String: JSONValue]) {
        guard wants(event, group: group) else { return }
        var fields = fields
        fields["time"] = JSONValue(Date())
        if let group { fields["group"] = .string(group) }
        for connection in connections.values {
            for subscription in connection.subscriptions where subscription.wants(event, group: group) {
                connection.sendEvent(subscription, event, fields)
            }
        }
    }

    /// Stops accepting and removes the socket file; open connections get
    /// what is already written, then close.
    func close() {
        listener.closeAndRemove()
        for connection in connections.values { connection.closeAfterWrites() }
        guard !connections.isEmpty, let timer = try? LoopTimer(loop) else { return }
        timer.start(after: Self.closeGrace) { [weak self, unowned timer] in
            for connection in self?.connections.values.map({ $0 }) ?? [] { connection.finish() }
            timer.close()
        }
    }
}
