import PeelIO

/// What `--offline-store` names: Peel's memory, or a Redis (or Valkey) server.
public enum OfflineStoreURL: Sendable, Equatable, CustomStringConvertible {
    /// The in-memory cache, one per process.
    case memory
    /// A Redis server and the database to select.
    case redis(RedisEndpoint, database: Int)

    public var description: String {
        switch self {
        case .memory: return "memory"
        case .redis(.tcp, let db): return "redis://\(endpointText)/\(db)"
        case .redis(.unix(let path), _): return "unix://" + path
        }
    }

    var endpointText: String {
        if case .redis(let e, _) = self { return e.description }
        return ""
    }

    /// Parses `memory`, `redis://HOST[:PORT][/DB]` (port 6379, database 0 by default) or `unix:///PATH`.
    public static func parse(_ text: String) -> Result<OfflineStoreURL, UpstreamURLError> {
        func bad(_ why: String) -> Result<OfflineStoreURL, UpstreamURLError> { .failure(UpstreamURLError(reason: why)) }
        if text == "memory" { return .success(.memory) }
        if text.hasPrefix("unix://") {
            let path = String(text.dropFirst(7))
            guard path.hasPrefix("/"), path.count > 1 else { return bad("unix:// needs an absolute path (unix:///run/redis.sock)") }
            guard !path.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return bad("has a control character in its path") }
            guard path.utf8.count < 108 else { return bad("a unix socket path must be shorter than 108 bytes") }
            return .success(.redis(.unix(path: path), database: 0))
        }
        guard text.hasPrefix("redis://") else { return bad("must be memory, redis://HOST:PORT[/DB] or unix:///PATH") }
        var rest = Substring(text.dropFirst(8))
        if rest.contains("?") || rest.contains("#") { return bad("must not carry a query or fragment") }
        if rest.contains("@") { return bad("must not carry a user or password: a URL is shown and logged; give them in --offline-store-password-file") }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard let n = Int(db), (0...1_000_000).contains(n) else { return bad("the database must be a number (redis://host:6379/0)") }
                database = n
            }
        }
        var host: Substring
        var port = 6379
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return bad("has an unclosed IPv6 bracket") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()) else { return bad("has a bad port") }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let p = Int(rest[rest.index(after: colon)...]) else { return bad("has a bad port") }
            port = p
        } else {
            host = rest
        }
        guard (1...65535).contains(port) else { return bad("port must be 1-65535") }
        guard !host.isEmpty else { return bad("has no host") }
        for c in host.utf8 where c <= 0x20 || c == 0x7F || c == UInt8(ascii: "/") || c == UInt8(ascii: "\\") {
            return bad("has an invalid host")
        }
        return .success(.redis(.tcp(host: String(host), port: port), database: database))
    }
}

/// One worker's view of the shared offline store: its own hiredis connection on its own
/// loop, the same rules as the in-memory cache, and a store that never makes a call slower or fail.
///
/// - Writes are sent after the answer (a deferred job on the loop), never waited for; at most
///   `maxOutstandingWrites` commands (and `maxOutstandingBytes` of values) wait for replies per
///   worker, and beyond them a write is dropped and counted.
/// - An answer written less than `rewriteAfter` ago whose value has not changed (the same body,
///   status, fields, validators and Vary values) is not written again: under load the same user's
///   answers cost one write a second, not one per call. Such an entry's `Age` can read up to that
///   much high (its TTL ends as much sooner), never low.
/// - Reads happen only while offline, bounded by `readTimeout`; a miss, a timeout or an error
///   gives the call what it would get without the store.
/// - A connection that fails or drops is retried with exponential backoff (0.1 s doubling to 5 s,
///   jittered) and counted. One that stops answering (a Redis stopped or black-holed: the socket
///   stays open) is dropped once a command has waited `stallTimeout` with no reply, and counted.
/// - Every command waiting for its reply counts against `maxOutstandingCommands`, reads and
///   deletions too; past it, writes and deletions are dropped and reads miss, counted.
final class RedisOfflineStore: OfflineStore {
    /// Commands waiting for replies per worker before writes are dropped.
    static let maxOutstandingWrites = 256
    /// Value bytes waiting to be written per worker before writes are dropped.
    static let maxOutstandingBytes = 8 << 20
    /// Unchanged answers are written again after this many seconds.
    static let rewriteAfter = 1.0
    /// Answers remembered per worker for `rewriteAfter` (the map is emptied when full).
    static let recentLimit = 4096
    /// Seconds one connection attempt may take.
    static let connectTimeout = 2.0
    /// Commands of any kind waiting for replies per worker (hiredis queues them without a bound).
    static let maxOutstandingCommands = 1024
    /// Seconds a command may wait with no reply at all before the connection is taken for stalled.
    static let stallTimeout = 2.0

