import Synchronization

/// The bytes of request and response bodies held at once, across every worker (`max_buffered`):
/// one atomic counter, so a spike on one worker is bounded for the whole process.
public final class MemoryBudget: Sendable {
    private let held = Atomic<Int>(0)
    private let ceiling: Atomic<Int>

    /// A budget of `limit` bytes.
    public init(limit: Int) {
        ceiling = Atomic(limit)
    }

    /// Bytes reserved now.
    public var bytes: Int { held.load(ordering: .relaxed) }

    /// The limit in bytes; a reload may change it (what is held stays held).
    public var limit: Int {
        get { ceiling.load(ordering: .relaxed) }
        set { ceiling.store(newValue, ordering: .relaxed) }
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
}
