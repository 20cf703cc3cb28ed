import PeelIO

// Reading stale answers from the shared store within its read bound.
extension RedisOfflineStore {

    func lookup(key: OfflineCacheKey, request: CacheRequest, requestField: @escaping (String) -> String?, terms: OfflineCache.Terms?,
                _ done: @escaping (OfflineCacheAnswer) -> Void) {
        let settings = terms ?? cache.settings.terms
        let finish: (OfflineCacheAnswer) -> Void = { [cache] answer in
            cache.count(answer)
            done(answer)
        }
        if request.refusesStored { return finish(.miss("the request asks for a fresh answer")) }
        guard connection.isConnected else {
            stats.readErrors.add(1, ordering: .relaxed)
            return finish(.miss("the offline store is not connected"))
        }
        let read = PendingRead(finish)
        let started = monotonicNow()
        let stats = self.stats
        let timer = LoopTimer(loop: loop) { [weak read] in
            guard let read, read.settle() else { return }
            stats.timeouts.add(1, ordering: .relaxed)
            stats.latency.withLock { $0.observe(monotonicNow() - started) }
            read.done(.miss("the offline store did not answer in time"))
        }
        read.timer = timer
        timer.arm(seconds: readTimeout)
        let sent = send(Self.read(codec.key(key), codec.maxEntry)) { [codec] reply in
            read.timer?.cancel()
            read.timer = nil
            guard read.settle() else { return }
            stats.latency.withLock { $0.observe(monotonicNow() - started) }
            switch reply {
            case .null:
                stats.misses.add(1, ordering: .relaxed)
                read.done(.miss("nothing stored"))
            case .bytes(let b) where b.isEmpty:
                // GETRANGE answers "" for a key that does not exist.
                stats.misses.add(1, ordering: .relaxed)
                read.done(.miss("nothing stored"))
            case .bytes(let b):
                switch codec.decode(b, under: codec.key(key)) {
                case .failure(let why):
                    stats.count(why)
                    read.done(.miss("a stored value was refused: \(why.rawValue)"))
                case .success(let value):
                    // RFC 9111 §4.1: used only when the fields its Vary names match (compared as keyed hashes).
                    for (name, h) in zip(value.vary, value.varyHashes) where codec.varyHash(name: name, value: requestField(name)) != h {
                        stats.misses.add(1, ordering: .relaxed)
                        return read.done(.miss("Vary differs"))
                    }
                    let answer = OfflineCacheRules.serve(value.record, request: request, maxAge: settings.maxAge,
                                                         override: settings.override, now: wallNow())
                    if case .miss = answer { stats.misses.add(1, ordering: .relaxed) } else { stats.hits.add(1, ordering: .relaxed) }
                    read.done(answer)
                }
            case .error, .failed, .other, .integer:
                stats.readErrors.add(1, ordering: .relaxed)
                read.done(.miss("the offline store failed"))
            }
        }
        if !sent, read.settle() {
            // Down, stalled, or as many commands waiting as allowed: the call does not wait.
            timer.cancel()
            stats.readErrors.add(1, ordering: .relaxed)
            read.done(.miss("the offline store is not answering"))
        }
    }

    /// One read in flight: answered exactly once, by the reply or by the timer.
    final class PendingRead {
        let done: (OfflineCacheAnswer) -> Void
        var timer: LoopTimer?
        var settled = false

        init(_ done: @escaping (OfflineCacheAnswer) -> Void) { self.done = done }

        /// True the first time only.
        func settle() -> Bool {
            if settled { return false }
            settled = true
            return true
        }
    }
}
