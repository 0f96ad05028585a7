#if canImport(Glibc)
import Glibc
#endif
import CLibUV
import Foundation
import StoreSyncControl
import Synchronization

/// One accepted client on the control socket (a `uv_pipe_t`), on the loop
/// thread: splits what it reads into lines, hands them on one at a time
/// (the next request is read once the previous one has been answered, so
/// replies come in request order), writes reply and event lines, and keeps
/// the connection's stream subscriptions.
final class ControlConnection: LoopHandle {
    /// Called with each request line; the handler calls `done` once the
    /// reply is written (or will be), and not before.
    var onLine: ((ControlConnection, Data, _ done: @escaping () -> Void) -> Void)?
    /// Called once, when the connection closes (for the server's bookkeeping).
    var onClose: ((ControlConnection) -> Void)?
    /// Set by the server after accepting; nil if the kernel would not say.
    var peer: PeerCredentials?
    /// A number for log lines.
    let serial: Int

    /// Subscriptions by the id of the request that opened them.
    private(set) var subscriptions: [ControlSubscription] = []

    /// The last serial handed out (connections are made on the loop, but an
    /// atomic counter is safe on any thread and costs nothing).
    private static let nextSerial = Atomic<Int>(0)
    private static let readSize = 64 * 1024
    /// A subscriber whose unread output passes this is cut off: the daemon
    /// must not hold an unbounded backlog for a client that stopped reading.
    static let maximumQueuedBytes = 4 * 1024 * 1024

