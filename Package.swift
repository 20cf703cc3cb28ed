// swift-tools-version:6.0
// Peel: listener (Peel's HTTP/1.1 server on libevent) → upstream client (libcurl multi) → envelope → response.
import PackageDescription

// Release builds drop the runtime exclusivity checks (swift_beginAccess, ~3k instructions per
// /small call, Benchmarks/RESULTS.md). Debug builds keep them, so every `swift test` run, plain or
// under ASan and TSan, checks exclusivity; the release binary valgrind runs has no checks.
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6),
                              .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
// Debian 12's valgrind 3.19 gives up on clang's DWARF 5 in C objects ("Possibly corrupted
// debuginfo file"), and make sanitize runs the release binary under valgrind memcheck.
let dwarf4: [CSetting] = [.unsafeFlags(["-gdwarf-4"])]

let package = Package(
    name: "Peel",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "peel", targets: ["peel"]),
    ],
    targets: [
        // C floor: system libraries and the one shim Swift needs for variadic curl calls.
        .systemLibrary(name: "CEvent", pkgConfig: "libevent_core", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "CPeelShims", dependencies: ["CCurl"], cSettings: dwarf4),
        // Encoders for compressing answers to clients: gzip (zlib) and br (brotli).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlienc", providers: [.apt(["libbrotli-dev"])]),
        // jemalloc's compiled-in options (`malloc_conf`), linked into the executable only.
        .target(name: "CPeelMalloc", cSettings: dwarf4),
        // The shared offline store (issue 21): hiredis on each worker's libevent loop, its libevent
        // adapter (static functions, hence the one-function C target) and libcrypto for HMAC keys.
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),
        .target(name: "CPeelRedis", dependencies: ["CHiredis", "CEvent"], cSettings: dwarf4),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

        // The scanner's wide kernels (issue 20): AVX2 and AVX-512 stage 1 and the position walk in C,
        // because Swift cannot attach target features to a function and a portable binary cannot
        // assume them globally. Pure computation: no I/O, no allocation, no library but the compiler's.
        .target(name: "CPeelScan", cSettings: dwarf4 + [.unsafeFlags(["-O2"])]),

        // Pure rules: strict JSON scanner, envelope verdicts, problem documents. No I/O; its one C
        // dependency is CPeelScan, which only computes over the buffer it is lent.
        .target(name: "PeelEnvelope", dependencies: ["CPeelScan"], swiftSettings: strict),

        // The only home of unsafe pointers: event loops, the HTTP/1.1 server, the curl multi driver,
        // the Redis connection and HMAC.
        .target(name: "PeelIO", dependencies: ["CEvent", "CCurl", "CPeelShims", "CZlib", "CBrotli",
                                                  "CHiredis", "CPeelRedis", "CCrypto"], swiftSettings: strict),

        // The demo upstream (`peel demo`) and the tests' misbehaving fake upstream.
        .target(name: "PeelDemo", dependencies: ["PeelIO"], swiftSettings: strict),

        // Wiring: config, reachability, metrics, admin, the forwarder; one worker per core.
        .target(name: "PeelGateway", dependencies: ["PeelIO", "PeelEnvelope"], swiftSettings: strict),

        // Thin executable: parse, start workers, wait for signals.
        // jemalloc (Debian libjemalloc-dev/libjemalloc2): a request makes ~140 small allocations and
        // libcurl a 256 KiB buffer per transfer; Benchmarks/RESULTS.md has the measurements.
        .executableTarget(name: "peel", dependencies: ["PeelGateway", "PeelDemo", "CPeelMalloc"], swiftSettings: strict,
                          linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]),

        // Helpers more than one test target uses (a gzip decoder, a scratch directory); no tests.
        .target(name: "PeelTestSupport", dependencies: ["CZlib"], path: "Tests/PeelTestSupport", swiftSettings: strict),
        .testTarget(name: "PeelEnvelopeTests", dependencies: ["PeelEnvelope", "PeelIO", "PeelTestSupport"], swiftSettings: strict),
        .testTarget(name: "PeelIOTests", dependencies: ["PeelIO", "PeelDemo", "PeelTestSupport"], swiftSettings: strict),
        .testTarget(name: "PeelGatewayTests", dependencies: ["PeelGateway", "PeelDemo", "PeelIO", "PeelTestSupport"], swiftSettings: strict),
    ]
)
