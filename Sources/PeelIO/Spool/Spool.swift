import Glibc
import Synchronization

/// Where buffered upstream answers go once they pass `threshold` bytes (nginx's `proxy_temp_path`),
/// and request bodies declaring more (`client_body_temp_path`):
/// files in `directory`, unlinked as they are created so a killed Peel leaves nothing behind, bounded
/// by a disk budget (`max_spooled`, with its per-client share) apart from the memory budget.
public final class Spool: Sendable {
    /// The directory spool files are created in (`spool_dir`).
    public let directory: String
    /// Spooled bytes held now, whole process and per client group (`max_spooled`, `max_spooled_per_client`).
    public let budget: MemoryBudget
    private let thresholdBytes: Atomic<Int>
    private let openFiles = Atomic<Int>(0)

    /// A spool in `directory` for answers past `threshold` bytes (0: never), bounded by `limit`
    /// spooled bytes, of which one client may hold `perClient`.
    public init(directory: String, threshold: Int, limit: Int, perClient: Int) {
        self.directory = directory
        thresholdBytes = Atomic(threshold)
        budget = MemoryBudget(limit: limit, perClient: perClient)
    }

    /// Bytes of a buffered answer past which it goes to a file; 0 keeps every answer in memory. A
    /// reload may change it (answers being spooled stay spooled).
    public var threshold: Int {
        get { thresholdBytes.load(ordering: .relaxed) }
        set { thresholdBytes.store(newValue, ordering: .relaxed) }
    }

    /// Spool files open now (being written, or held until their answer is written).
    public var files: Int { openFiles.load(ordering: .relaxed) }

    /// Spooled bytes held now.
    public var bytes: Int { budget.bytes }

    /// A new file no name reaches, open for reading and writing: `O_TMPFILE` (Linux 3.11, where the
    /// file system supports it), else a named file unlinked at once.
    func create() -> Result<Int32, SpoolError> {
        // O_TMPFILE is `__O_TMPFILE | O_DIRECTORY`; Glibc's macro does not reach Swift.
        let tmpfile: Int32 = 0o20000000 | O_DIRECTORY
        let fd = open(directory, tmpfile | O_RDWR | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 { return opened(fd) }
        let e = errno
        // EOPNOTSUPP: the file system has no O_TMPFILE; EISDIR: a kernel that does not know the flag.
        guard e == EOPNOTSUPP || e == EISDIR || e == EINVAL else { return .failure(SpoolError(errno: e, site: "open(\(directory), O_TMPFILE)")) }
        var template = Array((directory.hasSuffix("/") ? directory : directory + "/").utf8CString.dropLast()) + Array("peel-spool-XXXXXX".utf8CString)
        // mkostemp needs _GNU_SOURCE, which Glibc's module does not define: the flag follows at once.
        let named = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard named >= 0 else { return .failure(SpoolError(errno: errno, site: "mkstemp(\(directory))")) }
        _ = fcntl(named, F_SETFD, FD_CLOEXEC)
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        guard unlink(path) == 0 else {
            let e = errno
            Glibc.close(named)
            return .failure(SpoolError(errno: e, site: "unlink(\(path))"))
        }
        return opened(named)
    }

    private func opened(_ fd: Int32) -> Result<Int32, SpoolError> {
        openFiles.add(1, ordering: .relaxed)
        return .success(fd)
    }

    /// Closes a spool file `create` opened.
    func close(_ fd: Int32) {
        Glibc.close(fd)
        openFiles.subtract(1, ordering: .relaxed)
    }

    /// Whether a spool file can be created and written now: nil when it can, else why not (for
    /// `/readyz` and the start-up check).
    public func check() -> String? {
        switch create() {
        case .failure(let e): return e.description
        case .success(let fd):
            defer { close(fd) }
            var byte: UInt8 = 0
            if write(fd, &byte, 1) != 1 { return SpoolError(errno: errno, site: "write(\(directory))").description }
            return nil
        }
    }
}

/// A spool file that could not be created, written or read.
public struct SpoolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// errno of the failed call.
    public let errno: Int32
    /// The call, with the directory.
    public let site: String

    public var description: String { "\(site): \(String(cString: strerror(errno)))" }
}

/// One answer's (or request body's) bytes as they are written to a spool file, charged to the disk
/// budget as they go; the transfer that receives the answer (or the connection reading the body) owns it. Closes the file and gives the bytes back when
/// dropped unfinished (a failed or cancelled call).
final class SpoolWriter {
    private let spool: Spool
    /// The file; -1 once handed on with `finish`.
    private(set) var fd: Int32
    /// The client group the bytes are charged to; nil for Peel's own calls (the whole budget alone).
    private let client: String?
    /// Bytes taken (and charged): written, or gathered to be.
    private(set) var count = 0
    /// Bytes gathered before they are written, `stagingSize` at most: curl hands a body over 16 KiB
    /// at a time (CURL_MAX_WRITE_SIZE), and a write per piece cost 1,280 system calls per 20 MB.
    private var staging: UnsafeMutableRawPointer?
    private var staged = 0
    /// Whether pieces are gathered (an upstream answer's) or written as they come (a request
    /// body's, which arrives through a 64 KiB window already).
    private let gathers: Bool
    static let stagingSize = 262_144

    /// What stopped a write.
    enum Failure: Error, Equatable {
        /// The whole disk budget is held.
        case full
        /// This client holds its share of it.
        case clientShare
        /// The file system refused the bytes (ENOSPC, EFBIG, EIO…).
        case write(SpoolError)
    }

    private init(spool: Spool, fd: Int32, client: String?, gathers: Bool) {
        self.spool = spool
        self.fd = fd
        self.client = client
        self.gathers = gathers
    }