    let loop: EventLoop
    let connection: RedisConnection
    let cache: OfflineCache
    let stats: OfflineStoreStats
    let codec: OfflineStoreCodec
    let endpoint: RedisEndpoint
    let database: Int
    let readTimeout: Double
    let workerIndex: Int
    var outstandingWrites = 0
    var outstandingBytes = 0
    /// Commands sent and not yet answered, and since when the oldest-unanswered stretch began.
    var outstandingCommands = 0
    var waitingSince = 0.0
    /// Fires while commands wait, to notice a store that stopped answering (see `stallTimeout`).
    var stallTimer: LoopTimer?
    var backoff = 0.1
    var retryTimer: LoopTimer?
    var counted = false
    var reportedDown = false
    var stopped = false
    /// What was last written per key, and when.
    var recent: [OfflineCacheKey: (fingerprint: Int, at: Double)] = [:]
    /// The same answers before any parsing: a hash of the raw status, fields and body, when it was
    /// offered, and the Vary names and values it was stored under. An answer that matches is not
    /// even read (`storable` builds a String per field: 14 µs of CPU per /small call measured).
    var offered: [OfflineCacheKey: (raw: Int, at: Double, vary: [String], values: [String?])] = [:]

    /// Bytes a reply may hold beyond the largest value Peel reads (`$<length>\r\n`, `\r\n`).
    static let replyFraming = 64

    init(loop: EventLoop, cache: OfflineCache, stats: OfflineStoreStats, codec: OfflineStoreCodec, endpoint: RedisEndpoint,
         database: Int, credentials: RedisCredentials?, readTimeout: Double, workerIndex: Int) {
        self.loop = loop
        self.cache = cache
        self.stats = stats
        self.codec = codec
        self.endpoint = endpoint
        self.database = database
        self.readTimeout = readTimeout
        self.workerIndex = workerIndex
        // Reads ask for at most the bound plus one byte; a reply longer than that is not Redis
        // answering Peel's commands, and is never buffered whole.
        connection = RedisConnection(loop: loop, maxReply: codec.maxEntry + 1 + Self.replyFraming, credentials: credentials)
        connection.onEvent = { [unowned self] event in self.connectionEvent(event) }
    }

    var isEnabled: Bool { cache.isEnabled }
    var maxBody: Int { codec.maxEntry }

    /// Connects; loop thread.
    func start() {
        stopped = false
        connection.connect(to: endpoint, database: database, timeout: Self.connectTimeout)
    }

    /// Closes the connection and stops retrying; loop thread.
    func stop() {
        stopped = true
        retryTimer?.cancel()
        stallTimer?.cancel()
        if counted { stats.connected.subtract(1, ordering: .relaxed) }
        counted = false
        connection.close()
    }

    func connectionEvent(_ event: RedisConnectionEvent) {
        switch event {
        case .connected:
            // The server answered (the handshake's reply): only now is the outage over.
            backoff = 0.1
            stats.authFailed.store(false, ordering: .relaxed)
            if !counted { stats.connected.add(1, ordering: .relaxed) }
            counted = true
            if reportedDown || workerIndex == 0 {
                EventLog.emit("offline_store_connected", [("worker", "\(workerIndex)"), ("store", jsonEscaped(stats.endpoint))])
            }
            reportedDown = false
        case .connectFailed(let why), .disconnected(let why), .authFailed(let why):
            if counted { stats.connected.subtract(1, ordering: .relaxed) }
            counted = false
            if case .authFailed = event {
                // Counted apart: a password to fix, not a store that is down or full.
                stats.authFailures.add(1, ordering: .relaxed)
                stats.authFailed.store(true, ordering: .relaxed)
            } else {
                stats.connectFailures.add(1, ordering: .relaxed)
            }
            stats.lastError.withLock { $0 = (why, wallNow()) }
            if !reportedDown {
                // Once per outage and worker: a store that stays down is in /status and /metrics.
                let state = if case .authFailed = event { "auth_failed" } else { "down" }
                EventLog.emit("offline_store_down", [("worker", "\(workerIndex)"), ("store", jsonEscaped(stats.endpoint)),
                                                     ("state", jsonEscaped(state)), ("error", jsonEscaped(why)),
                                                     ("retry_in", "\(backoff)")])
                reportedDown = true
            }
            // Replies still owed on the lost connection came back as failures; the bound starts again.
            guard !stopped else { return }
            let delay = backoff * Double.random(in: 0.8...1.2)
            backoff = min(5, backoff * 2)
            let timer = retryTimer ?? LoopTimer(loop: loop) { [unowned self] in
                if !self.stopped { self.connection.connect(to: self.endpoint, database: self.database, timeout: Self.connectTimeout) }
            }
            retryTimer = timer
            timer.arm(seconds: delay)
        }
    }

