#!/usr/bin/env bash
# Builds the scanner micro-benchmark with the PeelEnvelope sources (-O, whole module like a release
# build) and CPeelScan (clang -O2, like SwiftPM's release build), and runs it; every scan kernel and
# Foundation are timed in the same process.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/.build-bench"
mkdir -p "$out"
swiftc="${SWIFTC:-swiftc}"
clang="$(dirname "$(command -v "$swiftc")")/clang"
for c in "$root"/Sources/CPeelScan/*.c; do
  "$clang" -O2 -I "$root/Sources/CPeelScan/include" -c "$c" -o "$out/$(basename "$c" .c).o"
done
# Compiled from inside $out so nothing the compiler writes lands in the repository.
(cd "$out" && "$swiftc" -O -wmo -module-name ScannerBench -I "$root/Sources/CPeelScan/include" \
  "$root"/Sources/PeelEnvelope/*.swift "$root"/Benchmarks/scanner/main.swift "$out"/scan*.o \
  -o "$out/scanner-bench")
exec "$out/scanner-bench"
