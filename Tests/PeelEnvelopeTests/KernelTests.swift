import Foundation
import XCTest

@testable import PeelEnvelope

/// Issue 20: each scan kernel (SSE2 in Swift, AVX2 and AVX-512 in CPeelScan) against the token
/// scanner and against each other, on lengths around the block threshold and 64 KiB, UTF-8 and
/// escapes straddling block edges, the fuzz seeds and JSONTestSuite, and seeded random mutations.
/// Where this CPU lacks a kernel, its test checks instead that forcing it falls back to the token
/// scanner (what `ScanCore.scanner` promises), and says so in the log; nothing is skipped.
final class KernelTests: XCTestCase {
    /// What one scan says: the verdict and, with envelope names, the members found.
    private struct Outcome: Equatable, CustomStringConvertible {
        var valid: Bool
        var members: EnvelopeMembers?
        var description: String { valid ? "valid \(members.map { "\($0)" } ?? "")" : "invalid" }
    }

    /// SplitMix64: the same sequence on every run, so a failure can be replayed.
    private struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    private func scan(_ bytes: [UInt8], _ path: ScanCore.Path, maxDepth: Int, envelope: Bool) -> Outcome {
        EnvelopeNames.with(code: "code", message: "message", data: "data") { names in
            bytes.withUnsafeBufferPointer { buffer in
                var members = EnvelopeMembers()
                let valid = ScanCore.run(buffer, maxDepth: maxDepth, names: envelope ? names : nil, members: &members, path: path)
                return Outcome(valid: valid, members: valid && envelope ? members : nil)
            }
        }
    }

    /// The kernels to compare `kernel` with: the token scanner first, then every other kernel here.
    private func others(_ kernel: ScanCore.Path) -> [ScanCore.Path] {
        [.portable] + [ScanCore.Path.sse2, .avx2, .avx512].filter { $0 != kernel && ScanCore.available($0) }
    }

    /// True when this CPU has `kernel`. Otherwise checks that forcing it answers as the token
    /// scanner does, on valid and invalid bodies across the block threshold, and returns false.
    private func available(_ kernel: ScanCore.Path, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        if ScanCore.available(kernel) { return true }
        print("KernelTests: this CPU lacks the \(kernel) kernel (CPU flags: \(Self.flags.sorted().joined(separator: " "))); "
              + "checking its fallback to the token scanner instead")
        let long = "{\"code\":0,\"message\":\"ok\",\"data\":[" + String(repeating: "\"\\u00e9x\",", count: 200) + "1]}"
        for body in ["{\"code\":0,\"data\":1}", long, String(long.dropLast()), long.replacingOccurrences(of: "x", with: "\u{1}")] {
            for envelope in [false, true] {
                XCTAssertEqual(scan(Array(body.utf8), kernel, maxDepth: 512, envelope: envelope),
                               scan(Array(body.utf8), .portable, maxDepth: 512, envelope: envelope),
                               "a forced \(kernel) this CPU lacks falls back to tokens", file: file, line: line)
            }
        }
        return false
    }

    /// `kernel` agrees with the token scanner and every other kernel, with and without names and
    /// with a depth limit of 2 too; returns the token scanner's verdict.
    @discardableResult
    private func compare(_ bytes: [UInt8], _ kernel: ScanCore.Path, _ what: @autoclosure () -> String = "",
                         file: StaticString = #filePath, line: UInt = #line) -> Bool {
        var verdict = false
        for maxDepth in [512, 2] {
            for envelope in [false, true] {
                let mine = scan(bytes, kernel, maxDepth: maxDepth, envelope: envelope)
                for other in others(kernel) {
                    let theirs = scan(bytes, other, maxDepth: maxDepth, envelope: envelope)
                    if mine != theirs {
                        XCTFail(
                            "\(kernel) says \(mine), \(other) says \(theirs) (depth \(maxDepth), names \(envelope)) on \(bytes.count) bytes \(what()): "
                                + String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription, file: file, line: line)
                        return false
                    }
                    if other == .portable && maxDepth == 512 && !envelope { verdict = theirs.valid }
                }
            }
        }
        return verdict
    }