    // MARK: commands

    /// Sends one command, counted until its reply; false (and nothing sent) when the connection is
    /// down, stalled, or `maxOutstandingCommands` already wait.
    func send(_ arguments: [[UInt8]], _ done: @escaping (RedisReply) -> Void) -> Bool {
        let now = monotonicNow()
        guard connection.isConnected, outstandingCommands < Self.maxOutstandingCommands else { return false }
        if outstandingCommands == 0 {
            waitingSince = now
            armStallCheck(Self.stallTimeout)
        }
        outstandingCommands += 1
        connection.send(arguments) { [weak self] reply in
            if let self, self.outstandingCommands > 0 {
                self.outstandingCommands -= 1
                self.waitingSince = monotonicNow()
            }
            done(reply)
        }
        return true
    }

    func armStallCheck(_ seconds: Double) {
        let timer = stallTimer ?? LoopTimer(loop: loop) { [weak self] in self?.stallCheck() }
        stallTimer = timer
        timer.arm(seconds: seconds)
    }

    /// Replies stopped coming while commands wait (the socket still open): the connection is dropped,
    /// the owed replies come back failed, and the retry loop takes over (a SIGSTOPped Redis would
    /// otherwise stay "connected" for good while every write is dropped).
    func stallCheck() {
        guard outstandingCommands > 0, connection.isConnected else { return }
        let quiet = monotonicNow() - waitingSince
        if quiet < Self.stallTimeout { return armStallCheck(Self.stallTimeout - quiet) }
        outstandingCommands = 0
        connection.drop("no reply within \(secondsText(Self.stallTimeout))")
    }

    /// Runs `done` on the loop once every command this store sent before has been answered (Redis
    /// answers one connection's commands in order), deferred writes included; at once when down.
    func afterPendingCommands(_ done: @escaping () -> Void) {
        loop.defer { [self] in
            if !send([Array("PING".utf8)], { _ in done() }) { done() }
        }
    }

    // MARK: invalidation

    /// Drops the stored answer for `key`: a newer answer to its request that may not be stored, or
    /// (RFC 9111 §4.4) one an unsafe method made stale. Deferred like writes, so a write sent for an
    /// older answer never lands after it.
    func invalidate(key: OfflineCacheKey) {
        guard cache.isEnabled else { return }
        forget(key)
        loop.defer { [self] in
            let sent = send([Array("DEL".utf8), codec.key(key)]) { [weak self] reply in
                if case .failed = reply { self?.stats.writesFailed.add(1, ordering: .relaxed) }
            }
            if !sent { stats.writesDropped.add(1, ordering: .relaxed) }
        }
    }

    /// What was written or offered for `key` is no longer known to be in the store.
    func forget(_ key: OfflineCacheKey) {
        recent[key] = nil
        offered[key] = nil
    }

    func release(_ estimate: Int) {
        outstandingWrites -= 1
        outstandingBytes -= estimate
    }

    static func fingerprint(_ r: OfflineCacheRecord, _ hashes: [[UInt8]]) -> Int {
        var h = Hasher()
        h.combine(r.status)
        h.combine(r.contentType)
        h.combine(r.etag)
        h.combine(r.lastModified)
        for (n, v) in r.fields.pairs {
            h.combine(n)
            h.combine(v)
        }
        for x in hashes { h.combine(x) }
        r.body.withUnsafeBytes { h.combine(bytes: $0) }
        return h.finalize()
    }

    /// At most `max + 1` bytes of the value: one over the bound is enough to refuse it, and a value
    /// planted far larger never crosses the wire whole.
    static func read(_ key: [UInt8], _ max: Int) -> [[UInt8]] {
        [Array("GETRANGE".utf8), key, Array("0".utf8), Array(String(max).utf8)]
    }

}
