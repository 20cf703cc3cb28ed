// libFuzzer entry for Peel's HTTP/1.1 request parser, checked against the demo's independent parser.
//
// Input layout: byte 0 picks the configuration (bit 0: small limits, so the size checks are reached;
// bit 1: answer each request only after the next piece arrived, so pipelined bytes are read ahead),
// byte 1 seeds how the rest is cut into pieces (incremental delivery); the rest is the byte stream a
// client sends on one connection.
//
// Every input is read five ways: Peel's parser whole, byte by byte and in pieces; Peel's
// ConnectionMachine in pieces; the demo's parser whole and in pieces. Peel must agree with itself
// exactly (short of which size limit trips first), and with the demo on every request both accept:
// same method, target, version, fields, de-chunked body, keep-alive, and the same end in the stream.
// Where one refuses a request the other accepts, Differences names the rule that allows it.
@testable import DemoParser

/// Cuts `count` bytes into pieces of pseudo-random sizes up to a bound chosen by `seed`.
private func pieces(_ count: Int, seed: UInt8) -> [Range<Int>] {
    let bound = [1, 2, 3, 7, 16, 64, 300, 4096][Int(seed & 7)]
    var state = UInt32(seed) &* 2_654_435_761 | 1
    var out: [Range<Int>] = []
    var at = 0
    while at < count {
        state ^= state << 13; state ^= state >> 17; state ^= state << 5
        let size = min(count - at, 1 + Int(state % UInt32(bound)))
        out.append(at..<(at + size))
        at += size
    }
    return out
}

private func isSize(_ e: RequestError) -> Bool { e == .headTooLarge || e == .targetTooLong }
private func isSize(_ r: RequestRefusal) -> Bool { r.status == 431 || r.reason.hasSuffix("too long") }

/// Two runs of the same reader over differently cut input: identical, except that which size limit
/// (or which error after it) trips first may depend on the cuts, and that a run that tripped a size
/// limit may have stopped before a request the other accepted.
private func sameReader<R: Equatable>(_ a: Outcome<R>, _ b: Outcome<R>, _ what: String, isSize: (R) -> Bool, _ stream: [UInt8]) {
    if a == b { return }
    let k = min(a.messages.count, b.messages.count)
    for i in 0..<k where a.messages[i] != b.messages[i] {
        disagree("\(what): request \(i) differs:\n  \(a.messages[i])\n  \(b.messages[i])", stream)
    }
    switch (a.ending, b.ending) {
    case (.refused(let x), .refused(let y)) where a.messages.count == b.messages.count && (isSize(x) || isSize(y)):
        return
    case (.refused(let x), _) where a.messages.count <= b.messages.count && isSize(x):
        return
    case (_, .refused(let y)) where b.messages.count <= a.messages.count && isSize(y):
        return
    default:
        disagree("\(what): \(a.messages.count) requests then \(a.ending) vs \(b.messages.count) then \(b.ending)", stream)
    }
}

