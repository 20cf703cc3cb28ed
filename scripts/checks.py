"""The checks every Python test script under scripts/ prints: one `ok`/`FAIL` line each, and the
number of failures as the script's exit status (`sys.exit(checks.failures())`)."""

_failed = 0


def check(name, expected, actual):
    """Prints `ok NAME`, or `FAIL NAME: expected [...] got [...]` and counts it."""
    global _failed
    if expected == actual:
        print(f"ok   {name}")
    else:
        _failed += 1
        print(f"FAIL {name}: expected [{expected!r}] got [{actual!r}]")


def failures():
    """The number of checks that failed so far."""
    return _failed
