#!/usr/bin/env python3
"""Exclusive instruction counts from a callgrind dump, per object (library) and per function.

    python3 Benchmarks/cgsum.py callgrind.out.PID.1 [REQUESTS] [TOP]
    python3 Benchmarks/cgsum.py callgrind.out.PID.1 REQUESTS callers SUBSTRING   who calls it, how often
    python3 Benchmarks/cgsum.py callgrind.out.PID.1 REQUESTS callees SUBSTRING   what it calls, inclusive
    python3 Benchmarks/cgsum.py callgrind.out.PID.1 REQUESTS floor OBJECT        one library with the C runtime it calls

With REQUESTS, every count is also shown per request.
"""
import collections
import re
import sys


EDGES = collections.Counter()
EDGE_CALLS = collections.Counter()


def parse(path):
    names = {"ob": {}, "fn": {}, "fl": {}}
    by_fn = collections.Counter()
    ob = fn = "?"
    after_call = False
    cob = None
    cfn = "?"
    ncalls = 0
    for line in open(path, errors="replace"):
        m = re.match(r"^(c?)(ob|fn|fl|fi|fe)=(\((\d+)\))?\s*(.*)$", line)
        if m:
            called, kind, _, num, name = m.groups()
            base = "fl" if kind in ("fi", "fe") else kind
            if num is not None:
                if name:
                    names[base][num] = name
                else:
                    name = names[base].get(num, "?")
            if called:
                if kind == "ob":
                    cob = name
                elif kind == "fn":
                    cfn = name
                continue
            if kind == "ob":
                ob = name
            elif kind == "fn":
                fn = name
            continue
        if line.startswith("calls="):
            after_call = True
            ncalls = int(line[6:].split()[0])
            continue
        if line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            if len(parts) >= 2:
                if after_call:
                    after_call = False
                    EDGES[(fn, cfn)] += int(parts[1])
                    EDGE_CALLS[(fn, cfn)] += ncalls
                    continue
                by_fn[(ob, fn)] += int(parts[1])
            continue
    return by_fn


def main():
    by_fn = parse(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    if len(sys.argv) > 4 and sys.argv[3] in ("callers", "callees"):
        # Call edges into (callers) or out of (callees) the matching functions, each with what the
        # calls cost inclusive of everything below them.
        want = sys.argv[4]
        into = sys.argv[3] == "callers"
        rows = [(c, k) for k, c in EDGES.items() if want in k[1 if into else 0]]
        for c, (caller, callee) in sorted(rows, reverse=True)[:40]:
            pair = (callee[:60], "<-", caller[:100]) if into else (caller[:50], "->", callee[:110])
            print("%9.0f instr/req  %6.2f calls/req  %s  %s  %s" % ((c / n, EDGE_CALLS[(caller, callee)] / n) + pair))
        return
    if len(sys.argv) > 4 and sys.argv[3] == "floor":
        # What one library costs with the C runtime it calls (malloc, free, memcpy, sscanf…): its
        # own instructions plus every call it makes into libc, jemalloc and the loader. Calls back
        # into Peel (curl's write and header callbacks) are not counted.
        want = sys.argv[4]
        ob_of = {}
        for (ob, fn), _ in by_fn.items():
            ob_of.setdefault(fn, ob)
        runtime = ("libc.so", "libjemalloc", "ld-linux", "libm.so")
        own = sum(c for (ob, _), c in by_fn.items() if want in ob)
        into = sum(c for (caller, callee), c in EDGES.items()
                   if want in ob_of.get(caller, "") and any(r in ob_of.get(callee, "") for r in runtime))
        print("%s: %.0f own + %.0f in the C runtime = %.0f instructions per request" % (want, own / n, into / n, (own + into) / n))
        return
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    total = sum(by_fn.values())
    by_ob = collections.Counter()
    for (ob, _), c in by_fn.items():
        by_ob[ob.rsplit("/", 1)[-1]] += c
    print("total %d instructions, %.0f per request" % (total, total / n))
    for ob, c in by_ob.most_common():
        if c / total >= 0.002:
            print("  %5.1f%% %9.0f  %s" % (100 * c / total, c / n, ob))
    print()
    for (ob, fn), c in by_fn.most_common(top):
        print("  %5.1f%% %9.0f  %s  [%s]" % (100 * c / total, c / n, fn[:110], ob.rsplit("/", 1)[-1]))


if __name__ == "__main__":
    main()
