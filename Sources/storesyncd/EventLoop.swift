import CLibUV
import Foundation
import Synchronization

/// A thin Swift layer over one libuv loop: timers, directory watches,
/// signals, and `post` for other threads to hand work back to the loop.
///
/// Every handle keeps its Swift object alive through `handle->data`
/// (retained) until libuv's close callback has run, because libuv may still
/// touch the handle's memory between `uv_close` and that callback.
///
/// Everything except `post` must be called on the loop's thread: the
/// thread that made the loop and runs it. `assertOnLoop()` checks it, and
/// every handle checks it when started, stopped or closed.
// @unchecked Sendable: `posted` is under `lock` (`post` is callable from any thread); all else is the loop thread's (assertOnLoop checks).
final class EventLoop: @unchecked Sendable {
    let loop: UnsafeMutablePointer<uv_loop_t>
    /// The loop's thread (libuv's handles are not thread-safe; only
    /// `uv_async_send`, behind `post`, may be called from elsewhere).
    let thread = pthread_self()
    private var wakeup: LoopHandle!
    private let lock = NSLock()
    private var posted: [() -> Void] = []

    init() throws {
        loop = .allocate(capacity: 1)
        let status = uv_loop_init(loop)
        guard status == 0 else { throw LoopError(call: "uv_loop_init", status: status) }
        let handle = LoopHandle(type: UV_ASYNC, thread: thread)
        let async = handle.pointer(uv_async_t.self)
        try LoopError.check("uv_async_init", uv_async_init(loop, async) { async in
            guard let async else { return }
            let handle = UnsafeMutableRawPointer(async).assumingMemoryBound(to: uv_handle_t.self)
            guard let data = uv_loop_get_data(uv_handle_get_loop(handle)) else { return }
            Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().drain()
        })
        handle.attach()
        wakeup = handle
        uv_loop_set_data(loop, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Runs until every handle is closed, on the thread that made the loop.
    func run() {
        assertOnLoop()
        uv_run(loop, UV_RUN_DEFAULT)
    }

    /// Traps when called off the loop's thread: state owned by the loop is
    /// read and written there only (one owner per piece of state).
    func assertOnLoop(_ function: StaticString = #function, file: StaticString = #fileID, line: UInt = #line) {
        precondition(pthread_equal(pthread_self(), thread) != 0, "\(function) must run on the event loop's thread", file: file, line: line)
    }

    /// Runs `block` on the loop thread soon; callable from any thread. libuv
    /// coalesces several `uv_async_send` into one callback, so blocks queue here.
    /// `sending`: the caller hands the block (and what it captures) over to
    /// the loop thread and keeps nothing of it (the compiler checks that).
    func post(_ block: sending @escaping () -> Void) {
        lock.lock()
        posted.append(block)
        lock.unlock()
        uv_async_send(wakeup.pointer(uv_async_t.self))
    }

    private func drain() {
        lock.lock()
        let blocks = posted
        posted.removeAll()
        lock.unlock()
        for block in blocks { block() }
    }

    /// Closes the wake-up handle: the last step of a shutdown, after which
    /// `run()` returns once the other handles are closed too.
    func closeWakeup() {
        assertOnLoop()
        drain()
        wakeup.close()
    }

    deinit {
        uv_loop_close(loop)
        loop.deallocate()
    }
}

/// A value of the loop thread's (a reply or completion handler, a `Gather`)
/// carried through a group's or another queue and back to the loop, where
/// alone it is used: made on the loop, and `value` traps off the loop.
///
/// ```swift
/// let reply = LoopBound(reply, loop: loop)        // on the loop
/// runner.perform({ try $0.conflicts() }) { result in   // on the group's queue
///     loop.post { reply.value(answer(result)) }    // on the loop again
/// }
/// ```
// @unchecked Sendable: the value is read on the loop's thread only, and `value` checks it (assertOnLoop).
struct LoopBound<Value>: @unchecked Sendable {
    private let wrapped: Value
    let loop: EventLoop

    init(_ value: Value, loop: EventLoop, file: StaticString = #fileID, line: UInt = #line) {
        loop.assertOnLoop("LoopBound.init", file: file, line: line)
        wrapped = value
        self.loop = loop
    }

    var value: Value {
        loop.assertOnLoop("LoopBound.value")
        return wrapped
    }
}

extension DispatchQueue {
    /// Runs `body` on the queue with `value`, which the caller hands over
    /// (`sending`: the compiler checks that the caller keeps no use of it),
    /// e.g. a connection the loop is done with, to be closed on its queue.
    func async<T>(handingOver value: sending T, _ body: @escaping @Sendable (sending T) -> Void) {
        let slot = Mutex<T?>(value)
        async { if let value = slot.withLock({ $0.take() }) { body(value) } }
    }
}

struct LoopError: Error, CustomStringConvertible {
    var call: String
    var status: Int32
    var path: String?

    var description: String {
        let reason = String(cString: uv_strerror(status))
        return path.map { "\(call) \($0): \(reason)" } ?? "\(call): \(reason)"
    }

    static func check(_ call: String, _ status: Int32, path: String? = nil) throws {
        if status != 0 { throw LoopError(call: call, status: status, path: path) }
    }
}

/// Memory for one libuv handle, owned by a Swift object. `attach()` retains
/// the object from `handle->data`; the close callback releases it.
class LoopHandle {
    let raw: UnsafeMutableRawPointer
    private(set) var closed = false
    private var attached = false
    /// The loop's thread, the only one the handle is used on.
    let thread: pthread_t

    init(type: uv_handle_type, thread: pthread_t) {
        self.thread = thread
        let size = uv_handle_size(type)
        raw = .allocate(byteCount: size, alignment: 16)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    }

    func pointer<T>(_ type: T.Type) -> UnsafeMutablePointer<T> { raw.assumingMemoryBound(to: T.self) }

    var handle: UnsafeMutablePointer<uv_handle_t> { raw.assumingMemoryBound(to: uv_handle_t.self) }

    func attach() {
        attached = true
        uv_handle_set_data(handle, Unmanaged.passRetained(self).toOpaque())
    }

    static func owner(of raw: UnsafeMutableRawPointer) -> LoopHandle? {
        guard let data = uv_handle_get_data(raw.assumingMemoryBound(to: uv_handle_t.self)) else { return nil }
        return Unmanaged<LoopHandle>.fromOpaque(data).takeUnretainedValue()
    }

    /// Stops and closes the handle; its memory is freed after libuv's close
    /// callback. Closing twice does nothing.
    func close() {
        assertOnLoop()
        guard !closed else { return }
        closed = true
        guard attached else { return }
        uv_close(handle) { handle in
            guard let handle, let data = uv_handle_get_data(handle) else { return }
            uv_handle_set_data(handle, nil)
            Unmanaged<LoopHandle>.fromOpaque(data).release()
        }
    }

    func assertOnLoop(_ function: StaticString = #function) {
        precondition(pthread_equal(pthread_self(), thread) != 0, "\(type(of: self)).\(function) must run on the event loop's thread")
    }

    deinit { raw.deallocate() }
}

/// A repeating or one-shot `uv_timer_t`.
final class LoopTimer: LoopHandle {
    private var action: () -> Void = {}

    init(_ loop: EventLoop) throws {
        loop.assertOnLoop()
        super.init(type: UV_TIMER, thread: loop.thread)
        try LoopError.check("uv_timer_init", uv_timer_init(loop.loop, pointer(uv_timer_t.self)))
        attach()
    }

    /// (Re)starts the timer: `after` seconds, then every `repeating` seconds
    /// (0: once). Restarting a running timer is how debouncing works.
    func start(after: TimeInterval, repeating: TimeInterval = 0, _ action: @escaping () -> Void) {
        assertOnLoop()
        guard !closed else { return }
        self.action = action
        uv_timer_start(pointer(uv_timer_t.self), { timer in
            guard let timer, let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(timer)) as? LoopTimer else { return }
            owner.action()
        }, UInt64((after * 1000).rounded(.up)), UInt64((repeating * 1000).rounded(.up)))
    }

    func stop() {
        assertOnLoop()
        guard !closed else { return }
        uv_timer_stop(pointer(uv_timer_t.self))
    }
}

/// A `uv_fs_event_t` on one directory. On Linux this is inotify, which does
/// not recurse; the daemon watches each store's own directory.
final class DirectoryWatch: LoopHandle {
    private let action: (String?) -> Void
    let path: String

