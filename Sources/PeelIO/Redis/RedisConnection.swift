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

/// What `AUTH` sends on every connection (Redis 6 ACL users, or `requirepass`'s default user).
/// Its description never shows the password.
public struct RedisCredentials: Sendable, Equatable, CustomStringConvertible {
    /// The ACL user; nil for `AUTH password` (the default user).
    public let user: [UInt8]?
    /// The password.
    public let password: [UInt8]

    /// Credentials for `user` (nil: the default user).
    public init(user: [UInt8]?, password: [UInt8]) {
        self.user = user
        self.password = password
    }

    public var description: String { user.map { "user \(String(decoding: $0, as: UTF8.self)) with a password" } ?? "a password" }

    /// The `AUTH` command's arguments.
    public var command: [[UInt8]] { [Array("AUTH".utf8)] + (user.map { [$0] } ?? []) + [password] }
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
    /// Connected, authenticated and the database selected, and the server has answered: commands
    /// may be sent.
    case connected
    /// The attempt failed (refused, unreachable, timed out, name not resolved); nothing is open.
    case connectFailed(String)
    /// An open connection ended; every command waiting on it got `.failed`.
    case disconnected(String)
    /// The server refused Peel's credentials (`WRONGPASS`) or wants some (`NOAUTH`); nothing is open.
    case authFailed(String)
}

/// One hiredis async connection on one event loop (its libevent adapter): no thread, no blocking
/// call on the loop. A host name is resolved by getaddrinfo on a short-lived thread, since hiredis
/// 0.14 would resolve it on the loop. Loop-thread only; every callback runs on the loop thread.
public final class RedisConnection: @unchecked Sendable {
    private let loop: EventLoop
    /// Unparsed bytes one reply may hold before the connection is dropped.
    private let maxReply: Int
    /// Sent with `AUTH` first on every connection, when set.
    private let credentials: RedisCredentials?
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    /// Contexts given up but not yet freed: freed on the next pass, unless hiredis frees one first
    /// (an error reply or a reader error later in the same read makes it free the context itself,
    /// and report that through the disconnect callback), so that no context is freed twice.
    private var abandoned: [UnsafeMutablePointer<redisAsyncContext>] = []
    private var connectTimer: LoopTimer?
    /// Bumped on every connect and close, so a late resolution or timer of an older attempt is ignored.
    private var attempt = 0
    private var database = 0
    /// True while the connection's first commands (AUTH, SELECT or PING) wait for their replies.
    private var handshaking = false
    /// True once connected and the database is selected.
    public private(set) var isConnected = false
    /// True from `connect` until connected or failed.
    public private(set) var isConnecting = false
    /// Commands sent whose replies have not come yet.
    public private(set) var pending = 0
    /// Connection events, on the loop thread.
    public var onEvent: ((RedisConnectionEvent) -> Void)?

