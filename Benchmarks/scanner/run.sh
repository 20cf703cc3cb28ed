#!/usr/bin/env bash
# Builds the scanner micro-benchmark with the PeelEnvelope sources (-O, whole module like a release
# build) and runs it; results are compared with Foundation in the same process.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/.build-bench"
mkdir -p "$out"
# Compiled from inside $out so nothing the compiler writes lands in the repository.
(cd "$out" && "${SWIFTC:-swiftc}" -O -wmo -module-name ScannerBench \
  "$root"/Sources/PeelEnvelope/*.swift "$root"/Benchmarks/scanner/main.swift \
  -o "$out/scanner-bench")
exec "$out/scanner-bench"