    /// `action` gets the name of the entry that changed (nil when libuv
    /// could not tell, e.g. the queue overflowed: treat as "anything").
    init(_ loop: EventLoop, path: String, _ action: @escaping (String?) -> Void) throws {
        self.action = action
        self.path = path
        loop.assertOnLoop()
        super.init(type: UV_FS_EVENT, thread: loop.thread)
        try LoopError.check("uv_fs_event_init", uv_fs_event_init(loop.loop, pointer(uv_fs_event_t.self)))
        attach()
        let status = uv_fs_event_start(pointer(uv_fs_event_t.self), { event, filename, _, status in
            guard let event, let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(event)) as? DirectoryWatch else { return }
            owner.action(status == 0 ? filename.map { String(cString: $0) } : nil)
        }, path, 0)
        if status != 0 {
            close()
            throw LoopError(call: "uv_fs_event_start", status: status, path: path)
        }
    }
}

/// A `uv_signal_t`: libuv turns the signal into a loop callback, so the
/// handler runs on the loop thread with no async-signal-safety limits.
final class SignalWatch: LoopHandle {
    private let action: () -> Void

    init(_ loop: EventLoop, signal: Int32, _ action: @escaping () -> Void) throws {
        self.action = action
        loop.assertOnLoop()
        super.init(type: UV_SIGNAL, thread: loop.thread)
        try LoopError.check("uv_signal_init", uv_signal_init(loop.loop, pointer(uv_signal_t.self)))
        attach()
        try LoopError.check("uv_signal_start", uv_signal_start(pointer(uv_signal_t.self), { handle, _ in
            guard let handle, let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(handle)) as? SignalWatch else { return }
            owner.action()
        }, signal))
    }
}

