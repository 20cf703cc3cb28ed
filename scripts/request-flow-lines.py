#!/usr/bin/env python3
"""Moves each `file:line` `name` reference in the README's "How a request flows" to the line where
`name` is now declared in that file (the nearest match to the old line), so the list stays true
after an edit moves code; Tests/PeelGatewayTests/RequestFlowDocTests.swift checks the result.

    python3 scripts/request-flow-lines.py   (rewrites README.md in place)
"""
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
readme_path = os.path.join(root, "README.md")
text = open(readme_path, encoding="utf-8").read()
start = text.index("### How a request flows")
end = text.find("\n## ", start)
section = text[start:end]
ref = re.compile(r"`(Peel[A-Za-z]+/[A-Za-z0-9/+]+\.swift):([0-9]+)` `([A-Za-z]+)`")
moved = 0


def fix(m):
    global moved
    path, line, name = m.group(1), int(m.group(2)), m.group(3)
    lines = open(os.path.join(root, "Sources", path), encoding="utf-8").read().split("\n")
    wanted = re.compile(r"\b(func %s\b|%s\()" % (name, name) if name != "init" else r"\binit\b")
    declared = [i + 1 for i, l in enumerate(lines) if re.search(r"func %s\b" % name, l)] if name != "init" else []
    candidates = declared or [i + 1 for i, l in enumerate(lines) if wanted.search(l)]
    if not candidates:
        sys.exit("%s: no `%s` any more; fix the README by hand" % (path, name))
    best = min(candidates, key=lambda n: abs(n - line))
    if best != line:
        moved += 1
    return "`%s:%d` `%s`" % (path, best, name)


text = text[:start] + ref.sub(fix, section) + text[end:]
open(readme_path, "w", encoding="utf-8").write(text)
print("request flow: %d references moved" % moved)