    /// A connection that is not open yet; a reply holding more than `maxReply` bytes drops it.
    public init(loop: EventLoop, maxReply: Int, credentials: RedisCredentials? = nil) {
        self.loop = loop
        self.maxReply = maxReply
        self.credentials = credentials
    }

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
    /// black-holed), or that lost its authentication: commands waiting get `.failed`, and the owner
    /// hears `.disconnected(why)` (`.authFailed(why)` when `auth`).
    public func drop(_ why: String, auth: Bool = false) {
        guard isConnected || isConnecting else { return }
        abandon(why, auth: auth)
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
        let attached = peel_redis_attach(ac, loop.base, maxReply) { ac in
            guard let ac, let me = RedisConnection.owner(ac), !me.abandoned.contains(ac) else { return }
            // Reading has stopped; the context is freed on the next pass, outside hiredis.
            me.abandon("a reply over \(me.maxReply) bytes (--offline-store-max-entry and framing): not read further")
        }
        guard attached == REDIS_OK else {
            ac.pointee.data = nil
            redisAsyncFree(ac)
            return abandon("cannot attach to the event loop")
        }
        redisAsyncSetConnectCallback(ac) { ac, status in
            guard let ac, let me = RedisConnection.owner(ac) else { return }
            if let i = me.abandoned.firstIndex(of: UnsafeMutablePointer(mutating: ac)) {
                // A failed connect is freed by hiredis once this returns; a good one by the pass.
                if status != REDIS_OK { me.abandoned.remove(at: i) }
                return
            }
            me.connectFinished(status == REDIS_OK ? nil : (ac.pointee.errstr.map { String(cString: $0) } ?? "connect failed"))
        }
        redisAsyncSetDisconnectCallback(ac) { ac, status in
            guard let ac, let me = RedisConnection.owner(ac) else { return }
            // hiredis is freeing a context already given up: it must not be freed again.
            if let i = me.abandoned.firstIndex(of: UnsafeMutablePointer(mutating: ac)) {
                me.abandoned.remove(at: i)
                return
            }
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
        guard let ac = context else { return }
        // A TCP connect proves nothing (a port-forward with nothing behind it accepts and closes):
        // the connection is healthy once the server has answered. AUTH and SELECT are answers
        // enough; without them, PING asks for one. All within the connect timeout.
        var steps: [[[UInt8]]] = []
        if let credentials { steps.append(credentials.command) }
        if database != 0 { steps.append([Array("SELECT".utf8), Array(String(database).utf8)]) }
        if steps.isEmpty { steps.append([Array("PING".utf8)]) }
        handshaking = true
        handshake(ac, steps[...])
    }

    private func handshake(_ ac: UnsafeMutablePointer<redisAsyncContext>, _ steps: ArraySlice<[[UInt8]]>) {
        guard let step = steps.first else {
            handshaking = false
            return becomeConnected()
        }
        let name = String(decoding: step[0], as: UTF8.self)
        issue(ac, step) { [weak self] reply in
            guard let self, self.handshaking, let ac = self.context else { return }
            switch reply {
            case .bytes: self.handshake(ac, steps.dropFirst())
            case .error(let e) where Self.isAuthError(e):
                self.abandon("\(name): \(e)", auth: true)
            case .error(let e) where name == "AUTH":
                // `ERR AUTH <password> called without any password configured`: a mismatch of
                // credentials all the same.
                self.abandon("AUTH: \(e)", auth: true)
            case .error(let e): self.abandon("\(name): \(e)")
            case .failed(let e):
                // No reply: either hiredis is ending the connection (it frees the context and
                // reports through `ended` once its callbacks return; freeing it here too would free
                // it twice) or it refused the command outright. A pass later, only the latter is left.
                let mine = self.attempt
                self.loop.defer { [weak self] in
                    guard let self, self.attempt == mine, self.handshaking else { return }
                    self.abandon("\(name): \(e)")
                }
            default: self.abandon("\(name): unexpected reply")
            }
        }
    }

    /// Whether an error reply says the connection is not authenticated or the credentials are wrong
    /// (`NOAUTH Authentication required.`, `WRONGPASS invalid username-password pair`, Redis 5's
    /// `ERR invalid password`).
    public static func isAuthError(_ e: String) -> Bool {
        e.hasPrefix("NOAUTH") || e.hasPrefix("WRONGPASS") || e.hasPrefix("ERR invalid password")
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
    private func abandon(_ why: String, auth: Bool = false) {
        let wasConnecting = isConnecting
        attempt += 1
        connectTimer?.cancel()
        connectTimer = nil
        isConnecting = false
        isConnected = false
        handshaking = false
        if let ac = context {
            context = nil
            abandoned.append(ac)
            // Strongly held until then: the context's callbacks still name this connection.
            loop.defer { [self] in
                guard let i = abandoned.firstIndex(of: ac) else { return }
                abandoned.remove(at: i)
                ac.pointee.data = nil
                redisAsyncFree(ac)
            }
        }
        if auth { onEvent?(.authFailed(why)) } else if wasConnecting { onEvent?(.connectFailed(why)) } else { onEvent?(.disconnected(why)) }
    }

    private func ended(_ why: String) {
        // hiredis frees the context once this callback returns.
        context = nil
        let wasConnected = isConnected
        attempt += 1
        connectTimer?.cancel()
        connectTimer = nil
        isConnected = false
        handshaking = false
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
