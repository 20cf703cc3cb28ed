import Glibc
import Synchronization

// Linux's pipe-size commands (<fcntl.h> with _GNU_SOURCE), which Glibc's module does not export.
private let F_SETPIPE_SZ: Int32 = 1031
private let F_GETPIPE_SZ: Int32 = 1032

private extension String {
    var trimmingSpaces: String { String(self.filter { !$0.isWhitespace }) }
}

/// Log lines on their way to a descriptor, written by one thread of their own so that a sink that
/// stalls (a stuck log shipper, Docker's blocking log mode) never blocks an event loop.
/// Callers hand over whole lines; at most `capacity` bytes wait, and what does not fit is dropped
/// and counted. One thread is the only writer of its descriptor and writes whole lines from its
/// own offset, so lines never interleave, whatever their length.
public final class LogWriter: @unchecked Sendable {
    /// The descriptor written to.
    public let fd: Int32
    private let limit: Atomic<Int>
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>
    // Guarded by `mutex`.
    private var queue: [UInt8] = []
    private var writing = false
    private var started = false
    private let droppedLines = Atomic<Int>(0)

    /// A writer for `fd`; its thread starts with the first line.
    public init(fd: Int32, capacity: Int) {
        self.fd = fd
        limit = Atomic(capacity)
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    /// Most bytes waiting at once (`--log-buffer`); a reload may change it, lines queued stay.
    public var capacity: Int {
        get { limit.load(ordering: .relaxed) }
        set { limit.store(newValue, ordering: .relaxed) }
    }

    /// Lines dropped because `capacity` bytes were already waiting.
    public var dropped: Int { droppedLines.load(ordering: .relaxed) }

    /// Queues `bytes`, which must be `lines` whole lines; never waits for the descriptor. False (and
    /// the lines counted as dropped) when they do not fit.
    @discardableResult
    public func submit(_ bytes: [UInt8], lines: Int) -> Bool {
        guard !bytes.isEmpty else { return true }
        pthread_mutex_lock(mutex)
        guard queue.count + bytes.count <= capacity else {
            pthread_mutex_unlock(mutex)
            droppedLines.add(lines, ordering: .relaxed)
            return false
        }
        queue.append(contentsOf: bytes)
        if !started {
            started = true
            OSThread.detach { [self] in run() }
        }
        // Broadcast: a flush() waiter shares the condition, and a signal could wake it instead of
        // the writer.
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
        return true
    }

    /// Waits up to `timeout` seconds for every queued line to be written; true when they were.
    @discardableResult
    public func flush(timeout: Double) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let ns = Int(timeout * 1e9) + deadline.tv_nsec
        deadline.tv_sec += ns / 1_000_000_000
        deadline.tv_nsec = ns % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !queue.isEmpty || writing {
            if pthread_cond_timedwait(cond, mutex, &deadline) == ETIMEDOUT { return queue.isEmpty && !writing }
        }
        return true
    }

    private func run() {
        var batch: [UInt8] = []
        pthread_mutex_lock(mutex)
        while true {
            while queue.isEmpty { pthread_cond_wait(cond, mutex) }
            swap(&batch, &queue)
            writing = true
            pthread_mutex_unlock(mutex)
            writeWhole(batch)
            // A burst's batch is not kept at its size: the queue it swaps with would hold it too.
            if batch.capacity > 1 << 20 { batch = [] } else { batch.removeAll(keepingCapacity: true) }
            pthread_mutex_lock(mutex)
            writing = false
            // Wakes flush() waiters (and is harmless for submitters).
            pthread_cond_broadcast(cond)
        }
    }

    /// Writes all of `bytes`, resuming partial writes; waits in poll(2) on a non-blocking sink.
    private func writeWhole(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = write(fd, raw.baseAddress! + off, raw.count - off)
                if n >= 0 {
                    off += n
                    continue
                }
                switch errno {
                case EINTR:
                    continue
                case EAGAIN:
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&p, 1, 1000)
                default:
                    // EPIPE, EBADF: nobody can read these lines; the rest of the batch goes too.
                    return
                }
            }
        }
    }

    /// Grows the descriptor's pipe, when it is one, toward `bytes` (at most the system's
    /// `fs.pipe-max-size`, 1 MiB by default; never shrinks it). A reader that wakes now and then and
    /// reads until the pipe is empty takes what the pipe holds plus what this thread writes while it
    /// reads: with Linux's 64 KiB pipe, a reader on a busy machine often finds it empty after one
    /// read and sleeps again, while lines arrive faster than that. Returns the pipe's size, nil
    /// when the descriptor is no pipe.
    @discardableResult
    public func widenPipe(to bytes: Int) -> Int? {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFIFO else { return nil }
        let current = fcntl(fd, F_GETPIPE_SZ)
        guard current > 0 else { return nil }
        let target = min(bytes, LogWriter.pipeMaxSize())
        if target > Int(current), fcntl(fd, F_SETPIPE_SZ, Int32(target)) > 0 {
            let now = fcntl(fd, F_GETPIPE_SZ)
            return now > 0 ? Int(now) : target
        }
        // EPERM (over the limit without CAP_SYS_RESOURCE) or EBUSY: the pipe keeps its size.
        return Int(current)
    }

    /// `fs.pipe-max-size`: the largest pipe an unprivileged process may ask for (1 MiB by default).
    private static func pipeMaxSize() -> Int {
        let fd = open("/proc/sys/fs/pipe-max-size", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 1 << 20 }
        defer { close(fd) }
        var text = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &text, text.count)
        guard n > 0 else { return 1 << 20 }
        return Int(String(decoding: text[0..<n], as: UTF8.self).trimmingSpaces) ?? 1 << 20
    }

    /// True when descriptors `a` and `b` are the same open file (`2>&1`): one writer must serve
    /// both, or two writers' lines would interleave.
    public static func sameFile(_ a: Int32, _ b: Int32) -> Bool {
        var sa = stat(), sb = stat()
        guard fstat(a, &sa) == 0, fstat(b, &sb) == 0 else { return false }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }
}
