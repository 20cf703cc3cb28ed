import CEvent
import Glibc
import Synchronization

/// One libevent `event_base` driven by one thread; everything that touches it runs on that thread.
public final class EventLoop: @unchecked Sendable {
    /// The libevent base (loop-thread only).
    let base: OpaquePointer
    private let wakeFD: Int32
    private var wakeEvent: OpaquePointer?
    private let mailbox = Locked<[@Sendable () -> Void]>([])
    private var thread: pthread_t?
    private var deferredEvent: OpaquePointer?
    private var deferred: [() -> Void] = []
    /// Set while `run()` is executing; lets callers check they are on the loop thread.
    private let runningThread = Atomic<UInt>(0)

    /// Creates a base with the epoll changelist (an ADD and a DEL in one iteration cost no syscall).
    public init() throws(PeelIOError) {
        EventLoop.ignoreSIGPIPE()
        guard let cfg = event_config_new() else { throw PeelIOError(.libevent, "event_config_new") }
        defer { event_config_free(cfg) }
        // The base is used from one thread only, so libevent's internal lock is dead weight.
        event_config_set_flag(cfg, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        event_config_set_flag(cfg, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        guard let b = event_base_new_with_config(cfg) else { throw PeelIOError(.libevent, "event_base_new_with_config") }
        base = b
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        if wakeFD < 0 { event_base_free(b); throw PeelIOError(.system(errno), "eventfd") }
        let me = Unmanaged.passUnretained(self).toOpaque()
        wakeEvent = event_new(base, wakeFD, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
            var value: UInt64 = 0
            _ = read(fd, &value, 8)
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().drainMailbox()
        }, me)
        event_add(wakeEvent, nil)
        deferredEvent = event_new(base, -1, 0, { _, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().runDeferred()
        }, me)
    }

    /// Runs `work` on this loop's next iteration; loop-thread only (never re-enters the caller).
    public func `defer`(_ work: @escaping () -> Void) {
        deferred.append(work)
        if deferred.count == 1 { event_active(deferredEvent, 0, 0) }
    }

    private func runDeferred() {
        let jobs = deferred
        deferred.removeAll(keepingCapacity: true)
        for job in jobs { job() }
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        if let deferredEvent { event_free(deferredEvent) }
        close(wakeFD)
        event_base_free(base)
    }

    // libevent writes with writev/send without MSG_NOSIGNAL: a peer's reset must not kill the process.
    private static let sigpipeOnce: Void = { signal(SIGPIPE, SIG_IGN) }()
    static func ignoreSIGPIPE() { _ = sigpipeOnce }

    /// Queues `work` to run on the loop thread; safe from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        mailbox.withLock { $0.append(work) }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func drainMailbox() {
        let jobs = mailbox.withLock { q -> [@Sendable () -> Void] in
            let taken = q
            q.removeAll(keepingCapacity: true)
            return taken
        }
        for job in jobs { job() }
    }

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        runningThread.store(UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))), ordering: .relaxed)
        event_base_loop(base, 0)
        // Freed bufferevents close their sockets from a callback on the next pass; run it so
        // nothing stays open after the loop ends.
        event_base_loop(base, Int32(EVLOOP_NONBLOCK))
        runningThread.store(0, ordering: .relaxed)
    }

    /// True on the thread currently running this loop.
    public var inLoopThread: Bool {
        runningThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Breaks out of `run()` after the current callbacks; safe from any thread.
    public func stop() {
        execute { [self] in event_base_loopbreak(self.base) }
    }

    /// Starts a dedicated thread running this loop.
    public func startThread() {
        thread = OSThread.start { [self] in run() }
    }

    /// Waits for the thread started by `startThread()` to finish.
    public func join() {
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Seconds on libevent's cached monotonic-ish clock for this iteration (cheap, no syscall).
    public var now: Double {
        var tv = timeval()
        event_base_gettimeofday_cached(base, &tv)
        return Double(tv.tv_sec) + Double(tv.tv_usec) / 1_000_000
    }
}

/// A timer on one loop; the owner keeps it alive, and it is cancelled when released.
public final class LoopTimer {
    private var event: OpaquePointer?
    private let action: () -> Void

    /// Creates a disarmed timer that runs `action` on `loop`'s thread each time it fires.
    public init(loop: EventLoop, _ action: @escaping () -> Void) {
        self.action = action
        event = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<LoopTimer>.fromOpaque(arg!).takeUnretainedValue().action()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Fires once after `seconds` (re-arming replaces the previous deadline).
    public func arm(seconds: Double) {
        var tv = timeval.peel(seconds)
        event_add(event, &tv)
    }

    /// Disarms without freeing.
    public func cancel() { event_del(event) }

    /// True while armed.
    public var isArmed: Bool { event_pending(event, Int16(EV_TIMEOUT), nil) != 0 }

    deinit { if let event { event_free(event) } }
}

extension timeval {
    static func peel(_ seconds: Double) -> timeval {
        let s = max(0, seconds)
        let whole = Int(s)
        return timeval(tv_sec: whole, tv_usec: Int((s - Double(whole)) * 1_000_000))
    }
}

/// Plain OS threads (pthreads) for loops and off-hot-path waits; started from a non-main file so
/// the closure is never inferred main-actor isolated.
public enum OSThread {
    private final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts a joinable thread running `body`.
    @discardableResult
    public static func start(_ body: @escaping @Sendable () -> Void) -> pthread_t {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { arg in
            Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return tid
    }

    /// Starts a detached thread running `body`.
    public static func detach(_ body: @escaping @Sendable () -> Void) {
        pthread_detach(start(body))
    }
}
