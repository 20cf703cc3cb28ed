import CEvent
import CHiredis
import CPeelRedis
import Glibc

/// Where a Redis (or Valkey) server listens.
public enum RedisEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// TCP: a host name or a numeric address, and a port.
    case tcp(host: String, port: Int)
    /// A unix socket path.
    case unix(path: String)

    public var description: String {
        switch self {
        case .tcp(let host, let port): return (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
        case .unix(let path): return "unix://" + path
        }
    }
}

/// One reply, as Peel reads them.
public enum RedisReply: Sendable {
    /// A bulk string or a status reply.
    case bytes([UInt8])
    /// A nil reply (a key that does not exist).
    case null
    /// An integer reply.
    case integer(Int)
    /// The server's error reply (`OOM …`, `WRONGTYPE …`).
    case error(String)
    /// No reply came: not connected, or the connection ended before it.
    case failed(String)
    /// An array or another kind Peel does not ask for.
    case other
}

/// What a connection reports to its owner.
public enum RedisConnectionEvent: Sendable {
    /// Connected (and the database selected): commands may be sent.
    case connected
    /// The attempt failed (refused, unreachable, timed out, name not resolved); nothing is open.
    case connectFailed(String)
    /// An open connection ended; every command waiting on it got `.failed`.
    case disconnected(String)
}

/// One hiredis async connection on one event loop (its libevent adapter): no thread, no blocking
/// call on the loop. A host name is resolved by getaddrinfo on a short-lived thread, since hiredis
/// 0.14 would resolve it on the loop. Loop-thread only; every callback runs on the loop thread.
public final class RedisConnection: @unchecked Sendable {
    private let loop: EventLoop
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var connectTimer: LoopTimer?
    /// Bumped on every connect and close, so a late resolution or timer of an older attempt is ignored.
    private var attempt = 0
    private var database = 0
    private var selecting = false
    /// True once connected and the database is selected.
    public private(set) var isConnected = false
    /// True from `connect` until connected or failed.
    public private(set) var isConnecting = false
    /// Commands sent whose replies have not come yet.
    public private(set) var pending = 0
    /// Connection events, on the loop thread.
    public var onEvent: ((RedisConnectionEvent) -> Void)?

    /// A connection that is not open yet.
    public init(loop: EventLoop) { self.loop = loop }

    deinit { close() }

    /// Starts connecting to `endpoint` and selects `database`; `onEvent` tells how it went within
    /// `timeout` seconds. Ignored while connecting or connected.
    public func connect(to endpoint: RedisEndpoint, database: Int, timeout: Double) {
        guard context == nil, !isConnecting else { return }
        attempt += 1
        let mine = attempt
        self.database = database
        isConnecting = true
        let timer = LoopTimer(loop: loop) { [weak self] in
            guard let self, self.attempt == mine, self.isConnecting else { return }
            self.abandon("connect timed out after \(timeout) s")
        }
        connectTimer = timer
        timer.arm(seconds: timeout)
        switch endpoint {
        case .unix(let path):
            open(redisAsyncConnectUnix(path))
        case .tcp(let host, let port):
            if Self.isNumeric(host) { return open(redisAsyncConnect(host, Int32(port))) }
            let loop = self.loop
            OSThread.detach { [self] in
                let address = Self.resolve(host)
                loop.execute { [self] in
                    guard self.attempt == mine, self.isConnecting else { return }
                    guard let address else { return self.abandon("cannot resolve \(host)") }
                    self.open(redisAsyncConnect(address, Int32(port)))
                }
            }
        }
    }

    /// Sends one command (its arguments as bytes); `done` runs exactly once on the loop thread, with
    /// `.failed` at once when not connected. Never waits.
    public func send(_ arguments: [[UInt8]], _ done: @escaping (RedisReply) -> Void) {
        guard isConnected, let ac = context else { return done(.failed("not connected")) }
        issue(ac, arguments, done)
    }

    /// Gives up on a connection that stopped answering (its socket still open: a Redis stopped or
    /// black-holed): commands waiting get `.failed`, and the owner hears `.disconnected(why)`.
    public func drop(_ why: String) {
        guard isConnected || isConnecting else { return }
        abandon(why)
    }

    /// Closes the connection; commands waiting get `.failed`, and no event is reported.
    public func close() {
        attempt += 1
        connectTimer?.cancel()
        connectTimer = nil
        isConnecting = false
        isConnected = false
        guard let ac = context else { return }
        context = nil
        ac.pointee.data = nil
        redisAsyncFree(ac)
    }

    // MARK: hiredis

