@testable import PeelEnvelope
@testable import PeelIO
import PeelTestSupport
import XCTest

/// The judge over a spooled answer (a read-only mapping of its file) against the judge over the same
/// bytes in memory: the same verdicts and codes, byte for byte, on the reference's generated
/// envelopes padded past a spool threshold, under every preset and the custom dialects.
final class SpooledJudgeTests: XCTestCase {
    /// Past it the samples are spooled; small, so the corpus stays quick to write.
    static let threshold = 16 * 1024

    func testGeneratedEnvelopes_judgedFromTheSpoolFile_equalTheJudgeInMemory() throws {
        let dir = try SpoolTestDirectory()
        let spool = Spool(directory: dir.path, threshold: Self.threshold, limit: 1 << 30, perClient: 1 << 30)
        var generator = EnvelopeGenerator(seed: 35)
        var compared = 0
        var verdicts: Set<String> = []
        for round in 0..<60 {
            for dialect in Dialect.presets + DialectReferenceTests.custom {
                let body = Self.padded(generator.next(4) == 0 ? generator.envelope() : generator.envelope(for: dialect), round: round)
                XCTAssertGreaterThan(body.count, Self.threshold)
                let writer = try XCTUnwrap(try? SpoolWriter.open(spool, client: nil).get())
                XCTAssertNil(body.withUnsafeBytes { writer.append($0) })
                let file = try writer.finish().get()
                var config = EnvelopeConfig()
                config.dialect = dialect
                for status in [200, 404, 500] {
                    let answer = UpstreamAnswer(status: status, contentType: "application/json", path: "/api/x", isHead: false,
                                                isOptions: false, contentDisposition: nil)
                    let inMemory = body.withUnsafeBufferPointer { judgeWithCode(answer, body: $0, config: config) }
                    let spooled = try file.withBytes { judgeWithCode(answer, body: $0, config: config) }.get()
                    XCTAssertEqual(spooled.verdict, inMemory.verdict)
                    XCTAssertEqual(spooled.upstreamCode, inMemory.upstreamCode)
                    // Asked for runs (as the gateway asks for a spooled body), a rest-of-object is
                    // the same bytes read from the file, and every other verdict is unchanged.
                    var restRuns: RestOfObject?
                    let runs = try file.withBytes { judgeWithCode(answer, body: $0, config: config, restRuns: &restRuns) }.get()
                    XCTAssertEqual(runs.upstreamCode, inMemory.upstreamCode)
                    if case .unwrapRest(let s, let built) = inMemory.verdict {
                        XCTAssertEqual(runs.verdict, .unwrapRest(status: s, body: []), "asked for runs, no bytes are copied")
                        guard let rest = restRuns else { return XCTFail("no runs for a rest of the object") }
                        XCTAssertEqual(rest.count, built.count)
                        XCTAssertEqual(try file.withBytes { rest.bytes(in: $0) }.get(), built)
                        XCTAssertEqual(Self.fromFile(rest, file), built)
                    } else {
                        XCTAssertEqual(runs.verdict, inMemory.verdict)
                        XCTAssertNil(restRuns)
                    }
                    verdicts.insert(Self.kind(inMemory.verdict))
                    compared += 1
                }
            }
        }
        XCTAssertEqual(compared, 60 * (Dialect.presets.count + DialectReferenceTests.custom.count) * 3)
        // Agreement proves little unless the corpus reaches the verdicts that read the body.
        XCTAssertTrue(verdicts.isSuperset(of: ["unwrap", "unwrapRest", "problem"]), "\(verdicts)")
        XCTAssertEqual(spool.files, 0)
        XCTAssertEqual(spool.bytes, 0)
    }

    /// Every scan kernel this CPU has (and the token scanner), run over the read-only mapping of a
    /// spool file, says what it says over the same bytes in memory: a kernel's wide loads near the
    /// end of a mapping that ends on a page must not read past it.
    func testEveryKernel_overTheMappedFile_equalsItselfInMemory() throws {
        let dir = try SpoolTestDirectory()
        let spool = Spool(directory: dir.path, threshold: Self.threshold, limit: 1 << 30, perClient: 1 << 30)
        var generator = EnvelopeGenerator(seed: 36)
        let paths = [ScanCore.Path.portable, .sse2, .avx2, .avx512].filter { $0 == .portable || ScanCore.available($0) }
        var compared = 0
        for round in 0..<24 {
            let body = Self.padded(generator.envelope(), round: round)
            let writer = try SpoolWriter.open(spool, client: nil).get()
            XCTAssertNil(body.withUnsafeBytes { writer.append($0) })
            let file = try writer.finish().get()
            for path in paths {
                let inMemory = body.withUnsafeBufferPointer { Self.scan($0, path) }
                let mapped = try file.withBytes { Self.scan($0, path) }.get()
                XCTAssertEqual(mapped.valid, inMemory.valid, "\(path), round \(round)")
                XCTAssertEqual(mapped.members, inMemory.members, "\(path), round \(round)")
                compared += 1
            }
        }
        XCTAssertEqual(compared, 24 * paths.count)
    }

    private static func scan(_ buffer: UnsafeBufferPointer<UInt8>, _ path: ScanCore.Path) -> (valid: Bool, members: EnvelopeMembers?) {
        EnvelopeNames.with(code: "code", message: "message", data: "data") { names in
            var members = EnvelopeMembers()
            let valid = ScanCore.run(buffer, maxDepth: 512, names: names, members: &members, path: path)
            return (valid, valid ? members : nil)
        }
    }

    /// `body` grown past the threshold: a long array member inside the top-level object (the scan
    /// kernels' work), else leading whitespace; every third sample ends exactly on a page, so a
    /// kernel reading past the end of the body would fault on the mapping.
    static func padded(_ body: [UInt8], round: Int) -> [UInt8] {
        var out: [UInt8]
        let numbers = Array(repeating: "12345.678e-3,\"a\\u00e9\\\"b\",true,null", count: threshold / 32 + round).joined(separator: ",")
        if body.first == UInt8(ascii: "{"), body.dropFirst().first(where: { $0 != 0x20 && $0 != 0x0A }) != UInt8(ascii: "}") {
            out = [UInt8(ascii: "{")] + Array("\"zz_pad\":[\(numbers)],".utf8) + body.dropFirst()
        } else {
            out = Array(repeating: UInt8(ascii: " "), count: threshold + round) + body
        }
        if round % 3 == 0 {
            let page = 4096
            out += Array(repeating: UInt8(ascii: "\n"), count: (page - out.count % page) % page)
        }
        return out
    }

    /// The answer a rest-of-object makes when each run is read from the file on its own (as the
    /// connection sends them, with sendfile).
    static func fromFile(_ rest: RestOfObject, _ file: SpooledBody) -> [UInt8] {
        [UInt8(ascii: "{")] + Array(rest.runs.map { file.read($0) }.joined(separator: [UInt8(ascii: ",")])) + [UInt8(ascii: "}")]
    }

    static func kind(_ v: Verdict) -> String {
        switch v {
        case .unwrap: return "unwrap"
        case .unwrapRest: return "unwrapRest"
        case .passthrough: return "passthrough"
        case .problem: return "problem"
        }
    }
}
