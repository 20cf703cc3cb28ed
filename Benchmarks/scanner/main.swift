// Times judge() against Foundation's JSONSerialization (parse, pick `data`, serialise again) on a
// ~200-byte and a ~100 KB envelope, and each scan kernel (AVX-512, AVX2, SSE2, tokens) on the same
// bytes, in the same process. Built by run.sh with -O -wmo.
import Foundation

/// Keeps results alive so the optimiser cannot drop the work.
nonisolated(unsafe) var sink = 0

/// A small realistic envelope, about 200 bytes.
func smallEnvelope() -> [UInt8] {
    Array(
        (#"{"code":0,"message":"ok","data":{"id":12345,"name":"Alice Zhang","email":"alice@example.com","#
            + #""balance":1024.50,"tags":["vip","beta"],"active":true,"created_at":"2024-05-01T12:00:00Z"}}"#).utf8)
}

/// A list endpoint's envelope, about 100 KB: objects with decimals, short and long strings, some Chinese.
func largeEnvelope(targetBytes: Int = 100_000) -> [UInt8] {
    var text = #"{"code":0,"message":"success","data":{"total":0,"items":["#
    var index = 0
    while text.utf8.count < targetBytes {
        if index > 0 { text += "," }
        let price = String(format: "%d.%02d", 10 + index * 7 % 990, index * 13 % 100)
        let chinese = index % 4 == 0 ? "商品描述：高品质，限时优惠" : "Product description, limited offer"
        text += #"{"id":\#(100_000 + index),"sku":"SKU-\#(index)-X","name":"Item number \#(index) of the catalogue","#
        text += #""price":\#(price),"ratio":0.\#(index % 97)e-3,"stock":\#(index * 31 % 1000),"available":\#(index % 3 != 0),"#
        text +=
            #""tags":["new","sale","tag\#(index % 10)"],"description":"\#(chinese) with a \"quoted\" word and more text to read","#
        text += #""seller":{"id":\#(index % 50),"name":"Seller \#(index % 50)","rating":4.\#(index % 10)},"image":null}"#
        index += 1
    }
    text += "]}}"
    return Array(text.utf8)
}

/// The shape of `make bench`'s /big (Benchmarks/harness.py): 900 small objects, compact, each title
/// holding `\u00e9` escapes the way PHP's and Jackson's default encoders write non-ASCII text.
func benchListEnvelope() -> [UInt8] {
    var items: [String] = []
    for i in 0..<900 {
        let price = String(format: "%d.%02d", 10 + i % 90, i % 100)
        let sku = String(format: "%06d", i * 7919 % 1_000_000)
        items.append(
            #"{"id":\#(i + 1),"sku":"SKU-\#(sku)","title":"Item \#(i + 1) \u00e9t\u00e9","price":\#(price),"#
                + #""qty":\#(i % 13),"tags":["a","b"],"active":\#(i % 2 == 1)}"#)
    }
    return Array((#"{"code":0,"message":"success","data":["# + items.joined(separator: ",") + "]}").utf8)
}

/// Nanoseconds per call of each case: rounds of the cases alternate and each keeps its best round,
/// so time slices lost to other processes on a shared machine drop out and hit every case alike.
func measure(rounds: Int = 200, _ cases: [(iterations: Int, body: () -> Int)]) -> [Double] {
    var best = [Double](repeating: .infinity, count: cases.count)
    for _ in 0..<rounds {
        for (index, item) in cases.enumerated() {
            let start = ContinuousClock.now
            for _ in 0..<item.iterations { sink &+= item.body() }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            best[index] = min(best[index], seconds * 1e9 / Double(item.iterations))
        }
    }
    return best
}

func report(_ name: String, bytes: [UInt8], iterations: Int) {
    let config = EnvelopeConfig()
    let answer = UpstreamAnswer(status: 200, contentType: "application/json", path: "/items", isHead: false)
    guard case .unwrap(200, _?) = judge(answer, body: bytes, config: config) else { fatalError("benchmark body does not unwrap") }
    for path in ScanCore.Path.allCases where ScanCore.available(path) {
        var members = EnvelopeMembers()
        let valid = bytes.withUnsafeBufferPointer { ScanCore.run($0, maxDepth: 512, names: nil, members: &members, path: path) }
        guard valid else { fatalError("benchmark body refused by \(path)") }
    }
    let data = Data(bytes)

    let judgeCase = {
        if case .unwrap(_, let range?) = judge(answer, body: bytes, config: config) { return range.count }
        return 0
    }
    let validateCase = { JSONScanner.validate(bytes) ? 1 : 0 }
    // Each kernel forced, validating only; one this CPU lacks is named and left out.
    let kernels: [(String, ScanCore.Path)] = [("AVX-512", .avx512), ("AVX2", .avx2), ("SSE2", .sse2), ("tokens", .portable)]
    let here = kernels.filter { ScanCore.available($0.1) }
    let kernelCases: [(iterations: Int, body: () -> Int)] = here.map { _, path in
        (iterations, {
            var members = EnvelopeMembers()
            return bytes.withUnsafeBufferPointer { ScanCore.run($0, maxDepth: 512, names: nil, members: &members, path: path) } ? 1 : 0
        })
    }
    let foundationCase = {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let inner = object["data"],
            let out = try? JSONSerialization.data(withJSONObject: inner, options: [.fragmentsAllowed])
        else { return 0 }
        return out.count
    }
    // Foundation is a few hundred times slower, so it gets one call per round and fewer rounds' worth of time.
    let times = measure([(iterations, judgeCase), (iterations, validateCase), (1, foundationCase)] + kernelCases)
    let (judgeNs, validateNs, foundationNs) = (times[0], times[1], times[2])
    let gbs = { (ns: Double) in Double(bytes.count) / ns }  // bytes per ns == GB/s
    print("\(name): \(bytes.count) bytes")
    print(String(format: "  judge()                       %12.0f ns/op  %6.2f GB/s", judgeNs, gbs(judgeNs)))
    print(String(format: "  JSONScanner.validate()        %12.0f ns/op  %6.2f GB/s", validateNs, gbs(validateNs)))
    print(String(format: "  JSONSerialization parse+write %12.0f ns/op  %6.2f GB/s", foundationNs, gbs(foundationNs)))
    print(String(format: "  ratio Foundation / judge()    %12.1fx", foundationNs / judgeNs))
    for (index, (name, _)) in here.enumerated() {
        let ns = times[3 + index]
        let label = "  scan, \(name) kernel".padding(toLength: 32, withPad: " ", startingAt: 0)
        print(label + String(format: "%12.0f ns/op  %6.2f GB/s", ns, gbs(ns)))
    }
    for (name, path) in kernels where !ScanCore.available(path) { print("  scan, \(name) kernel: this CPU lacks it") }
}

/// The rest-of-object path (issue 25) against the member path on the same ~100 KB: the large
/// envelope's `data` members moved beside WeChat-style `errcode`/`errmsg`, judged under `wechat`,
/// where the answer is built from the members' bytes instead of lent from the body.
func reportRest(iterations: Int) {
    let member = largeEnvelope()
    let text = String(decoding: member, as: UTF8.self)
    let inner = text.dropFirst(#"{"code":0,"message":"success","data":{"#.utf8.count).dropLast(2)
    let rest = Array((#"{"errcode":0,"errmsg":"ok","# + inner + "}").utf8)
    var wechat = EnvelopeConfig()
    wechat.dialect = .wechat
    let answer = UpstreamAnswer(status: 200, contentType: "application/json", path: "/items", isHead: false)
    guard case .unwrap(200, _?) = judge(answer, body: member, config: EnvelopeConfig()),
          case .unwrapRest(200, let built) = judge(answer, body: rest, config: wechat), built.count == rest.count - 26
    else { fatalError("rest benchmark bodies do not judge as expected") }
    let times = measure([
        (iterations, {
            if case .unwrap(_, let range?) = judge(answer, body: member, config: EnvelopeConfig()) { return range.count }
            return 0
        }),
        (iterations, {
            if case .unwrapRest(_, let body) = judge(answer, body: rest, config: wechat) { return body.count }
            return 0
        }),
    ])
    print("rest of the object: \(rest.count) bytes (wechat) against the member path on \(member.count) bytes (peel)")
    print(String(format: "  judge(), payload member        %12.0f ns/op", times[0]))
    print(String(format: "  judge(), rest of the object    %12.0f ns/op", times[1]))
    print(String(format: "  ratio rest / member            %12.2fx (target at most 1.3x)", times[1] / times[0]))
}

/// A validation failure as Laravel answers one (issue 33): about 100 KB holding 2,000 field errors,
/// judged under the default dialect at 422, so the body is scanned, refused as an envelope, and
/// read by the well-known shapes into RFC 9457 `errors`.
func failureBody() -> [UInt8] {
    var fields: [String] = []
    for k in 0..<2_000 {
        fields.append(#""items.\#(k).name":["The name field is required."]"#)
    }
    return Array((#"{"message":"The name field is required. (and 1999 more errors)","errors":{"#
        + fields.joined(separator: ",") + "}}").utf8)
}

func reportFailure(iterations: Int) {
    let body = failureBody()
    let answer = UpstreamAnswer(status: 422, contentType: "application/json", path: "/orders", isHead: false)
    let config = EnvelopeConfig()
    let first: String = ##"[{"detail":"The name field is required.","pointer":"#/items/0/name"},"##
    guard case .problem(let p) = judge(answer, body: body, config: config), let errors = p.errors,
          p.detail?.hasPrefix("The name field") == true,
          String(decoding: errors.prefix(first.utf8.count), as: UTF8.self) == first
    else { fatalError("failure benchmark body does not judge as expected") }
    let times = measure([
        (iterations, {
            if case .problem(let p) = judge(answer, body: body, config: config) { return p.errors?.count ?? 0 }
            return 0
        }),
        (iterations, { JSONScanner.validate(body) ? 1 : 0 }),
    ])
    let gbs = { (ns: Double) in Double(body.count) / ns }
    print("failure body, 2,000 field errors (laravel, default dialect, 422): \(body.count) bytes")
    print(String(format: "  judge() to problem with errors %12.0f ns/op  %6.2f GB/s (target at least 1 GB/s)", times[0], gbs(times[0])))
    print(String(format: "  JSONScanner.validate()         %12.0f ns/op  %6.2f GB/s", times[1], gbs(times[1])))
}

// BENCH_ONLY=failure runs that part alone (for a profiler).
let only = ProcessInfo.processInfo.environment["BENCH_ONLY"]
if only == nil {
    report("small envelope", bytes: smallEnvelope(), iterations: 2_000)
    report("large envelope", bytes: largeEnvelope(), iterations: 20)
    report("bench /big envelope", bytes: benchListEnvelope(), iterations: 20)
    reportRest(iterations: 20)
}
if only == nil || only == "failure" { reportFailure(iterations: 20) }
if sink == 42 { print("") }