    /// The CPU's feature flags from /proc/cpuinfo (empty where there is none).
    private static let flags: Set<String> = {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("flags") })
        else { return [] }
        return Set(line.split(separator: ":").last!.split(separator: " ").map(String.init))
    }()

    // MARK: which kernels run here

    func testKernels_areEveryOneTheCPUFlagsPromise() throws {
        #if arch(x86_64)
            let flags = Self.flags
            // Linux on x86-64 always has /proc/cpuinfo with a flags line.
            XCTAssertFalse(flags.isEmpty, "no /proc/cpuinfo flags to compare with")
            let base = flags.isSuperset(of: ["popcnt", "bmi1", "pclmulqdq"])
            XCTAssertTrue(ScanCore.available(.sse2))
            XCTAssertEqual(ScanCore.available(.avx2), base && flags.contains("avx2"), "flags: \(flags.sorted())")
            XCTAssertEqual(
                ScanCore.available(.avx512), base && flags.isSuperset(of: ["avx512f", "avx512bw", "avx512_vbmi2"]), "flags: \(flags.sorted())")
            for kernel in [ScanCore.Path.avx2, .avx512] where !ScanCore.available(kernel) {
                print("KernelTests: this CPU lacks the \(kernel) kernel; its test checks the fallback instead")
            }
        #else
            XCTAssertFalse(ScanCore.available(.avx2))
            XCTAssertFalse(ScanCore.available(.avx512))
            XCTAssertEqual(ScanCore.scanner(.automatic, 1 << 20), .tokens)
        #endif
    }

    func testForcedKernelThisCPULacks_fallsBackToTokens() {
        for kernel in [ScanCore.Path.avx2, .avx512] where !ScanCore.available(kernel) {
            XCTAssertEqual(ScanCore.scanner(kernel, 1 << 20), .tokens)
        }
        for kernel in [ScanCore.Path.avx2, .avx512] where ScanCore.available(kernel) {
            XCTAssertEqual(ScanCore.scanner(kernel, 1), kernel == .avx2 ? .avx2 : .avx512)
        }
    }

    // MARK: per kernel

    func testAVX512_agreesOnEdgesLengthsCorporaAndMutations() throws {
        guard available(.avx512) else { return }
        try everything(.avx512)
    }

    func testAVX2_agreesOnEdgesLengthsCorporaAndMutations() throws {
        guard available(.avx2) else { return }
        try everything(.avx2)
    }

    func testSSE2_agreesOnEdgesLengthsCorporaAndMutations() throws {
        guard available(.sse2) else { return }
        try everything(.sse2)
    }

    private func everything(_ kernel: ScanCore.Path) throws {
        lengthsAroundEdges(kernel)
        utf8AcrossEdges(kernel)
        escapesAcrossEdges(kernel)
        squeezedSeparators(kernel)
        try corpora(kernel)
        mutations(kernel)
    }

    /// A valid envelope of exactly `length` bytes: a `data` string padded with `fill`.
    private func envelope(length: Int, fill: UInt8 = 0x78) -> [UInt8] {
        let head = Array(#"{"code":0,"message":"ok","data":""#.utf8)
        let tail = Array(#""}"#.utf8)
        return head + [UInt8](repeating: fill, count: max(0, length - head.count - tail.count)) + tail
    }

    /// Bodies of 511, 512 and 513 bytes and 64 KiB ± 1, valid and broken at the start, at block
    /// edges and at the very end.
    private func lengthsAroundEdges(_ kernel: ScanCore.Path) {
        for length in [511, 512, 513, 65535, 65536, 65537] {
            let body = envelope(length: length)
            XCTAssertEqual(body.count, length)
            XCTAssertTrue(compare(body, kernel, "length \(length)"), "length \(length) should be valid")
            // The same length as an array of numbers, so every block is dense with positions.
            var numbers = Array("[".utf8)
            while numbers.count < length - 2 { numbers += Array("1,".utf8) }
            numbers += Array(numbers.count == length - 2 ? "1]".utf8 : "]".utf8)
            if numbers.count == length { compare(numbers, kernel, "numbers \(length)") }
            for cut in [1, 2, 63, 64, 65, length / 2, length - 2, length - 1] {
                compare(Array(body[..<cut]), kernel, "cut to \(cut)")
                for bad: UInt8 in [0x22, 0x5C, 0x01, 0x80, 0x7D, 0x2C] {
                    var broken = body
                    broken[cut] = bad
                    compare(broken, kernel, "byte \(bad) at \(cut) of \(length)")
                }
            }
        }
    }

    /// Every UTF-8 sequence from the edge cases of RFC 3629 §4, valid and not, split across a block
    /// edge at each of its bytes, inside a string and outside.
    private func utf8AcrossEdges(_ kernel: ScanCore.Path) {
        let sequences: [[UInt8]] = [
            [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80],
            [0xF4, 0x8F, 0xBF, 0xBF], [0xE5, 0x95, 0x86],
            // Not UTF-8: overlong, surrogate, too large, stray or missing continuation, bad leads.
            [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],
            [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80],
            [0xFF], [0x80], [0xBF, 0xBF], [0xC3], [0xE5, 0x95], [0xF0, 0x9F, 0x98], [0xC3, 0x41], [0xE5, 0x41, 0x86],
            [0xE5, 0x95, 0x86, 0x86], [0xC3, 0xA9, 0xA9],
        ]
        for sequence in sequences {
            for split in 0...sequence.count {
                for block in [64, 128, 512] {
                    // Inside the `data` string, placed so the edge falls before byte `split`.
                    let head = Array(#"{"code":0,"data":""#.utf8)
                    let pad = [UInt8](repeating: 0x61, count: block - head.count - split)
                    var body = head + pad + sequence + Array(#"","n":1}"#.utf8)
                    body += [UInt8](repeating: 0x20, count: max(0, 600 - body.count))
                    compare(body, kernel, "UTF-8 \(sequence) split at \(split)")
                    // Outside strings, where any non-ASCII byte is an error.
                    let outside = Array("[".utf8) + [UInt8](repeating: 0x20, count: block - 1 - split) + sequence + Array("]".utf8)
                    compare(outside + [UInt8](repeating: 0x20, count: 600), kernel, "UTF-8 outside \(sequence)")
                }
            }
        }
    }

    /// Escapes, `\u` digits and surrogate pairs with the block edge at each of their bytes, and
    /// backslash runs of every length ending at an edge.
    private func escapesAcrossEdges(_ kernel: ScanCore.Path) {
        let escapes = [
            #"\""#, #"\\"#, #"\/"#, #"\b"#, #"\n"#, #"\u00e9"#, #"\uD83D\uDE00"#, #"\ud800\udc00"#, #"\uDBFF\uDFFF"#, #"\uD83D"#,
            #"\uDE00"#, #"\uD83D\u0041"#, #"\uD83Dx"#, #"\uD83D\\uDE00"#, #"\u12"#, #"\u12G4"#, #"\x"#, #"\ "#, #"\\\""#,
        ].map { Array($0.utf8) }
        for escape in escapes {
            for split in 0...escape.count {
                for block in [64, 128] {
                    let head = Array(#"{"code":0,"data":["#.utf8) + [0x22]
                    let pad = [UInt8](repeating: 0x61, count: block - head.count - split)
                    var body = head + pad + escape + Array(#"",1],"message":"x"}"#.utf8)
                    body += [UInt8](repeating: 0x0A, count: max(0, 600 - body.count))
                    compare(body, kernel, "escape \(String(decoding: escape, as: UTF8.self)) split at \(split)")
                }
            }
        }
        for run in 0..<6 {
            for end in 60..<70 {
                var body = Array(#"["#.utf8) + [0x22] + [UInt8](repeating: 0x61, count: end - 2 - run)
                body += [UInt8](repeating: 0x5C, count: run) + [0x22, 0x2C, 0x22, 0x62, 0x22, 0x5D]
                compare(body + [UInt8](repeating: 0x20, count: 520), kernel, "backslash run \(run) ending at \(end)")
            }
        }
    }

    /// Commas and colons the kernels leave out of their positions (between a token's last byte and
    /// the next one's first), in every context they are wrong in, at both sides of an edge.
    private func squeezedSeparators(_ kernel: ScanCore.Path) {
        let cases = [
            #"{"a":1,"b":[1,2,{"c":"d"}],"e":{"f":null}}"#, #"["a":1]"#, #"{"a":1,2}"#, #"{"a",1}"#, #"[1:2]"#, #"{"a":1:2}"#,
            #"{"a"::1}"#, #"[1,,2]"#, #"{"a":1,,"b":2}"#, #"["a","b":1]"#, #"{"a":"b":1}"#, #"[[1],2,[3]]"#, #"[{},{}]"#,
            #"{"a":{},"b":[]}"#, #"1,2"#, #""a":1"#, #"[1,"a",true,null,false,-0.5e3]"#, #"{"a":1 ,"b":2}"#, #"{"a" :1}"#,
            #"{"a": 1}"#, #"[1 ,2]"#, #"[1, 2]"#, #"[1,]"#, #"[,1]"#, #"{,"a":1}"#, #"{"a":1,}"#, #"[1}"#, #"{"a":1]"#,
            #"[true,false]"#, #"[truex,1]"#, #"[1x,2]"#, #"["a"1]"#, #"["a"x,1]"#, #"[1"a"]"#,
        ].map { Array($0.utf8) }
        for text in cases {
            for pad in 0..<66 {
                let body = [UInt8](repeating: 0x20, count: pad) + text
                compare(body + [UInt8](repeating: 0x20, count: 512), kernel, "separators at \(pad)")
                compare(Array(#"{"data":["#.utf8) + [UInt8](repeating: 0x20, count: pad) + text + Array("]}".utf8)
                    + [UInt8](repeating: 0x20, count: 512), kernel, "nested separators at \(pad)")
            }
        }
    }

    /// The fuzz seeds and JSONTestSuite at several shifts across an edge, and grown past the threshold.
    private func corpora(_ kernel: ScanCore.Path) throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let seeds = repo.appendingPathComponent("Fuzz/ScannerFuzz/seeds")
        let suite = repo.appendingPathComponent("../shared/testdata/JSONTestSuite/test_parsing").standardizedFileURL
        var files: [URL] = []
        for folder in [seeds, suite] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?.sorted() ?? []
            if names.isEmpty { print("KernelTests: \(folder.path) is absent; not compared") }
            files += names.map { folder.appendingPathComponent($0) }
        }
        XCTAssertFalse(files.isEmpty, "no corpus at all")
        for file in files {
            let bytes = [UInt8](try Data(contentsOf: file))
            let name = file.lastPathComponent
            let valid = compare(bytes, kernel, name)
            if name.hasPrefix("y_") { XCTAssertTrue(valid, name) }
            if name.hasPrefix("n_") { XCTAssertFalse(valid, name) }
            for shift in [1, 31, 63, 64, 65] {
                compare([UInt8](repeating: 0x20, count: shift) + bytes + [UInt8](repeating: 0x20, count: 512), kernel, "\(name) shifted \(shift)")
            }
        }
    }

    /// Seeded random changes to a large envelope: bytes replaced, inserted and removed, favouring the
    /// bytes that matter to the grammar, and each change also tried one block later.
    private func mutations(_ kernel: ScanCore.Path) {
        var text = #"{"code":0,"message":"success","data":{"items":["#
        for i in 0..<24 {
            if i > 0 { text += "," }
            text += #"{"id":\#(1000 + i),"price":\#(i).25,"ratio":0.\#(i)e-3,"ok":\#(i % 3 != 0),"n":null,"#
            text += #""s":"商品 \u00e9 \"q\" \\ \uD83D\uDE00 😀","t":["a","b",{"x":[]}]}"#
        }
        text += "]}}"
        let base = Array(text.utf8)
        XCTAssertTrue(compare(base, kernel, "base envelope"))
        let special: [UInt8] = Array(#"{}[]:,"\ -.0123456789eEtfnul+"#.utf8) + [0x00, 0x01, 0x09, 0x0A, 0x0D, 0x7F, 0x80, 0xBF, 0xC3, 0xE5, 0xF0, 0xFF]
        var random = Seeded(state: 20)
        for round in 0..<1500 {
            var body = base
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let at = Int.random(in: 0..<body.count, using: &random)
                let byte = Bool.random(using: &random) ? special.randomElement(using: &random)! : UInt8.random(in: 0...255, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: body[at] = byte
                case 1: body.insert(byte, at: at)
                default: body.remove(at: at)
                }
            }
            compare(body, kernel, "mutation round \(round)")
            compare([UInt8](repeating: 0x20, count: 64) + body, kernel, "mutation round \(round), one block later")
        }
    }
}