/// Peel's run against the demo's: the requests both accepted must be the same; past them, one may
/// refuse what the other accepts only under a rule in Differences, and neither may have accepted a
/// request the other still waits for (a different boundary).
private func compareWithDemo(_ peel: Outcome<RequestError>, _ demo: Outcome<RequestRefusal>, _ stream: [UInt8],
                             limits: HTTP1Parser.Limits, demoMaxHead: Int) {
    let k = min(peel.messages.count, demo.messages.count)
    for i in 0..<k where peel.messages[i] != demo.messages[i] {
        let what = peel.messages[i].end != demo.messages[i].end ? "BOUNDARY" : peel.messages[i].body != demo.messages[i].body ? "BODY" : "request"
        disagree("peel vs demo: \(what) \(i) differs:\n  peel \(peel.messages[i])\n  demo \(demo.messages[i])", stream)
    }
    if peel.messages.count == demo.messages.count {
        // Both stopped at the same request: refused, or waiting for more, in any combination (Peel
        // refuses at the first bad byte, the demo once the head is in), or both closed.
        if (peel.ending == .closed) != (demo.ending == .closed) { disagree("peel vs demo: \(peel.ending) vs \(demo.ending)", stream) }
        return
    }
    let start = k == 0 ? 0 : peel.messages[k - 1].end
    let context = Context(limits: limits, demoMaxHead: demoMaxHead, remaining: stream.count - start)
    if peel.messages.count > k {
        let m = peel.messages[k]
        guard case .refused(let r) = demo.ending else {
            disagree("peel vs demo: BOUNDARY: peel accepted request \(k) (\(m)), demo \(demo.ending)", stream)
        }
        if Differences.demoRefusal(r, accepted: m, raw: RawMessage(stream[start..<m.end]), context) == nil {
            disagree("peel vs demo: demo refused request \(k) with \(r), peel accepted \(m)", stream)
        }
    } else {
        let m = demo.messages[k]
        guard case .refused(let e) = peel.ending else {
            disagree("peel vs demo: BOUNDARY: demo accepted request \(k) (\(m)), peel \(peel.ending)", stream)
        }
        if Differences.peelRefusal(e, accepted: m, raw: RawMessage(stream[start..<m.end]), context) == nil {
            disagree("peel vs demo: peel refused request \(k) with \(e), demo accepted \(m)", stream)
        }
    }
}

/// The machine against Peel's parser driven directly over the same pieces: the same, except that the
/// machine also answers an unknown expectation (in any Expect field) with 417.
private func compareMachine(_ machine: Outcome<RequestError>, _ direct: Outcome<RequestError>, _ stream: [UInt8]) {
    if machine == direct { return }
    let k = machine.messages.count
    if case .refused(.expectationFailed) = machine.ending, direct.messages.count >= k, Array(direct.messages.prefix(k)) == machine.messages {
        // Refused at the head: the parser alone may have read the request, or waited for or refused its body.
        guard direct.messages.count > k else { return }
        let m = direct.messages[k]
        if m.version == "HTTP/1.1", m.values("expect").contains(where: { !onlyContinue($0) }) { return }
    }
    disagree("machine vs parser: \(machine.messages.count) requests then \(machine.ending) vs "
             + "\(direct.messages.count) then \(direct.ending)\n  \(machine.messages)\n  \(direct.messages)", stream)
}

/// Called by libFuzzer once per input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard size >= 2, let data else { return 0 }
    let control = data[0]
    let stream = Array(UnsafeBufferPointer(start: data + 2, count: size - 2))
    let cuts = pieces(stream.count, seed: data[1])
    let whole = stream.isEmpty ? [] : [0..<stream.count]
    let bytewise = stream.indices.map { $0..<($0 + 1) }

    var connection = ConnectionLimits()
    if control & 1 != 0 {
        connection.maxHead = 512
        connection.maxRequestLine = 200
        connection.maxBody = 300
    }
    let limits = connection.parserLimits
    // The demo's defaults are 64 KiB of head (Peel's too) and 16 MiB of body (Peel's is 10 MiB):
    // given Peel's limits, the two must agree on every body size, declared or chunked.
    let demoMaxHead = connection.maxHead
    let demoMaxBody = connection.maxBody

    let peel = runPeel(stream, pieces: cuts, limits: limits)
    sameReader(runPeel(stream, pieces: whole, limits: limits), peel, "parser whole vs pieces", isSize: isSize, stream)
    sameReader(runPeel(stream, pieces: bytewise, limits: limits), peel, "parser byte by byte vs pieces", isSize: isSize, stream)
    compareMachine(runMachine(stream, pieces: cuts, limits: connection, deferReplies: control & 2 != 0), peel, stream)

    let demo = runDemo(stream, pieces: cuts, maxHead: demoMaxHead, maxBody: demoMaxBody)
    sameReader(runDemo(stream, pieces: whole, maxHead: demoMaxHead, maxBody: demoMaxBody), demo, "demo whole vs pieces",
               isSize: isSize, stream)
    compareWithDemo(peel, demo, stream, limits: limits, demoMaxHead: demoMaxHead)
    return 0
}
