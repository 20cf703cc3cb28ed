import Synchronization

/// The bytes of request and response bodies held at once, across every worker (`max_buffered`):
/// one atomic counter, so a spike on one worker is bounded for the whole process. Request bodies,
/// and upstream answers past `answerAllowance`, are also counted per client
/// (`max_buffered_per_client`), so that no one client can hold the whole budget and starve the others.
public final class MemoryBudget: Sendable {
    /// Why bytes were refused.
    public enum Refusal: Error, Equatable, Sendable {
        /// The whole budget is held.
        case full
        /// This client already holds its share.
        case clientShare
    }

    private let held = Atomic<Int>(0)
    private let ceiling: Atomic<Int>
    private let clientCeiling: Atomic<Int>
    /// Bytes held per client (request bodies, answers past `answerAllowance`); an entry lives while
    /// its client holds any.
    private let clients = Locked<[String: Int]>([:])

    /// A budget of `limit` bytes, of which one client may hold `perClient` (default: all).
    public init(limit: Int, perClient: Int? = nil) {
        ceiling = Atomic(limit)
        clientCeiling = Atomic(perClient ?? limit)
    }

    /// Bytes reserved now.
    public var bytes: Int { held.load(ordering: .relaxed) }

    /// The limit in bytes; a reload may change it (what is held stays held).
    public var limit: Int {
        get { ceiling.load(ordering: .relaxed) }
        set { ceiling.store(newValue, ordering: .relaxed) }
    }

    /// The most one client may hold; a reload may change it (what is held stays held).
    public var perClientLimit: Int {
        get { clientCeiling.load(ordering: .relaxed) }
        set { clientCeiling.store(newValue, ordering: .relaxed) }
    }

    /// Takes `n` bytes; false, with nothing taken, when that would pass the limit.
    public func reserve(_ n: Int) -> Bool {
        let limit = self.limit
        var current = held.load(ordering: .relaxed)
        while true {
            if n > limit - current { return false }
            let (done, seen) = held.compareExchange(expected: current, desired: current + n, ordering: .relaxed)
            if done { return true }
            current = seen
        }
    }

    /// Gives back `n` bytes taken with `reserve`.
    public func release(_ n: Int) {
        if n > 0 { held.subtract(n, ordering: .relaxed) }
    }

    /// Takes `n` bytes for `client`; the refusal, with nothing taken, when that would pass the
    /// client's share or the whole budget.
    public func reserve(_ n: Int, client: String) -> Refusal? {
        clients.withLock { table in
            let mine = table[client] ?? 0
            if n > perClientLimit - mine { return .clientShare }
            guard reserve(n) else { return .full }
            table[client] = mine + n
            return nil
        }
    }

    /// Whether `n` more bytes for `client` would fit now, taking nothing: a declared length is
    /// checked at the head (so an honest client is told at once), and charged only as it arrives.
    public func admits(_ n: Int, client: String) -> Refusal? {
        let mine = clients.withLock { $0[client] ?? 0 }
        if n > perClientLimit - mine { return .clientShare }
        if n > limit - bytes { return .full }
        return nil
    }

    /// The bytes of one upstream answer counted against the whole budget alone; past them the whole
    /// answer is charged to its client. An answer this small leaves a reply most sockets take at
    /// once (a connection's kernel buffers hold about as much), so the common call never takes
    /// the lock, and what one client pins through it is bounded per connection it keeps open.
    public static let answerAllowance = 64 * 1024

    /// Takes `n` bytes of an upstream answer `client` waits for, which already holds `held` bytes
    /// (charged to `client` when `charged`, otherwise to the whole budget alone); on success all
    /// `held + n` are charged to `client`. The refusal, with nothing taken, when that would pass the
    /// whole budget, or the client's share while it holds anything besides this answer: one answer
    /// alone always fits the share (as one request body does), so an answer within
    /// `max_upstream_body` never becomes unservable, while many never hold more than the share.
    public func reserveAnswer(_ n: Int, client: String, held: Int, charged: Bool) -> Refusal? {
        clients.withLock { table in
            let mine = table[client] ?? 0
            let others = charged ? mine - held : mine
            if others > 0 && n > perClientLimit - others - held { return .clientShare }
            guard reserve(n) else { return .full }
            table[client] = others + held + n
            return nil
        }
    }

    /// Gives back `n` bytes taken with `reserve(_:client:)` or `reserveAnswer`.
    public func release(_ n: Int, client: String) {
        guard n > 0 else { return }
        release(n)
        clients.withLock { table in
            let left = (table[client] ?? 0) - n
            table[client] = left > 0 ? left : nil
        }
    }

    /// Bytes `client` holds now (request bodies, answers past `answerAllowance`).
    public func held(by client: String) -> Int { clients.withLock { $0[client] ?? 0 } }

    /// Clients holding bytes charged to them now.
    public var clientCount: Int { clients.withLock { $0.count } }
}