    private func issue(_ ac: UnsafeMutablePointer<redisAsyncContext>, _ arguments: [[UInt8]], _ done: @escaping (RedisReply) -> Void) {
        let box = Unmanaged.passRetained(ReplyBox(done, self)).toOpaque()
        // hiredis copies the arguments into its output buffer before this returns.
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        var storage: [UnsafeMutablePointer<CChar>] = []
        pointers.reserveCapacity(arguments.count)
        for a in arguments {
            let p = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, a.count))
            a.withUnsafeBytes { raw in
                if let base = raw.baseAddress { UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: a.count) }
            }
            storage.append(p)
            pointers.append(UnsafePointer(p))
            lengths.append(a.count)
        }
        defer { for p in storage { p.deallocate() } }
        pending += 1
        let rc = pointers.withUnsafeMutableBufferPointer { argv in
            lengths.withUnsafeBufferPointer { argvlen in
                redisAsyncCommandArgv(ac, { ac, reply, privdata in
                    RedisConnection.replied(reply, privdata)
                }, box, Int32(arguments.count), argv.baseAddress, argvlen.baseAddress)
            }
        }
        if rc != REDIS_OK {
            pending -= 1
            Unmanaged<ReplyBox>.fromOpaque(box).takeRetainedValue().done(.failed("hiredis refused the command"))
        }
    }

    private static func replied(_ reply: UnsafeMutableRawPointer?, _ privdata: UnsafeMutableRawPointer?) {
        guard let privdata else { return }
        let box = Unmanaged<ReplyBox>.fromOpaque(privdata).takeRetainedValue()
        box.owner?.pending -= 1
        guard let r = reply?.assumingMemoryBound(to: redisReply.self).pointee else {
            return box.done(.failed("the connection ended before the reply"))
        }
        switch Int32(r.type) {
        case REDIS_REPLY_STRING, REDIS_REPLY_STATUS:
            let n = Int(r.len)
            var bytes = [UInt8](repeating: 0, count: n)
            if n > 0, let s = r.str { bytes.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: s, byteCount: n) } }
            box.done(.bytes(bytes))
        case REDIS_REPLY_NIL: box.done(.null)
        case REDIS_REPLY_INTEGER: box.done(.integer(Int(r.integer)))
        case REDIS_REPLY_ERROR: box.done(.error(r.str.map { String(cString: $0) } ?? "error"))
        default: box.done(.other)
        }
    }

    private final class ReplyBox {
        let done: (RedisReply) -> Void
        weak var owner: RedisConnection?
        init(_ done: @escaping (RedisReply) -> Void, _ owner: RedisConnection) {
            self.done = done
            self.owner = owner
        }
    }

    private func open(_ made: UnsafeMutablePointer<redisAsyncContext>?) {
        guard let ac = made else { return abandon("hiredis could not allocate a context") }
        if ac.pointee.err != 0 {
            let why = ac.pointee.errstr.map { String(cString: $0) } ?? "connect failed"
            redisAsyncFree(ac)
            return abandon(why)
        }
        ac.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        guard peel_redis_attach(ac, loop.base) == REDIS_OK else {
            ac.pointee.data = nil
            redisAsyncFree(ac)
            return abandon("cannot attach to the event loop")
        }
        redisAsyncSetConnectCallback(ac) { ac, status in
            guard let ac, let me = RedisConnection.owner(ac) else { return }
            me.connectFinished(status == REDIS_OK ? nil : (ac.pointee.errstr.map { String(cString: $0) } ?? "connect failed"))
        }
        redisAsyncSetDisconnectCallback(ac) { ac, status in
            guard let ac, let me = RedisConnection.owner(ac) else { return }
            me.ended(status == REDIS_OK ? "closed" : (ac.pointee.errstr.map { String(cString: $0) } ?? "connection lost"))
        }
        context = ac
    }

    private static func owner(_ ac: UnsafePointer<redisAsyncContext>) -> RedisConnection? {
        ac.pointee.data.map { Unmanaged<RedisConnection>.fromOpaque($0).takeUnretainedValue() }
    }

    private func connectFinished(_ error: String?) {
        if let error {
            // hiredis frees a context whose connect failed once this callback returns.
            context = nil
            return abandon(error)
        }
        guard database != 0, let ac = context else { return becomeConnected() }
        // SELECT before anything else, still within the connect timeout.
        selecting = true
        issue(ac, [Array("SELECT".utf8), Array(String(database).utf8)]) { [weak self] reply in
            guard let self, self.selecting else { return }
            self.selecting = false
            switch reply {
            case .bytes: self.becomeConnected()
            case .error(let e), .failed(let e): self.abandon("SELECT \(self.database): \(e)")
            default: self.abandon("SELECT \(self.database): unexpected reply")
            }
        }
    }

    private func becomeConnected() {
        connectTimer?.cancel()
        connectTimer = nil
        isConnecting = false
        isConnected = true
        onEvent?(.connected)
    }

    /// A connection attempt that will not become one: whatever is open is freed on the next pass
    /// (never inside a hiredis callback), and the owner hears why.
    private func abandon(_ why: String) {
        let wasConnecting = isConnecting
        attempt += 1
        connectTimer?.cancel()
        connectTimer = nil
        isConnecting = false
        isConnected = false
        selecting = false
        if let ac = context {
            context = nil
            ac.pointee.data = nil
            loop.defer { redisAsyncFree(ac) }
        }
        if wasConnecting { onEvent?(.connectFailed(why)) } else { onEvent?(.disconnected(why)) }
    }

    private func ended(_ why: String) {
        // hiredis frees the context once this callback returns.
        context = nil
        let wasConnected = isConnected
        attempt += 1
        connectTimer?.cancel()
        connectTimer = nil
        isConnected = false
        selecting = false
        if isConnecting {
            isConnecting = false
            onEvent?(.connectFailed(why))
        } else if wasConnected {
            onEvent?(.disconnected(why))
        }
    }

    private static func isNumeric(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// An address getaddrinfo gives for `host` (off the loop thread), IPv4 first: a Redis in a
    /// container or a single-stack cluster often listens on IPv4 only, while `localhost` may
    /// resolve to ::1 first.
    private static func resolve(_ host: String) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, list != nil else { return nil }
        defer { freeaddrinfo(list) }
        var found: [String] = []
        var next = list
        while let a = next {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(a.pointee.ai_addr, a.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 {
                let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                if a.pointee.ai_family == AF_INET { found.insert(text, at: 0) } else { found.append(text) }
            }
            next = a.pointee.ai_next
        }
        return found.first
    }
}