    private let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: ControlConnection.readSize, alignment: 16)
    private var input: [UInt8] = []
    private var lines: [Data] = []
    private var busy = false
    private var inputEnded = false
    private var closeWhenWritten = false
    private var pendingWrites = 0
    private var finished = false
    /// Reading is paused because the client sends faster than it reads:
    /// requests wait in `lines`, replies in libuv's write queue, and
    /// neither may grow without bound.
    private var throttled = false
    private var reading = false
    static let maximumQueuedLines = 128

    init(_ loop: EventLoop) throws {
        serial = Self.nextSerial.wrappingAdd(1, ordering: .relaxed).newValue
        loop.assertOnLoop()
        super.init(type: UV_NAMED_PIPE, thread: loop.thread)
        try LoopError.check("uv_pipe_init", uv_pipe_init(loop.loop, pointer(uv_pipe_t.self), 0))
        attach()
    }

    deinit { readBuffer.deallocate() }

    var isOpen: Bool { !finished }

    /// The accepted socket's descriptor (for `SO_PEERCRED`).
    var fileDescriptor: Int32? {
        var fd: uv_os_fd_t = -1
        return uv_fileno(handle, &fd) == 0 ? fd : nil
    }

    /// Bytes written but not yet taken by the peer.
    var queuedBytes: Int {
        pointer(uv_pipe_t.self).withMemoryRebound(to: uv_stream_t.self, capacity: 1) { Int(uv_stream_get_write_queue_size($0)) }
    }

    // MARK: - Reading

    func startReading() {
        guard !finished, !reading else { return }
        reading = true
        let status = stream { stream in
            uv_read_start(stream, { handle, _, buffer in
                guard let handle, let buffer, let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(handle)) as? ControlConnection else { return }
                buffer.pointee = uv_buf_init(owner.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(ControlConnection.readSize))
            }, { stream, count, buffer in
                guard let stream, let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(stream)) as? ControlConnection else { return }
                if count > 0, let base = buffer?.pointee.base {
                    owner.received(UnsafeRawBufferPointer(start: base, count: count))
                } else if count < 0 {
                    owner.endOfInput()
                }
            })
        }
        if status != 0 { finish() }
    }

    private func stopReading() {
        guard !finished, reading else { return }
        reading = false
        _ = stream { uv_read_stop($0) }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !finished, !closeWhenWritten else { return }
        input.append(contentsOf: bytes)
        var start = 0
        while let newline = input[start...].firstIndex(of: UInt8(ascii: "\n")) {
            var line = input[start..<newline]
            start = newline + 1
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.count > ControlProtocol.maximumRequestBytes { return tooLarge(line.count) }
            // Blank lines (a client ending a request with "\r\n\n") ask nothing.
            if !line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { lines.append(Data(line)) }
        }
        input.removeSubrange(..<start)
        if input.count > ControlProtocol.maximumRequestBytes { return tooLarge(input.count) }
        if lines.count >= Self.maximumQueuedLines {
            throttled = true
            stopReading()
        }
        processNext()
    }

    /// The rest of the stream cannot be framed: answer once, then close.
    private func tooLarge(_ count: Int) {
        input.removeAll()
        lines.removeAll()
        stopReading()
        let limit = ControlProtocol.maximumRequestBytes
        sendAndClose(ControlReply.error(.null, ControlError(.tooLarge, "request line of \(count >= limit ? "more than \(limit)" : "\(count)") bytes; the limit is \(limit) bytes per line; closing the connection")))
    }

    /// The client closed its side (or the connection broke): requests read
    /// so far are still answered; a subscriber keeps its stream until a
    /// write fails.
    private func endOfInput() {
        inputEnded = true
        stopReading()
        // Not `finish()`: the reply to the last request may still be in
        // libuv's write queue (a client that half-closes after asking).
        if !busy && lines.isEmpty && subscriptions.isEmpty { closeAfterWrites() }
    }

    private func processNext() {
        if throttled, !inputEnded, !closeWhenWritten, lines.count < Self.maximumQueuedLines / 4, queuedBytes < Self.maximumQueuedBytes {
            throttled = false
            startReading()
        }
        // A client that does not read its replies gets no more until it does.
        if queuedBytes > Self.maximumQueuedBytes, !lines.isEmpty {
            throttled = true
            stopReading()
            return
        }
        guard !busy, !finished, !closeWhenWritten, !lines.isEmpty, let onLine else {
            if inputEnded, !busy, lines.isEmpty, subscriptions.isEmpty { closeAfterWrites() }
            return
        }
        busy = true
        let line = lines.removeFirst()
        var called = false
        onLine(self, line) { [weak self] in
            guard let self, !called else { return }
            called = true
            busy = false
            processNext()
        }
    }

    // MARK: - Writing

    /// Writes one JSON value as one line. Does nothing once closed (a reply
    /// arriving from a group queue after the client went away).
    func send(_ value: JSONValue) {
        guard !finished else { return }
        var bytes = [UInt8](value.encoded())
        bytes.append(UInt8(ascii: "\n"))
        let data = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
        data.copyMemory(from: bytes, byteCount: bytes.count)
        let request = UnsafeMutableRawPointer.allocate(byteCount: uv_req_size(UV_WRITE), alignment: 16)
        let write = request.assumingMemoryBound(to: uv_write_t.self)
        let box = WriteBox(connection: self, data: data, request: request)
        uv_req_set_data(request.assumingMemoryBound(to: uv_req_t.self), Unmanaged.passRetained(box).toOpaque())
        var buffer = uv_buf_init(data.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        pendingWrites += 1
        let status = stream { stream in
            uv_write(write, stream, &buffer, 1) { request, status in
                guard let request else { return }
                let raw = UnsafeMutableRawPointer(request)
                guard let data = uv_req_get_data(raw.assumingMemoryBound(to: uv_req_t.self)) else { return }
                let box = Unmanaged<WriteBox>.fromOpaque(data).takeRetainedValue()
                box.data.deallocate()
                box.request.deallocate()
                box.connection.writeFinished(status)
            }
        }
        if status != 0 {
            // libuv did not take the request: its callback will not run.
            Unmanaged.passUnretained(box).release()
            data.deallocate()
            request.deallocate()
            pendingWrites -= 1
            finish()
        }
    }

    /// Memory for one write, released in its callback.
    private final class WriteBox {
        let connection: ControlConnection
        let data: UnsafeMutableRawPointer
        let request: UnsafeMutableRawPointer
        init(connection: ControlConnection, data: UnsafeMutableRawPointer, request: UnsafeMutableRawPointer) {
            self.connection = connection
            self.data = data
            self.request = request
        }
    }

    private func writeFinished(_ status: Int32) {
        pendingWrites -= 1
        // A peer that went away: nothing more can reach it.
        if status != 0 { return finish() }
        if closeWhenWritten, pendingWrites == 0 { return finish() }
        // Room in the write queue again: requests held back may go on.
        if throttled || (!busy && !lines.isEmpty) { processNext() }
    }

    /// Writes the value, then closes once it has gone out (oversized or
    /// refused requests; the daemon stopping).
    func sendAndClose(_ value: JSONValue) {
        send(value)
        closeAfterWrites()
    }

    func closeAfterWrites() {
        guard !finished else { return }
        closeWhenWritten = true
        stopReading()
        if pendingWrites == 0 { finish() }
    }

    // MARK: - Subscriptions

    func add(_ subscription: ControlSubscription) { subscriptions.append(subscription) }

    /// Ends one subscription (the `cancel` op); false if there was none with that id.
    @discardableResult
    func cancelSubscription(id: JSONValue) -> Bool {
        guard let index = subscriptions.firstIndex(where: { $0.id == id }) else { return false }
        subscriptions.remove(at: index).end()
        if inputEnded, !busy, lines.isEmpty, subscriptions.isEmpty { closeAfterWrites() }
        return true
    }

    /// Sends one stream item unless the client has fallen too far behind,
    /// in which case its streams end with a `slow-consumer` line and the
    /// connection closes.
    func sendEvent(_ subscription: ControlSubscription, _ name: String, _ fields: [String: JSONValue]) {
        guard !finished, !closeWhenWritten else { return }
        if queuedBytes > Self.maximumQueuedBytes {
            sendAndClose(ControlReply.error(subscription.id, ControlError(.slowConsumer, "more than \(Self.maximumQueuedBytes) bytes of events were not read; the stream ends")))
            return
        }
        send(ControlReply.event(subscription.id, name, fields))
    }

    // MARK: - Closing

    /// Closes now: pending writes are dropped, subscriptions end.
    func finish() {
        guard !finished else { return }
        finished = true
        lines.removeAll()
        for subscription in subscriptions { subscription.end() }
        subscriptions.removeAll()
        onClose?(self)
        onClose = nil
        onLine = nil
        close()
    }

    private func stream<T>(_ body: (UnsafeMutablePointer<uv_stream_t>) -> T) -> T {
        pointer(uv_pipe_t.self).withMemoryRebound(to: uv_stream_t.self, capacity: 1, body)
    }
}