    /// A new spool file for a body of `client`'s; `gathers` pieces into `stagingSize` writes (the
    /// caller charges that memory).
    static func open(_ spool: Spool, client: String?, gathers: Bool = false) -> Result<SpoolWriter, SpoolError> {
        spool.create().map { SpoolWriter(spool: spool, fd: $0, client: client, gathers: gathers) }
    }

    /// A writer over a descriptor opened elsewhere (tests inject failing ones: /dev/full).
    static func adopting(_ fd: Int32, spool: Spool, client: String?, gathers: Bool = false) -> SpoolWriter {
        SpoolWriter(spool: spool, fd: fd, client: client, gathers: gathers)
    }

    /// Charges and appends `bytes` (gathered up to `stagingSize`, then written); on failure nothing
    /// more is charged, and the file is dropped with the writer. A regular file's write never
    /// returns EAGAIN: each is at most `stagingSize` (or the threshold's bytes once), so one call
    /// blocks the loop no longer than the page cache takes them, as nginx writes its temp files.
    func append(_ bytes: UnsafeRawBufferPointer) -> Failure? {
        guard bytes.count > 0, let base = bytes.baseAddress else { return nil }
        let refusal: MemoryBudget.Refusal?
        if let client { refusal = spool.budget.reserve(bytes.count, client: client) } else { refusal = spool.budget.reserve(bytes.count) ? nil : .full }
        if let refusal { return refusal == .full ? .full : .clientShare }
        count += bytes.count
        if !gathers || (staged == 0 && bytes.count >= Self.stagingSize) {
            return writeAll(UnsafeRawBufferPointer(start: base, count: bytes.count))
        }
        let buffer = staging ?? UnsafeMutableRawPointer.allocate(byteCount: Self.stagingSize, alignment: 64)
        staging = buffer
        var taken = 0
        while taken < bytes.count {
            let n = min(bytes.count - taken, Self.stagingSize - staged)
            (buffer + staged).copyMemory(from: base + taken, byteCount: n)
            staged += n
            taken += n
            if staged == Self.stagingSize, let failure = flush() { return failure }
        }
        return nil
    }

    /// Writes what is gathered; the failure when the file system refused it.
    func flush() -> Failure? {
        guard staged > 0, let staging else { return nil }
        let n = staged
        staged = 0
        return writeAll(UnsafeRawBufferPointer(start: staging, count: n))
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) -> Failure? {
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                // The bytes stay charged in `count` until the writer goes, with its file.
                return .write(SpoolError(errno: errno, site: "write(spool file in \(spool.directory))"))
            }
            done += n
        }
        return nil
    }

    private func give(back n: Int) {
        if let client { spool.budget.release(n, client: client) } else { spool.budget.release(n) }
    }

    /// The whole answer, its last bytes written, handed on for judging and sending; the writer is
    /// spent. The failure (the writer keeps the file, dropped with it) when the last write failed.
    func finish() -> Result<SpooledBody, Failure> {
        if let failure = flush() { return .failure(failure) }
        let body = SpooledBody(spool: spool, fd: fd, count: count, client: client)
        fd = -1
        count = 0
        return .success(body)
    }

    deinit {
        staging?.deallocate()
        guard fd >= 0 else { return }
        give(back: count)
        spool.close(fd)
    }
}

/// A whole answer in a spool file: read through a short-lived mapping (judging, compressing) or
/// sent with sendfile(2). The file closes, and its bytes leave the disk budget, when the last owner
/// lets go (after the answer is written, or when the connection closes).
public final class SpooledBody: Sendable {
    private let spool: Spool
    /// The file (read with pread, mmap and sendfile only; its offset is never used).
    let fd: Int32
    /// Bytes in the file.
    public let count: Int
    private let client: String?

    fileprivate init(spool: Spool, fd: Int32, count: Int, client: String?) {
        self.spool = spool
        self.fd = fd
        self.count = count
        self.client = client
    }

    deinit {
        if let client { spool.budget.release(count, client: client) } else { spool.budget.release(count) }
        spool.close(fd)
    }

    /// Calls `body` with the whole file mapped read-only, and unmaps it before returning, so memory
    /// holds only the answers being read at that moment; the pointer must not escape. The error
    /// when the file cannot be mapped.
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> Result<R, SpoolError> {
        guard count > 0 else { return .success(body(UnsafeBufferPointer(start: nil, count: 0))) }
        guard let map = mmap(nil, count, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0), map != MAP_FAILED else {
            return .failure(SpoolError(errno: errno, site: "mmap(spool file)"))
        }
        defer { munmap(map, count) }
        return .success(body(UnsafeBufferPointer(start: map.assumingMemoryBound(to: UInt8.self), count: count)))
    }

    /// Reads up to `buffer.count` bytes from `offset` into `buffer` (a request body sent upstream, an
    /// answer compressed as it is sent):
    /// how many, 0 at the end, -1 when the file cannot be read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        let want = min(buffer.count, count - offset)
        guard want > 0, let base = buffer.baseAddress else { return 0 }
        while true {
            let n = pread(fd, base, want, off_t(offset))
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    /// A copy of `range` of the file (an excerpt, a stored answer); the bytes up to the end when it
    /// ends sooner, none when it cannot be read.
    public func read(_ range: Range<Int>) -> [UInt8] {
        let range = range.clamped(to: 0..<count)
        guard !range.isEmpty else { return [] }
        var out = [UInt8](repeating: 0, count: range.count)
        var done = 0
        while done < range.count {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, range.count - done, off_t(range.lowerBound + done)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            done += n
        }
        return Array(out.prefix(done))
    }
}
