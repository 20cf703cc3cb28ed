// libFuzzer entry: every input goes through the scanner and judge(), and each result is checked
// against the reference reader and a few invariants. Any disagreement traps, so libFuzzer saves it.

/// Stops the run with a message libFuzzer prints beside the crashing input.
private func disagree(_ what: String, _ bytes: [UInt8]) -> Never {
    fatalError("\(what) on \(bytes.count) bytes: \(bytes.prefix(256))")
}

/// Every block kernel this CPU runs (SSE2, AVX2, AVX-512), named once at start-up.
private let kernels: [ScanCore.Path] = {
    let here = [ScanCore.Path.sse2, .avx2, .avx512].filter { ScanCore.available($0) }
    let missing = [ScanCore.Path.sse2, .avx2, .avx512].filter { !ScanCore.available($0) }
    print("fuzz: comparing the token scanner with kernels \(here)" + (missing.isEmpty ? "" : "; this CPU lacks \(missing)"))
    return here
}()

/// Every kernel and the portable token scanner must agree on every input: same verdict, and with
/// envelope names the same member ranges. Each kernel is compared with the token scanner and with
/// the kernel before it, with and without names, and with a depth limit just under the input's
/// nesting too, so the depth check is reached from both sides.
private func comparePaths(_ bytes: [UInt8], depth: Int) {
    EnvelopeNames.with(code: "code", message: "message", data: "data") { names in
        bytes.withUnsafeBufferPointer { buffer in
            for limit in [depth, 1, 2] {
                for withNames in [false, true] {
                    var portable = EnvelopeMembers()
                    let b = ScanCore.run(buffer, maxDepth: limit, names: withNames ? names : nil, members: &portable, path: .portable)
                    var previous: (ScanCore.Path, Bool, EnvelopeMembers)?
                    for kernel in kernels {
                        var found = EnvelopeMembers()
                        let a = ScanCore.run(buffer, maxDepth: limit, names: withNames ? names : nil, members: &found, path: kernel)
                        if a != b || (a && found != portable) {
                            disagree("\(kernel) kernel \(a) \(found), token scanner \(b) \(portable) (depth \(limit), names \(withNames))", bytes)
                        }
                        if let (other, verdict, members) = previous, verdict != a || (a && members != found) {
                            disagree("\(kernel) kernel \(a) \(found), \(other) kernel \(verdict) \(members) (depth \(limit), names \(withNames))", bytes)
                        }
                        previous = (kernel, a, found)
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
    // The diagnosis behind a refusal's reason explains exactly the bodies the scanner refuses.
    let diagnosed = bytes.withUnsafeBufferPointer { ScanDiagnosis.diagnose($0, maxDepth: depth, names: nil) }
    if (diagnosed == .valid) != valid { disagree("diagnosis \(diagnosed), scanner \(valid)", bytes) }

    // Wrapping a valid text in whitespace or one BOM keeps it valid; a second BOM never is.
    if valid && !bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
        if !JSONScanner.validate([0x20] + bytes + [0x0A], maxDepth: depth) { disagree("whitespace changed validity", bytes) }
        if !JSONScanner.validate([0xEF, 0xBB, 0xBF] + bytes, maxDepth: depth) { disagree("a BOM changed validity", bytes) }
        if JSONScanner.validate([0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + bytes, maxDepth: depth) {
            disagree("two BOMs accepted", bytes)
        }
    }

    // The dialect target: the raw input, an envelope built from it for each dialect, and a failure
    // body in one of the well-known shapes, judged in one pass and by the tree-building reference
    // (Tests/PeelEnvelopeTests/DialectReference.swift), under every preset (`rest` included) and
    // the reference's custom dialects (field errors, 5xx messages shown), at a success, an expired
    // sign-in, a client error, a validation failure and a server error.
    var generator = EnvelopeGenerator(bytes: bytes)
    let shaped = generator.failureBody()
    for dialect in DialectReference.allDialects {
        var config = EnvelopeConfig()
        config.maxDepth = depth
        config.dialect = dialect
        let bodies: [([UInt8], String?)] = [(bytes, "application/json"), (generator.envelope(for: dialect), "application/json"),
                                            (shaped.body, shaped.problemType ? "application/problem+json" : nil)]
        for (body, type) in bodies {
            for status in [200, 401, 404, 422, 500] {
                if let d = DialectReference(bytes: body, dialect: dialect, config: config, contentType: type).disagreement(status: status) {
                    disagree(d, body)
                }
                let answer = UpstreamAnswer(status: status, contentType: type, path: "/", isHead: false)
                let verdict = judge(answer, body: body, config: config)
                switch verdict {
                case .problem(let problem):
                    if problem.kind == .badUpstreamFormat, problem.reason?.isEmpty ?? true {
                        disagree("a malformed envelope without a reason: \(problem)", body)
                    }
                    let rendered = renderProblem(
                        problem, requestId: String(decoding: body.prefix(40), as: UTF8.self), language: .chinese, typeBase: "urn:x:")
                    if !JSONScanner.validate(rendered) { disagree("rendered problem is not JSON", body) }
                case .unwrap(_, let range?):
                    guard range.lowerBound >= 0, range.upperBound <= body.count else { disagree("data range out of bounds", body) }
                    // Any JSON value is itself a JSON text, so the unwrapped bytes must validate on their own.
                    if !JSONScanner.validate(Array(body[range]), maxDepth: depth) { disagree("unwrapped data is not JSON", body) }
                case .unwrapRest(_, let rest):
                    if !JSONScanner.validate(rest, maxDepth: depth) { disagree("the rest of the object is not JSON", body) }
                case .unwrap(_, nil), .passthrough:
                    break
                }
            }
        }
    }

    // Accept-Language parsing sees arbitrary header bytes too.
    _ = Language(acceptLanguage: String(decoding: bytes.prefix(200), as: UTF8.self))
    return 0
}
