#!/usr/bin/env bash
# libFuzzer + AddressSanitizer targets, each checked against an independent reference:
#   scanner  PeelEnvelope's scanner against a reference JSON reader, every scan kernel the CPU runs
#            (SSE2, AVX2, AVX-512) against the token scanner and each other, and judge() under every
#            dialect preset (and the reference's custom dialects) against a tree-building reference,
#            at 200, 401, 404, 422 and 500, on the input, on an envelope and on a framework's failure
#            body generated from it;
#   http     PeelIO's HTTP/1.1 request parser and ConnectionMachine, against the demo's request parser.
# FUZZ_TARGET picks one (default: all, scanner first); FUZZ_SECONDS bounds each run (default 60).
# Everything lands in .build-fuzz/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.build-fuzz"
seconds="${FUZZ_SECONDS:-60}"
target="${FUZZ_TARGET:-all}"
swiftc="${SWIFTC:-swiftc}"
suite="$root/../shared/testdata/JSONTestSuite/test_parsing"

case "$target" in
  all | scanner | http) ;;
  *) echo "fuzz: FUZZ_TARGET must be all, scanner or http (got '$target')" >&2; exit 2 ;;
esac
mkdir -p "$out/corpus" "$out/artifacts"
# libFuzzer and ASan print the stack of a failed check; Swift's own backtracer would only add a wait.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"

# The fuzzer runtime ships with the Swift toolchain's clang; say so plainly when it is missing.
resource_dir=$("$swiftc" -print-target-info | sed -n 's/.*"runtimeResourcePath": "\(.*\)".*/\1/p')
if ! ls "$resource_dir"/../clang/*/lib/linux/libclang_rt.fuzzer-"$(uname -m)".a >/dev/null 2>&1; then
  echo "fuzz: no libclang_rt.fuzzer in the Swift toolchain ($resource_dir/../clang); cannot build" >&2
  exit 1
fi

fuzz_scanner() {
  # CPeelScan (the AVX2 and AVX-512 kernels) is C: compiled by the toolchain's clang with the same
  # sanitizers (coverage for libFuzzer, AddressSanitizer), then linked beside the Swift module.
  local clang scan="$out/cpeelscan"
  clang="$(dirname "$(command -v "$swiftc")")/clang"
  mkdir -p "$scan"
  for c in "$root"/Sources/CPeelScan/*.c; do
    "$clang" -fsanitize=fuzzer-no-link,address -O2 -g -I "$root/Sources/CPeelScan/include" -c "$c" \
      -o "$scan/$(basename "$c" .c).o" || return
  done
  # One module from the library sources plus the entry point, so the oracle can see internals.
  # Compiled from inside $out: with -g, swiftc writes module files to the working directory.
  (cd "$out" && "$swiftc" -sanitize=fuzzer,address -parse-as-library -O -wmo -g \
    -module-name ScannerFuzz -I "$root/Sources/CPeelScan/include" \
    -D PEEL_FUZZ "$root"/Sources/PeelEnvelope/*.swift "$root"/Fuzz/ScannerFuzz/*.swift \
    "$root"/Tests/PeelEnvelopeTests/DialectReference.swift "$scan"/*.o \
    -o "$out/scanner-fuzz") || return

  # Seed from the shared JSONTestSuite files when present, plus Peel's own envelope seeds.
  local seeds=("$root/Fuzz/ScannerFuzz/seeds")
  if [ -d "$suite" ]; then
    seeds+=("$suite")
  else
    echo "fuzz: $suite absent, seeding from Fuzz/ScannerFuzz/seeds only" >&2
  fi

  echo "fuzz: scanner for ${seconds}s; corpus $out/corpus, crashes in $out/artifacts" >&2
  # LeakSanitizer cannot see pointers Swift stores with an enum's tag in their spare bits (a
  # preset's `SuccessRule.errorMember(MemberPath)` held in a static), so it reports them leaked at
  # exit; leaks are judged on the real binary under valgrind (make sanitize).
  ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$out/scanner-fuzz" \
    -detect_leaks=0 \
    -max_total_time="$seconds" \
    -max_len=4096 \
    -dict="$root/Fuzz/ScannerFuzz/json.dict" \
    -artifact_prefix="$out/artifacts/" \
    -print_final_stats=1 \
    "$out/corpus" "${seeds[@]}"
}

fuzz_http() {
  local build="$out/http"
  mkdir -p "$build" "$out/http-corpus"
  # Two modules: PeelIO's and PeelDemo's sources each declare a ParsedRequest. The demo's parser is
  # a static library built for testing (its internals are visible to the oracle through @testable);
  # the entry point is compiled with PeelIO's parser, buffer, errors and ConnectionMachine (plus the
  # header helpers and the body budget it uses), none of which needs libevent or curl.
  (cd "$build" && "$swiftc" -sanitize=fuzzer,address -parse-as-library -O -wmo -g -enable-testing \
    -module-name DemoParser -emit-module -emit-library -static \
    "$root"/Sources/PeelDemo/{RequestParser,HTTPGrammar,ParsedRequest}.swift \
    -o "$build/libDemoParser.a") || return
  (cd "$build" && "$swiftc" -sanitize=fuzzer,address -parse-as-library -O -wmo -g \
    -module-name HTTPParserFuzz -I "$build" -L "$build" -lDemoParser \
    "$root"/Sources/PeelIO/HTTP1/{HTTP1Parser,RequestBuffer,RequestError,ConnectionMachine}.swift \
    "$root"/Sources/PeelIO/Fields/HeaderFields.swift "$root"/Sources/PeelIO/MemoryBudget.swift "$root"/Fuzz/HTTPParserFuzz/*.swift \
    -o "$out/http-parser-fuzz") || return

  echo "fuzz: http for ${seconds}s; corpus $out/http-corpus, crashes in $out/artifacts/http-*" >&2
  "$out/http-parser-fuzz" \
    -max_total_time="$seconds" \
    -max_len=4096 \
    -dict="$root/Fuzz/HTTPParserFuzz/http.dict" \
    -artifact_prefix="$out/artifacts/http-" \
    -print_final_stats=1 \
    "$out/http-corpus" "$root/Fuzz/HTTPParserFuzz/seeds"
}

# Both targets run even when the first finds something; the exit status says whether either did.
# Called in an || list, a function runs without set -e: each build step returns on failure itself,
# so a failed compile never fuzzes a binary left from an earlier build.
status=0
if [ "$target" = all ] || [ "$target" = scanner ]; then fuzz_scanner || status=$?; fi
if [ "$target" = all ] || [ "$target" = http ]; then fuzz_http || status=$?; fi
exit "$status"
