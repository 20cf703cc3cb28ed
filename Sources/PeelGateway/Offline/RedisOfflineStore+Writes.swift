import PeelIO

// Writing answers to the shared store: one MULTI per answer, bounded by the store's own limits.
extension RedisOfflineStore {

    func store(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
               status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8], terms: OfflineCache.Terms?) {
        guard cache.isEnabled else { return }
        // The TTL follows the call's generation; read now, so a reload before the write does not change it.
        let terms = terms ?? cache.settings.terms
        let now = wallNow()
        var h = Hasher()
        h.combine(status)
        h.combine(contentType)
        h.combine(fields)
        body.withUnsafeBytes { h.combine(bytes: $0) }
        let raw = h.finalize()
        if !request.directives.noStore, let last = offered[key], last.raw == raw, now - last.at < Self.rewriteAfter,
           last.vary.map(requestField) == last.values {
            stats.writesUnchanged.add(1, ordering: .relaxed)
            return
        }
        guard case .success(let answer) = OfflineCacheRules.storable(status: status, key: key, request: request,
                                                                      hasAuthorization: hasAuthorization, fields: fields) else {
            // A newer answer that may not be stored must not leave the older one servable, when it
            // speaks for the resource (`OfflineCacheRules.unstoredAnswerDrops`).
            if OfflineCacheRules.unstoredAnswerDrops(status: status, request: request, shared: key.isShared) { invalidate(key: key) }
            return
        }
        let values = answer.vary.map(requestField)
        let hashes = zip(answer.vary, values).map { codec.varyHash(name: $0.0, value: $0.1) }
        if offered.count >= Self.recentLimit { offered.removeAll(keepingCapacity: true) }
        offered[key] = (raw, now, answer.vary, values)
        // The rest runs on the loop's next pass, once the answer this call is writing has gone out.
        loop.defer { [self] in
            // A storable answer replaces the older one (RFC 9111 §4), even one that may not be served
            // (`public, no-cache` to a reload): the memory store keeps it in v1's place too.
            write(key, OfflineCacheRules.record(answer, status: status, contentType: contentType, body: body, now: now),
                  vary: answer.vary, hashes: hashes, now: now, terms: terms)
        }
    }

    func refresh(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                 notModified fields: ResponseHeaders, terms: OfflineCache.Terms?) {
        guard cache.isEnabled else { return }
        let terms = terms ?? cache.settings.terms
        // §5.2.1.5: nothing of a no-store request's answer is kept, and nothing stored is touched.
        if request.directives.noStore { return }
        let storable = OfflineCacheRules.storable(status: 200, key: key, request: request, hasAuthorization: hasAuthorization, fields: fields)
        let vary = OfflineCacheRules.varyNames(fields)
        let hashes = vary.map { codec.varyHash(name: $0, value: requestField($0)) }
        guard connection.isConnected else { stats.writesUnconnected.add(1, ordering: .relaxed); return }
        guard outstandingWrites < Self.maxOutstandingWrites else { stats.writesDropped.add(1, ordering: .relaxed); return }
        outstandingWrites += 1
        // The stored answer is read back (while the upstream is reachable, in the background) and
        // judged by the same rule as the memory store's (`OfflineCacheRules.notModified`).
        let sent = send(Self.read(codec.key(key), codec.maxEntry)) { [weak self] reply in
            guard let self else { return }
            self.outstandingWrites -= 1
            let now = wallNow()
            var stored: OfflineStoreValue?
            switch reply {
            case .bytes(let b) where !b.isEmpty:
                // A value that does not decode is never served: nothing full is stored.
                if case .success(let value) = self.codec.decode(b, under: self.codec.key(key)) { stored = value }
            case .null, .bytes: break
            default:
                // No answer to the read: what is stored is unknown, so it is left as it is.
                return
            }
            let sameVariant = stored.map { $0.vary == vary && $0.varyHashes == hashes } ?? false
            switch OfflineCacheRules.notModified(stored: stored?.record, sameVariant: sameVariant, storable: storable,
                                                 notModified: fields, request: request, now: now) {
            case .refresh(let merged):
                if let stored { self.write(key, merged, vary: stored.vary, hashes: stored.varyHashes, now: now, terms: terms, force: true) }
            case .validator(let record, let vary):
                // Only where nothing is stored (NX): a full answer written since the read (a 200
                // finished in the same pass, or another replica's) must not become a validator.
                self.write(key, record, vary: vary, hashes: hashes, now: now, terms: terms, force: true, onlyIfAbsent: true)
            case .drop:
                self.invalidate(key: key)
            case .leave:
                break
            }
        }
        if !sent {
            outstandingWrites -= 1
            stats.writesDropped.add(1, ordering: .relaxed)
        }
    }

    /// Writes `record` by the call's generation's `terms`; one that may not be written takes the
    /// older value with it when `dropsOlder`.
    func write(_ key: OfflineCacheKey, _ record: OfflineCacheRecord, vary: [String], hashes: [[UInt8]], now: Double,
               terms: OfflineCache.Terms, force: Bool = false, dropsOlder: Bool = true, onlyIfAbsent: Bool = false) {
        // Turned off since the answer came (a reload): nothing more is written, as the README promises.
        guard cache.isEnabled else { return }
        // The TTL is how long the entry may still be served: Redis drops it then, so nothing
        // unservable lingers (RFC 5861's stale-if-error bound, --offline-cache-max-age).
        let ttl = Int(OfflineCacheRules.servableFor(record, maxAge: terms.maxAge, override: terms.override, now: now) * 1000)
        // An answer that may not be served must not leave the older value servable, as the memory
        // store drops it too (a newer no-cache answer would otherwise leave v1 in Redis).
        guard ttl >= 1 else {
            if dropsOlder && !onlyIfAbsent { invalidate(key: key) }
            return
        }
        guard connection.isConnected else { stats.writesUnconnected.add(1, ordering: .relaxed); return }
        let fingerprint = Self.fingerprint(record, hashes)
        if !force, let last = recent[key], last.fingerprint == fingerprint, now - last.at < Self.rewriteAfter {
            stats.writesUnchanged.add(1, ordering: .relaxed)
            return
        }
        let estimate = record.body.count + 512
        guard outstandingWrites < Self.maxOutstandingWrites, outstandingBytes + estimate <= Self.maxOutstandingBytes else {
            stats.writesDropped.add(1, ordering: .relaxed)
            return
        }
        if recent.count >= Self.recentLimit { recent.removeAll(keepingCapacity: true) }
        recent[key] = (fingerprint, now)
        guard let value = codec.encode(record, vary: vary, varyHashes: hashes, under: codec.key(key)) else {
            forget(key)
            stats.writesTooLarge.add(1, ordering: .relaxed)
            if dropsOlder && !onlyIfAbsent { invalidate(key: key) }
            return
        }
        outstandingWrites += 1
        outstandingBytes += estimate
        let set = [Array("SET".utf8), codec.key(key), value, Array("PX".utf8), Array(String(ttl).utf8)] + (onlyIfAbsent ? [Array("NX".utf8)] : [])
        let sent = send(set) { [weak self] reply in
            guard let self else { return }
            self.release(estimate)
            switch reply {
            case .bytes: self.stats.writesStored.add(1, ordering: .relaxed)
            case .null:
                // NX found a value there: it stands.
                self.forget(key)
            case .failed:
                self.forget(key)
                self.stats.writesFailed.add(1, ordering: .relaxed)
            case .error(let e) where RedisConnection.isAuthError(e):
                // The server asks for credentials it did not ask for at connect (a `requirepass` or
                // ACL change): not a refusal of this value. The connection starts again with AUTH.
                self.forget(key)
                self.connection.drop(e, auth: true)
            default:
                // `OOM command not allowed when used memory > 'maxmemory'`, or any other refusal:
                // counted; the call was answered long ago.
                self.forget(key)
                self.stats.writesRefused.add(1, ordering: .relaxed)
            }
        }
        if !sent {
            release(estimate)
            forget(key)
            stats.writesDropped.add(1, ordering: .relaxed)
        }
    }

}
