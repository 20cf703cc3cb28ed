// How a buffered answer's body is held: in memory up to the spool's threshold (charged to the
// memory budget), then in a spool file (charged to the disk budget instead), as nginx moves an
// answer that outgrows its proxy_buffers to proxy_temp_path.
extension UpstreamTransfer {
    /// Takes one piece of a buffered body from curl's write callback; false, with `state` saying
    /// why, when the transfer must stop (curl then fails it with CURLE_WRITE_ERROR).
    func keep(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        if let writer = spoolWriter {
            if writer.count + n > limit { return stop(.tooLarge) }
            return spooled(writer.append(bytes))
        }
        if body.count + n > limit { return stop(.tooLarge) }
        let threshold = spool?.threshold ?? 0
        // The head's Content-Length, a hint only (curl's decoding may change the size): sizes the
        // buffer once instead of growing it chunk by chunk, and sends an answer declared past the
        // threshold to disk from its first byte instead of through memory. Read from the parsed
        // head: curl's getinfo for it costs ~460 instructions per answer.
        let declared = body.isEmpty ? handle?.head.facts?.contentLength ?? -1 : -1
        if threshold > 0 && (body.count + n > threshold || declared > threshold) {
            return spill(bytes)
        }
        if let budget, let refusal = charge(n, to: budget) {
            return stop(refusal == .full ? .overBudget : .overClientShare)
        }
        if declared > 0 && body.capacity == 0 {
            body.reserveCapacity(min(Int(declared), limit))
        }
        body.append(contentsOf: bytes)
        return true
    }

    /// Moves what memory holds of the body to a new spool file, then `bytes` after it; the memory
    /// budget gives back what the body held there.
    private func spill(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let spool else { return false }
        let writer: SpoolWriter
        switch SpoolWriter.open(spool, client: clientAddress.map(IPNetwork.clientGroup), gathers: true) {
        case .success(let w): writer = w
        case .failure(let e): return stop(.spoolWrite(e))
        }
        spoolWriter = writer
        let held = body.withUnsafeBytes { writer.append($0) }
        if let held { return spooled(held) }
        body = []
        // What memory still holds while the body arrives is the writer's gathering buffer: charged
        // in place of the body, and given back when the body is whole.
        releaseBudget()
        if let budget, let refusal = charge(SpoolWriter.stagingSize, to: budget) {
            return stop(refusal == .full ? .overBudget : .overClientShare)
        }
        return spooled(writer.append(bytes))
    }

    /// True when a spool write went through; else stops the transfer with its reason.
    private func spooled(_ failure: SpoolWriter.Failure?) -> Bool {
        switch failure {
        case nil: return true
        case .full: return stop(.overSpoolBudget)
        case .clientShare: return stop(.overSpoolClientShare)
        case .write(let e): return stop(.spoolWrite(e))
        }
    }

    private func stop(_ why: TransferStop) -> Bool {
        state = .stopped(why)
        return false
    }
}
