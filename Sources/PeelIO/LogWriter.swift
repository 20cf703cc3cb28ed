import Glibc
import Synchronization

/// Log lines on their way to a descriptor, written by one thread of their own so that a sink that
/// stalls (a stuck log shipper, Docker's blocking log mode) never blocks an event loop (issue 18).
/// Callers hand over whole lines; at most `capacity` bytes wait, and what does not fit is dropped
/// and counted. One thread is the only writer of its descriptor and writes whole lines from its
/// own offset, so lines never interleave, whatever their length.
public final class LogWriter: @unchecked Sendable {
    /// The descriptor written to.
    public let fd: Int32
    /// Most bytes waiting at once.
    public let capacity: Int
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
        self.capacity = capacity
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
            batch.removeAll(keepingCapacity: true)
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

    /// True when descriptors `a` and `b` are the same open file (`2>&1`): one writer must serve
    /// both, or two writers' lines would interleave.
    public static func sameFile(_ a: Int32, _ b: Int32) -> Bool {
        var sa = stat(), sb = stat()
        guard fstat(a, &sa) == 0, fstat(b, &sb) == 0 else { return false }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }
}
