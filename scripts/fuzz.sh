#!/usr/bin/env bash
# Fuzzes PeelEnvelope's scanner and judge() with libFuzzer + AddressSanitizer, checked against a
# reference reader. FUZZ_SECONDS bounds the run (default 60); everything lands in .build-fuzz/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.build-fuzz"
seconds="${FUZZ_SECONDS:-60}"
swiftc="${SWIFTC:-swiftc}"
suite="$root/../shared/testdata/JSONTestSuite/test_parsing"
mkdir -p "$out/corpus" "$out/artifacts"

# The fuzzer runtime ships with the Swift toolchain's clang; say so plainly when it is missing.
resource_dir=$("$swiftc" -print-target-info | sed -n 's/.*"runtimeResourcePath": "\(.*\)".*/\1/p')
if ! ls "$resource_dir"/../clang/*/lib/linux/libclang_rt.fuzzer-"$(uname -m)".a >/dev/null 2>&1; then
  echo "fuzz: no libclang_rt.fuzzer in the Swift toolchain ($resource_dir/../clang); cannot build" >&2
  exit 1
fi

# One module from the library sources plus the entry point, so the oracle can see internals.
# Compiled from inside $out: with -g, swiftc writes module files to the working directory.
(cd "$out" && "$swiftc" -sanitize=fuzzer,address -parse-as-library -O -wmo -g \
  -module-name ScannerFuzz \
  "$root"/Sources/PeelEnvelope/*.swift "$root"/Fuzz/ScannerFuzz/*.swift \
  -o "$out/scanner-fuzz")

# Seed from the shared JSONTestSuite files when present, plus Peel's own envelope seeds.
seeds=("$root/Fuzz/ScannerFuzz/seeds")
if [ -d "$suite" ]; then
  seeds+=("$suite")
else
  echo "fuzz: $suite absent, seeding from Fuzz/ScannerFuzz/seeds only" >&2
fi

echo "fuzz: running for ${seconds}s; corpus $out/corpus, crashes in $out/artifacts" >&2
exec "$out/scanner-fuzz" \
  -max_total_time="$seconds" \
  -max_len=4096 \
  -dict="$root/Fuzz/ScannerFuzz/json.dict" \
  -artifact_prefix="$out/artifacts/" \
  -print_final_stats=1 \
  "$out/corpus" "${seeds[@]}"
