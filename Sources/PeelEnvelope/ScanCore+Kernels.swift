// Which scanner takes a body, and the bridge to the AVX2 and AVX-512 kernels in CPeelScan. The
// kernels answer exactly what the token scanner answers (the fuzzer and BlockScannerTests hold
// them to it); only the speed differs.
import CPeelScan

extension ScanCore {
    /// Which scanner run() uses; the forced choices exist for tests, the fuzzer and the benchmark.
    enum Path: CaseIterable {
        /// The fastest kernel this CPU runs for bodies of `blockThreshold` bytes or more, else tokens.
        case automatic
        /// The SSE2 block scanner in Swift (the token scanner off x86-64).
        case sse2
        /// The AVX2 kernel (the token scanner on a CPU without it).
        case avx2
        /// The AVX-512 kernel: BW and VBMI2 (the token scanner on a CPU without them).
        case avx512
        /// The token scanner.
        case portable
    }

    /// A scanner that runs on this CPU.
    enum Scanner: Equatable {
        /// ScanCore.scan, one token at a time.
        case tokens
        /// The SSE2 block scanner (ScanCore+Blocks.swift).
        case sse2
        /// CPeelScan's AVX2 kernel.
        case avx2
        /// CPeelScan's AVX-512 kernel.
        case avx512
    }

    /// The kernels this CPU runs, asked once.
    static let kernels = peel_scan_kernels()

    /// Whether a forced path runs its own scanner here rather than falling back to tokens.
    static func available(_ path: Path) -> Bool {
        switch path {
        case .automatic, .portable: return true
        case .sse2:
            #if arch(x86_64)
                return true
            #else
                return false
            #endif
        case .avx2: return kernels & UInt32(PEEL_SCAN_AVX2) != 0
        case .avx512: return kernels & UInt32(PEEL_SCAN_AVX512) != 0
        }
    }

    /// The scanner run() takes for a body of n bytes; a forced path this CPU lacks falls back to tokens.
    static func scanner(_ path: Path, _ n: Int) -> Scanner {
        switch path {
        case .automatic:
            guard n >= blockThreshold else { return .tokens }
            if available(.avx512) { return .avx512 }
            if available(.avx2) { return .avx2 }
            return available(.sse2) ? .sse2 : .tokens
        case .sse2: return available(.sse2) ? .sse2 : .tokens
        case .avx2: return available(.avx2) ? .avx2 : .tokens
        case .avx512: return available(.avx512) ? .avx512 : .tokens
        case .portable: return .tokens
        }
    }

    /// What a kernel's member reports need: the buffer and the top-level bookkeeping.
    private struct KernelTop {
        /// The scanned buffer.
        let base: UnsafePointer<UInt8>
        /// The names and what was found so far.
        var top: TopLevel
    }

    /// A kernel's report of one top-level member; `context` points to the scan's KernelTop.
    private static let reportMember: peel_scan_member_fn = { context, nameStart, nameEnd, valueStart, valueEnd in
        let k = context!.assumingMemoryBound(to: KernelTop.self)
        k.pointee.top.begin(k.pointee.base, nameStart, nameEnd)
        k.pointee.top.fieldStart = valueStart
        return k.pointee.top.end(valueEnd)
    }

    /// run()'s kernel path: the C kernel walks the body and reports each top-level member, which is
    /// matched and recorded here exactly as the token scanner does.
    static func runKernel(
        _ scanner: Scanner, _ base: UnsafePointer<UInt8>, _ n: Int, _ depthLimit: Int, _ words: Int, _ names: EnvelopeNames?,
        _ members: inout EnvelopeMembers
    ) -> Bool {
        let kernel = UInt32(scanner == .avx512 ? PEEL_SCAN_AVX512 : PEEL_SCAN_AVX2)
        // Stage 1 starts after the BOM, if any; leading whitespace yields no positions.
        let start = n >= 3 && base[0] == 0xEF && base[1] == 0xBB && base[2] == 0xBF ? 3 : 0
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: words) { stack in
            stack.initialize(repeating: 0)
            guard let names else { return peel_scan(kernel, base, n, start, depthLimit, stack.baseAddress, nil, nil) }
            var top = KernelTop(base: base, top: TopLevel(names: names))
            let ok = withUnsafeMutablePointer(to: &top) { top in
                peel_scan(kernel, base, n, start, depthLimit, stack.baseAddress, reportMember, top)
            }
            members = top.top.members
            return ok
        }
    }
}
