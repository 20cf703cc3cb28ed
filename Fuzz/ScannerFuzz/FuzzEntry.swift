// libFuzzer entry: every input goes through the scanner and judge(), and each result is checked
// against the reference reader and a few invariants. Any disagreement traps, so libFuzzer saves it.

/// Stops the run with a message libFuzzer prints beside the crashing input.
private func disagree(_ what: String, _ bytes: [UInt8]) -> Never {
    fatalError("\(what) on \(bytes.count) bytes: \(bytes.prefix(256))")
}

/// The block scanner and the portable token scanner must agree on every input: same verdict, and
/// with envelope names the same member ranges. Run with and without names, and with a depth limit
/// just under the input's nesting too, so the depth check is reached from both sides.
private func comparePaths(_ bytes: [UInt8], depth: Int) {
    EnvelopeNames.with(code: "code", message: "message", data: "data") { names in
        bytes.withUnsafeBufferPointer { buffer in
            for limit in [depth, 1, 2] {
                for withNames in [false, true] {
                    var blocks = EnvelopeMembers()
                    var portable = EnvelopeMembers()
                    let a = ScanCore.run(buffer, maxDepth: limit, names: withNames ? names : nil, members: &blocks, path: .blocks)
                    let b = ScanCore.run(buffer, maxDepth: limit, names: withNames ? names : nil, members: &portable, path: .portable)
                    if a != b || (a && blocks != portable) {
                        disagree("block scanner \(a) \(blocks), token scanner \(b) \(portable) (depth \(limit), names \(withNames))", bytes)
                    }
                }
            }
        }
    }
}

/// Called by libFuzzer once per input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    // Small depth limits reach the depth check from short inputs; the default covers real bodies.
    let depth = bytes.count > 64 ? 512 : 6

    let valid = JSONScanner.validate(bytes, maxDepth: depth)
    comparePaths(bytes, depth: depth)
    let reference = ReferenceReader.read(bytes, maxDepth: depth) != nil
    if valid != reference { disagree("scanner said \(valid), reference said \(reference)", bytes) }

    // Wrapping a valid text in whitespace or one BOM keeps it valid; a second BOM never is.
    if valid && !bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
        if !JSONScanner.validate([0x20] + bytes + [0x0A], maxDepth: depth) { disagree("whitespace changed validity", bytes) }
        if !JSONScanner.validate([0xEF, 0xBB, 0xBF] + bytes, maxDepth: depth) { disagree("a BOM changed validity", bytes) }
        if JSONScanner.validate([0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + bytes, maxDepth: depth) {
            disagree("two BOMs accepted", bytes)
        }
    }

    var config = EnvelopeConfig()
    config.maxDepth = depth
    for status in [200, 404, 500] {
        let answer = UpstreamAnswer(status: status, contentType: "application/json", path: "/", isHead: false)
        let verdict = judge(answer, body: bytes, config: config)
        let expected = referenceVerdict(bytes, status: status, config: config)
        if verdict != expected { disagree("judge(\(status)) gave \(verdict), reference \(expected)", bytes) }
        switch verdict {
        case .unwrap(_, let range?):
            guard range.lowerBound >= 0, range.upperBound <= bytes.count else { disagree("data range out of bounds", bytes) }
            // Any JSON value is itself a JSON text, so the unwrapped bytes must validate on their own.
            if !JSONScanner.validate(Array(bytes[range]), maxDepth: depth) { disagree("unwrapped data is not JSON", bytes) }
        case .problem(let problem):
            let rendered = renderProblem(
                problem, requestId: String(decoding: bytes.prefix(40), as: UTF8.self), language: .chinese, typeBase: "urn:x:")
            if !JSONScanner.validate(rendered) { disagree("rendered problem is not JSON", bytes) }
        case .unwrap(_, nil), .passthrough:
            break
        }
    }

    // Accept-Language parsing sees arbitrary header bytes too.
    _ = Language(acceptLanguage: String(decoding: bytes.prefix(200), as: UTF8.self))
    return 0
}