/// A `uv_poll_t` on a socket another library owns (libpq's connection):
/// the loop is told when it is readable and the owner reads it. The handle
/// must be closed before the owner closes the socket, or a new socket given
/// the same number would be watched by the old handle.
final class SocketPoll: LoopHandle {
    /// Gets 0 when the socket is readable, or libuv's negative error status.
    private let action: (Int32) -> Void

    init(_ loop: EventLoop, socket: Int32, _ action: @escaping (Int32) -> Void) throws {
        self.action = action
        loop.assertOnLoop()
        super.init(type: UV_POLL, thread: loop.thread)
        try LoopError.check("uv_poll_init_socket", uv_poll_init_socket(loop.loop, pointer(uv_poll_t.self), socket))
        attach()
        let status = uv_poll_start(pointer(uv_poll_t.self), Int32(UV_READABLE.rawValue), { handle, status, _ in
            guard let handle, let owner = LoopHandle.owner(of: UnsafeMutableRawPointer(handle)) as? SocketPoll else { return }
            owner.action(status)
        })
        if status != 0 {
            close()
            throw LoopError(call: "uv_poll_start", status: status)
        }
    }

    /// Stops watching at once (closing follows), e.g. before the socket is closed.
    func stop() {
        assertOnLoop()
        guard !closed else { return }
        uv_poll_stop(pointer(uv_poll_t.self))
    }
}
